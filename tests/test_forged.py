"""Robustness (issue 7): forged events in row data. A real MariaDB 10.11
(the live_server fixture) logs rows whose BLOB values are byte-exact GTID and
GTID_LIST events with valid CRC32s. Scanning, indexing and every lookup must
give exactly the server's answers: the event chain walked from the file start
(or from a validated index record) is the authority, and no code path
resynchronizes onto bytes that merely look like events."""
from __future__ import annotations

import shutil
import struct
import zlib

import pytest

from conftest import FIXTURES
from gtidx import api
from gtidx.binlog.mariadb import GTID, GTID_LIST, Binlog
from gtidx.errors import NotFoundError
from gtidx.gtid import Position
from gtidx.index.build import build_index
from gtidx.index.files import open_index
from gtidx.tail import IncrementalIndex

pytestmark = pytest.mark.live

FORGED_SERVER = 4242


def real_event(etype: int) -> bytes:
    """A real event of this type from a CRC32 fixture binlog, as a template."""
    with Binlog(FIXTURES / "mariadb-10.11" / "xa" / "master-bin.000006") as b:
        for off, t, _, ln in b.headers():
            if t == etype:
                return bytes(b.buffer[off:off + ln])
    raise AssertionError(etype)


def forge_gtid(domain: int, seq: int, server: int = FORGED_SERVER) -> bytes:
    ev = bytearray(real_event(GTID))
    struct.pack_into("<I", ev, 5, server)
    struct.pack_into("<QI", ev, 19, seq, domain)
    struct.pack_into("<I", ev, len(ev) - 4, zlib.crc32(ev[:-4]))
    return bytes(ev)


def forge_gtid_list(gtids) -> bytes:
    body = struct.pack("<I", len(gtids)) + b"".join(struct.pack("<IIQ", d, s, q) for d, s, q in gtids)
    ev = bytearray(real_event(GTID_LIST)[:19]) + body + b"\0\0\0\0"
    struct.pack_into("<I", ev, 9, len(ev))
    struct.pack_into("<I", ev, len(ev) - 4, zlib.crc32(ev[:-4]))
    return bytes(ev)


def forged_blob(i: int) -> bytes:
    """Events that would change every answer if a reader believed them: a GTID in
    a domain the server never uses, one far ahead in domain 0, a GTID_LIST."""
    return (forge_gtid(77, 1000 + i) + forge_gtid(0, 10 ** 9 + i)
            + forge_gtid_list([(0, FORGED_SERVER, 5 * 10 ** 9), (78, 1, 1)]) + forge_gtid(79, 3, 1))


def server_pos(conn, name: str, offset: int):
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (name, offset))
        answer = cur.fetchone()[0]
    return None if answer is None else Position.parse(answer)


