"""``gtidx serve`` on MySQL binlogs against a real MySQL 9.7 replica.

The source history is written by the shared MySQL 9.7 (tools/mysql97.py,
GTIDX_MY97_SOCKET): a database of its own, transactions with a GTID tag of
this test's (``svmysql``, so the history's GTIDs are known whatever other
sessions write meanwhile), across a FLUSH BINARY LOGS; its binlog files
copied to tmp_path. ``gtidx serve`` runs as a process on the copies
(127.0.0.1, a free port) with the shared server's server_id and UUID. A
private MySQL 9.7 (``PrivateMySQL97``: its own datadir, server_uuid and
server_id 2; GTID_MODE=ON; replica_parallel_workers as 9.7 defaults, 4) is
the replica: its gtid_purged set to a backup's GTID set (the history's
start, or a point inside it with the tables loaded), then CHANGE
REPLICATION SOURCE TO gtidx with SOURCE_AUTO_POSITION=1, START REPLICA. The
oracles: WAIT_FOR_EXECUTED_GTID_SET reaching the history's end, SHOW
REPLICA STATUS without error, CHECKSUM TABLE equal to the source server's;
a raw client's stream from gtidx equal, byte for byte, to the real 9.7's
for the same executed set; the real servers' error texts.
"""
from __future__ import annotations

import os
import shutil
import struct
import uuid

import pytest
from hypothesis import given, settings, strategies as st

from gtidx.binlog.mysql import MysqlBinlog
from gtidx.mysqlgtid import GtidSet
from servehelp import PASSWORD, serving, start_serve, stop
from tools.mysql97 import MySQL97, PrivateMySQL97

TAG = "svmysql"
TABLES = ("t", "u")
DB_PREFIX = "gtidxserve_my"


def binlog_names(srv) -> list[str]:
    return [r[0] for r in srv.sql("SHOW BINARY LOGS")]


def gtid_executed(cur) -> GtidSet:
    cur.execute("SELECT @@GLOBAL.gtid_executed")
    return GtidSet.parse(cur.fetchall()[0][0])


@pytest.fixture(scope="module")
def source():
    srv = MySQL97().ensure()
    assert srv.sql("SELECT @@GLOBAL.gtid_mode")[0][0] == "ON"
    return srv


@pytest.fixture(scope="module")
def history(source, tmp_path_factory):
    """{"dir": the binlog copies, "start": the GTID set before the history,
    "end": the one after it, "db", "checksums": {table: the source's
    CHECKSUM TABLE}, "backup": {"set": the GTID set at a point inside the
    first file, "tables": {table: (CREATE TABLE, rows)}}, "until": the
    history's GTID (uuid:svmysql:N) a restore stops after, "until_checksums":
    the tables' there, "uuid", "server_id": the source's}."""
    srv = source
    db = f"{DB_PREFIX}_{uuid.uuid4().hex[:12]}"
    own = srv.sql("SELECT @@GLOBAL.server_uuid")[0][0]
    srv.sql("FLUSH BINARY LOGS")
    first = binlog_names(srv)[-1]
    out = {"db": db, "uuid": own, "server_id": srv.sql("SELECT @@GLOBAL.server_id")[0][0]}
    conn = srv.connect()
    try:
        with conn.cursor() as cur:
            out["start"] = gtid_executed(cur)
            cur.execute(f"SET gtid_next = 'AUTOMATIC:{TAG}'")
            cur.execute(f"CREATE DATABASE {db}")
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(64), n BIGINT)")
            cur.execute(f"CREATE TABLE {db}.u (id INT AUTO_INCREMENT PRIMARY KEY, b BLOB)")
            for i in range(20):
                cur.execute("BEGIN")
                cur.executemany(f"INSERT INTO {db}.t VALUES (%s, %s, %s)",
                                [(i * 10 + k, f"row {i}-{k}", i * k) for k in range(10)])
                cur.execute(f"INSERT INTO {db}.u (b) VALUES (%s)", (os.urandom(300),))
                cur.execute("COMMIT")
                if i == 9:                       # a backup taken here: the replica's start inside the file
                    out["backup"] = {"set": gtid_executed(cur),
                                     "tables": {t: (srv.sql(f"SHOW CREATE TABLE {db}.{t}")[0][1],
                                                    srv.sql(f"SELECT * FROM {db}.{t}")) for t in TABLES}}
                if i == 14:                      # a point in time to restore to
                    out["until"] = f"{own}:{TAG}:{gtid_executed(cur).last(own, TAG)}"
                    out["until_checksums"] = {t: srv.sql(f"CHECKSUM TABLE {db}.{t}")[0][1] for t in TABLES}
            cur.execute("FLUSH BINARY LOGS")    # the stream crosses a rotation
            cur.execute(f"UPDATE {db}.t SET n = n + 1, v = CONCAT(v, '!') WHERE id % 3 = 0")
            cur.execute(f"DELETE FROM {db}.t WHERE id % 7 = 0")
            cur.execute(f"ALTER TABLE {db}.u ADD COLUMN c INT DEFAULT 5")
            cur.execute("SET gtid_next = 'AUTOMATIC'")
            out["end"] = gtid_executed(cur)
            out["checksums"] = {t: srv.sql(f"CHECKSUM TABLE {db}.{t}")[0][1] for t in TABLES}
            cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
    names = binlog_names(srv)
    d = tmp_path_factory.mktemp("serve-mysql-binlogs")
    for name in names[names.index(first):-1]:
        shutil.copyfile(srv.datadir / name, d / name)
    out["dir"] = d
    yield out
    srv.sql(f"DROP DATABASE IF EXISTS {db}")


