"""What the live tests of ``gtidx serve`` share (tests/test_serve_live.py,
tests/test_serve_s3.py, tests/test_serve_mysql.py): the source history written by the shared dev
server (``history``: its binlogs copied to a temporary directory), the
private MariaDB 10.11 replica (``replica``), ``gtidx serve`` as a process
(``start_serve``), the replica driven through it (``replicate``,
``restore_backup``), and a raw replica reading the stream (``dump_events``).

The fixtures are module-scoped: a test module imports them
(``from servehelp import history, replica``) and gets its own history and
replica.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import private
from gtidx.gtid import Position
from tools.mariadb import MariaDB

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "serve-pw"
TABLES = ("t", "u")


def binlog_names(srv) -> list[str]:
    return [r[0] for r in srv.sql("SHOW BINARY LOGS")]


@pytest.fixture(scope="module")
def history(live_server, tmp_path_factory):
    """(the directory of binlog copies, the GTID position before the history,
    the one after it, the database, {table: the source's CHECKSUM TABLE,
    "rows": the count and sum of t's rows}, a backup inside the first file:
    {"position": its GTID position, "tables": {table: (CREATE TABLE, rows)},
    "until": a later position in the same file, "until_checksums": the
    tables' CHECKSUM TABLE there})."""
    srv = live_server
    db = f"gtidxserve_{uuid.uuid4().hex[:12]}"
    srv.sql("FLUSH BINARY LOGS")
    first = binlog_names(srv)[-1]
    start = srv.sql("SELECT @@gtid_binlog_pos")[0][0]
    srv.sql(f"CREATE DATABASE {db}")
    srv.sql(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(64), n BIGINT) ENGINE=InnoDB")
    srv.sql(f"CREATE TABLE {db}.u (id INT AUTO_INCREMENT PRIMARY KEY, b BLOB) ENGINE=InnoDB")
    conn = srv.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            for i in range(20):
                cur.executemany(f"INSERT INTO {db}.t VALUES (%s, %s, %s)",
                                [(i * 10 + k, f"row {i}-{k}", i * k) for k in range(10)])
                cur.execute(f"INSERT INTO {db}.u (b) VALUES (%s)", (os.urandom(300),))
                conn.commit()
                if i == 9:                         # a backup taken here: the replica's mid start
                    backup = {"position": srv.sql("SELECT @@gtid_binlog_pos")[0][0],
                              "tables": {t: (srv.sql(f"SHOW CREATE TABLE {db}.{t}")[0][1],
                                             srv.sql(f"SELECT * FROM {db}.{t}")) for t in TABLES}}
                if i == 14:                        # a point in time to restore to
                    backup["until"] = srv.sql("SELECT @@gtid_binlog_pos")[0][0]
                    backup["until_checksums"] = {t: srv.sql(f"CHECKSUM TABLE {db}.{t}")[0][1] for t in TABLES}
            srv.sql("FLUSH BINARY LOGS")           # the stream crosses a rotation
            cur.execute(f"UPDATE {db}.t SET n = n + 1, v = CONCAT(v, '!') WHERE id % 3 = 0")
            conn.commit()
            cur.execute(f"DELETE FROM {db}.t WHERE id % 7 = 0")
            conn.commit()
    finally:
        conn.close()
    srv.sql(f"ALTER TABLE {db}.u ADD COLUMN c INT DEFAULT 5")
    end = srv.sql("SELECT @@gtid_binlog_pos")[0][0]
    checksums = {t: srv.sql(f"CHECKSUM TABLE {db}.{t}")[0][1] for t in TABLES}
    checksums["rows"] = srv.sql(f"SELECT COUNT(*), SUM(n) FROM {db}.t")
    srv.sql("FLUSH BINARY LOGS")
    names = binlog_names(srv)
    d = tmp_path_factory.mktemp("serve-binlogs")
    for name in names[names.index(first):-1]:
        shutil.copyfile(srv.binlog_dir / name, d / name)
    yield d, start, end, db, checksums, backup
    srv.sql(f"DROP DATABASE IF EXISTS {db}")


def replica_server(tmp_path_factory, name: str, **options):
    """A private 10.11 replica (server_id 2, applying in parallel) with
    ``options`` more, for a module's fixture (``yield from``)."""
    srv = private(MariaDB(tmp_path_factory.mktemp(name), {"server_id": "2", "slave_parallel_threads": "4", **options}),
                  "the private MariaDB replica")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    yield from replica_server(tmp_path_factory, "serve-replica", replicate_wild_do_table="gtidxserve%.%")


def start_serve(directory, port: int, server_id: int, where: Path, *extra: str):
    """``gtidx serve`` as a process on ``directory`` (a path or URL; ``port``
    0: a free one), user repl with PASSWORD, ``extra`` arguments, its log in
    ``where``: (the process, its port, its log)."""
    pw = where / "pw"
    pw.write_text(PASSWORD + "\n")
    log = where / "serve.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "gtidx", "serve", str(directory), "--bind", "127.0.0.1",
                                 "--port", str(port), "--user", "repl", "--password-file", str(pw),
                                 "--heartbeat", "1", "--server-id", str(server_id), *extra],
                                stderr=err, stdout=subprocess.DEVNULL, env=env)
    with open(log) as lines:
        line = ""
        while proc.poll() is None and not line.endswith("\n"):
            more = lines.readline()             # the first line: where it listens
            line += more
            if not more:
                time.sleep(0.02)
    m = re.search(r" on 127\.0\.0\.1:(\d+)$", line.strip())
    if not m:
        proc.kill()
        raise AssertionError(f"gtidx serve did not say where it listens: {log.read_text()!r}")
    return proc, int(m.group(1)), log


@contextmanager
def serving(directory, port: int, server_id: int, where: Path, *extra: str):
    """``start_serve``'s process for a ``with`` block, stopped (SIGTERM) at
    its end: (the process, its port, its log)."""
    proc, port, log = start_serve(directory, port, server_id, where, *extra)
    try:
        yield proc, port, log
    finally:
        stop(proc)


def stop(*procs) -> None:
    """Each ``gtidx serve`` process still running (None: never started)
    terminated, and waited for."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.terminate()
            p.wait(timeout=30)


def slave_status(srv) -> dict:
    conn = srv.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SLAVE STATUS")
            row = cur.fetchone()
            return dict(zip([c[0] for c in cur.description], row)) if row else {}
    finally:
        conn.close()


def replicate(replica, served, position: str, end: str) -> None:
    """The replica from ``position`` through gtidx serve until it holds ``end``."""
    _, port, log = served
    replica.sql("STOP SLAVE")
    replica.sql("RESET SLAVE ALL")
    replica.sql("SET GLOBAL gtid_slave_pos = %s", (position,))
    replica.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', "
                f"MASTER_PASSWORD='{PASSWORD}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1")
    replica.sql("START SLAVE")
    waited = replica.sql("SELECT MASTER_GTID_WAIT(%s, 60)", (end,))[0][0]
    status = slave_status(replica)
    assert waited == 0, (f"the replica did not reach {end}: IO {status.get('Last_IO_Error')!r}, "
                         f"SQL {status.get('Last_SQL_Error')!r}, at {status.get('Gtid_IO_Pos')!r}; "
                         f"gtidx serve said: {log.read_text()[-2000:]}")
    assert status["Slave_IO_Running"] == "Yes" and status["Slave_SQL_Running"] == "Yes"
    assert status["Last_IO_Errno"] == 0 and status["Last_SQL_Errno"] == 0
    replica.sql("STOP SLAVE")


def replica_facts(replica, db: str) -> dict:
    got = {t: replica.sql(f"CHECKSUM TABLE {db}.{t}")[0][1] for t in TABLES}
    got["rows"] = replica.sql(f"SELECT COUNT(*), SUM(n) FROM {db}.t")
    return got


def restore_backup(replica, db: str, backup: dict) -> None:
    """The backup's tables ({"tables": {table: (CREATE TABLE, rows)}}) on the
    replica, in a database ``db`` made anew, not binlogged there."""
    replica.sql("STOP SLAVE")
    conn = replica.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SET sql_log_bin = 0")
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
            cur.execute(f"CREATE DATABASE {db}")
            for t, (create, rows) in backup["tables"].items():
                cur.execute(f"USE {db}")
                cur.execute(create)
                if rows:
                    cur.executemany(f"INSERT INTO {db}.{t} VALUES ({', '.join(['%s'] * len(rows[0]))})", rows)
            conn.commit()
    finally:
        conn.close()
    for t, (_, rows) in backup["tables"].items():
        assert replica.sql(f"SELECT COUNT(*) FROM {db}.{t}")[0][0] == len(rows)


def restore_until(replica, port: int, log: Path, db: str, backup: dict) -> dict:
    """The restore ``gtidx serve`` is for, through gtidx on ``port`` (its log
    ``log``): the backup on the replica, then START SLAVE UNTIL
    master_gtid_pos=``backup["until"]``. The replica stops exactly there (its
    gtid_slave_pos is that position, asserted); {table: its CHECKSUM TABLE}."""
    restore_backup(replica, db, backup)
    replica.sql("RESET SLAVE ALL")
    replica.sql("SET GLOBAL gtid_slave_pos = %s", (backup["position"],))
    replica.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', "
                f"MASTER_PASSWORD='{PASSWORD}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1")
    replica.sql(f"START SLAVE UNTIL master_gtid_pos = '{backup['until']}'")
    waited = replica.sql("SELECT MASTER_GTID_WAIT(%s, 60)", (backup["until"],))[0][0]
    status = slave_status(replica)
    assert waited == 0, (status.get("Last_IO_Error"), status.get("Last_SQL_Error"), log.read_text()[-2000:])
    got = {t: replica.sql(f"CHECKSUM TABLE {db}.{t}")[0][1] for t in TABLES}
    assert Position.parse(replica.sql("SELECT @@gtid_slave_pos")[0][0]) == Position.parse(backup["until"])
    replica.sql("STOP SLAVE")
    return got


def dump_events(connect: dict, state: str | None, until: str, flags: int,
                file: tuple[str, int] = ("", 4)) -> list[tuple[int, int, int, bytes]]:
    """A raw replica: what a source sends for COM_BINLOG_DUMP (``flags``) from the GTID
    ``state`` (None: from ``file``, a name and an offset) through the group
    of the GTID ``until`` (domain 0's of the history's end; the next GTID,
    ROTATE or heartbeat ends it): (type, flags, log_pos, the event's bytes)
    of each event."""
    import pymysql
    last = next(g for g in until.split(",") if g.startswith("0-"))
    server, seq = (int(x) for x in last.split("-")[1:])
    conn = pymysql.connect(autocommit=True, **connect)
    out = []
    try:
        with conn.cursor() as cur:
            for q in ("SET @master_binlog_checksum= @@global.binlog_checksum", "SET @mariadb_slave_capability=4",
                      *([] if state is None else [f"SET @slave_connect_state='{state}'"]),
                      "SET @slave_gtid_strict_mode=0", "SET @slave_gtid_ignore_duplicates=0"):
                cur.execute(q)
        conn._execute_command(0x12, struct.pack("<IHI", file[1], flags, 3_000_000_000 + os.getpid() % 1_000_000)
                              + file[0].encode())
        reached = False
        while True:
            data = conn._read_packet().get_all_data()
            assert data[0] == 0, data
            ev = data[1:]
            etype, sid, _, log_pos, flags = struct.unpack_from("<BIIIH", ev, 4)
            if reached and etype in (162, 4, 27):      # the next group, the file's end, a heartbeat
                return out
            if etype == 162:
                reached = struct.unpack_from("<QI", ev, 19) == (seq, 0) and sid == server
            out.append((etype, flags, log_pos, bytes(ev)))
    finally:
        conn.close()
