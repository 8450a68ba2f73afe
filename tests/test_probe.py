"""`gtidx probe FILE OFFSET` (issue 14 item 2): the event boundaries around any
byte, against a brute-force walk of the event lengths from the file start at
every byte of sampled regions (the preamble, around index records, around
forged events, the end of the file), the GTID state against the servers'
BINLOG_GTID_POS answers (fixtures/*/oracle.json), and damaged copies of real
binlogs (an event header destroyed mid-file) with and without an index."""
from __future__ import annotations

import bisect
import json
import random
import shutil
import struct

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, growing_copy
from gtidx import admin, api
from gtidx.binlog.mariadb import GTID, Binlog
from gtidx.cli import cli
from gtidx.errors import BadInputError, CorruptBinlogError
from gtidx.gtid import Position
from gtidx.index.build import build_index
from gtidx.index.files import index_path, open_index
from gtidx.binlog.probe import CHAIN_EVENTS

M1011 = FIXTURES / "mariadb-10.11"
M118 = FIXTURES / "mariadb-11.8"
SAMPLED = [M1011 / "mixed" / "master-bin.000002", M1011 / "nochecksum" / "master-bin.000011",
           M1011 / "bigtrx" / "master-bin.000004", M118 / "mixed" / "master-bin.000002",
           M118 / "nochecksum" / "master-bin.000014"]


# -- the brute force: event lengths summed from the file start, nothing checked --------------

def chain(data: bytes) -> list[int]:
    """Every event boundary of an intact binlog, with 0 (the file start) and its size."""
    out, off = [0, 4], 4
    while off + 19 <= len(data):
        ln = struct.unpack_from("<I", data, off + 9)[0]
        if off + ln > len(data):
            break
        off += ln
        out.append(off)
    assert out[-1] == len(data)
    return out


def expected(bounds: list[int], o: int) -> tuple[int, int]:
    i = bisect.bisect_right(bounds, o) - 1
    return (o, o) if bounds[i] == o else (bounds[i], bounds[i + 1])