@pytest.fixture(scope="module")
def served(history, tmp_path_factory):
    """``gtidx serve`` on the copies as the server that wrote them: its
    server_id and server_uuid. (the process, its port, its log)"""
    with serving(history["dir"], 0, history["server_id"], tmp_path_factory.mktemp("serve"),
                 "--server-uuid", history["uuid"]) as it:
        yield it


@pytest.fixture(scope="module")
def replica():
    srv = PrivateMySQL97(f"svmysql-{uuid.uuid4().hex[:8]}")
    try:
        srv.start()
    except (RuntimeError, OSError) as e:
        srv.stop()
        pytest.fail(f"cannot start the private MySQL 9.7 replica: {e}", pytrace=False)
    try:
        # the shared server's binlogs hold other sessions' writes too: the test's databases only
        srv.sql(f"CHANGE REPLICATION FILTER REPLICATE_WILD_DO_TABLE = ('{DB_PREFIX}%.%')")
        yield srv
    finally:
        srv.stop()


def replica_status(srv) -> dict:
    with srv.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW REPLICA STATUS")
        row = cur.fetchone()
        return dict(zip([c[0] for c in cur.description], row)) if row else {}


def provision(replica, history, backup: dict | None, port: int) -> None:
    """The replica as a restored backup: no replication, gtid_executed the
    backup's set (the history's start without ``backup``), its tables (not
    binlogged), then gtidx as its auto-positioned source."""
    replica.sql("STOP REPLICA")
    replica.sql("RESET REPLICA ALL")
    db = history["db"]
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute("SET sql_log_bin = 0")
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        cur.execute("RESET BINARY LOGS AND GTIDS")
        cur.execute("SET GLOBAL gtid_purged = %s", ((backup["set"] if backup else history["start"]).one_line(),))
        if backup:
            cur.execute(f"CREATE DATABASE {db}")
            cur.execute(f"USE {db}")
            for t, (create, rows) in backup["tables"].items():
                cur.execute(create)
                if rows:
                    cur.executemany(f"INSERT INTO {db}.{t} VALUES ({', '.join(['%s'] * len(rows[0]))})", rows)
    replica.sql(f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={port}, SOURCE_USER='repl', "
                f"SOURCE_PASSWORD='{PASSWORD}', SOURCE_AUTO_POSITION=1, SOURCE_SSL=0, SOURCE_CONNECT_RETRY=1")


def wait_for(replica, gtids: str, log) -> None:
    waited = replica.sql("SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, 60)", (gtids,))[0][0]
    status = replica_status(replica)
    assert waited == 0, (f"the replica did not reach the set: IO {status.get('Last_IO_Error')!r}, "
                         f"SQL {status.get('Last_SQL_Error')!r}; gtidx serve said: {log.read_text()[-2000:]}")
    assert status["Last_IO_Errno"] == 0 and status["Last_SQL_Errno"] == 0


def checksums(replica, db: str) -> dict:
    return {t: replica.sql(f"CHECKSUM TABLE {db}.{t}")[0][1] for t in TABLES}


@pytest.mark.parametrize("where", ["start", "backup"])
def test_a_mysql_replica_catches_up_through_gtidx(history, served, replica, where):
    """From the history's start (every transaction of it sent, the CREATE
    DATABASE first) and from a backup inside the first file (the source
    reads the file from its start and leaves out what the backup holds):
    the replica reaches the history's end with the source's checksums."""
    _, port, log = served
    provision(replica, history, history["backup"] if where == "backup" else None, port)
    replica.sql("START REPLICA")
    wait_for(replica, history["end"].one_line(), log)
    status = replica_status(replica)
    assert status["Replica_IO_Running"] == "Yes" and status["Replica_SQL_Running"] == "Yes"
    assert status["Source_UUID"] == history["uuid"] and status["Source_Server_Id"] == history["server_id"]
    assert checksums(replica, history["db"]) == history["checksums"] and None not in history["checksums"].values()
    assert replica.sql(f"SELECT COUNT(*) FROM {history['db']}.t")[0][0] == 200 - 29
    replica.sql("STOP REPLICA")


def stopped_at(replica, gtid: str, log) -> int:
    """Waits for ``gtid`` (uuid:tag:N) applied and the SQL thread stopped by
    its UNTIL condition: the last N of that uuid and tag applied."""
    wait_for(replica, gtid, log)
    for _ in range(600):          # it stops by itself, right after: a bounded poll, no fixed sleep
        if replica_status(replica)["Replica_SQL_Running"] == "No":
            break
        replica.sql("DO SLEEP(0.05)")
    status = replica_status(replica)
    assert status["Replica_SQL_Running"] == "No" and status["Last_SQL_Errno"] == 0, status["Last_SQL_Error"]
    uuid_, tag, _ = gtid.split(":")
    return GtidSet.parse(replica.sql("SELECT @@GLOBAL.gtid_executed")[0][0]).last(uuid_, tag)


def test_restore_to_a_point_with_start_replica_until(history, served, replica):
    """The restore the command is for: the backup, then START REPLICA UNTIL
    SQL_BEFORE_GTIDS= the GTID after the point: the replica stops exactly
    before it, with the source's checksums at the point. Then UNTIL
    SQL_AFTER_GTIDS= a GTID three later: it stops once that one is applied,
    without error (not exactly after it: 9.7's applier is a coordinator and
    workers, replica_parallel_workers=0 reads back as 1, and the workers
    finish what they took past it: seen N+4 to N+6 for N+3; the replica's
    own rule, the stream being the server's byte for byte). Then a plain
    START REPLICA resumes to the history's end with the source's checksums."""
    _, port, log = served
    provision(replica, history, history["backup"], port)
    uuid_, tag, n = history["until"].split(":")
    n = int(n)
    replica.sql(f"START REPLICA UNTIL SQL_BEFORE_GTIDS = '{uuid_}:{tag}:{n + 1}'")
    assert stopped_at(replica, history["until"], log) == n
    assert checksums(replica, history["db"]) == history["until_checksums"] != history["checksums"]
    replica.sql("STOP REPLICA")
    replica.sql(f"START REPLICA UNTIL SQL_AFTER_GTIDS = '{uuid_}:{tag}:{n + 3}'")
    assert stopped_at(replica, f"{uuid_}:{tag}:{n + 3}", log) >= n + 3
    replica.sql("STOP REPLICA")
    replica.sql("START REPLICA")
    wait_for(replica, history["end"].one_line(), log)
    assert checksums(replica, history["db"]) == history["checksums"]
    replica.sql("STOP REPLICA")


