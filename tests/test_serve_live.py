"""``gtidx serve`` against a real MariaDB 10.11 replica.

The source history is written by the shared dev server (``live_server``):
a database of its own, transactions across a FLUSH BINARY LOGS, its binlog
files copied to tmp_path. ``gtidx serve`` runs as a process on those copies
(127.0.0.1, a free port). A second, private MariaDB 10.11 (``tools/mariadb.py``)
is the replica, applying in parallel (slave_parallel_threads=4):
gtid_slave_pos set to the history's start, CHANGE MASTER TO gtidx with
MASTER_USE_GTID=slave_pos, START SLAVE. The oracles: the
replica's MASTER_GTID_WAIT reaching the history's end, its SHOW SLAVE STATUS
(no IO or SQL error), and CHECKSUM TABLE equal to the source server's.
Other writers of the shared server are in the same binlogs: the replica
replicates only the databases named ``gtidxserve%``.
"""
from __future__ import annotations

import os
import shutil
import socket
import struct
import uuid
from pathlib import Path

import pytest

from gtidx.gtid import Position

from tests.servehelp import PASSWORD, start_serve
from tools.mariadb import MariaDB

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


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    srv = MariaDB(tmp_path_factory.mktemp("serve-replica"),
                  {"server_id": "2", "replicate_wild_do_table": "gtidxserve%.%", "slave_parallel_threads": "4"})
    try:
        srv.start()
    except RuntimeError as e:
        pytest.fail(f"cannot start the private MariaDB replica: {e}", pytrace=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def served(history, live_server, tmp_path_factory):
    """``gtidx serve`` on the copies, with the server_id of the server that
    wrote them (what it puts in the events it makes up): (its process, its
    port, its log)."""
    server_id = live_server.sql("SELECT @@server_id")[0][0]
    proc, port, log = start_serve(history[0], 0, server_id, tmp_path_factory.mktemp("serve"))
    try:
        yield proc, port, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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


def test_replica_catches_up_through_gtidx(history, replica, served):
    """From the history's start (the first file's GTID_LIST): every group sent."""
    d, start, end, db, checksums, _ = history
    replicate(replica, served, start, end)
    assert replica_facts(replica, db) == checksums and None not in checksums.values()
    assert checksums["rows"][0][0] == 200 - 29          # the history's rows: 200 inserted, 29 deleted


def restore_backup(replica, db: str, backup: dict) -> None:
    """The backup's tables on the replica, not binlogged there."""
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
    assert replica.sql(f"SELECT COUNT(*) FROM {db}.t")[0][0] == 100


def test_restore_from_backup_position(history, replica, served):
    """A backup taken mid-file restored on the replica, which starts at its
    position: gtidx starts in the file the position is in and leaves out the
    groups the backup holds."""
    d, start, end, db, checksums, backup = history
    restore_backup(replica, db, backup)
    replicate(replica, served, backup["position"], end)
    assert replica_facts(replica, db) == checksums


def test_restore_to_a_point_with_start_slave_until(history, replica, served):
    """The restore the command is for: the backup, then START SLAVE UNTIL
    master_gtid_pos= a later position. The replica stops exactly there:
    its gtid_slave_pos is that position, its tables' checksums the
    source's at that point."""
    d, start, end, db, checksums, backup = history
    _, port, log = served
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
    assert got == backup["until_checksums"] != {t: checksums[t] for t in TABLES}
    assert Position.parse(replica.sql("SELECT @@gtid_slave_pos")[0][0]) == Position.parse(backup["until"])
    replica.sql("STOP SLAVE")


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


@pytest.mark.parametrize("where, flags", [("start", 2), ("backup", 0)])
def test_stream_equals_the_servers(history, served, live_server, where, flags):
    """What gtidx sends a replica is what the real server that wrote the
    binlogs sends, up to the history's end: the same events, byte for byte,
    the made-up ones too (fake ROTATE, fake GTID_LIST once the skipped
    domains are reached). From the history's start asking for ANNOTATE_ROWS
    events (flag 2), and from the backup's position without them."""
    d, start, end, db, checksums, backup = history
    position = start if where == "start" else backup["position"]
    _, port, log = served
    theirs = dump_events(live_server.connection_settings(), position, end, flags)
    ours = dump_events({"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD},
                       position, end, flags)
    assert [e[:3] for e in ours] == [e[:3] for e in theirs]
    assert ours == theirs
    assert any(e[0] == 160 for e in ours) == bool(flags)
    assert any(e[0] == 163 and e[1] & 0x20 for e in ours) == (where == "backup")


def test_a_position_the_binlogs_cannot_serve_is_the_servers_error_1236(history, served, live_server):
    """A replica ahead of the binlogs, or one whose GTID's server never
    logged in its domain (diverged), is refused with error 1236 and the
    real server's very text; the connection's end leaves gtidx serving."""
    import pymysql
    d, start, end, db, checksums, backup = history
    _, port, log = served
    last = next(g for g in end.split(",") if g.startswith("0-"))
    server, seq = (int(x) for x in last.split("-")[1:])
    refused = []
    for state in (f"0-{server}-{seq + 10**9}", f"0-4000000123-{seq}"):
        for connect in (live_server.connection_settings(),
                        {"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}):
            with pytest.raises(pymysql.err.OperationalError) as e:
                dump_events(connect, state, end, 0)
            refused.append(e.value.args)
    assert refused[0] == refused[1] and refused[2] == refused[3]
    assert refused[0][0] == 1236 and "which is not in the master's binlog" in refused[0][1]
    assert "diverged" in refused[2][1] and "diverged" not in refused[0][1]
    assert dump_events({"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}, start, end, 0)


def test_a_wrong_password_is_access_denied(served):
    import pymysql
    _, port, log = served
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(host="127.0.0.1", port=port, user="repl", password="not-" + PASSWORD)
    assert e.value.args[0] == 1045 and "Access denied for user 'repl'" in e.value.args[1]


def test_file_offset_stream_equals_the_servers(history, served, live_server):
    """MASTER_USE_GTID=no: a dump from a file and an offset (the backup's
    first group sent, where ``gtidx seek --replica`` says) is the real
    server's, byte for byte: its FDE with log_pos and created zeroed."""
    from gtidx import api
    d, start, end, db, checksums, backup = history
    _, port, log = served
    first = api.seek(backup["position"], d, replica=True).first
    at = (Path(first.file).name, first.start)
    theirs = dump_events(live_server.connection_settings(), None, end, 2, at)
    ours = dump_events({"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}, None, end, 2, at)
    assert [e[:3] for e in ours] == [e[:3] for e in theirs]
    assert ours == theirs
    assert theirs[1][0] == 15 and theirs[2][2] > first.start


def until_heartbeat(connect: dict, state: str) -> list[tuple[int, int, int, int, bytes]]:
    """A raw replica asking for a heartbeat every 0.2 s, from ``state``: the
    events up to the first heartbeat, (type, server_id, log_pos, flags,
    body without its checksum)."""
    import pymysql
    conn = pymysql.connect(autocommit=True, **connect)
    out = []
    try:
        with conn.cursor() as cur:
            for q in ("SET @master_binlog_checksum= @@global.binlog_checksum", "SET @mariadb_slave_capability=4",
                      f"SET @slave_connect_state='{state}'", "SET @master_heartbeat_period=200000000"):
                cur.execute(q)
        conn._execute_command(0x12, struct.pack("<IHI", 4, 0, 3_000_000_000 + os.getpid() % 1_000_000))
        while not out or out[-1][0] != 27:
            ev = conn._read_packet().get_all_data()[1:]
            ts, etype, sid, _, log_pos, flags = struct.unpack_from("<IBIIIH", ev, 0)
            assert etype == 27 or len(out) < 10_000
            out.append((etype, sid, log_pos, flags, bytes(ev[19:-4])))
        return out
    finally:
        conn.close()


def test_at_the_end_a_heartbeat_as_the_server_sends_it(history, served, live_server):
    """A replica at the binlogs' end: the fake GTID_LIST of its reached
    domain, the file's last events (its ROTATE: the copies are closed
    binlogs), then heartbeats (no artificial flag, the file's name, log_pos
    its end), as the real server sends them at the end of its own binlog."""
    from gtidx import api
    d, start, end, db, checksums, backup = history
    _, port, log = served
    last = api.list_binlogs(d)[-1]
    size = os.path.getsize(last)
    at_end = str(api.state_at(last, size).position)
    ours = until_heartbeat({"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}, at_end)
    name = Path(last).name.encode()
    assert ours[-1][2:] == (size, 0, name) and ours[-2][0] == 4 and ours[-2][2] == size
    assert [e[0] for e in ours if e[3] & 0x20] == [4, 163]          # the fake ROTATE, the fake GTID_LIST
    live_end = live_server.sql("SELECT @@gtid_binlog_pos")[0][0]
    theirs = until_heartbeat(live_server.connection_settings(), live_end)
    assert theirs[-1][0::3] == ours[-1][0::3] and theirs[-1][1] == ours[-1][1]
    assert theirs[-1][4].startswith(b"master-bin.") and theirs[0][0] == 4 and theirs[0][3] == 0x20


def test_a_bad_packet_ends_that_connection_only(history, served):
    """A client that answers the handshake with garbage is disconnected with
    a logged reason; the next replica is served."""
    d, start, end, db, checksums, backup = history
    _, port, log = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.recv(1 << 12)                                   # the handshake
        s.sendall(b"\x05\x00\x00\x01garba")               # a 5-byte "response": no 4.1 fixed part
        assert s.recv(1 << 12) == b""                     # closed
    assert "ended: a handshake response shorter than its fixed part" in log.read_text()
    assert dump_events({"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}, start, end, 0)


def test_kill_9_and_restart_the_replica_resumes(history, replica, live_server, tmp_path):
    """gtidx serve killed with SIGKILL while the replica idles at the end of
    the first binlog, then started again on the same port with the rest:
    the replica reconnects by itself and resumes with no gap and no group
    twice (a group twice: a duplicate key, or an UPDATE applied twice)."""
    from gtidx import api
    d, start, end, db, checksums, backup = history
    first = tmp_path / "first"
    first.mkdir()
    head = api.list_binlogs(d)[0]
    shutil.copyfile(head, first / Path(head).name)
    at_head_end = str(api.state_at(head, os.path.getsize(head)).position)
    server_id = live_server.sql("SELECT @@server_id")[0][0]
    proc, port, log = start_serve(first, 0, server_id, tmp_path)
    again = None
    try:
        restore_backup(replica, db, backup)
        replica.sql("RESET SLAVE ALL")
        replica.sql("SET GLOBAL gtid_slave_pos = %s", (backup["position"],))
        replica.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', "
                    f"MASTER_PASSWORD='{PASSWORD}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1")
        replica.sql("START SLAVE")
        assert replica.sql("SELECT MASTER_GTID_WAIT(%s, 60)", (at_head_end,))[0][0] == 0
        proc.kill()
        proc.wait(timeout=30)
        (tmp_path / "again").mkdir()
        again, _, log2 = start_serve(d, port, server_id, tmp_path / "again")
        waited = replica.sql("SELECT MASTER_GTID_WAIT(%s, 60)", (end,))[0][0]
        status = slave_status(replica)
        assert waited == 0, (status.get("Last_IO_Error"), status.get("Last_SQL_Error"), log2.read_text()[-2000:])
        assert status["Last_SQL_Errno"] == 0
        assert replica_facts(replica, db) == checksums
        replica.sql("STOP SLAVE")
    finally:
        for p in (proc, again):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
