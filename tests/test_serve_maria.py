"""``gtidx serve`` against MariaDB 10.11 semantics: refusals, strict mode,
ignore-duplicates, non-monotonic histories, a kill mid-stream, bad clients.

One private 10.11 source per module (``tools/mariadb.py``) writes a history
of its own (gtid_strict_mode=0): two rotations, a hole in domain 0's seq_no
(20, then 22), a non-monotonic domain 5 on two servers, then its first
binlog purged with PURGE BINARY LOGS. ``gtidx serve`` runs on that server's
own binlog directory. The oracle is the server itself: a raw dump client
(in this file) asks it and gtidx the same, and gets the same bytes, or the
same error 1236 and text. A private 10.11 replica (one, reused) follows
gtidx on that live directory, survives a kill -9 of it mid-group, and
restores an 11.8 history.

MariaDB 11.8: a private 11.8 source (``tools/mariadb118.py``, in the shared
script's Debian 13 root) with log_bin_compress=ON writes a second history
(compressed events, its own ``.idx`` beside the binlogs); gtidx serves it
as the 11.8 server does past its start, to a private 11.8 replica and to
the 10.11 one.
"""
from __future__ import annotations

import hashlib
import os
import socket
import struct
import threading
import time
import uuid

import pytest

from gtidx.gtid import Position

from conftest import private
from servehelp import PASSWORD, replica_server, serving, slave_status, start_serve, stop
from tools.mariadb import MariaDB
from tools.mariadb118 import MariaDB118

pytestmark = pytest.mark.live

# domain 5, (seq_no, server_id): seq_no goes back on both servers
NONMONO = [(100, 1), (101, 2), (50, 1), (51, 1), (40, 2), (60, 1)]
BIG_ROW = 1 << 20          # the kill test's big group: rows of 1 MiB, one row event each
BIG_ROWS = 16


def _insert(cur, v, domain=0, server=1, seq=None):
    cur.execute("SET SESSION gtid_domain_id=%s, server_id=%s", (domain, server))
    if seq is not None:
        cur.execute("SET SESSION gtid_seq_no=%s", (seq,))
    cur.execute("INSERT INTO d.t (v) VALUES (%s)", (v,))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The private source, its history written: (the server, {name: GTID position}).
    "purged": in the purged first binlog; "end": the history's end."""
    srv = private(MariaDB(tmp_path_factory.mktemp("serve-maria-src"), {"gtid_strict_mode": "0"}),
                  "a private MariaDB source")
    try:
        srv.sql("CREATE DATABASE d")
        srv.sql("CREATE TABLE d.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT, b LONGBLOB) ENGINE=InnoDB")
        conn = srv.connect()
        with conn.cursor() as cur:
            _insert(cur, 1)
            purged = srv.sql("SELECT @@gtid_binlog_pos")[0][0]     # older than the second binlog's start
            _insert(cur, 1)
            cur.execute("FLUSH BINARY LOGS")
            second = srv.sql("SHOW MASTER STATUS")[0][0]
            for i in range(3):
                _insert(cur, 2)
            cur.execute("FLUSH BINARY LOGS")
            _insert(cur, 3, seq=20)
            _insert(cur, 3, seq=22)                      # 0-1-21: a hole
            for seq, server in NONMONO:
                _insert(cur, 5, domain=5, server=server, seq=seq)
                _insert(cur, 4)
        conn.close()
        deadline = time.monotonic() + 60
        while srv.sql("SHOW BINARY LOGS")[0][0] != second:   # a binlog goes once the engine's checkpoint passed it
            assert time.monotonic() < deadline, "PURGE BINARY LOGS kept the first binlog"
            srv.sql(f"PURGE BINARY LOGS TO '{second}'")
            time.sleep(0.1)
        yield srv, {"purged": purged, "end": srv.sql("SELECT @@gtid_binlog_pos")[0][0]}
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def served(source, tmp_path_factory):
    """``gtidx serve`` on the source's own binlog directory, as server_id 1 (the source's)."""
    with serving(source[0].binlog_dir, 0, 1, tmp_path_factory.mktemp("serve-maria")) as it:
        yield it