def test_kill_9_and_restart_the_replica_resumes(history, replica, tmp_path):
    """gtidx serve killed with SIGKILL while the replica idles at the end of
    the first binlog, then started again on the same port with every
    binlog: the replica reconnects by itself (SOURCE_CONNECT_RETRY), sends
    its executed set again, and ends with the source's checksums (a
    transaction twice: a duplicate key; one missed: other checksums)."""
    first = tmp_path / "first"
    first.mkdir()
    head = sorted(history["dir"].iterdir())[0]
    shutil.copyfile(head, first / head.name)
    with MysqlBinlog(head) as b:
        at_head_end = b.end_set()
    proc, port, log = start_serve(first, 0, history["server_id"], tmp_path, "--server-uuid", history["uuid"])
    again = None
    try:
        provision(replica, history, history["backup"], port)
        replica.sql("START REPLICA")
        wait_for(replica, at_head_end.one_line(), log)
        proc.kill()
        proc.wait(timeout=30)
        (tmp_path / "again").mkdir()
        again, _, log2 = start_serve(history["dir"], port, history["server_id"], tmp_path / "again",
                                     "--server-uuid", history["uuid"])
        wait_for(replica, history["end"].one_line(), log2)
        assert checksums(replica, history["db"]) == history["checksums"]
        replica.sql("STOP REPLICA")
    finally:
        stop(proc, again)


def encoded(gtids: GtidSet) -> bytes:
    """A GTID set as COM_BINLOG_DUMP_GTID carries it: written here from
    MySQL's layout (the untagged format when no GTID has a tag; else the
    tagged one: format 1 in the top byte, the count in bits 8-55), not
    with gtidx's decoder."""
    entries: dict = {}
    for uuid_, tag, start, end in gtids.intervals():
        entries.setdefault((uuid_, tag), []).append((start, end))
    tagged = any(tag for _, tag in entries)
    out = [struct.pack("<Q", (1 << 56 | len(entries) << 8 | 1) if tagged else len(entries))]
    for (uuid_, tag), ivs in sorted(entries.items()):
        out.append(bytes.fromhex(uuid_.replace("-", "")))
        if tagged:
            out.append(bytes([len(tag) << 1]) + tag.encode())
        out.append(struct.pack("<Q", len(ivs)) + b"".join(struct.pack("<QQ", *iv) for iv in ivs))
    return b"".join(out)


def dump_events(connect: dict, gtids: GtidSet | None, last: str, file: tuple[str, int] = ("", 4),
                out: list | None = None, flags: int = 0) -> list[tuple[int, int, int, bytes]]:
    """A raw MySQL replica: what a source sends for COM_BINLOG_DUMP_GTID
    with the executed set ``gtids`` (None: COM_BINLOG_DUMP from ``file``, a
    name and an offset; ``flags`` the dump's), through the transaction of
    GTID ``last`` (the next GTID event, ROTATE or HEARTBEAT after it ends the list): (type,
    flags, log_pos, the event's bytes) of each event (into ``out`` as they
    come, when given)."""
    import pymysql
    from gtidx.binlog.mysql import GTID_TAGGED
    from gtidx.binlog.mysqlevents import decode_tagged_gtid
    conn = pymysql.connect(autocommit=True, **connect)
    out, reached = [] if out is None else out, False
    try:
        with conn.cursor() as cur:
            cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum")
        replica_id = 3_000_000_000 + os.getpid() % 1_000_000
        if gtids is None:
            conn._execute_command(0x12, struct.pack("<IHI", file[1], flags, replica_id) + file[0].encode())
        else:
            data = encoded(gtids)
            conn._execute_command(0x1E, struct.pack("<HII", flags, replica_id, 0) + struct.pack("<QI", 4, len(data))
                                  + data)
        while True:
            ev = conn._read_packet().get_all_data()
            assert ev[0] == 0, ev
            ev = ev[1:]
            etype, _, _, log_pos, flags = struct.unpack_from("<BIIIH", ev, 4)
            if reached and etype in (33, 42, 4, 27, 41):
                return out
            if etype == GTID_TAGGED:
                reached = str(decode_tagged_gtid(ev[19:-4]).gtid) == last
            out.append((etype, flags, log_pos, bytes(ev)))
    finally:
        conn.close()


