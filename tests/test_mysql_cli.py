"""MySQL binlogs on the command line: bad input is one line on stderr,
nothing on stdout, exit 2 (never a traceback or a wrong answer); ``scan``
lists their transactions. (seek and pos: tests/test_mysql_answers.py.)"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT

ROTATED = FIXTURES / "mysql-9.7" / "rotated"
UUID = "8f2379f0-e75f-11f1-a262-02fc00000001"


@pytest.fixture
def logs(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(ROTATED, d)
    return d


def gtidx(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "gtidx", *map(str, args)], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr.splitlines()


def one_line(rc, out, err, *words):
    assert rc == 2, (rc, out, err)
    assert out == ""
    assert len(err) == 1, err
    assert err[0].startswith("gtidx: ")
    for w in words:
        assert w in err[0], err
    assert "Traceback" not in err[0]



def test_a_mariadb_gtid_in_a_mysql_directory(logs):
    """seek answers MySQL binlogs (tests/test_mysql_answers.py); a MariaDB
    GTID given for them is one line, exit 2."""
    for where in (logs, logs / "binlog.index", logs / "binlog.000015"):
        one_line(*gtidx("seek", "--gtid", "0-1-1", where), "is a MariaDB GTID", "these are MySQL binlogs")
        one_line(*gtidx("seek", "--replica", "0-1-1", where), "is a MariaDB GTID", "these are MySQL binlogs")


def test_a_bad_mysql_gtid(logs):
    one_line(*gtidx("seek", "--gtid", f"{UUID}:0", logs), "GTID number 0 is out of range")
    one_line(*gtidx("seek", "--replica", f"{UUID}:1-5\n{UUID}:x:1", logs), "bad MySQL GTID set")


@pytest.mark.parametrize("scenario", sorted(p.parent for p in (FIXTURES / "mysql-9.7").glob("*/oracle.json")),
                         ids=lambda p: p.name)
def test_scan_a_mysql_file(scenario):
    """``gtidx scan`` lists a MySQL binlog's transactions as the server logged
    them (the fixtures' oracle from SHOW BINLOG EVENTS): GTID (null /
    "(anonymous)" for an anonymous one), start, end; its Previous_gtids as the
    start state, on one line; no flags2."""
    import json
    oracle = json.loads((scenario / "oracle.json").read_text())
    for f in oracle["files"]:
        rc, out, err = gtidx("scan", "--json", scenario / f["name"])
        assert rc == 0 and err == [], err
        doc = json.loads(out)
        assert [[g["gtid"], g["start"], g["end"]] for g in doc["groups"]] == f["groups"]
        assert doc["count"] == len(f["groups"]) and all(g["flags2"] is None for g in doc["groups"])
        assert doc["start_state"] == f["previous_gtids"].replace("\n", "")
        rc, out, err = gtidx("scan", scenario / f["name"])
        lines = out.splitlines()
        assert rc == 0 and lines[-1] == f"# {len(f['groups'])} groups"
        assert [ln.split() for ln in lines[3:-1]] == [["(anonymous)" if g is None else g, str(s), str(e)]
                                                      for g, s, e in f["groups"]]