def gtidx_at(port: int) -> dict:
    return {"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}


def raw_dump(connect: dict, sets: list[str], flags: int = 2, limit: int = 10_000, digest: bool = False):
    """A raw replica: the queries ``sets`` (after the checksum and capability
    ones a replica sends, and a 50 ms heartbeat), COM_BINLOG_DUMP (GTID
    start, ``flags``), then every event up to the first heartbeat: (the
    events' bytes (``digest``: an event over 4 KiB as its SHA-256), the
    error's (code, text) or None)."""
    import pymysql
    conn = pymysql.connect(autocommit=True, **connect)
    out = []
    try:
        with conn.cursor() as cur:
            for q in ("SET @master_binlog_checksum= @@global.binlog_checksum", "SET @mariadb_slave_capability=4",
                      "SET @master_heartbeat_period=50000000", *sets):
                cur.execute(q)
        conn._execute_command(0x12, struct.pack("<IHI", 4, flags, 3_000_000_000 + os.getpid() % 1_000_000))
        while len(out) < limit:
            data = conn._read_packet().get_all_data()
            assert data[0] == 0, data
            out.append(hashlib.sha256(data[1:]).digest() if digest and len(data) > 4097 else bytes(data[1:]))
            if data[5] == 27:                            # a heartbeat: the end of the binlogs
                return out, None
        raise AssertionError(f"no heartbeat after {limit} events")
    except pymysql.err.OperationalError as e:
        return out, e.args
    finally:
        conn.close()


def as_sets(events: list[bytes]) -> list[bytes]:
    """The events, a made-up GTID_LIST's entries sorted and its checksum
    dropped: the server lists its binlog state in its hash's order, gtidx in
    ``BinlogState.entries``' order (the same entries)."""
    out = []
    for e in events:
        if e[4] == 163 and e[17] & 0x20:
            n = struct.unpack_from("<I", e, 19)[0] & 0x0FFFFFFF
            out.append(e[:23] + b"".join(sorted(e[23 + 16 * i:39 + 16 * i] for i in range(n))))
        else:
            out.append(e)
    return out


def first_difference(ours: list[bytes], theirs: list[bytes]) -> str:
    """Where two event lists first differ: the event's index and type, the differing byte offsets."""
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"event {i} (type {b[4]}): bytes {[k for k in range(min(len(a), len(b))) if a[k] != b[k]][:12]}"
    return f"{len(ours)} events against {len(theirs)}"


STARTS = {                                               # (the replica's SETs, refused)
    "inside a seq_no hole": (["SET @slave_connect_state='0-1-21'"], False),
    "a hole, strict mode": (["SET @slave_connect_state='0-1-21'", "SET @slave_gtid_strict_mode=1"], True),
    "a GTID, strict mode": (["SET @slave_connect_state='0-1-20'", "SET @slave_gtid_strict_mode=1"], False),
    "ahead of the source": (["SET @slave_connect_state='0-1-90'"], True),
    "ahead, ignore duplicates": (["SET @slave_connect_state='0-1-90'", "SET @slave_gtid_ignore_duplicates=1"], False),
    "diverged, ignore duplicates": (["SET @slave_connect_state='0-2-5'", "SET @slave_gtid_ignore_duplicates=1"], True),
    "ahead on another server, ignore duplicates": (["SET @slave_connect_state='0-2-900'",
                                                    "SET @slave_gtid_ignore_duplicates=1"], False),
    "a domain the source lacks": (["SET @slave_connect_state='0-1-22,9-9-9'"], False),
    "purged": (None, True),                              # the position in the purged binlog
    "the empty position, purged": (["SET @slave_connect_state=''"], True),
    "non-monotonic: a seq_no logged before a higher one": (["SET @slave_connect_state='0-1-20,5-1-50'"], False),
    "non-monotonic: the other server's low seq_no": (["SET @slave_connect_state='0-1-20,5-2-40'"], False),
    "non-monotonic: the server's seq_no before it went back": (["SET @slave_connect_state='0-1-20,5-2-101'"], True),
    "non-monotonic, strict mode: a hole met mid-stream": (["SET @slave_connect_state='0-1-20,5-1-51'",
                                                           "SET @slave_gtid_strict_mode=1"], True),
    "two domains reached apart": (["SET @slave_connect_state='0-1-22,5-1-60'"], False),
    "two domains, one in a hole": (["SET @slave_connect_state='0-1-21,5-1-51'"], False),
}


@pytest.mark.parametrize("name", list(STARTS))
def test_a_start_is_answered_as_the_server_answers_it(source, served, name):
    """Each replica start (strict mode, ignore duplicates, a hole, a
    position ahead, diverged, purged, inside a non-monotonic domain): gtidx
    sends what the source sends for it, byte for byte, the made-up events
    too (fake GTID_LISTs, heartbeats) and the error 1236 and its text."""
    srv, positions = source
    sets, refused = STARTS[name]
    sets = sets or [f"SET @slave_connect_state='{positions['purged']}'"]
    theirs = raw_dump(srv.connection_settings(), sets)
    ours = raw_dump(gtidx_at(served[1]), sets)
    assert [e[4] for e in ours[0]] == [e[4] for e in theirs[0]] and ours[1] == theirs[1]
    assert as_sets(ours[0]) == as_sets(theirs[0]), first_difference(as_sets(ours[0]), as_sets(theirs[0]))
    assert (theirs[1] is not None and theirs[1][0] == 1236) == refused


def test_a_bad_client_ends_its_connection_only(source, served):
    """A client that sends garbage after the handshake, a COM_BINLOG_DUMP cut
    short, an unknown command, or nothing at all: each connection ends with
    a logged reason (or an error packet), and the server goes on serving."""
    import pymysql
    _, port, log = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.recv(1 << 12)                                  # the handshake; then nothing, and gone
    conn = pymysql.connect(autocommit=True, **gtidx_at(port))
    conn._execute_command(0x12, b"\x04\x00")             # a COM_BINLOG_DUMP shorter than its fixed part
    with pytest.raises(pymysql.err.OperationalError):
        conn._read_packet()
    conn.close()
    conn = pymysql.connect(autocommit=True, **gtidx_at(port))
    conn._execute_command(0x7f, b"")                     # a command no server knows
    with pytest.raises(pymysql.err.OperationalError) as e:
        conn._read_packet()
    assert e.value.args[0] == 1047
    conn.ping()                                          # the connection goes on
    conn.close()
    conn = pymysql.connect(autocommit=True, **gtidx_at(port))
    conn._sock.sendall(struct.pack("<I", 0xFFFFFF)[:3] + b"\x00" + b"\x03garbage")   # a packet cut short, then gone
    conn._sock.close()
    reasons = ("ended: the replica closed the connection", "ended: a COM_BINLOG_DUMP shorter than its fixed part",
               "ended: a packet of more than")                   # a read is bounded: no 16 MiB buffer for it
    deadline = time.monotonic() + 10
    while not all(r in log.read_text() for r in reasons) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(r in log.read_text() for r in reasons), log.read_text()
    srv, positions = source
    assert raw_dump(gtidx_at(port), ["SET @slave_connect_state='0-1-20'"])[1] is None


# -- a real replica: following the live directory, a kill mid-stream -------------------------

@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """A private 10.11 replica applying in parallel, logging what it applies
    (its binlog: the GTIDs it applied, each once)."""
    yield from replica_server(tmp_path_factory, "serve-maria-replica", log_slave_updates="ON")


def connect_replica(replica, port: int, position: str, tls: bool = True) -> None:
    """The replica at ``position``, replicating through gtidx serve on ``port``, its IO thread connected.
    ``tls`` False: MASTER_SSL=0 (an 11.4+ replica asks for TLS by default; gtidx serve has none)."""
    replica.sql("STOP SLAVE")
    replica.sql("RESET SLAVE ALL")
    replica.sql("SET GLOBAL gtid_slave_pos = %s", (position,))
    replica.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', "
                f"MASTER_PASSWORD='{PASSWORD}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1"
                + ("" if tls else ", MASTER_SSL=0"))
    replica.sql("START SLAVE")
    deadline = time.monotonic() + 30
    while slave_status(replica).get("Slave_IO_Running") != "Yes":
        assert time.monotonic() < deadline, slave_status(replica).get("Last_IO_Error")
        time.sleep(0.05)