@pytest.mark.parametrize("where, flags", [("start", 0), ("backup", 0), ("backup", 2)])
def test_stream_equals_the_servers(history, served, source, where, flags):
    """What gtidx sends a MySQL replica is what the 9.7 that wrote the
    binlogs sends for the same executed set, byte for byte, up to the
    history's last transaction: the fake ROTATE, the FORMAT_DESCRIPTION,
    PREVIOUS_GTIDS, the transactions the set lacks, and the heartbeat after
    each run of transactions left out (from the backup: inside the file),
    a HEARTBEAT_V2 where the dump asks for it (flag 2, as a 9.7 replica's)."""
    _, port, log = served
    gtids = history["start"] if where == "start" else history["backup"]["set"]
    last = f"{history['uuid']}:{TAG}:{history['end'].last(history['uuid'], TAG)}"
    theirs = dump_events({"unix_socket": str(source.socket), "user": "root"}, gtids, last, flags=flags)
    ours = dump_events({"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}, gtids, last,
                       flags=flags)
    assert [e[:3] for e in ours] == [e[:3] for e in theirs]
    assert ours == theirs
    assert [e[0] for e in ours[:3]] == [4, 15, 35] and ours[0][1] & 0x20
    if where == "backup":             # the backup's transactions left out: a heartbeat moves over them
        assert [e[0] for e in ours[3:5]] == [41 if flags else 27, 42] and ours[3][2] == ours[4][2] - len(ours[4][3])


def test_file_offset_stream_equals_the_servers(history, served, source):
    """Without auto-position (COM_BINLOG_DUMP: a file and an offset, here the
    first transaction after the backup, where ``gtidx seek --replica`` says)
    the stream is the 9.7 source's byte for byte: its FORMAT_DESCRIPTION
    with log_pos zeroed (and its CRC32 again), no PREVIOUS_GTIDS, every
    event from the offset on."""
    from gtidx import api
    _, port, log = served
    first = api.seek(history["backup"]["set"].one_line(), history["dir"], replica=True).first
    at = (os.path.basename(first.file), first.start)
    last = f"{history['uuid']}:{TAG}:{history['end'].last(history['uuid'], TAG)}"
    theirs = dump_events({"unix_socket": str(source.socket), "user": "root"}, None, last, at)
    ours = dump_events({"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}, None, last, at)
    assert [e[:3] for e in ours] == [e[:3] for e in theirs]
    assert ours == theirs
    assert [e[0] for e in ours[:3]] == [4, 15, 42] and ours[1][2] == 0 and ours[2][2] > first.start


def until_heartbeat(connect: dict, gtids: GtidSet, flags: int) -> list[tuple[int, int, int, int, int, bytes]]:
    """A raw MySQL replica asking for a heartbeat every 0.2 s, with the
    executed set ``gtids`` and the dump's ``flags``: the events up to two
    heartbeats in a row (the second one sent while idle), (timestamp, type,
    server_id, log_pos, flags, body without its checksum)."""
    import pymysql
    conn = pymysql.connect(autocommit=True, **connect)
    out = []
    try:
        with conn.cursor() as cur:
            cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum, @source_heartbeat_period = 200000000")
        data = encoded(gtids)
        conn._execute_command(0x1E, struct.pack("<HII", flags, 3_000_000_001 + os.getpid() % 1_000_000, 0)
                              + struct.pack("<QI", 4, len(data)) + data)
        while len(out) < 2 or not {out[-1][1], out[-2][1]} <= {27, 41}:
            ev = conn._read_packet().get_all_data()[1:]
            ts, etype, sid, _, log_pos, ev_flags = struct.unpack_from("<IBIIIH", ev, 0)
            assert len(out) < 10_000
            out.append((ts, etype, sid, log_pos, ev_flags, bytes(ev[19:-4])))
        return out
    finally:
        conn.close()


@pytest.mark.parametrize("flags", [0, 2])
def test_at_the_end_a_heartbeat_as_the_server_sends_it(history, served, source, flags):
    """A replica that holds everything: the last binlog's fake ROTATE,
    FORMAT_DESCRIPTION, PREVIOUS_GTIDS, a heartbeat over what is left out,
    the binlog's closing ROTATE, then, idle, heartbeats as the 9.7 source
    sends them at the end of its own binlog: timestamp 0, flags 0, the
    source's server_id, log_pos the binlog's end, its name (a HEARTBEAT_V2
    for flag 2, the name and position in its fields)."""
    from gtidx.serve.wire import lenenc_int
    _, port, log = served
    last = sorted(history["dir"].iterdir())[-1]
    with MysqlBinlog(last) as b:
        everything = b.end_set()
    ours = until_heartbeat({"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD},
                           everything, flags)
    theirs = until_heartbeat({"unix_socket": str(source.socket), "user": "root"},
                             GtidSet.parse(source.sql("SELECT @@GLOBAL.gtid_executed")[0][0]), flags)
    hb = 41 if flags else 27
    assert [e[1] for e in ours] == [4, 15, 35, hb, 4, hb, hb] and [e[1] for e in theirs[:3]] == [4, 15, 35]
    size, name = last.stat().st_size, last.name.encode()
    pos = lenenc_int(size)
    body = b"\x01" + bytes([len(name)]) + name + b"\x02" + bytes([len(pos)]) + pos + b"\x00" if flags else name
    assert ours[-1] == (0, hb, history["server_id"], size, 0, body)
    assert theirs[-1][:3] == (0, hb, history["server_id"]) and theirs[-1][4] == 0
    their_name = theirs[-1][5][2:2 + theirs[-1][5][1]] if flags else theirs[-1][5]
    assert their_name.startswith(b"binlog.") and len(their_name) == len(name)


def test_mysqlbinlog_reads_from_gtidx_as_from_the_server(history, served, source):
    """The server's own ``mysqlbinlog --read-from-remote-source=BINLOG-DUMP-GTIDS
    --exclude-gtids=START`` (it says @source_binlog_checksum='NONE' and
    BINLOG_DUMP_NON_BLOCK: an EOF packet at the end) prints from gtidx what
    it prints from the 9.7 that wrote the binlogs, rows decoded, up to where
    the copies end (the server goes on into its later binlogs); gtidx's
    output then ends as mysqlbinlog ends any."""
    import subprocess
    from tests.mysqlhistory import mysqlbinlog_command
    _, port, log = served
    args = ["--read-from-remote-source=BINLOG-DUMP-GTIDS", f"--exclude-gtids={history['start'].one_line()}",
            "-v", "--base64-output=DECODE-ROWS", "--to-last-log", ""]
    sock = "/" + str(source.socket.relative_to(source.root))
    theirs = subprocess.run([*mysqlbinlog_command(source), f"--socket={sock}", "--user=root", *args],
                            capture_output=True, timeout=120, check=True).stdout.split(b"\n")
    ours = subprocess.run([*mysqlbinlog_command(source), "--host=127.0.0.1", f"--port={port}", "--user=repl",
                           f"--password={PASSWORD}", "--ssl-mode=DISABLED", *args],
                          capture_output=True, timeout=120, check=True).stdout.split(b"\n")
    body, tail = ours[:-6], ours[-6:]            # GTID_NEXT reset, DELIMITER, the end, 2 SETs, ""
    assert tail == theirs[-6:] and tail[2] == b"# End of log file"
    assert body == theirs[:len(body)]
    last = f"{history['uuid']}:{TAG}:{history['end'].last(history['uuid'], TAG)}".encode()
    assert any(last in line for line in body) and any(history["db"].encode() in line for line in body)


def test_a_replica_ahead_of_the_binlogs_gets_the_servers_error(history, served, source):
    """A replica with a GTID of the source's UUID the binlogs never logged:
    error 1236 in the 9.7 source's very words, from gtidx as from the
    server; the connection's end leaves gtidx serving."""
    import pymysql
    _, port, log = served
    ahead = history["end"] | GtidSet.parse(f"{history['uuid']}:{TAG}:900000000")
    last = f"{history['uuid']}:{TAG}:1"
    refused = []
    for connect in ({"unix_socket": str(source.socket), "user": "root"},
                    {"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}):
        with pytest.raises(pymysql.err.OperationalError) as e:
            dump_events(connect, ahead, last)
        refused.append(e.value.args)
    assert refused[0] == refused[1] and refused[0][0] == 1236
    assert "Replica has more GTIDs than the source has" in refused[0][1]
    with pymysql.connect(host="127.0.0.1", port=port, user="repl", password=PASSWORD, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.SERVER_UUID")
        assert cur.fetchall()[0][0] == history["uuid"]


def test_purged_gtids_get_the_servers_error(replica, tmp_path):
    """A replica lacking GTIDs the source's first binlog's Previous_gtids
    holds (purged): error 1236 in the 9.7 source's words, the two sets in
    it where they fit the message, else its "too long" words. The source
    here is the private 9.7 itself, its binlogs purged; gtidx serves a copy
    of what is left."""
    import pymysql
    replica.sql("STOP REPLICA")
    replica.sql("RESET REPLICA ALL")
    replica.sql("RESET BINARY LOGS AND GTIDS")
    server_uuid = replica.sql("SELECT @@GLOBAL.server_uuid")[0][0]
    with replica.connect() as conn, conn.cursor() as cur:      # transactions of its own, then purged
        cur.execute(f"DROP DATABASE IF EXISTS {DB_PREFIX}_purged")
        cur.execute(f"CREATE DATABASE {DB_PREFIX}_purged")
        cur.execute(f"CREATE TABLE {DB_PREFIX}_purged.p (id INT PRIMARY KEY)")
        for i in range(7):
            cur.execute(f"INSERT INTO {DB_PREFIX}_purged.p VALUES ({i})")
        cur.execute("SET gtid_next = 'AUTOMATIC:tg'")
        for i in range(7, 10):
            cur.execute(f"INSERT INTO {DB_PREFIX}_purged.p VALUES ({i})")
        cur.execute("SET gtid_next = 'AUTOMATIC'")
    purged = GtidSet.parse(f"{server_uuid}:1-10,{server_uuid}:tg:1-3")
    replica.sql("FLUSH BINARY LOGS")
    replica.sql(f"PURGE BINARY LOGS TO '{binlog_names(replica)[-1]}'")
    assert GtidSet.parse(replica.sql("SELECT @@GLOBAL.gtid_purged")[0][0]) == purged
    replica.sql("FLUSH BINARY LOGS")
    d = tmp_path / "binlogs"
    d.mkdir()
    for name in binlog_names(replica)[:-1]:
        shutil.copyfile(replica.datadir / name, d / name)
    with MysqlBinlog(d / binlog_names(replica)[0]) as b:
        assert b.previous_gtids == purged
    proc, port, log = start_serve(d, 0, 2, tmp_path, "--server-uuid", server_uuid)
    try:
        many = ",".join(f"bbbbbbbb-0000-4000-8000-{i:012x}:1-3:5:7:9:11:13" for i in range(12))
        for have in ("", f"{server_uuid}:1-5:7,cccccccc-0000-4000-8000-000000000001:1-2",
                     f"{server_uuid}:1-9," + many):
            refused = []
            for connect in ({"unix_socket": str(replica.socket), "user": "root"},
                            {"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}):
                with pytest.raises(pymysql.err.OperationalError) as e:
                    dump_events(connect, GtidSet.parse(have), "")
                refused.append(e.value.args)
            assert refused[0] == refused[1], have
            assert refused[0][0] == 1236 and "the source purged required binary logs" in refused[0][1]
            assert ("too long to print" in refused[0][1]) == (have.count(",") > 1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def self_signed(where) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, PEM files in ``where``."""
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    (where / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (where / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                      serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    return str(where / "cert.pem"), str(where / "key.pem")


def test_over_tls_as_a_97_replica_asks_for_it(history, replica, tmp_path):
    """With --tls-cert/--tls-key gtidx offers TLS: a 9.7 replica with
    SOURCE_SSL=1 (what it asks for unless told SOURCE_SSL=0: without TLS it
    stops at "SSL is required but the server doesn't support it") restores
    from the backup to the history's end over TLS, checksums the source's."""
    cert, key = self_signed(tmp_path)
    proc, port, log = start_serve(history["dir"], 0, history["server_id"], tmp_path, "--server-uuid",
                                  history["uuid"], "--tls-cert", cert, "--tls-key", key)
    try:
        provision(replica, history, history["backup"], port)
        replica.sql("CHANGE REPLICATION SOURCE TO SOURCE_SSL = 1")
        replica.sql("START REPLICA")
        wait_for(replica, history["end"].one_line(), log)
        status = replica_status(replica)
        assert status["Source_SSL_Allowed"] == "Yes" and status["Replica_IO_Running"] == "Yes"
        assert checksums(replica, history["db"]) == history["checksums"]
        assert "MySQL replica connected over TLS: user 'repl'" in log.read_text()
        replica.sql("STOP REPLICA")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_wrong_password_is_access_denied(served):
    import pymysql
    _, port, log = served
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(host="127.0.0.1", port=port, user="repl", password="not-" + PASSWORD)
    assert e.value.args[0] == 1045 and "Access denied for user 'repl'" in e.value.args[1]


def test_a_client_of_another_plugin_is_switched_to_caching_sha2(served):
    """A client that answers the handshake as mysql_native_password gets an
    auth switch to caching_sha2_password with the same nonce; its
    caching_sha2 answer (PyMySQL's scramble) is fast auth success, then OK."""
    import socket
    from pymysql._auth import scramble_caching_sha2, scramble_native_password
    _, port, log = served

    def packet(s) -> bytes:
        head = s.recv(4, socket.MSG_WAITALL)
        n = int.from_bytes(head[:3], "little")
        return s.recv(n, socket.MSG_WAITALL) if n else b""

    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        hello = packet(s)
        at = hello.index(b"\0", 1) + 1                       # after the version
        nonce = hello[at + 4:at + 12] + hello[at + 31:at + 43]
        assert hello.endswith(b"caching_sha2_password\0")
        auth = scramble_native_password(PASSWORD.encode(), nonce)
        caps = 0x200 | 0x8000 | 0x80000 | 0x200000          # 4.1, secure connection, plugin auth (lenenc)
        body = (struct.pack("<IIB23x", caps, 1 << 24, 45) + b"repl\0" + bytes([len(auth)]) + auth
                + b"mysql_native_password\0")
        s.sendall(len(body).to_bytes(3, "little") + b"\x01" + body)
        switch = packet(s)
        assert switch == b"\xfecaching_sha2_password\0" + nonce + b"\0"
        answer = scramble_caching_sha2(PASSWORD.encode(), nonce)
        s.sendall(len(answer).to_bytes(3, "little") + b"\x03" + answer)
        assert packet(s) == b"\x01\x03" and packet(s)[0] == 0


@settings(max_examples=200, deadline=None)
@given(password=st.binary(max_size=40), nonce=st.binary(min_size=20, max_size=20), other=st.binary(max_size=40))
def test_caching_sha2_fast_path_against_pymysql(password, nonce, other):
    """The fast path's check accepts what PyMySQL's client sends for the
    password, and refuses it for another one."""
    from pymysql._auth import scramble_caching_sha2
    from gtidx.serve.mysqlsession import caching_sha2_ok
    assert caching_sha2_ok(password, nonce, scramble_caching_sha2(password, nonce))
    if other != password:
        assert not caching_sha2_ok(other, nonce, scramble_caching_sha2(password, nonce))


def test_several_assignments_of_one_set():
    from gtidx.serve.mysqlsession import several_assignments
    assert several_assignments("SET @master_heartbeat_period = 30000001024, @source_heartbeat_period = 30000001024") \
        == [("master_heartbeat_period", "30000001024"), ("source_heartbeat_period", "30000001024")]
    assert several_assignments("SET @a = 'x, y', @b = @@global.binlog_checksum;") \
        == [("a", "'x, y'"), ("b", "@@global.binlog_checksum")]
    assert several_assignments("SET @a = 'x, y'") is None              # one: the session's own SET keeps it
    assert several_assignments("SELECT @a, @b") is None


def test_the_purged_text_fits_512_bytes_as_the_servers():
    """The purged refusal with both sets where the whole text is at most 512
    bytes (at 512 cut to 511), else the "too long" words: the bounds
    measured on 9.7 (508-510 whole, 512 cut, 513 on too long)."""
    from gtidx.errors import ReplicaStartRefused
    from gtidx.serve.mysqlsession import PURGED_TEXT, refusal_text
    lost = GtidSet.parse("aaaaaaaa-0000-4000-8000-000000000001:1-10")
    seen = {}
    for width in range(1, 33):
        have = GtidSet.parse(",".join(f"bbbbbbbb-0000-4000-8000-00000000000{i}:1-3" for i in range(3))
                             + f",cccccccc-0000-4000-8000-000000000001:{'t' * width}:1")
        whole = (f"{PURGED_TEXT} The GTID set sent by the replica is '{have}', and the missing transactions are "
                 f"'{lost - have}'")
        text = refusal_text(ReplicaStartRefused("purged", reason="purged", gtid=lost - have), have)
        seen[len(whole)] = text == whole, text == whole[:511], "too long to print" in text
    assert {511, 512, 513} <= set(seen)
    assert seen[511][0] and seen[512] == (False, True, False)
    assert seen[513] == (False, False, True)


@pytest.mark.parametrize("args, words", [
    (["--tls-cert", "CERT"], "--tls-cert and --tls-key go together"),
    (["--tls-cert", "CERT", "--tls-key", "CERT"], "cannot load the TLS certificate"),
    (["--server-uuid", "not-a-uuid"], "--server-uuid wants a UUID"),
])
def test_bad_tls_or_uuid_options_are_one_line_exit_2(tmp_path, args, words):
    """A certificate without its key, a file that is no key, a UUID that is
    none: one line, exit 2, before anything listens."""
    from click.testing import CliRunner
    from gtidx.cli import cli
    from conftest import FIXTURES
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    args = [str(tmp_path / "cert.pem") if a == "CERT" else a for a in args]
    r = CliRunner().invoke(cli, ["serve", str(FIXTURES / "mysql-9.7" / "single"), "--port", "0", "--no-auth", *args])
    assert r.exit_code == 2, r.output
    assert words in r.output and len(r.output.strip().splitlines()) <= 2, r.output


def test_an_anonymous_transaction_ends_the_stream_as_the_servers(replica, tmp_path):
    """An auto-positioned replica whose source meets an anonymous transaction
    (gtid_mode ON_PERMISSIVE for a while): error 1236 in the 9.7 source's
    words, after the same events, byte for byte, from gtidx as from the
    server (the private 9.7, whose binlogs gtidx serves a copy of): met
    after the first transaction sent, and before it (every transaction up
    to it in the set). The replica holds the start file's first GTID: the
    FORMAT_DESCRIPTIONs go with created zeroed (the file's is not: the first
    binlog after RESET BINARY LOGS AND GTIDS has it set, as at a start)."""
    import pymysql
    replica.sql("STOP REPLICA")
    replica.sql("RESET REPLICA ALL")
    replica.sql("RESET BINARY LOGS AND GTIDS")
    server_uuid = replica.sql("SELECT @@GLOBAL.server_uuid")[0][0]
    db = f"{DB_PREFIX}_anonymous"
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")                      # GTID 1
        cur.execute(f"CREATE DATABASE {db}")                               # 2
        cur.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY)")           # 3
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SET GLOBAL gtid_mode = 'ON_PERMISSIVE'")
        try:
            cur.execute(f"INSERT INTO {db}.a VALUES (1)")                  # 4
            cur.execute("SET gtid_next = 'ANONYMOUS'")
            cur.execute(f"INSERT INTO {db}.a VALUES (2)")                  # anonymous
            cur.execute("SET gtid_next = 'AUTOMATIC'")
            cur.execute(f"INSERT INTO {db}.a VALUES (3)")                  # 5
        finally:
            cur.execute("SET gtid_next = 'AUTOMATIC'")
            cur.execute("SET GLOBAL gtid_mode = 'ON'")
        cur.execute("FLUSH BINARY LOGS")
    d = tmp_path / "binlogs"
    d.mkdir()
    for name in binlog_names(replica)[:-1]:
        shutil.copyfile(replica.datadir / name, d / name)
    proc, port, log = start_serve(d, 0, 2, tmp_path, "--server-uuid", server_uuid)
    try:
        for have in (f"{server_uuid}:1-2", f"{server_uuid}:1-4"):
            got = []
            for connect in ({"unix_socket": str(replica.socket), "user": "root"},
                            {"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}):
                events = []
                with pytest.raises(pymysql.err.OperationalError) as e:
                    dump_events(connect, GtidSet.parse(have), "", out=events)
                got.append((events, e.value.args))
            assert [e[:3] for e in got[1][0]] == [e[:3] for e in got[0][0]], have
            assert got[1][1] == got[0][1], have
            assert got[0] == got[1], have
            assert got[0][1][0] == 1236 and "Cannot replicate anonymous transaction" in got[0][1][1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def file_events(path) -> list[bytes]:
    """Every event of a binlog file, read here with the header's length
    field alone (not with gtidx's readers)."""
    data, out, at = path.read_bytes(), [], 4
    while at + 19 <= len(data):
        n = int.from_bytes(data[at + 9:at + 13], "little")
        out.append(data[at:at + n])
        at += n
    return out


@pytest.mark.parametrize("scenario", ["rotated", "nochecksum", "single", "compressed"])
@pytest.mark.parametrize("batch", [300, 1 << 17])
def test_a_file_offset_stream_is_the_files_events_in_order(scenario, batch, monkeypatch):
    """A file/offset dump from a directory's first binlog at 4, with
    BINLOG_DUMP_NON_BLOCK, over a socket pair: per file a fake ROTATE, then
    every event of the file as its bytes are (the FORMAT_DESCRIPTION too:
    these are closed files), then the EOF packet; small events written in
    batches (small ones: many flushes, large ones on their own too) change
    nothing of it."""
    import socket
    import threading
    from gtidx.serve import mysqlstream, stream as mariadbstream
    from gtidx.serve.wire import Connection
    from conftest import FIXTURES
    monkeypatch.setattr(mariadbstream, "GATHER_BYTES", batch)
    monkeypatch.setattr(mariadbstream, "GATHER_EVENT", min(batch, 1 << 16))
    from gtidx import api
    files = api.list_binlogs(FIXTURES / "mysql-9.7" / scenario)
    ours, theirs = socket.socketpair()
    theirs.settimeout(30)
    conn = Connection(ours)
    conn.seq = 1
    stream = mysqlstream.MysqlStream(conn, files, 0, 4, None, 7, 30.0, lambda line: None, flags=1)

    def serve():
        try:
            stream.run()
        finally:
            ours.close()
    t = threading.Thread(target=serve)
    t.start()
    got, reader = [], Connection(theirs)
    while True:
        packet = reader.read_packet(limit=1 << 25)
        if packet[:1] == b"\xfe" and len(packet) < 9:
            break
        assert packet[0] == 0
        got.append(packet[1:])
    t.join(timeout=30)
    theirs.close()
    want = []
    for path in files:
        events = file_events(type(FIXTURES)(path))
        want.append(4)                               # the fake ROTATE's type
        want.extend(events)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w == 4:
            assert g[4] == 4 and int.from_bytes(g[17:19], "little") & 0x20
        else:
            assert g == w


# -- an archive in an object store ------------------------------------------------


@pytest.fixture(scope="module")
def served_s3(history, tmp_path_factory):
    """The history's binlogs uploaded to a ``moto_server`` bucket, indexed
    and catalogued there as a user would (``gtidx build``, ``gtidx catalog
    build`` on the prefix), and ``gtidx serve`` on the prefix as the
    source: (the process, its port, its log)."""
    import subprocess
    import sys
    from servehelp import ROOT
    from tools.s3server import MotoServer
    moto = MotoServer(tmp_path_factory.mktemp("serve-mysql-moto"))
    proc = None
    try:
        client = moto.bucket("serve-mysql")
        for f in sorted(history["dir"].iterdir()):
            client.put_object(Bucket="serve-mysql", Key=f"binlogs/{f.name}", Body=f.read_bytes())
        url = "s3://serve-mysql/binlogs/"
        opts = [a for k, v in moto.storage_options().items() for a in ("--storage-option", f"{k}={v}")]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for cmd in (["build", "-q", "--span-min", "1"], ["catalog", "build"]):
            done = subprocess.run([sys.executable, "-m", "gtidx", *cmd, url, *opts], env=env, capture_output=True,
                                  text=True, timeout=120)
            assert done.returncode == 0, (cmd, done.stdout, done.stderr)
        keys = {o["Key"] for o in client.list_objects_v2(Bucket="serve-mysql")["Contents"]}
        assert any(k.endswith(".idx") for k in keys) and len(keys) > 2 * len(list(history["dir"].iterdir()))
        proc, port, log = start_serve(url, 0, history["server_id"], tmp_path_factory.mktemp("serve-s3"),
                                      "--server-uuid", history["uuid"], *opts)
        yield proc, port, log
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        moto.stop()


def test_a_replica_restores_from_an_object_store_archive(history, served, served_s3, replica):
    """From a bucket (moto_server), indexed and catalogued there: a MySQL
    9.7 replica from the backup inside the first file reaches the history's
    end with auto-position, the source's checksums; a raw client's streams
    (auto-position from the backup with HEARTBEAT_V2, file and offset from
    the first file's start) are the local directory's byte for byte (that
    one is the 9.7 source's: test_stream_equals_the_servers)."""
    _, port, log = served_s3
    provision(replica, history, history["backup"], port)
    replica.sql("START REPLICA")
    wait_for(replica, history["end"].one_line(), log)
    assert checksums(replica, history["db"]) == history["checksums"] and None not in history["checksums"].values()
    replica.sql("STOP REPLICA")
    last = f"{history['uuid']}:{TAG}:{history['end'].last(history['uuid'], TAG)}"
    first = sorted(history["dir"].iterdir())[0].name
    for gtids, at, flags in ((history["backup"]["set"], ("", 4), 2), (None, (first, 4), 0)):
        streams = [dump_events({"host": "127.0.0.1", "port": p, "user": "repl", "password": PASSWORD}, gtids, last,
                               at, flags=flags) for p in (served[1], port)]
        assert [e[:3] for e in streams[1]] == [e[:3] for e in streams[0]]
        assert streams[1] == streams[0] and len(streams[0]) > 20


def test_history_picks_the_files_a_mysql_dump_reads(tmp_path):
    """MySQL binlogs of two histories (the fixtures' 15 files, then the
    oldest one again under a later name: its Previous_gtids do not chain):
    with --history 2 an auto-positioned dump from the set before that file reads that
    history's one file (its events as the file has them, after the fake
    ROTATE naming it, without a CRC32 as the dump said none; NON_BLOCK: the EOF packet at its end); with --history
    1 a file/offset dump naming that file is refused as the server refuses
    a file it does not have."""
    import pymysql
    from test_mysql_catalog import MY, archive
    d = archive(tmp_path / "two")
    shutil.copy(MY / "single" / "binlog.000002", d / "binlog.000030")
    from gtidx import admin
    admin.build_catalog(str(d))
    want = file_events(d / "binlog.000030")
    with MysqlBinlog(d / "binlog.000030") as b:      # the replica holds what came before the file
        before = encoded(b.previous_gtids)
    got = {}
    for history_id, command in ((2, struct.pack("<HII", 1, 77, 0) + struct.pack("<QI", 4, len(before)) + before),
                                (1, struct.pack("<IHI", 4, 1, 77) + b"binlog.000030")):
        where = tmp_path / f"serve{history_id}"
        where.mkdir()
        proc, port, log = start_serve(d, 0, 1000, where, "--history", str(history_id))
        try:
            conn = pymysql.connect(host="127.0.0.1", port=port, user="repl", password=PASSWORD, autocommit=True)
            events = []
            try:
                conn._execute_command(0x1E if history_id == 2 else 0x12, command)
                while True:
                    packet = conn._read_packet().get_all_data()
                    if packet[:1] == b"\xfe" and len(packet) < 9:
                        break
                    events.append(packet[1:])
            except pymysql.err.OperationalError as e:
                got[history_id] = e.args
            finally:
                conn.close()
            got.setdefault(history_id, events)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert isinstance(got[2], list), got
    rotate, *rest = got[2]
    assert rotate[4] == 4 and rotate.endswith(b"binlog.000030") and rest == want
    assert got[1][0] == 1236 and "Could not find first log file name" in got[1][1] and "binlog.000030" in got[1][1]