def test_forged_events_in_row_data_fool_nothing(live_server, tmp_path):
    srv = live_server
    srv.sql("CREATE DATABASE IF NOT EXISTS gtidx_forge")
    srv.sql("CREATE TABLE IF NOT EXISTS gtidx_forge.t (id INT AUTO_INCREMENT PRIMARY KEY, "
            "d INT, b LONGBLOB) ENGINE=InnoDB")
    srv.sql("FLUSH BINARY LOGS")
    name = srv.sql("SHOW MASTER STATUS")[0][0]
    conn = srv.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION binlog_format=ROW")
        for i in range(60):
            cur.execute(f"SET SESSION gtid_domain_id={i % 3}")
            blob = forged_blob(i) if i % 2 else b"plain %d" % i
            cur.execute("INSERT INTO gtidx_forge.t (d, b) VALUES (%s, %s)", (i, blob))
            if i % 7 == 0:        # a blob that starts right at a row boundary, and a big one
                cur.execute("INSERT INTO gtidx_forge.t (d, b) VALUES (%s, %s)", (i, forged_blob(i) * 50))
        cur.execute("SET SESSION gtid_domain_id=0")
    srv.sql("FLUSH BINARY LOGS")
    src = srv.binlog_dir / name
    binlog = tmp_path / name
    shutil.copyfile(src, binlog)
    data = binlog.read_bytes()

    # the forged events are in the file, byte for byte, each with a valid CRC32
    forged = []
    for i in range(1, 60, 2):
        for ev in (forge_gtid(77, 1000 + i), forge_gtid(0, 10 ** 9 + i)):
            at = data.find(ev)
            while at >= 0:
                forged.append(at)
                at = data.find(ev, at + 1)
    assert len(forged) >= 60
    with Binlog(binlog) as b:
        assert all(b.event_ok(f) for f in forged)        # a CRC check alone would believe them

    # the server's answers: every event boundary, every forged event, inside them
    boundaries = []
    with conn.cursor() as cur:
        cur.execute(f"SHOW BINLOG EVENTS IN '{name}'")
        events = cur.fetchall()
    for _, pos, etype, server_id, end, info in events:
        boundaries.append(pos)
    boundaries.append(len(data))
    server_groups = [(pos, info) for _, pos, etype, _, _, info in events if etype == "Gtid"]
    offsets = sorted(set(boundaries + forged + [f + 19 for f in forged] + [f + 1 for f in forged]))
    oracle = {o: server_pos(conn, name, o) for o in offsets}
    assert all(oracle[f] is None for f in forged)

    # the scan: the same groups as the server lists
    with Binlog(binlog) as b:
        groups = list(b.groups())
        assert [g.start for g in groups] == [p for p, _ in server_groups]
        assert not any(g.gtid.server == FORGED_SERVER or g.gtid.domain in (77, 78, 79) for g in groups)
        assert b.start_state.get(0, FORGED_SERVER) is None
        # started anywhere on the chain before a forged event, a walk never lands on it
        chain = [o for o in boundaries if o < len(data)]
        for f in forged[:40]:
            before = [o for o in chain if o < f]
            for start in before[-3:]:
                assert b.apply_until(b.start_state.copy(), start, f) is False
                assert all(g[0] != f for g in b.group_spans(start))

    def check(logs, label):
        wrong = []
        for o in offsets:
            try:
                mine = logs.state_at(binlog, o).position
            except NotFoundError:
                mine = None
            if mine != oracle[o]:
                wrong.append((label, o, str(mine), str(oracle[o])))
        for i in range(1, 60, 2):
            for g in (f"77-{FORGED_SERVER}-{1000 + i}", f"0-{FORGED_SERVER}-{10 ** 9 + i}", "79-1-3"):
                with pytest.raises(NotFoundError):
                    logs.locate(g)
        for pos, info in server_groups[::5]:
            gtid = info.split()[-1] if info.split()[-1].count("-") == 2 else info.split()[1]
            assert logs.locate(gtid).start == pos, (label, gtid)
        return wrong

    with api.BinlogSeries([str(binlog)], use_index=False) as logs:
        assert check(logs, "scan") == []
    for ps, span in ((64, 1), (4096, 65536)):
        build_index(binlog, page_size=ps, span_min=span, max_ratio=None, force=True)
        with api.BinlogSeries([str(binlog)]) as logs:
            assert check(logs, f"index {ps}") == []
            assert logs.state_at(binlog, len(data)).via == "index"

    # hot: the same binlog while it grows (IN_USE), its index in progress
    hot = tmp_path / "hot"
    hot.mkdir()
    grow = hot / name
    part = bytearray(data[:len(data) * 2 // 3])
    part[21] |= 1
    grow.write_bytes(bytes(part))
    inc = IncrementalIndex(str(grow), page_size=64, span_min=1)
    with Binlog(grow) as b:
        inc.start(b)
        inc.advance(b)
        st = open_index(b)
        assert st.usable and st.partial
        st.close()
    inc.close()
    with api.BinlogSeries([str(grow)]) as logs:
        for o in offsets:
            if o > len(part):
                continue
            try:
                mine = logs.state_at(grow, o).position
            except NotFoundError:
                mine = None
            assert mine == oracle[o] or (o == len(part) and oracle[o] is None), o
    conn.close()