def events(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, length) of every event."""
    b = chain(data)
    return [(o, data[o + 4], e - o) for o, e in zip(b[1:], b[2:])]


def around(points, width: int, size: int) -> list[int]:
    out = set()
    for p in points:
        out.update(range(max(0, p - width), min(size, p + width) + 1))
    return sorted(out)


def copy_with_index(src, tmp_path, span: int = 4096):
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    build_index(dst, page_size=4096, span_min=span, max_ratio=None, force=True)
    return dst


def record_offsets(binlog) -> list[int]:
    _, records = admin.index_records(index_path(str(binlog)))
    return [r.offset for r in records]


def check_every_byte(path, offsets, bounds, *, use_index: bool) -> list:
    wrong = []
    with api.BinlogSeries([str(path)], use_index=use_index) as logs:
        for o in offsets:
            r = logs.probe(path, o)
            if (r.before, r.after) != expected(bounds, o) or r.damaged is not None:
                wrong.append((o, r.before, r.after, r.damaged, expected(bounds, o)))
            if use_index and o > 8192 and r.via != "index":
                wrong.append((o, "via", r.via))
    return wrong


# -- intact binlogs: every byte of sampled regions equals the brute force --------------------

@pytest.mark.parametrize("src", SAMPLED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_probe_equals_brute_force_walk_at_every_byte(src, tmp_path):
    data = src.read_bytes()
    bounds = chain(data)
    size = len(data)
    if (src.parent / (src.name + ".idx")).exists():       # 11.8: the index its server wrote
        path = tmp_path / src.name
        shutil.copyfile(src, path)
        shutil.copyfile(src.parent / (src.name + ".idx"), tmp_path / (src.name + ".idx"))
    else:
        path = copy_with_index(src, tmp_path)
    with Binlog(path) as b:
        body = b.body_start
    recs = [r for r in record_offsets(path) if r > body]
    assert len(recs) >= 3
    # a big event (bigtrx: ~220 KB rows) whose inside is walked over, not into
    big = max(events(data), key=lambda e: e[2])
    with_index = around([0, body, *recs[:2], recs[len(recs) // 2], recs[-1], size, big[0] + big[2] // 2], 400, size)
    assert check_every_byte(path, with_index, bounds, use_index=True) == []
    no_index = around([0, body, size // 2, size], 250 if size < 2 << 20 else 80, size)   # each walks from the start
    assert check_every_byte(path, no_index, bounds, use_index=False) == []


def test_probe_state_is_binlog_gtid_pos(oracle_files, tmp_path):
    """At every offset the servers were asked about: a boundary gives their
    answer; inside an event, `before` is the boundary and its state theirs.
    Through an index (11.8's, written by its server; one built for 10.11's)
    at all of them, walking from the start at every fourth."""
    checked = 0
    for path, expect in oracle_files:
        if "encrypted" in str(path):
            continue
        answers = {o: a for o, a in expect["pos"]}
        if not (path.parent / (path.name + ".idx")).exists():
            d = tmp_path / path.parent.name
            d.mkdir(exist_ok=True)
            path = copy_with_index(path, d)
        for use_index in (True, False):
            with api.BinlogSeries([str(path)], use_index=use_index) as logs:
                for o, answer in expect["pos"][::1 if use_index else 4]:
                    if o > expect["size"]:
                        with pytest.raises(BadInputError):
                            logs.probe(path, o)
                        continue
                    r = logs.probe(path, o)
                    theirs = answers.get(r.before) if answer is None else answer
                    if answer is not None:
                        assert (r.before, r.after) == (o, o) or o < 4, (path, o)
                    else:
                        assert r.before < o < r.after, (path, o, r)
                    if theirs is not None or r.before in answers:
                        assert r.position == Position.parse(theirs), (path, o, use_index, str(r.position), theirs)
                        checked += 1
    assert checked > 5000


def test_every_fixture_event_is_plausible(oracle_files):
    """The checks a probe walk makes (plausible header, CRC32) hold for every
    event of every fixture binlog: the walk to the end meets no damage."""
    for path, expect in oracle_files:
        if "encrypted" in str(path):
            continue
        r = api.probe(path, expect["size"], use_index=False)
        assert (r.before, r.after, r.damaged) == (expect["size"], expect["size"], None), path
        answer = dict(expect["pos"]).get(expect["size"])
        if answer is not None:
            assert r.position == Position.parse(answer), path


def test_probe_in_the_magic_and_at_the_ends():
    path = M1011 / "mixed" / "master-bin.000002"
    size = path.stat().st_size
    with api.BinlogSeries([str(path)], use_index=False) as logs:
        start = str(logs.state_at(path, 4).position)
        assert [logs.probe(path, o)[2:4] for o in range(6)] == [(0, 0), (0, 4), (0, 4), (0, 4), (4, 4), (4, 256)]
        assert {str(logs.probe(path, o).position) for o in range(5)} == {start}
        r = logs.probe(path, size)
        assert (r.before, r.after) == (size, size) and r.position == logs.state_at(path, size).position
        with pytest.raises(BadInputError):
            logs.probe(path, size + 1)


# -- damaged copies --------------------------------------------------------------------------

def damage(src, tmp_path, pick, junk=b"\xff" * 19, name=None, index: bool = False):
    """A copy of ``src`` whose event chosen by ``pick(events)`` has its header
    overwritten with ``junk``; its index (built before the damage) with
    ``index``. Returns (path, intact bytes, the damaged event)."""
    data = src.read_bytes()
    evs = events(data)
    x = pick(evs)
    d = tmp_path / (name or "damaged")
    d.mkdir()
    path = d / src.name
    path.write_bytes(data)
    if index:
        build_index(path, page_size=4096, span_min=4096, max_ratio=None, force=True)
    bad = bytearray(data)
    bad[x[0]:x[0] + len(junk)] = junk
    path.write_bytes(bytes(bad))
    return path, data, x


def mid_gtid(evs):
    gtids = [e for e in evs if e[1] == GTID]
    return gtids[len(gtids) // 2]


def mid_rows(evs):
    rows = [e for e in evs if e[1] == 23 and e[2] > 200]         # WRITE_ROWS_V1 with a body to hide in
    return rows[len(rows) // 3]


@pytest.mark.parametrize("src,pick,junk", [
    (M1011 / "mixed" / "master-bin.000002", mid_gtid, b"\xff" * 19),
    (M1011 / "mixed" / "master-bin.000002", mid_rows, bytes(random.Random(14).randrange(256) for _ in range(19))),
    (M1011 / "nochecksum" / "master-bin.000011", mid_gtid, b"\xff" * 19),
    (M1011 / "nochecksum" / "master-bin.000011", mid_rows, b"\0" * 19),
    (M118 / "mixed" / "master-bin.000002", mid_rows, b"\xee" * 13),          # header from type to next_pos
    (M118 / "nochecksum" / "master-bin.000014", mid_gtid, bytes(range(7, 26))),
], ids=["1011-gtid-ff", "1011-rows-random", "1011-nocrc-gtid", "1011-nocrc-rows-zero", "118-rows", "118-nocrc-gtid"])
def test_damaged_header_is_reported_and_boundaries_after_it_are_real(src, pick, junk, tmp_path):
    path, data, (x, _, xlen) = damage(src, tmp_path, pick, junk)
    bounds = chain(data)
    xend = x + xlen
    size = len(data)
    with Binlog(src) as b:
        intact = {o: b.state_at(o) for o in bounds if x - 2000 <= o <= xend + 2000 or o == size}
    offsets = around([x, xend, size], 300 if size < 2 << 20 else 80, size)     # each walks from the start
    with api.BinlogSeries([str(path)], use_index=False) as logs:
        for o in offsets:
            r = logs.probe(path, o)
            if o <= x:             # x itself ends the last good event: a boundary
                assert (r.before, r.after, r.damaged) == (*expected(bounds, o), None), o
                assert r.state == intact.get(r.before, r.state)
            elif o < xend:
                assert (r.before, r.after, r.damaged) == (x, xend, (x, xend)), (o, r)
                assert r.state == intact[x]
            else:
                assert (r.before, r.after, r.damaged) == (*expected(bounds, o), (x, xend)), (o, r)
                assert r.state is None and r.position is None
    # the CLI says so: exit 0, the damaged range in JSON and in a line of text
    res = CliRunner().invoke(cli, ["probe", str(path), str(xend + 1), "--json", "--no-index"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["damaged"] == [x, xend] and doc["state"] is None and doc["before"] == xend
    res = CliRunner().invoke(cli, ["probe", str(path), str(x + 1), "--no-index"])
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and f"before {x}, after {xend}" in lines[0]
    assert lines[1].startswith(f"damaged: no trustworthy event in bytes {x} to {xend}")


@pytest.mark.parametrize("src", [M1011 / "mixed" / "master-bin.000002", M1011 / "nochecksum" / "master-bin.000011"],
                         ids=["crc32", "none"])
def test_damaged_with_an_index_built_before(src, tmp_path):
    """The index of the intact file still serves: walks start at its records;
    one after the damage gives the state there (the index saw the event the
    damage destroyed), a walk that crosses the damage reports it."""
    path, data, (x, _, xlen) = damage(src, tmp_path, mid_gtid, index=True)
    xend = x + xlen
    bounds = chain(data)
    size = len(data)
    st = open_index(Binlog(path))
    assert st.usable, st.reason
    st.close()
    recs = record_offsets(path)
    after = next(r for r in recs if r > xend)
    with Binlog(src) as b, api.BinlogSeries([str(path)]) as logs:
        for o in around([x, xend, after, size], 200, size):
            r = logs.probe(path, o)
            assert r.via == "index"
            if x < o < xend:
                assert (r.before, r.after, r.damaged) == (x, xend, (x, xend)), o
                assert r.state == b.state_at(x)
                continue
            assert (r.before, r.after) == expected(bounds, o), o
            if o <= x or r.before >= after:
                assert r.damaged is None and r.state == b.state_at(r.before), o
            else:
                assert r.damaged == (x, xend) and r.state is None, o


def test_two_damaged_regions(tmp_path):
    src = M1011 / "mixed" / "master-bin.000002"
    data = src.read_bytes()
    evs = events(data)
    gtids = [e for e in evs if e[1] == GTID]
    a, c = gtids[len(gtids) // 3], gtids[2 * len(gtids) // 3]
    bad = bytearray(data)
    bad[a[0] + 9:a[0] + 13] = b"\x07\0\0\0"        # a length below the header's
    bad[c[0]:c[0] + 19] = b"\xff" * 19
    path = tmp_path / src.name
    path.write_bytes(bytes(bad))
    bounds = chain(data)
    with api.BinlogSeries([str(path)], use_index=False) as logs:
        for o in around([a[0], a[0] + a[2], c[0], c[0] + c[2]], 100, len(data)):
            r = logs.probe(path, o)
            if o <= a[0]:
                assert r.damaged is None and (r.before, r.after) == expected(bounds, o)
            elif o < a[0] + a[2]:
                assert (r.before, r.after, r.damaged) == (a[0], a[0] + a[2], (a[0], a[0] + a[2]))
            elif o <= c[0]:
                assert (r.before, r.after, r.damaged) == (*expected(bounds, o), (a[0], a[0] + a[2]))
            elif o < c[0] + c[2]:
                assert (r.before, r.after, r.damaged) == (c[0], c[0] + c[2], (c[0], c[0] + c[2]))
            else:
                assert (r.before, r.after, r.damaged) == (*expected(bounds, o), (c[0], c[0] + c[2]))


def test_a_zeroed_stretch_over_several_events(tmp_path):
    """3000 zero bytes from inside one event on: damaged from the start of
    that event (its CRC32 fails) to the first event wholly after them."""
    src = M118 / "mixed" / "master-bin.000002"
    data = src.read_bytes()
    evs = events(data)
    lo_at = evs[len(evs) // 2][0] + 30
    path = tmp_path / src.name
    path.write_bytes(data[:lo_at] + bytes(3000) + data[lo_at + 3000:])
    lo = max(o for o, _, _ in evs if o <= lo_at)
    hi = min(o for o, _, _ in evs if o >= lo_at + 3000)
    bounds = chain(data)
    with api.BinlogSeries([str(path)], use_index=False) as logs:
        for o in around([lo, lo_at, lo_at + 3000, hi], 25, len(data)):      # each walks from the start
            r = logs.probe(path, o)
            if o <= lo:
                assert (r.before, r.after, r.damaged) == (*expected(bounds, o), None), o
            elif o < hi:
                assert (r.before, r.after, r.damaged) == (lo, hi, (lo, hi)), o
            else:
                assert (r.before, r.after, r.damaged) == (*expected(bounds, o), (lo, hi)), o


def test_no_trustworthy_boundary_after_the_damage(tmp_path):
    """Garbage from an event to the end of the file: before it the answers
    stand, after it there is nothing to trust: exit 3, naming the break."""
    src = M1011 / "mixed" / "master-bin.000002"
    data = src.read_bytes()
    x = events(data)[len(events(data)) // 2][0]
    path = tmp_path / src.name
    path.write_bytes(data[:x] + random.Random(3).randbytes(len(data) - x))
    with api.BinlogSeries([str(path)], use_index=False) as logs:
        assert logs.probe(path, x - 1).after <= x
        with pytest.raises(CorruptBinlogError) as e:
            logs.probe(path, x + 100)
        assert e.value.offset == x
    res = CliRunner().invoke(cli, ["probe", str(path), str(x + 100), "--json", "--no-index"])
    assert res.exit_code == 3
    assert json.loads(res.stdout)["error"]["offset"] == x
    assert res.stderr.startswith("gtidx: ") and len(res.stderr.splitlines()) == 1


def test_cut_short_and_still_written(tmp_path):
    """The file ends inside an event: a closed binlog cut short reports the
    partial event as damaged to the end; one still being written does not."""
    src = M1011 / "mixed" / "master-bin.000002"
    data = src.read_bytes()
    x, _, ln = mid_rows(events(data))
    cut = x + ln // 2
    closed, hot = tmp_path / "closed", tmp_path / "hot"
    closed.mkdir(), hot.mkdir()
    (closed / src.name).write_bytes(data[:cut])
    (hot / src.name).write_bytes(growing_copy(data, cut))
    for d, damaged in ((closed, (x, cut)), (hot, None)):
        r = api.probe(d / src.name, cut - 5, use_index=False)
        assert (r.before, r.after, r.damaged) == (x, cut, damaged)
        r = api.probe(d / src.name, cut, use_index=False)
        assert (r.before, r.after, r.damaged) == (x, cut, damaged)
        r = api.probe(d / src.name, x - 1, use_index=False)
        assert r.after == x and r.damaged is None


# -- forged events in row data (a live server logs them) --------------------------------------

def forge_zero_next(ev: bytes) -> bytes:
    """A forged event whose next-position field is 0 (as 11.4+ writes for
    events from the transaction cache): only its chain can unmask it."""
    import zlib
    ev = bytearray(ev)
    ev[13:17] = b"\0\0\0\0"
    struct.pack_into("<I", ev, len(ev) - 4, zlib.crc32(ev[:-4]))
    return bytes(ev)


@pytest.mark.live
def test_forged_events_do_not_fool_probe(live_server, tmp_path):
    import test_forged as tf
    srv = live_server
    srv.sql("CREATE DATABASE IF NOT EXISTS gtidx_probe")
    srv.sql("CREATE TABLE IF NOT EXISTS gtidx_probe.t (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB")
    srv.sql("FLUSH BINARY LOGS")
    name = srv.sql("SHOW MASTER STATUS")[0][0]
    short = b"".join(forge_zero_next(tf.forge_gtid(77, 500 + k)) for k in range(CHAIN_EVENTS // 4))
    long_ = b"".join(forge_zero_next(tf.forge_gtid(78, 900 + k)) for k in range(CHAIN_EVENTS + 8))
    conn = srv.connect()
    with conn.cursor() as cur:
        for i in range(12):
            blob = (tf.forged_blob(i), short, tf.forged_blob(i) * 50, b"plain")[i % 4]
            cur.execute("INSERT INTO gtidx_probe.t (b) VALUES (%s)", (blob,))
        cur.execute("INSERT INTO gtidx_probe.t (b) VALUES (%s)", (long_,))
    conn.close()
    srv.sql("FLUSH BINARY LOGS")
    path = tmp_path / name
    shutil.copyfile(srv.binlog_dir / name, path)
    data = path.read_bytes()
    bounds = chain(data)
    head = tf.forge_gtid(77, 1001)[:19]          # every forged GTID event of forged_blob has this header
    forged, at = [], data.find(head)
    while at >= 0:
        forged.append(at)
        at = data.find(head, at + 1)
    forged += [data.find(short), data.find(long_)]
    assert len(forged) >= 3 and -1 not in forged
    with Binlog(path) as b:
        assert b.event_ok(data.find(short)) and b.event_ok(data.find(long_))
    points = [f + k * 42 for f in forged for k in (0, 3)]
    assert check_every_byte(path, around(points, 60, len(data)), bounds, use_index=False) == []
    build_index(path, page_size=64, span_min=1, max_ratio=None, force=True)
    assert check_every_byte(path, around(points, 60, len(data)), bounds, use_index=True) == []

    # destroy the header of a rows event holding forged events: the chain
    # resumes at its real end, not on the forgeries
    evs = events(data)
    for needle in (short, tf.forged_blob(2) * 50, long_):
        at = data.find(needle)
        x, _, ln = next(e for e in evs if e[0] < at < e[0] + e[2])
        d = tmp_path / f"bad{x}"
        d.mkdir()
        bad = bytearray(data)
        bad[x:x + 19] = b"\xff" * 19
        (d / name).write_bytes(bytes(bad))
        with api.BinlogSeries([str(d / name)], use_index=False) as logs:
            for o in around([x, at, at + len(needle), x + ln], 50, len(data)):
                r = logs.probe(d / name, o)
                want = (x, x + ln) if x < o < x + ln else expected(bounds, o)
                assert (r.before, r.after) == want and (o <= x or r.damaged == (x, x + ln)), (o, r)


# -- the command line ------------------------------------------------------------------------

def test_cli_probe(tmp_path):
    src = M1011 / "mixed" / "master-bin.000002"
    path = copy_with_index(src, tmp_path)
    size = path.stat().st_size
    run = CliRunner().invoke
    res = run(cli, ["probe", str(path), "1000"])
    assert res.exit_code == 0, res.output
    assert res.stdout == f"{path} offset 1000: before 913, after 1041, position at 913: 0-1-7 (via index)\n"
    res = run(cli, ["probe", str(path), "913", "--json"])
    assert json.loads(res.stdout) == {"file": str(path), "offset": 913, "before": 913, "after": 913,
                                      "state": "0-1-7", "damaged": None, "via": "index"}
    res = run(cli, ["probe", str(path), hex(size - 3)])
    assert res.exit_code == 0 and f"after {size}, position at" in res.stdout and "(via index)" in res.stdout
    res = run(cli, ["probe", str(path), "0x391", "--no-index"])
    assert res.stdout == f"{path} offset 913: an event boundary, position 0-1-7 (via scan)\n"
    # past the end: bad input (2); a missing file: I/O (3); not an offset: 2
    res = run(cli, ["probe", str(path), str(size + 1), "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["exit_code"] == 2
    assert "past the end" in res.stderr and len(res.stderr.splitlines()) == 1
    res = run(cli, ["probe", str(tmp_path / "nope.000001"), "4"])
    assert res.exit_code == 3 and res.stderr.startswith("gtidx: ") and len(res.stderr.splitlines()) == 1
    res = run(cli, ["probe", str(path), "-5"])
    assert res.exit_code == 2
    res = run(cli, ["probe", str(path), "12x"])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_probe_through_an_object_store(tmp_path):
    """A URL goes through the storage layer as for `pos`: the same answers,
    through the object's index, damaged objects too."""
    pytest.importorskip("s3fs")
    from tools.s3server import MotoServer
    src = M118 / "mixed" / "master-bin.000002"
    data = src.read_bytes()
    bad = bytearray(data)
    x, _, xlen = mid_rows(events(data))
    bad[x:x + 19] = b"\xff" * 19
    with MotoServer(tmp_path) as s3:
        client = s3.bucket("probe")
        client.put_object(Bucket="probe", Key=f"ok/{src.name}", Body=data)
        client.put_object(Bucket="probe", Key=f"ok/{src.name}.idx", Body=(src.parent / (src.name + ".idx")).read_bytes())
        client.put_object(Bucket="probe", Key=f"bad/{src.name}", Body=bytes(bad))
        opts = s3.storage_options()
        url = f"s3://probe/ok/{src.name}"
        bounds = chain(data)
        with api.BinlogSeries([url], storage_options=opts) as logs, Binlog(src) as b:
            for o in [5, 1000, len(data) // 2, x + 7, len(data) - 1, len(data)]:
                r = logs.probe(url, o)
                assert (r.before, r.after, r.damaged, r.via) == (*expected(bounds, o), None, "index"), o
                assert r.state == b.state_at(r.before)
        r = api.probe(f"s3://probe/bad/{src.name}", x + xlen + 1, storage_options=opts)
        assert (r.before, r.damaged) == (x + xlen, (x, x + xlen))
        res = CliRunner().invoke(cli, ["probe", f"s3://probe/bad/{src.name}", str(x + 3), "--json",
                                       *[a for k, v in opts.items() for a in ("--storage-option", f"{k}={v}")]])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["damaged"] == [x, x + xlen]
