"""Until gtidx indexes and scans MySQL binlogs, those commands given one (a
file, a directory, a binlog.index) say so in one line on stderr, nothing on
stdout, and exit 2: never a traceback, a pile of per-file warnings or a
wrong answer. (seek and pos answer them: tests/test_mysql_answers.py.)"""
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


MYSQL_FILE = ("a MySQL binlog", "not supported yet")


def test_a_mariadb_gtid_in_a_mysql_directory(logs):
    """seek answers MySQL binlogs (tests/test_mysql_answers.py); a MariaDB
    GTID given for them is one line, exit 2."""
    for where in (logs, logs / "binlog.index", logs / "binlog.000015"):
        one_line(*gtidx("seek", "--gtid", "0-1-1", where), "is a MariaDB GTID", "these are MySQL binlogs")
        one_line(*gtidx("seek", "--replica", "0-1-1", where), "is a MariaDB GTID", "these are MySQL binlogs")


def test_a_bad_mysql_gtid(logs):
    one_line(*gtidx("seek", "--gtid", f"{UUID}:0", logs), "GTID number 0 is out of range")
    one_line(*gtidx("seek", "--replica", f"{UUID}:1-5\n{UUID}:x:1", logs), "bad MySQL GTID set")


def test_scan_a_mysql_file(logs):
    one_line(*gtidx("scan", logs / "binlog.000015"), *MYSQL_FILE)