def wait_for(replica, position: str, log) -> None:
    waited = replica.sql("SELECT MASTER_GTID_WAIT(%s, 60)", (position,))[0][0]
    status = slave_status(replica)
    assert waited == 0, (status.get("Last_IO_Error"), status.get("Last_SQL_Error"), log.read_text()[-2000:])
    assert status["Last_SQL_Errno"] == 0 and status["Last_IO_Errno"] == 0


def checksums(srv, db: str) -> dict:
    return {t: srv.sql(f"CHECKSUM TABLE {db}.{t}")[0][1] for t in ("a", "b")}


def test_a_replica_follows_the_live_binlogs(source, served, replica):
    """A replica connected to gtidx serve on the source's own binlog directory,
    at its end: the transactions written after it connected reach it, across
    a FLUSH BINARY LOGS, and a big one written while it waits. gtid_slave_pos
    and CHECKSUM TABLE equal the source's."""
    srv, _ = source
    srv.sql("FLUSH BINARY LOGS")      # a start at a file's GTID_LIST: domain 5's groups, which went back, not again
    connect_replica(replica, served[1], srv.sql("SELECT @@gtid_binlog_pos")[0][0])
    srv.sql("CREATE DATABASE f")
    srv.sql("CREATE TABLE f.a (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB")
    srv.sql("CREATE TABLE f.b (id INT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB")
    conn = srv.connect()
    with conn.cursor() as cur:
        for i in range(20):
            cur.execute("INSERT INTO f.a (v) VALUES (%s)", (f"row {i}",))
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("UPDATE f.a SET v = CONCAT(v, '!') WHERE id % 3 = 0")
        cur.execute("INSERT INTO f.b VALUES (1, REPEAT('x', 3000000))")     # a group of a few MB
        cur.execute("DELETE FROM f.a WHERE id % 7 = 0")
    conn.close()
    end = srv.sql("SELECT @@gtid_binlog_pos")[0][0]
    wait_for(replica, end, served[2])
    assert Position.parse(replica.sql("SELECT @@gtid_slave_pos")[0][0]) == Position.parse(end)
    assert checksums(replica, "f") == checksums(srv, "f")
    replica.sql("STOP SLAVE")


