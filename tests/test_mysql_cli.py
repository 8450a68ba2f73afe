"""Until gtidx answers for MySQL binlogs, every command given one (a file,
a directory, a binlog.index) or a MySQL GTID says so in one line on stderr,
nothing on stdout, and exits 2: never a traceback, a pile of per-file
warnings, a misleading "bad GTID" or a wrong answer."""
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


def test_seek_gtid_in_a_mysql_directory(logs):
    one_line(*gtidx("seek", "--gtid", "0-1-1", logs), *MYSQL_FILE)
    one_line(*gtidx("seek", "--gtid", "0-1-1", logs / "binlog.index"), *MYSQL_FILE)


def test_seek_gtid_in_a_mysql_file(logs):
    one_line(*gtidx("seek", "--gtid", "0-1-1", logs / "binlog.000015"), *MYSQL_FILE)


def test_seek_a_mysql_gtid(logs):
    one_line(*gtidx("seek", "--gtid", f"{UUID}:5", logs), "is a MySQL GTID", "not supported yet")
    one_line(*gtidx("seek", "--gtid", f"{UUID}:tag:5", logs), "is a MySQL GTID", "not supported yet")


def test_seek_replica_in_a_mysql_directory(logs):
    one_line(*gtidx("seek", "--replica", "0-1-1", logs), *MYSQL_FILE)
    one_line(*gtidx("seek", "--replica", f"{UUID}:1-5,\n{UUID}:x:1", logs), "is a MySQL GTID", "not supported yet")


def test_pos_in_a_mysql_file(logs):
    one_line(*gtidx("pos", logs / "binlog.000015", 158), *MYSQL_FILE)


def test_scan_a_mysql_file(logs):
    one_line(*gtidx("scan", logs / "binlog.000015"), *MYSQL_FILE)
