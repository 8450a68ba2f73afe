"""MysqlBinlog on the binlog a live MySQL 9.7 is writing (IN_USE set by
the server, not by a test): its transactions, start set and end set equal
what the server says of it (SHOW BINLOG EVENTS, @@gtid_executed)."""
from __future__ import annotations

import random
import uuid

import pytest

from gtidx.binlog.mysql import MysqlBinlog
from tools.make_mysql_fixtures import Session, groups_of, w_compressed, w_tagged
from tools.mysql97 import MySQL97


@pytest.fixture(scope="module")
def server():
    srv = MySQL97().ensure()
    s = Session(srv)
    s.sql("CREATE DATABASE IF NOT EXISTS fx")
    s.sql("CREATE TABLE IF NOT EXISTS fx.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200))")
    yield srv, s
    s.sql("SET gtid_next = 'AUTOMATIC'")


def test_the_file_being_written(server):
    srv, s = server
    s.sql("DROP TABLE IF EXISTS fx.tagged, fx.c")      # the workloads create them
    s.sql("FLUSH BINARY LOGS")
    name = s.one("SHOW BINARY LOG STATUS")
    rng = random.Random("gtidx-mysql-live")
    foreign = [str(uuid.uuid4()) for _ in range(3)]     # GTIDs the server never executed, on every run
    w_tagged(s, rng, foreign)
    w_compressed(s, rng)
    events = [[int(r[1]), r[2], int(r[4]), str(r[5])] for r in s.sql(f"SHOW BINLOG EVENTS IN '{name}'")]
    executed = s.one("SELECT @@GLOBAL.gtid_executed")
    assert s.one("SHOW BINARY LOG STATUS") == name
    with MysqlBinlog(srv.datadir / name) as b:
        assert b.growing                       # the server's IN_USE flag
        groups = list(b.groups())
        assert [[str(g.gtid), g.start, g.end] for g in groups] == groups_of(events)
        # the GTID numbers of every width, tagged and not, are in this file
        assert sum(str(g.gtid).startswith((foreign[1], foreign[2])) for g in groups) == 36
        assert str(b.previous_gtids) == next(e[3] for e in events if e[1] == "Previous_gtids")
        # nothing was written since: the end set is the server's executed set
        assert str(b.end_set()) == executed