def applied_gtids(replica) -> list[tuple[int, int, int]]:
    """The GTIDs the replica logged as it applied them, in order, from its own binlogs."""
    from gtidx import api
    from gtidx.binlog.mariadb import Binlog
    out = []
    for path in api.list_binlogs(replica.binlog_dir):
        with Binlog(path) as b:
            out += [(domain, server, seq) for _, _, (_, server, seq, domain, _) in b.group_spans()]
    return out


def test_kill_9_mid_group_and_the_replica_resumes(source, replica, tmp_path):
    """gtidx serve killed with SIGKILL while it sends a group of 16 MiB (the
    replica reads at 4 MB/s: killed once the replica has read 2 MiB of it,
    whatever the sockets hold in between; the replica's read position is
    then inside the group), then started again on the same port:
    the replica reconnects by itself and ends with the source's checksums
    and gtid_slave_pos, every GTID applied once."""
    srv, _ = source
    proc, port, log = start_serve(srv.binlog_dir, 0, 1, tmp_path)
    again = None
    try:
        srv.sql("FLUSH BINARY LOGS")
        start = srv.sql("SELECT @@gtid_binlog_pos")[0][0]
        replica.sql("SET GLOBAL read_binlog_speed_limit = 4096")      # KB/s: the kill lands mid-group
        connect_replica(replica, port, start)
        before = applied_gtids(replica)
        srv.sql("CREATE DATABASE k")
        srv.sql("CREATE TABLE k.a (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
        srv.sql("CREATE TABLE k.b (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB")
        conn = srv.connect(autocommit=False)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO k.a (v) VALUES (1)")
            conn.commit()
            for i in range(BIG_ROWS):                                 # one group, a row event per row
                cur.execute("INSERT INTO k.b (b) VALUES (%s)", (os.urandom(BIG_ROW),))
            conn.commit()
            cur.execute("INSERT INTO k.a (v) VALUES (2)")
            conn.commit()
        conn.close()
        name, size = srv.sql("SHOW MASTER STATUS")[0][:2]
        end = srv.sql("SELECT @@gtid_binlog_pos")[0][0]
        from gtidx.binlog.mariadb import Binlog
        with Binlog(srv.binlog_dir / name) as b:
            spans = [(gs, ge) for gs, ge, g in b.group_spans() if ge - gs > BIG_ROWS * BIG_ROW]
        assert len(spans) == 1
        deadline = time.monotonic() + 60
        while slave_status(replica)["Read_Master_Log_Pos"] < spans[0][0] + 2 * BIG_ROW:   # inside the big group
            assert time.monotonic() < deadline, "the replica did not read into the big group"
            time.sleep(0.01)
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 60
        while slave_status(replica).get("Slave_IO_Running") == "Yes":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        read = slave_status(replica)["Read_Master_Log_Pos"]
        replica.sql("SET GLOBAL read_binlog_speed_limit = 0")
        assert spans[0][0] < read < spans[0][1], (read, spans)    # the stream was cut inside the group
        (tmp_path / "again").mkdir()
        again, _, log2 = start_serve(srv.binlog_dir, port, 1, tmp_path / "again")
        wait_for(replica, end, log2)
        assert Position.parse(replica.sql("SELECT @@gtid_slave_pos")[0][0]) == Position.parse(end)
        assert checksums(replica, "k") == checksums(srv, "k")
        applied = applied_gtids(replica)[len(before):]
        with Binlog(srv.binlog_dir / name) as b:
            written = [(domain, server, seq) for _, _, (_, server, seq, domain, _) in b.group_spans()]
        assert applied == written and len(set(applied)) == len(applied) == 6      # 3 DDLs, 3 transactions
        replica.sql("STOP SLAVE")
    finally:
        replica.sql("SET GLOBAL read_binlog_speed_limit = 0")
        stop(proc, again)


def rss_anon(pid: int) -> int:
    """A process's anonymous resident memory, in bytes (/proc/PID/status's RssAnon)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:")) * 1024


def test_many_replicas_at_once_get_the_same_bytes_in_bounded_memory(source, served):
    """Eight raw replicas streaming at once from gtidx, through the 16 MiB
    group too: each gets what one alone gets from the source, and gtidx's
    anonymous memory grows by at most 10 MiB per connection meanwhile, less
    than the group: a connection holds the read-ahead's two windows (1 MiB
    each from a local file) and their join, an event longer than a window
    read on its own (these rows are 1 MiB), 256 KiB of gathered packets, and
    its thread's malloc arena keeps what it freed; about 7 MiB measured
    with eight at once, 2 to 4.5 MiB before the read-ahead)."""
    srv, positions = source
    sets = ["SET @slave_connect_state='0-1-20,5-1-50'"]
    theirs = raw_dump(srv.connection_settings(), sets, digest=True)
    assert sum(len(e) for e in theirs[0]) > BIG_ROWS * 32           # the big group is in it, as digests
    got = [None] * 8
    pid = served[0].pid
    before = peak = rss_anon(pid)

    def one(i):
        got[i] = raw_dump(gtidx_at(served[1]), sets, digest=True)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_anon(pid))
        time.sleep(0.005)
    assert all(g is not None and as_sets(g[0]) == as_sets(theirs[0]) and g[1] is None for g in got)
    assert peak - before <= 8 * 10 * 1024 * 1024, (before, peak)


# -- MariaDB 11.8: its binlogs (compressed events, its .idx beside them), its replicas -------------

COMPRESSED = range(165, 172)     # QUERY_COMPRESSED, then the compressed row events (and their V1 forms)


@pytest.fixture(scope="module")
def source118():
    """A private 11.8 source (log_bin_compress=ON) and its history: (the
    server, the position before it, the one after it, the tables' CHECKSUM TABLE)."""
    srv = private(MariaDB118(f"gtidx-serve-{uuid.uuid4().hex[:12]}",
                             {"log_bin_compress": "ON", "log_bin_compress_min_len": "10"}), "a private MariaDB 11.8")
    try:
        start = srv.sql("SELECT @@gtid_binlog_pos")[0][0]
        srv.sql("CREATE DATABASE m")
        srv.sql("CREATE TABLE m.a (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200), n BIGINT) ENGINE=InnoDB")
        srv.sql("CREATE TABLE m.b (id INT PRIMARY KEY, t TEXT) ENGINE=InnoDB")
        conn = srv.connect()
        with conn.cursor() as cur:
            for i in range(30):
                cur.execute("INSERT INTO m.a (v, n) VALUES (%s, %s)", ("compressible " * 10, i))
            cur.executemany("INSERT INTO m.b VALUES (%s, %s)", [(i, "x" * (i * 50)) for i in range(40)])
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("UPDATE m.a SET n = n * 2, v = CONCAT(v, '!') WHERE id % 3 = 0")
            cur.execute("DELETE FROM m.b WHERE id % 4 = 0")
            cur.execute("ALTER TABLE m.a ADD COLUMN c INT DEFAULT 7")
        conn.close()
        end = srv.sql("SELECT @@gtid_binlog_pos")[0][0]
        sums = {t: srv.sql(f"CHECKSUM TABLE m.{t}")[0][1] for t in ("a", "b")}
        yield srv, start, end, sums
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def served118(source118, tmp_path_factory):
    with serving(source118[0].binlog_dir, 0, 1, tmp_path_factory.mktemp("serve-118")) as it:
        yield it


def test_the_stream_of_11_8_binlogs_equals_the_servers(source118, served118):
    """From the history's start, with and without ANNOTATE_ROWS: gtidx sends
    what the 11.8 source sends, compressed events included, but for the
    start: gtidx starts as 10.11 does (the file from offset 4: its FDE and
    GTID_LIST as written), 11.8 from where its GTID index says (the fake
    ROTATE names that offset, the FDE has log_pos 0, and a fake GTID_LIST of
    the state there stands in for the file's)."""
    srv, start, end, sums = source118
    for flags in (2, 0):
        theirs, error = raw_dump(srv.connection_settings(), [f"SET @slave_connect_state='{start}'"], flags)
        ours, _ = raw_dump(gtidx_at(served118[1]), [f"SET @slave_connect_state='{start}'"], flags)
        assert error is None and as_sets(ours[3:]) == as_sets(theirs[3:])
        assert [e[4] for e in ours[:3]] == [e[4] for e in theirs[:3]] == [4, 15, 163]
        at = struct.unpack_from("<Q", theirs[0], 19)[0]                        # 11.8: the index's offset
        assert struct.unpack_from("<Q", ours[0], 19)[0] == 4 and at == struct.unpack_from("<I", ours[2], 13)[0]
        assert struct.unpack_from("<I", theirs[1], 13)[0] == 0 and theirs[2][17] & 0x20 and not ours[2][17] & 0x20
        assert theirs[2][19:-4] == ours[2][19:-4]                              # the same state listed
        assert any(e[4] in COMPRESSED for e in ours) and any(e[4] == 165 for e in ours)


def replicate118(replica, served, source, tls: bool = True) -> None:
    srv, start, end, sums = source
    connect_replica(replica, served[1], start, tls)
    wait_for(replica, end, served[2])
    assert Position.parse(replica.sql("SELECT @@gtid_slave_pos")[0][0]) == Position.parse(end)
    assert {t: replica.sql(f"CHECKSUM TABLE m.{t}")[0][1] for t in ("a", "b")} == sums
    replica.sql("STOP SLAVE")


def test_an_11_8_replica_restores_through_gtidx(source118, served118):
    replica = private(MariaDB118(f"gtidx-serve-{uuid.uuid4().hex[:12]}",
                                 {"server_id": "2", "slave_parallel_threads": "4"}), "a private MariaDB 11.8 replica")
    try:
        replicate118(replica, served118, source118, tls=False)     # 11.8 asks for TLS by default: gtidx serve has none
    finally:
        replica.stop()


def test_a_10_11_replica_restores_11_8_binlogs_through_gtidx(source118, served118, replica):
    replicate118(replica, served118, source118)
