"""``gtidx serve`` with MariaDB 11.8: binlogs an 11.8 source wrote (with its
own ``.idx`` files beside them, and compressed events: log_bin_compress=ON),
served to an 11.8 replica and to a 10.11 one.

The source and the 11.8 replica are private 11.8 servers
(``tools/mariadb118.py``, in the shared script's Debian 13 root); the 10.11
replica is ``tools/mariadb.py``'s. ``gtidx serve`` runs on the source's own
binlog directory. Oracles: the raw dump client of ``test_serve_maria``
against the source and against gtidx (the same bytes), each replica's
gtid_slave_pos and CHECKSUM TABLE against the source's.
"""
from __future__ import annotations

import struct
import uuid

import pytest

from gtidx.gtid import Position
from test_serve_live import start_serve
from test_serve_maria import as_sets, connect_replica, gtidx_at, raw_dump, wait_for
from tools.mariadb import MariaDB
from tools.mariadb118 import MariaDB118

pytestmark = pytest.mark.live

COMPRESSED = range(165, 172)     # QUERY_COMPRESSED, then the compressed row events (and their V1 forms)


def private(srv, what: str):
    try:
        return srv.start()
    except RuntimeError as e:
        pytest.fail(f"cannot start {what}: {e}", pytrace=False)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A private 11.8 source and its history: (the server, the position
    before it, the one after it, the tables' CHECKSUM TABLE)."""
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
def served(source, tmp_path_factory):
    proc, port, log = start_serve(source[0].binlog_dir, 0, 1, tmp_path_factory.mktemp("serve-118"))
    try:
        yield proc, port, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_stream_of_11_8_binlogs_equals_the_servers(source, served):
    """From the history's start, with and without ANNOTATE_ROWS: gtidx sends
    what the 11.8 source sends, compressed events included, but for the
    start: gtidx starts as 10.11 does (the file from offset 4: its FDE and
    GTID_LIST as written), 11.8 from where its GTID index says (the fake
    ROTATE names that offset, the FDE has log_pos 0, and a fake GTID_LIST of
    the state there stands in for the file's)."""
    srv, start, end, sums = source
    for flags in (2, 0):
        theirs, error = raw_dump(srv.connection_settings(), [f"SET @slave_connect_state='{start}'"], flags)
        ours, _ = raw_dump(gtidx_at(served[1]), [f"SET @slave_connect_state='{start}'"], flags)
        assert error is None and as_sets(ours[3:]) == as_sets(theirs[3:])
        assert [e[4] for e in ours[:3]] == [e[4] for e in theirs[:3]] == [4, 15, 163]
        at = struct.unpack_from("<Q", theirs[0], 19)[0]                        # 11.8: the index's offset
        assert struct.unpack_from("<Q", ours[0], 19)[0] == 4 and at == struct.unpack_from("<I", ours[2], 13)[0]
        assert struct.unpack_from("<I", theirs[1], 13)[0] == 0 and theirs[2][17] & 0x20 and not ours[2][17] & 0x20
        assert theirs[2][19:-4] == ours[2][19:-4]                              # the same state listed
        assert any(e[4] in COMPRESSED for e in ours) and any(e[4] == 165 for e in ours)


def replicate(replica, served, source, tls: bool = True) -> None:
    srv, start, end, sums = source
    connect_replica(replica, served[1], start, tls)
    wait_for(replica, end, served[2])
    assert Position.parse(replica.sql("SELECT @@gtid_slave_pos")[0][0]) == Position.parse(end)
    assert {t: replica.sql(f"CHECKSUM TABLE m.{t}")[0][1] for t in ("a", "b")} == sums
    replica.sql("STOP SLAVE")


def test_an_11_8_replica_restores_through_gtidx(source, served):
    replica = private(MariaDB118(f"gtidx-serve-{uuid.uuid4().hex[:12]}",
                                 {"server_id": "2", "slave_parallel_threads": "4"}), "a private MariaDB 11.8 replica")
    try:
        replicate(replica, served, source, tls=False)     # 11.8 asks for TLS by default: gtidx serve has none
    finally:
        replica.stop()


def test_a_10_11_replica_restores_11_8_binlogs_through_gtidx(source, served, tmp_path):
    replica = private(MariaDB(tmp_path / "replica", {"server_id": "2", "slave_parallel_threads": "4"}),
                      "a private MariaDB 10.11 replica")
    try:
        replicate(replica, served, source)
    finally:
        replica.stop()
