"""gtidx's index of MySQL binlogs (gtidx/index/mysql.py, docs/mysql-index-format.md).

Every answer of the index is held against a brute-force walk of the binlog
(``MysqlBinlog.groups``, itself checked against the server's SHOW BINLOG
EVENTS in test_mysqlbinlog.py): the executed set after every transaction.
The transaction_length walk (``transactions``) against the event walk.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, ROOT, growing_copy, mysql_events, set_trx_length
from gtidx.index import format as fmt
from gtidx.errors import CorruptBinlogError, CorruptIndexError, GtidxError, MySQLBinlogError
from gtidx.index.build import build_index, build_mysql_index
from gtidx.index.files import index_path, open_index, read_index, verify_index
from gtidx.index.meta import IndexState
from gtidx.binlog.mysql import GTID_LOG, MysqlBinlog, open_binlog
from gtidx.mysqlgtid import GNO_MAX, GtidSet, MysqlGtid
from gtidx.index.mysql import MAGIC, MYSQL, MysqlIndexReader, MysqlRecordPolicy, decode_set, encode_set
from gtidx.index.reader import IndexReader
from gtidx.index.writer import write_records

MYSQL_FIXTURES = FIXTURES / "mysql-9.7"
SCENARIOS = sorted(p.parent for p in MYSQL_FIXTURES.glob("*/oracle.json"))
FILES = [d / f["name"] for d in SCENARIOS for f in json.loads((d / "oracle.json").read_text())["files"]]
ids = [f"{p.parent.name}/{p.name}" for p in FILES]
DOC = ROOT / "docs" / "mysql-index-format.md"


def walk(b: MysqlBinlog) -> list[tuple[int, GtidSet]]:
    """The brute force: (offset, executed set) at the end of Previous_gtids
    and after every transaction, by the event walk."""
    state = b.previous_gtids.copy() if b.previous_gtids is not None else GtidSet()
    out = [(b.body_start, state.copy())]
    for g in b.groups():
        if g.gtid is not None:
            state.add(*g.gtid)
        out.append((g.end, state.copy()))
    return out


def index_of(path: Path, **kw) -> MysqlIndexReader:
    kw.setdefault("max_ratio", None)
    build_index(path, force=True, **kw)
    return MysqlIndexReader(Path(index_path(path)).read_bytes(), path=index_path(path))


def copy(tmp_path: Path, path: Path) -> Path:
    out = tmp_path / path.name
    shutil.copyfile(path, out)
    return out


def expected_at(records: list, target: int):
    found = None
    for rec in records:
        if rec[0] > target:
            break
        found = rec
    return found


def expected_before(records: list, g: MysqlGtid):
    found = None
    for rec in records:
        if g in rec[1]:
            break
        found = rec
    return found


def probe_gtids(walked: list) -> list[MysqlGtid]:
    """Every GTID of the file, some of Previous_gtids, and some absent."""
    first, last = walked[0][1], walked[-1][1]
    gtids = list((last - first))
    rnd = random.Random(7)
    before = [g for _, _, s, e in first.intervals() for g in (s, e - 1)]
    keys = last.keys() or [("8f2379f0-e75f-11f1-a262-02fc00000001", "")]
    for uuid, tag in keys:
        gtids += [MysqlGtid(uuid, tag, n) for n in (1, 2, GNO_MAX, (last.last(uuid, tag) or 0) + 1)]
    gtids += [MysqlGtid(u, t, n) for (u, t), n in zip(first.keys() * 3, rnd.sample(before, min(len(before), 30)))]
    gtids.append(MysqlGtid("ffffffff-ffff-ffff-ffff-ffffffffffff", "", 1))
    return gtids


# -- the transaction_length walk ---------------------------------------------------------

@pytest.mark.parametrize("path", FILES, ids=ids)
def test_transactions_equal_the_event_walk(path):
    """With and without the jumps, from the start and from boundaries."""
    with MysqlBinlog(path) as b:
        every = list(b.groups())
        assert list(b.transactions()) == every
        assert list(b.transactions(jump=False)) == every
        for g in every[::5]:
            assert list(b.transactions(g.start)) == list(b.groups(g.start))
        if every:       # from inside a transaction (its second event): its rest is skipped, as groups() does
            head = path.read_bytes()[every[0].start:every[0].start + 19]
            inner = every[0].start + struct.unpack_from("<4xB4xI", head)[1]
            assert list(b.transactions(inner)) == list(b.groups(inner)) == every[1:]


@pytest.mark.parametrize("path", [p for p in FILES if p.stat().st_size > 20000], ids=lambda p: p.name)
def test_transactions_of_a_growing_file(tmp_path, path):
    """Prefixes as the server had them (IN_USE): the same transactions."""
    data = path.read_bytes()
    with MysqlBinlog(path) as b:
        groups = list(b.groups())
    for n in sorted({x for g in groups[::4] for x in (g.start, g.end - 1, g.end, g.end + 20)}):
        p = tmp_path / path.name
        p.write_bytes(growing_copy(data, n))
        with MysqlBinlog(p) as b:
            assert list(b.transactions()) == list(b.groups()), n


def test_transactions_of_a_closed_file_cut_short(tmp_path):
    path = MYSQL_FIXTURES / "single" / "binlog.000002"
    with MysqlBinlog(path) as b:
        whole = list(b.groups())
        g = whole[20]
    # cut inside transaction 21's last event: the whole ones (jumping or not), then the event walk's error
    (tmp_path / "cut").write_bytes(path.read_bytes()[:g.end - 1])
    with MysqlBinlog(tmp_path / "cut") as b, pytest.raises(CorruptBinlogError, match="runs past the end") as want:
        list(b.groups())
    for jump in (True, False):
        seen = []
        with MysqlBinlog(tmp_path / "cut") as b, pytest.raises(CorruptBinlogError, match="runs past the end") as got:
            for t in b.transactions(jump=jump):
                seen.append(t)
        # the event walk checks the file's end first (no transaction yielded); the jumps meet it after the
        # 20 whole ones: either way only whole transactions, then the same error
        assert seen == whole[:len(seen)] and len(seen) in (0, 20)
        assert (got.value.offset, got.value.message) == (want.value.offset, want.value.message)
    # cut after it: a closed MySQL binlog may end after a whole transaction without ROTATE/STOP
    # (the server's crash recovery leaves the binlog it recovers so: MysqlBinlog.truncation)
    (tmp_path / "cut").write_bytes(path.read_bytes()[:g.end])
    for jump in (True, False):
        with MysqlBinlog(tmp_path / "cut") as b:
            assert len(list(b.transactions(jump=jump))) == 21


@pytest.mark.parametrize("path,fix_crc", [(MYSQL_FIXTURES / "uuids" / "binlog.000004", False),
                                          (MYSQL_FIXTURES / "uuids" / "binlog.000004", True),
                                          (MYSQL_FIXTURES / "nochecksum" / "binlog.000011", False)],
                         ids=["crc32-damaged", "crc32-crc-fixed", "no-checksum"])
def test_a_length_its_events_do_not_end_at(tmp_path, path, fix_crc, build_walk):
    """transaction_length rewritten in many GTID events: off by a few bytes,
    or ending on a real event inside a transaction (the terminator of its
    own, the BEGIN after the next GTID event: whole, with a right CRC32 and
    next position). Damaged (the GTID event's CRC32 fails): the event walk
    takes those transactions, the answers are the same. A lie (its CRC32
    recomputed, or a file without checksums): the event headers and the
    event walk end the transaction elsewhere, so CorruptBinlogError at the
    first forged GTID event, after exactly the event walk's transactions
    before it; never another answer. The event walk itself (``groups``)
    reads no length: it still answers."""
    data = bytearray(path.read_bytes())
    with MysqlBinlog(path) as b:
        good = list(b.groups())
        crc = b.checksum_len
    bounds = [o for o, _, _ in mysql_events(data)]
    starts = {g.start for g in good}
    events = [(o, ln) for o, t, ln in mysql_events(data) if t == GTID_LOG]
    forged = []
    for k, (off, ln) in enumerate(events[1:-1]):
        g = next(g for g in good if g.start == off)
        end = off + g.length
        inside = (bounds[bounds.index(end) - 1], bounds[bounds.index(end) + 1])   # its terminator, the BEGIN after
        target = (end - 1, end + 1, end + 19, *inside)[k % 5]
        assert k % 5 < 3 or (target in bounds and target not in starts)
        value = target - off
        if (value >= 251) != (g.length >= 251) or (value >= 65536) != (g.length >= 65536):
            continue
        set_trx_length(data, off, value, fix_crc)
        forged.append(off)
    assert len(forged) >= 10
    p = tmp_path / path.name
    p.write_bytes(bytes(data))
    spans = [(g.gtid, g.start, g.end) for g in good]
    with MysqlBinlog(p) as b:
        assert [(g.gtid, g.start, g.end) for g in b.groups()] == spans
        if crc and not fix_crc:
            assert [(g.gtid, g.start, g.end) for g in b.transactions()] == spans
            _records_both_ways(b, (1, 1000))
            return
        seen = []
        with pytest.raises(CorruptBinlogError, match="transaction_length") as lie:
            for g in b.transactions():
                seen.append((g.gtid, g.start, g.end))
        assert lie.value.offset == forged[0] and seen == spans[:len(seen)] and seen[-1][2] == forged[0]
        with MysqlBinlog(path) as pristine:
            for span in (1, 1000):
                with pytest.raises(CorruptBinlogError) as e:
                    MysqlRecordPolicy(span, jump=True).records(b)
                assert (e.value.offset, e.value.message) == (lie.value.offset, lie.value.message)
                assert MysqlRecordPolicy(span, jump=False).records(b) == \
                    MysqlRecordPolicy(span, jump=False).records(pristine)


# -- the index against the walk ------------------------------------------------------------------

@pytest.mark.parametrize("layout", [dict(span_min=1, page_size=64), dict(span_min=1),
                                    dict(page_size=256, span_min=8192), dict()],
                         ids=["every-trx-64", "every-trx", "span8k-256", "defaults"])
@pytest.mark.parametrize("path", FILES, ids=ids)
def test_answers_equal_the_walk(tmp_path, path, layout):
    """at_offset at every transaction boundary and around it, and at a
    sample of other offsets; before_gtid for every GTID of the file, some
    of Previous_gtids, some absent: the index's answers are the walk's."""
    p = copy(tmp_path, path)
    r = index_of(p, **layout)
    with MysqlBinlog(p) as b:
        walked = walk(b)
        size = b.size
    records = list(r.records())
    assert r.check()["records"] == len(records)
    assert all(tuple(rec) in walked for rec in records)
    assert records[0] == walked[0]
    if layout.get("span_min") == 1:
        assert [tuple(x) for x in records] == walked
    assert r.first_record() == records[0] and r.last_record() == records[-1]
    rnd = random.Random(path.name)
    targets = {o + d for o, _ in walked for d in (-1, 0, 1)} | {0, 4, size, size + 1, 2**32 - 1}
    targets |= {rnd.randrange(size) for _ in range(200)}
    for t in sorted(targets):
        assert r.at_offset(t) == expected_at(records, t), t
    for g in probe_gtids(walked):
        assert r.before_gtid(g) == expected_before(records, g), g


def test_a_deep_tree(tmp_path):
    """The big-transaction file with 64-byte pages and a record per
    transaction: several levels, continuation pages, separators."""
    p = copy(tmp_path, MYSQL_FIXTURES / "tagged" / "binlog.000006")
    r = index_of(p, span_min=1, page_size=64)
    stats = r.check()
    assert stats["levels"] >= 4 and stats["pages"] > 100
    assert verify_index(p)["records"] == 68


def _records_both_ways(b: MysqlBinlog, spans=(1, 300, 4096, 65536), cap=fmt.MAX_OFFSET):
    for span in spans:
        fused = MysqlRecordPolicy(span, cap, jump=True).records(b)
        assert fused == MysqlRecordPolicy(span, cap, jump=False).records(b), span


@pytest.mark.parametrize("path", FILES, ids=ids)
def test_the_build_walk_gives_the_event_walks_records(path, build_walk):
    """``set_batches`` (compiled or not) against the event walk: the same
    records for every span, and with a 4 GiB cap set low."""
    with MysqlBinlog(path) as b:
        _records_both_ways(b)
        if b.size > 20000:
            _records_both_ways(b, (1, 4096), cap=b.size // 2)


def test_the_build_walk_on_growing_damaged_and_cut_files(tmp_path, build_walk):
    src = MYSQL_FIXTURES / "single" / "binlog.000002"
    data = src.read_bytes()
    with MysqlBinlog(src) as b:
        groups = list(b.groups())
    p = tmp_path / "binlog.000002"
    for n in sorted({x for g in groups[::3] for x in (g.end - 1, g.end, g.end + 20)}):
        p.write_bytes(growing_copy(data, n))
        with MysqlBinlog(p) as b:
            _records_both_ways(b, (1, 8192))
    damaged = bytearray((MYSQL_FIXTURES / "uuids" / "binlog.000004").read_bytes())
    with MysqlBinlog(MYSQL_FIXTURES / "uuids" / "binlog.000004") as b:
        lengths = {g.start: g.length for g in b.groups()}
    forged = [(k, off) for k, (off, t, _) in enumerate([e for e in mysql_events(damaged) if e[1] == GTID_LOG][2::5])
              if lengths[off] >= 256]
    for crc_fixed in (False, True):     # damaged lengths (CRC32 fails): the same records; then lies too: an error
        for k, off in forged:
            if (k % 2 == 0) == crc_fixed:
                set_trx_length(damaged, off, lengths[off] + (-1, 19, 1)[k % 3], crc_fixed)
        p.write_bytes(bytes(damaged))
        with MysqlBinlog(p) as b:
            if not crc_fixed:
                _records_both_ways(b)
                continue
            for span in (1, 300, 65536):
                with pytest.raises(CorruptBinlogError, match="transaction_length") as e:
                    MysqlRecordPolicy(span, jump=True).records(b)
                assert e.value.offset == min(off for k, off in forged if k % 2 == 0)
    p.write_bytes(data[:groups[20].end - 1])           # closed, cut inside a transaction: the same error
    errors = []
    for jump in (True, False):
        with MysqlBinlog(p) as b, pytest.raises(CorruptBinlogError, match="runs past the end") as e:
            MysqlRecordPolicy(1, jump=jump).records(b)
        errors.append((e.value.offset, e.value.message))
    assert errors[0] == errors[1]
    p.write_bytes(data[:groups[20].end])               # closed after a whole one (crash recovery): whole
    with MysqlBinlog(p) as b:
        assert MysqlRecordPolicy(1, jump=True).records(b) == MysqlRecordPolicy(1, jump=False).records(b)


# -- the set coding --------------------------------------------------------------------------

UUIDS = ["00000000-0000-0000-0000-000000000000", "3e11fa47-71ca-11e1-9e33-c80aa9429562",
         "8f2379f0-e75f-11f1-a262-02fc00000001", "ffffffff-ffff-ffff-ffff-ffffffffffff"]
TAGS = ["", "a", "alpha", "beta_2", "_x", "t" * 32]
gnos = st.one_of(st.integers(1, 300), st.integers(1, GNO_MAX))
sets = st.lists(st.tuples(st.sampled_from(UUIDS), st.sampled_from(TAGS), gnos, st.integers(0, 2**40)),
                max_size=30).map(lambda items: GtidSet.from_intervals(
                    (u, t, s, min(s + 1 + w, GNO_MAX + 1)) for u, t, s, w in items))


@settings(max_examples=400, deadline=None)
@given(sets)
def test_set_coding_round_trip(s):
    blob = encode_set(s)
    assert decode_set(blob) == s
    assert (blob == b"") == (not s)
    n, value = MYSQL.encode(s)
    assert n == len(value)


@settings(max_examples=400, deadline=None)
@given(sets, st.data())
def test_set_coding_is_canonical_and_refuses_damage(s, data):
    """Bytes that decode at all are the one encoding of their set; damaged
    bytes decode to that or raise ValueError, nothing else."""
    blob = bytearray(encode_set(s))
    if blob:
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] ^= data.draw(st.integers(1, 255))
    blob = bytes(blob[:data.draw(st.integers(0, len(blob)))])
    try:
        got = decode_set(blob)
    except ValueError:
        return
    assert encode_set(got) == blob


def test_sets_in_deltas():
    """Deltas apply by union; the records' sets are the executed sets."""
    recs = [(100, GtidSet.parse("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-5:7")),
            (200, GtidSet.parse("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:6")),
            (300, GtidSet()),
            (400, GtidSet.parse("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:x:1-2,bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb:9"))]
    r = MysqlIndexReader(b"".join(write_records(recs, 64, MYSQL)))
    got = [(o, s.one_line()) for o, s in r.records()]
    assert got == [(100, "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-5:7"), (200, "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-7"),
                   (300, "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-7"),
                   (400, "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-7:x:1-2,bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb:9")]
    assert r.before_gtid(MysqlGtid.parse("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:6"))[0] == 100
    assert r.before_gtid(MysqlGtid.parse("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:x:2"))[0] == 300
    assert r.before_gtid(MysqlGtid.parse("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1")) is None
    assert r.at_offset(99) is None and r.at_offset(299)[0] == 200


# -- flavors and magic -------------------------------------------------------------------------

def test_neither_flavor_reads_the_others_index(tmp_path):
    p = copy(tmp_path, MYSQL_FIXTURES / "single" / "binlog.000002")
    build_index(p)
    mysql_idx = Path(index_path(p)).read_bytes()
    assert mysql_idx[:4] == MAGIC and MAGIC != fmt.MAGIC
    with pytest.raises(CorruptIndexError, match="bad magic"):
        IndexReader(mysql_idx, path="x.idx")
    mariadb_idx = next((FIXTURES / "mariadb-11.8").rglob("*.idx")).read_bytes()
    assert mariadb_idx[:4] == fmt.MAGIC
    with pytest.raises(CorruptIndexError, match="bad magic"):
        MysqlIndexReader(mariadb_idx, path="y.idx")
    assert type(read_index(mysql_idx)) is MysqlIndexReader and type(read_index(mariadb_idx)) is IndexReader
    # an index of the other flavor beside a binlog is corrupt for it: lookups scan
    Path(index_path(p)).write_bytes(mariadb_idx)
    with MysqlBinlog(p) as b:
        status = open_index(b)
        assert status.state is IndexState.CORRUPT and "bad magic" in status.reason
    maria = tmp_path / "maria"
    maria.mkdir()
    m = copy(maria, FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002")
    Path(index_path(m)).write_bytes(mysql_idx)
    with open_binlog(m) as b:
        assert b.flavor == "mariadb"
        status = open_index(b)
        assert status.state is IndexState.CORRUPT and "bad magic" in status.reason


def test_build_mysql_index_refuses_a_mariadb_binlog(tmp_path):
    m = copy(tmp_path, FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002")
    with pytest.raises(GtidxError, match="not a MySQL binlog"):
        build_mysql_index(m)
    p = copy(tmp_path, MYSQL_FIXTURES / "uuids" / "binlog.000004")
    assert build_mysql_index(p).action == "built"


# -- damage -----------------------------------------------------------------------------------

def _queries(walked):
    offsets = sorted({o for o, _ in walked} | {o + 1 for o, _ in walked})
    return offsets[::3], probe_gtids(walked)[::4]


@pytest.mark.parametrize("fix_crc", [False, True], ids=["flips", "flips-crc-fixed"])
def test_damaged_index_never_answers_wrong_or_crashes(tmp_path, fix_crc):
    """Every byte of a deep index flipped in turn. Without the CRC fixed:
    CorruptIndexError (with the path) or the right answer, never a wrong
    one. With the page's CRC fixed (a forgery: a changed GTID number is
    well-formed), still never anything but an answer or CorruptIndexError."""
    p = copy(tmp_path, MYSQL_FIXTURES / "single" / "binlog.000002")
    good = index_of(p, span_min=4096, page_size=64)
    raw = Path(index_path(p)).read_bytes()
    with MysqlBinlog(p) as b:
        walked = walk(b)
    offsets, gtids = _queries(walked)
    right_at = {t: good.at_offset(t) for t in offsets}
    right_before = {g: good.before_gtid(g) for g in gtids}
    rnd = random.Random(3)
    wrong = 0
    for i in range(len(raw)):
        data = bytearray(raw)
        data[i] ^= 1 << rnd.randrange(8)
        if fix_crc:
            start = i - i % 64
            page = bytearray(data[start:start + 64])
            data[start:start + 64] = fmt.seal(page)
        try:
            r = MysqlIndexReader(bytes(data), path="d.idx")
            r.check()
            for t in offsets:
                a = r.at_offset(t)
                if a != right_at[t]:
                    assert fix_crc, (i, t)
                    wrong += 1
            for g in gtids:
                a = r.before_gtid(g)
                if a != right_before[g]:
                    assert fix_crc, (i, g)
                    wrong += 1
        except CorruptIndexError as e:
            assert e.path == "d.idx"
    if not fix_crc:
        assert wrong == 0


def test_forged_counts_and_pointers(tmp_path):
    """Numbers from disk are bounded before use: a key's unit count past its
    node, child pointers forward or to itself, a UUID count beyond the key."""
    recs = [(199, GtidSet.parse("8f2379f0-e75f-11f1-a262-02fc00000001:1-2"))] + [
        (1000 * i, GtidSet.parse(f"8f2379f0-e75f-11f1-a262-02fc00000001:{i + 2}")) for i in range(1, 40)]
    pages = [bytearray(p) for p in write_records(recs, 64, MYSQL)]

    def broken(page: int, at: int, value: bytes):
        out = [bytearray(p) for p in pages]
        out[page][at:at + len(value)] = value
        fmt.seal(out[page])
        return MysqlIndexReader(b"".join(out), path="f.idx")

    for forged in (broken(0, 16, struct.pack("<I", 2**32 - 1)),          # record 0's unit count
                   broken(0, 24, b"\x7f"),                                  # its UUID count
                   broken(len(pages) - 1, 4, struct.pack("<I", len(pages) + 5)),   # root's first child pointer
                   broken(len(pages) - 1, 4, struct.pack("<I", len(pages)))):
        with pytest.raises(CorruptIndexError) as e:
            forged.check()
            list(forged.records())
            forged.at_offset(10**6)
        assert e.value.path == "f.idx"


# -- files: build rules, CLI ---------------------------------------------------------------------

def gtidx(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "gtidx", *map(str, args)], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def test_cli_on_a_mysql_directory(tmp_path):
    d = tmp_path / "logs"
    shutil.copytree(MYSQL_FIXTURES / "rotated", d)
    rc, out, err = gtidx("build", "--json", d)
    assert rc == 0, err
    results = json.loads(out)["results"]
    assert [r["action"] for r in results] == ["built"] * 4
    assert "Traceback" not in err
    rc, out, _ = gtidx("build", d)
    assert rc == 0 and out.count("skipped (index is valid and current)") == 4
    for f in sorted(d.glob("binlog.0*[0-9]")):
        idx = f"{f}.idx"
        assert Path(idx).read_bytes()[:4] == MAGIC
        rc, out, err = gtidx("verify", "--json", idx)
        assert rc == 0 and json.loads(out)["ok"], err
        rc, out, err = gtidx("info", "--json", idx)
        info = json.loads(out)
        assert rc == 0 and info["status"] == "ok" and info["owner"] == "gtidx", err
        rc, out, err = gtidx("dump", idx)
        dump = json.loads(out)
        with MysqlBinlog(f) as b:
            walked = {o: str(s) for o, s in walk(b)}
        assert dump["records"] and all(walked[r["offset"]] == r["state"] for r in dump["records"])
    rc, out, err = gtidx("status", "--json", d)
    assert rc == 0, err
    assert {row["state"] for row in json.loads(out)["files"]} == {"complete"}
    # a binlog rewritten under its index: stale (info says so, verify fails)
    f = d / "binlog.000015"
    data = bytearray(f.read_bytes())
    data[-30] ^= 0xFF
    f.write_bytes(bytes(data))
    rc, out, _ = gtidx("info", "--json", f"{f}.idx")
    assert json.loads(out)["status"] == "stale"
    rc, out, err = gtidx("verify", f"{f}.idx")
    assert rc == 3 and out == "" and err.startswith("gtidx: ") and "stale" in err and "Traceback" not in err


def test_build_a_directory_of_both_flavors(tmp_path):
    """Each file's flavor from its FDE, each index of its flavor."""
    d = tmp_path / "mixed"
    d.mkdir()
    m = copy(d, FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002")
    y = copy(d, MYSQL_FIXTURES / "uuids" / "binlog.000004")
    rc, out, err = gtidx("build", m, y)
    assert rc == 0, err
    assert Path(index_path(m)).read_bytes()[:4] == fmt.MAGIC
    assert Path(index_path(y)).read_bytes()[:4] == MAGIC
    assert verify_index(m)["records"] and verify_index(y)["records"]


def test_build_leaves_a_binlog_still_being_written(tmp_path):
    """The newest file with IN_USE set belongs to its server: not built
    unless --force (``still_written``, as for MariaDB); forced, its index
    covers the complete transactions and answers as the walk does."""
    src = MYSQL_FIXTURES / "single" / "binlog.000002"
    with MysqlBinlog(src) as b:
        cut = list(b.groups())[30].end + 7
    p = tmp_path / src.name
    p.write_bytes(growing_copy(src.read_bytes(), cut))
    r = build_index(p)
    assert r.action == "skipped" and "still being written" in r.reason
    assert not os.path.exists(index_path(p))
    r = build_index(p, force=True, span_min=1, max_ratio=None)
    assert r.action == "built"
    idx = MysqlIndexReader(Path(index_path(p)).read_bytes())
    with MysqlBinlog(p) as b:
        assert [tuple(x) for x in idx.records()] == walk(b)
    # an older file of the series with IN_USE (its server crashed) is final
    (tmp_path / "binlog.000003").write_bytes(src.read_bytes()[:500])
    os.unlink(index_path(p))
    assert build_index(p).action == "built"


def test_size_budget_on_the_big_transactions(tmp_path):
    """The 2% budget: fewer records (each carrying the dropped ones'
    GTIDs), every remaining set still exact."""
    p = copy(tmp_path, MYSQL_FIXTURES / "single" / "binlog.000002")
    r = build_index(p, span_min=1, page_size=64, max_ratio=0.002)
    assert not r.server_layout and r.size <= 0.002 * r.binlog_size
    assert verify_index(p)["records"] == r.records < 46


# -- the worked example of docs/mysql-index-format.md -------------------------------------------

def test_the_worked_example_in_the_doc(tmp_path):
    """The doc's example index, built again: its bytes and CRCs."""
    text = DOC.read_text()
    p = copy(tmp_path, MYSQL_FIXTURES / "single" / "binlog.000002")
    build_index(p, span_min=8192, page_size=64, max_ratio=None)
    raw = Path(index_path(p)).read_bytes()
    block = re.search(r"<!-- example-bytes -->\n```\n(.*?)```", text, re.S).group(1)
    pages = [re.sub(r"[^0-9a-f]", "", line.split(":", 1)[1]) for line in block.splitlines() if line.startswith("page")]
    assert b"".join(bytes.fromhex(x) for x in pages) == raw
    crcs = re.search(r"golden CRCs: (.*)", text).group(1)
    assert re.findall(r"[0-9a-f]{8}", crcs) == [raw[i + 60:i + 64][::-1].hex() for i in range(0, len(raw), 64)]


def test_a_transaction_without_its_gtid_event_is_refused(tmp_path, build_walk):
    """A GTID event taken out (what 5.6 with GTIDs off looks like): the
    jump before it does not land (a BEGIN is there), the event walk takes
    over and refuses the file (exit 2), for the build as for groups()."""
    src = MYSQL_FIXTURES / "single" / "binlog.000002"
    data = src.read_bytes()
    with MysqlBinlog(src) as b:
        start = list(b.groups())[5].start
    length = int.from_bytes(data[start + 9:start + 13], "little")
    d = tmp_path / "logs"
    d.mkdir()
    p = d / src.name
    p.write_bytes(data[:start] + data[start + length:])
    with MysqlBinlog(p) as b:
        for jump in (True, False):
            with pytest.raises(MySQLBinlogError, match="outside any transaction") as e:
                MysqlRecordPolicy(1, jump=jump).records(b)
            assert e.value.offset == start
    if build_walk == "compiled":
        rc, out, err = gtidx("build", d)
        assert rc == 2 and out == "" and err.count("\n") == 1 and "outside any transaction" in err
        assert not os.path.exists(index_path(p))


# -- the live server -----------------------------------------------------------------------

def test_index_of_the_binlog_a_live_server_writes(tmp_path):
    """The binlog MySQL 9.7 is writing (IN_USE set by the server): build
    leaves it alone; forced (into another file), the index's records sit
    where the server's SHOW BINLOG EVENTS has transactions end, with the
    sets of the GTIDs the server logged before them."""
    from tools.make_mysql_fixtures import Session, groups_of
    from tools.mysql97 import MySQL97
    srv = MySQL97().ensure()
    s = Session(srv)
    s.sql("CREATE DATABASE IF NOT EXISTS myidx_live")
    s.sql("CREATE TABLE IF NOT EXISTS myidx_live.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200))")
    name = s.one("SHOW BINARY LOG STATUS")
    for i in range(60):
        if i % 10 == 3:
            s.sql("SET gtid_next = 'AUTOMATIC:myidx'")
        s.sql("INSERT INTO myidx_live.t(v) VALUES (%s)", ("x" * (i * 3),))
        s.sql("SET gtid_next = 'AUTOMATIC'")
    events = [[int(r[1]), r[2], int(r[4]), str(r[5])] for r in s.sql(f"SHOW BINLOG EVENTS IN '{name}'")]
    groups = groups_of(events)
    path = srv.datadir / name
    assert build_index(path).action == "skipped"           # the server's newest, IN_USE: still written
    out = tmp_path / "live.idx"
    r = build_index(path, force=True, out=str(out), span_min=1, max_ratio=None)
    assert r.action == "built"
    idx = MysqlIndexReader(out.read_bytes())
    records = list(idx.records())
    prev = next(e for e in events if e[1] == "Previous_gtids")
    assert records[0][0] == prev[2] and str(records[0][1]) == prev[3]
    state = records[0][1].copy()
    ends = {}
    for gtid, _, end in groups:
        state.add(*MysqlGtid.parse(gtid))
        ends[end] = state.copy()
    assert len(records) > 60 and all(ends[o] == st for o, st in records[1:] if o in ends)
    assert [o for o, _ in records[1:]][:len(groups)] == [g[2] for g in groups][:len(records) - 1]
    mine = [MysqlGtid.parse(g[0]) for g in groups if "myidx" in g[0]]
    assert mine and all(idx.before_gtid(g)[0] == next(x[1] for x in groups if x[0] == str(g)) for g in mine)


def test_status_of_an_index_without_its_fingerprint(tmp_path):
    """No MySQL server writes an index: one whose fingerprint is gone
    (copied without its xattr) is gtidx's, complete when it matches its
    binlog (judged as a server's: record 0, the tail), not "server-owned"."""
    from gtidx import admin, api
    from gtidx.index.meta import IndexMeta
    d = tmp_path / "logs"
    shutil.copytree(MYSQL_FIXTURES / "rotated", d)
    for r in admin.build(d, max_ratio=None):
        assert r.action == "built"
    idx = Path(index_path(d / "binlog.000015"))
    raw = idx.read_bytes()
    idx.unlink()                      # the xattr goes with it (a sidecar would name the old inode)
    IndexMeta.remove(str(idx))
    idx.write_bytes(raw)
    assert IndexMeta.read(index_path(d / "binlog.000015")) is None
    rows = {Path(r.file).name: r.state for r in admin.binlog_status(d)}
    assert rows == {f"binlog.0000{n}": "complete" for n in (14, 15, 16, 17)}
