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
from pathlib import Path

import pytest

from servehelp import (PASSWORD, TABLES, dump_events, history, replica, replica_facts, replicate,  # noqa: F401
                       restore_backup, restore_until, slave_status, serving, start_serve, stop)


@pytest.fixture(scope="module")
def served(history, live_server, tmp_path_factory):
    """``gtidx serve`` on the copies, with the server_id of the server that
    wrote them (what it puts in the events it makes up): (its process, its
    port, its log)."""
    server_id = live_server.sql("SELECT @@server_id")[0][0]
    with serving(history[0], 0, server_id, tmp_path_factory.mktemp("serve")) as it:
        yield it


def test_replica_catches_up_through_gtidx(history, replica, served):
    """From the history's start (the first file's GTID_LIST): every group sent."""
    d, start, end, db, checksums, _ = history
    replicate(replica, served, start, end)
    assert replica_facts(replica, db) == checksums and None not in checksums.values()
    assert checksums["rows"][0][0] == 200 - 29          # the history's rows: 200 inserted, 29 deleted


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
    got = restore_until(replica, port, log, db, backup)
    assert got == backup["until_checksums"] != {t: checksums[t] for t in TABLES}


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
        stop(proc, again)
