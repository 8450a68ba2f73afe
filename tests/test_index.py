"""The .idx writer and reader: the spec's golden bytes, MariaDB 11.8's own
index files, every server answer through gtidx's indexes, size budgets,
and the fallback to a scan when an index cannot be trusted."""
from __future__ import annotations

import json
import logging
import os
import random
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, answers_equal, fixture_files, fixture_id
from gtidx import admin, api
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import BadInputError, NotFoundError
from gtidx.gtid import BinlogState, Position
from gtidx.index.build import build_index, coarsen, server_records
from gtidx.index.files import open_index, stored_facts, verify_index
from gtidx.index.meta import IndexMeta, IndexState
from gtidx.index.reader import IndexReader, Record
from gtidx.index.writer import IndexWriter, RecordPolicy, write_records
from gtidx.series.files import SeriesFile

M118 = FIXTURES / "mariadb-11.8"
M1011 = FIXTURES / "mariadb-10.11"
SERVER_INDEXES = sorted(M118.glob("*/*.idx"))
READABLE = [(p, e) for p, e in fixture_files() if p.parent.name != "encrypted"]


def copy_set(tmp_path: Path, scenario_dir: Path, keep_idx: bool = False) -> list[Path]:
    dest = tmp_path / f"{scenario_dir.parent.name}-{scenario_dir.name}"
    shutil.copytree(scenario_dir, dest)
    for p in dest.iterdir():
        p.chmod(0o644)
        if p.suffix == ".idx" and not keep_idx:
            p.unlink()
    return sorted(p for p in dest.iterdir() if p.name[-6:].isdigit())


# -- the format -------------------------------------------------------------------------

GOLDEN = {  # the spec's worked example: page_size 64, three records
    1: "fefe0c01 01000000 40000000 05000000 01000000 1d010000 02000000 0e020000 "
       "00000000 01000000 01000000 00000000",
    2: "05000000 02000000 ad020000 00000000 01000000 02000000 00000000",
    3: "0c000000 01000000 02000000 ad020000 00000000 01000000 02000000 00000000 02000000",
}
GOLDEN_CRC = {1: "0e4fac43", 2: "0c4ec2b9", 3: "8155a3c7"}


def test_worked_example_golden_bytes():
    pages = write_records([(0x11d, []), (0x20e, [(0, 1, 1)]), (0x2ad, [(0, 1, 2)])], 64)
    assert len(pages) == 3
    for n, page in enumerate(pages, 1):
        body = bytes.fromhex(GOLDEN[n].replace(" ", ""))
        assert page[:len(body)] == body
        assert page[len(body):60] == bytes(60 - len(body))
        assert page[60:].hex() == GOLDEN_CRC[n]
    r = IndexReader(b"".join(pages))
    assert [(rec.offset, str(rec.state)) for rec in r.records()] == [
        (0x11d, ""), (0x20e, "0-1-1"), (0x2ad, "0-1-2")]
    assert r.check()["levels"] == 2


record_streams = st.lists(
    st.tuples(st.integers(1, 5000),
              st.lists(st.tuples(st.integers(0, 30), st.integers(1, 3), st.integers(1, 10**6)), max_size=40)),
    min_size=1, max_size=60)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 3), st.integers(1, 10**6)), max_size=50),
       record_streams, st.sampled_from([64, 96, 128, 512, 4096]))
def test_write_read_round_trip_against_brute_force(first, stream, page_size):
    """Any record stream, any page size: the reader's records, and its searches,
    equal a brute-force replay of the stream."""
    records, offset = [(100, [tuple(g) for g in BinlogState(first)])], 100
    for gap, gtids in stream:
        offset += gap
        records.append((offset, [tuple(g) for g in BinlogState(gtids)]))
    r = IndexReader(b"".join(write_records(records, page_size)))
    r.check()
    state, expected = BinlogState(), []
    for off, gtids in records:
        state.update(gtids)
        expected.append((off, state.copy()))
    assert [(rec.offset, rec.state) for rec in r.records()] == expected
    for target in {expected[0][0] - 1, expected[-1][0] + 1, *(o for o, _ in expected[::7]),
                   *(o + 1 for o, _ in expected[::5])}:
        brute = [e for e in expected if e[0] <= target]
        got = r.at_offset(target)
        assert (got is None and not brute) or (got.offset, got.state) == brute[-1]



def _random_records(seed: int, n: int, domains: int) -> list[tuple[int, list]]:
    """``n`` index records as a binlog makes them: offsets growing, each
    record the GTIDs logged since the previous one (seq_no growing per
    domain, a few servers), the first one a start state."""
    rnd = random.Random(seed)
    seq = {d: 0 for d in range(domains)}
    records, offset = [], 4
    for i in range(n):
        events = []
        for _ in range(rnd.choice((0, 1, 1, 2, 3, 8)) if i else rnd.randrange(domains + 1)):
            d = rnd.randrange(domains)
            seq[d] += rnd.choice((1, 1, 2, 1000))
            events.append((d, rnd.choice((1, 1, 2, 3)), seq[d]))
        offset += rnd.randrange(1, 5000)
        records.append((offset, [tuple(g) for g in BinlogState(events)]))
    return records


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(1, 600), st.integers(1, 6), st.integers(64, 4096), st.data())
def test_search_equals_a_scan_of_records(seed, n, domains, page_size, data):
    """Random trees (page sizes 64..4096, one to many levels): ``search`` at
    random predicates - an offset bound, a replication position, with and
    without the state - answers what a brute-force scan of ``records()``
    answers (the last record of the accepted prefix), and every state the
    search hands its predicate, in interior nodes and leaves, is the true
    state at that offset."""
    records = _random_records(seed, n, domains)
    r = IndexReader(b"".join(write_records(records, page_size)))
    expected = [(rec.offset, rec.state) for rec in r.records()]
    state = BinlogState()
    assert expected == [(off, state.update(gtids).copy()) for off, gtids in records]
    true_state = dict(expected)

    def brute(accept):
        found = None
        for off, st_ in expected:
            if not accept(off, st_):
                break
            found = (off, st_)
        return found

    def check(accept, needs_state):
        def traced(off, st_):
            if needs_state:
                assert st_ == true_state[off], off
            else:
                assert st_ is None
            return accept(off, st_)
        got = r.search(traced, needs_state=needs_state)
        want = brute(accept)
        assert (got and (got.offset, got.state)) == want

    offsets = [off for off, _ in expected]
    targets = data.draw(st.lists(st.one_of(st.sampled_from(offsets), st.integers(0, offsets[-1] + 10)),
                                 min_size=1, max_size=6))
    for t in [offsets[0] - 1, offsets[-1], *targets, *(t + 1 for t in targets)]:
        check(lambda off, _, t=t: off <= t, needs_state=False)
        check(lambda off, _, t=t: off <= t, needs_state=True)
    picks = data.draw(st.lists(st.sampled_from(range(len(expected))), min_size=1, max_size=6))
    for k in picks:
        pos = expected[k][1].position()
        for delta in (0, -1, 1):
            moved = Position(g._replace(seq=max(1, g.seq + delta)) for g in pos)
            answers = [s.is_before(moved) for _, s in expected]
            assert answers == sorted(answers, reverse=True)        # a prefix: what search assumes
            check(lambda _, s, p=moved: s.is_before(p), needs_state=True)
    assert r.first_record() == Record(*expected[0])
    assert r.last_record() == Record(*expected[-1])


def test_reader_docstring_examples_run():
    import doctest

    import gtidx.index.reader
    result = doctest.testmod(gtidx.index.reader)
    assert result.attempted > 0 and result.failed == 0

def test_writer_rejects_offsets_past_4_gib_and_policy_stops_there():
    w = IndexWriter(4096, lambda page: None)
    with pytest.raises(BadInputError):
        w.add(2**32, [])
    p = RecordPolicy(10, max_offset=1000)
    assert p.group(500, 0, 1, 1) is not None
    assert p.group(1001, 0, 1, 2) is None      # past the u32 limit: no more records
    with pytest.raises(BadInputError):
        IndexWriter(32, lambda page: None)


def test_coarsen_keeps_exact_states():
    with Binlog(M118 / "mixed" / "master-bin.000002") as b:
        recs = server_records(b, 65536)
    full = [(o, s.copy()) for o, s in _replay(recs)]
    for span in (1, 100000, 400000, 10**9):
        sub = coarsen(recs, span)
        assert sub[0] == recs[0]
        got = _replay(sub)
        by_offset = dict(full)
        assert all(by_offset[o] == s for o, s in got)


def _replay(records):
    state, out = BinlogState(), []
    for off, gtids in records:
        state.update(gtids)
        out.append((off, state.copy()))
    return out


# -- MariaDB 11.8's own index files -----------------------------------------------------------

def _tree_shape(data: bytes) -> list:
    """Per page: flags; per node: key offsets and GTID sets (orders inside a key are the
    server's hash order, so compare sets)."""
    r = IndexReader(data)
    shape = []
    for p in range(1, r.npages + 1):
        shape.append(r._flags(p))
    return shape


@pytest.mark.parametrize("idx", SERVER_INDEXES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_server_index_reads_and_checks(idx):
    r = IndexReader(idx.read_bytes(), path=str(idx))
    stats = r.check()
    assert stats["records"] >= 1
    with Binlog(idx.with_suffix("")) as b:
        st = open_index(b, str(idx))
        assert st.usable, st.reason
        st.close()
    assert verify_index(idx.with_suffix(""), str(idx))["records"] == stats["records"]


@pytest.mark.parametrize("idx", SERVER_INDEXES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_gtidx_build_equals_the_server_index(idx, tmp_path):
    """Record for record (offset and full state), and the same tree: same pages, same flags."""
    binlog = idx.with_suffix("")
    out = tmp_path / "ours.idx"
    res = build_index(binlog, out=str(out), max_ratio=None, force=True)
    assert res.server_layout
    theirs = IndexReader(idx.read_bytes())
    ours = IndexReader(out.read_bytes())
    assert [(r.offset, r.state) for r in ours.records()] == [(r.offset, r.state) for r in theirs.records()]
    assert out.stat().st_size == idx.stat().st_size
    assert _tree_shape(out.read_bytes()) == _tree_shape(idx.read_bytes())


def test_server_indexes_give_the_server_answers():
    for idx in SERVER_INDEXES:
        path = idx.with_suffix("")
        expected = next(f for f in json.loads((path.parent / "oracle.json").read_text())["files"]
                        if f["name"] == path.name)
        with api.BinlogSeries([str(path)]) as logs:
            assert answers_equal(path, expected, logs, via="index") == []


# -- every server answer through gtidx's own indexes ----------------------------------------------

@pytest.mark.parametrize("page_size", [64, 512, 4096, 16384])
@pytest.mark.parametrize("span_min", [1, 2048, 65536])
def test_every_oracle_answer_through_gtidx_indexes(tmp_path, page_size, span_min):
    wrong = {}
    for path, expected in READABLE:
        dest = tmp_path / path.parent.parent.name / path.parent.name
        dest.mkdir(parents=True, exist_ok=True)
        copy = dest / path.name
        shutil.copyfile(path, copy)
        res = build_index(copy, page_size=page_size, span_min=span_min, max_ratio=None)
        assert res.action == "built" and res.page_size == page_size
        with api.BinlogSeries([str(copy)]) as logs:
            bad = answers_equal(copy, expected, logs, via="index")
        if bad:
            wrong[fixture_id(path)] = bad[:3]
    assert not wrong


# -- size budget --------------------------------------------------------------------------------------

@pytest.mark.parametrize("scenario", [M118 / "manydomains", M1011 / "manydomains"], ids=["11.8", "10.11"])
def test_budget_beats_the_server_on_manydomains(tmp_path, scenario):
    (binlog,) = copy_set(tmp_path, scenario)
    server = build_index(binlog, out=str(tmp_path / "server-layout.idx"), max_ratio=None)
    assert server.ratio > 0.10          # the server's layout: ~11-15% of the binlog
    res = build_index(binlog)
    assert res.size <= 0.02 * res.binlog_size and not res.over_budget
    assert res.records >= 2 and not res.server_layout
    verify_index(binlog)
    expected = next(f for f in json.loads((scenario / "oracle.json").read_text())["files"])
    with api.BinlogSeries([str(binlog)]) as logs:
        assert answers_equal(binlog, expected, logs, via="index") == []


def test_budget_for_a_tiny_binlog_writes_the_smallest_valid_index(tmp_path):
    (binlog,) = copy_set(tmp_path, M118 / "empty")
    res = build_index(binlog)
    assert res.over_budget and "smallest valid index" in res.warning
    assert res.records == 1
    smallest = min(len(write_records(server_records(Binlog(binlog), 65536)[:1], ps)) * ps
                   for ps in (64, 128, 256, 512, 1024, 4096))
    assert res.size == smallest
    verify_index(binlog)


# -- build behaviour ------------------------------------------------------------------------------------

def test_build_skips_a_current_index_and_force_rebuilds(tmp_path):
    binlogs = copy_set(tmp_path, M118 / "multifile", keep_idx=True)
    before = {p: (p.parent / (p.name + ".idx")).read_bytes() for p in binlogs}
    results = list(admin.build(str(binlogs[0].parent)))
    assert [r.action for r in results] == ["skipped"] * 5
    assert all((p.parent / (p.name + ".idx")).read_bytes() == before[p] for p in binlogs)
    forced = build_index(binlogs[1], force=True, max_ratio=None)
    assert forced.action == "built"
    assert not [f for f in os.listdir(binlogs[0].parent) if f.endswith(".tmp")]


def test_build_stores_seq_ranges_and_upgrades_an_index_without_them(tmp_path):
    """build stores what its walk saw (per (domain, server) the seq range,
    and the pairs that do not grow): exactly what a walk of the binlog gives.
    An index of ours made before (no ranges) is made again, once."""
    binlog, = copy_set(tmp_path, M118 / "nonmono")
    assert build_index(binlog, max_ratio=None).action == "built"
    idx = str(binlog) + ".idx"
    with Binlog(binlog) as b:
        offset, ranges, repeats = stored_facts(b)
        assert offset == b.size
        walked, prev = {}, dict(((d, s), q) for d, s, q in b.start_state)
        down = set()
        for _, _, (_, server, seq, domain, _) in b.group_spans():
            key = (domain, server)
            if key in prev and seq <= prev[key]:
                down.add(key)
            prev[key] = seq
            lo, hi = walked.get(key, (seq, seq))
            walked[key] = (min(lo, seq), max(hi, seq))
    assert ranges == walked and repeats == down and (5, 1) in down
    before = os.stat(idx).st_ino
    assert build_index(binlog, max_ratio=None).action == "skipped"
    meta = IndexMeta.read(idx)
    with open(idx, "rb+") as f:       # what an older gtidx stored: no ranges
        meta.replace(ranges=None, repeats=None).write(f.fileno(), idx)
    assert build_index(binlog, max_ratio=None).action == "built"
    assert os.stat(idx).st_ino != before and IndexMeta.read(idx).seen() is not None


def test_build_leaves_a_growing_binlogs_index_to_its_server(tmp_path):
    (binlog,) = copy_set(tmp_path, M118 / "xa")
    data = bytearray(binlog.read_bytes())
    data[4 + 17] |= 1            # IN_USE: the server is still writing it
    binlog.write_bytes(bytes(data))
    idx = Path(str(binlog) + ".idx")
    idx.write_bytes(b"")         # the server's hot index: nothing flushed yet
    assert build_index(binlog).action == "skipped"
    assert idx.read_bytes() == b""


def test_build_replaces_a_stale_index(tmp_path):
    a, = copy_set(tmp_path, M118 / "xa")
    b, = copy_set(tmp_path, M118 / "nonmono")
    build_index(a)
    shutil.copyfile(str(a) + ".idx", str(b) + ".idx")
    assert build_index(b).action == "built"
    verify_index(b)


# -- fallback -------------------------------------------------------------------------------------------

def _damage(kind: str, idx: Path, binlog: Path, other: Path):
    data = bytearray(idx.read_bytes())
    if kind == "flipped byte":
        data[len(data) // 2] ^= 0x10
        idx.write_bytes(bytes(data))
    elif kind == "crc byte at EOF-2":
        data[-2] ^= 0xFF
        idx.write_bytes(bytes(data))
    elif kind == "truncated":
        idx.write_bytes(bytes(data[:len(data) - 100]))
    elif kind == "missing root":
        ps = struct.unpack_from("<I", data, 8)[0]
        idx.write_bytes(bytes(data[:-ps]))
    elif kind == "empty file":
        idx.write_bytes(b"")
    elif kind == "not an index":
        idx.write_bytes(b"hello" * 1000)
    elif kind == "another binlog's index":
        build_index(other, out=str(idx), force=True, max_ratio=None, page_size=512, span_min=2048)
    elif kind == "binlog truncated":
        with open(binlog, "r+b") as f:
            f.truncate(binlog.stat().st_size // 2)
    elif kind == "index of a shorter binlog":
        short = binlog.parent / "short"
        short.mkdir()
        cut = binlog.parent / "short" / binlog.name
        with Binlog(binlog) as b:
            spans = list(b.group_spans())
        end = spans[len(spans) // 2][1]
        raw = bytearray(binlog.read_bytes()[:end])
        raw[4 + 17] |= 1        # an index built while the file was growing
        cut.write_bytes(bytes(raw))
        build_index(cut, out=str(idx), force=True, page_size=512, span_min=2048, max_ratio=None)


FAULTS = ["flipped byte", "crc byte at EOF-2", "truncated", "missing root", "empty file", "not an index",
          "another binlog's index", "binlog truncated", "index of a shorter binlog"]


@pytest.mark.parametrize("kind", FAULTS)
def test_unusable_index_gives_identical_answers_by_scan(tmp_path, kind, caplog):
    binlog, = copy_set(tmp_path, M118 / "mixed")
    other, = copy_set(tmp_path, M118 / "xa")
    build_index(binlog, page_size=512, span_min=2048, max_ratio=None)
    idx = Path(str(binlog) + ".idx")
    expected = next(f for f in json.loads((M118 / "mixed" / "oracle.json").read_text())["files"])
    _damage(kind, idx, binlog, other)
    size = binlog.stat().st_size
    with caplog.at_level(logging.WARNING, logger="gtidx"):
        with api.BinlogSeries([str(binlog)]) as logs:
            wrong = []
            fell_back = False
            for offset, answer in expected["pos"]:
                if offset > size:
                    continue
                try:
                    r = logs.state_at(binlog, offset)
                except NotFoundError:
                    r = None
                except Exception as e:       # binlog truncated: corruption past the cut
                    assert kind == "binlog truncated" and "closed binlog" in str(e), e
                    continue
                mine = None if r is None else r.position
                theirs = None if answer is None else Position.parse(answer)
                # Like the server, lookups check index pages as they read them: a
                # damaged page the search never touched cannot change an answer.
                # Once damage is seen, every later answer comes from a scan.
                fell_back = fell_back or any("no usable index" in rec.getMessage() for rec in caplog.records)
                if mine != theirs or (r is not None and fell_back and r.via != "scan"):
                    wrong.append((offset, str(mine), answer, r and r.via))
    assert not wrong, wrong[:3]
    warnings = [rec for rec in caplog.records if "no usable index" in rec.getMessage()]
    assert len(warnings) == 1
    # build sees every kind of damage (it checks every page) and rebuilds
    if kind not in ("binlog truncated",):
        assert build_index(binlog, page_size=512, span_min=2048, max_ratio=None).action == "built"
        verify_index(binlog)


# -- locate ---------------------------------------------------------------------------------------------

LOCATE_SETS = [M1011 / s for s in ("mixed", "xa", "nonmono", "multifile", "nochecksum", "compressed")] + \
              [M118 / s for s in ("xa", "nonmono", "multifile", "bigtrx")]


@pytest.mark.parametrize("scenario", LOCATE_SETS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_locate_every_gtid_index_equals_scan(tmp_path, scenario):
    files = copy_set(tmp_path, scenario)
    for f in files:
        build_index(f, page_size=64, span_min=1, max_ratio=None)
    expected = {}
    for o in [json.loads((scenario / "oracle.json").read_text())]:
        for f in o["files"]:
            for g, start, end in f["groups"]:
                expected.setdefault(g, (f["name"], start, end))
    with api.BinlogSeries([str(f) for f in files], use_index=False) as scan, \
            api.BinlogSeries([str(f) for f in files]) as idx:
        for g, (name, start, end) in expected.items():
            a, b = scan.locate(g), idx.locate(g)
            assert (os.path.basename(a.file), a.start, a.end) == (name, start, end)
            assert (b.file, b.start, b.end, b.resume) == (a.file, a.start, a.end, a.end)
            assert a.via == "scan"


def test_locate_outside_the_binlogs(tmp_path):
    files = copy_set(tmp_path, M118 / "multifile")
    with api.open_binlogs(files[0].parent) as logs:
        with pytest.raises(NotFoundError, match="purged") as e:
            logs.locate("0-1-5")
        assert "earliest state" in str(e.value) and "latest" in str(e.value)
        with pytest.raises(NotFoundError, match="never written"):
            logs.locate("0-1-99999999")
        with pytest.raises(NotFoundError, match="never written"):
            logs.locate("77-1-1")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(1, 30), st.just(api.UNKNOWN)), min_size=2, max_size=9),
       st.integers(1, 32))
def test_planner_bisection_is_the_rule(bounds, n):
    """Planner's bisection (monotonic pairs) answers what the rule says file
    by file: file i can hold n when the known bounds around it allow it."""
    plan = api.plan_locate(api.Gtid(0, 1, n), bounds)
    known = [0 if b is None else b for b in bounds if b != api.UNKNOWN]
    if any(a > b for a, b in zip(known, known[1:])):
        assert plan.monotone is False and plan.files == tuple(range(len(bounds) - 1))
        return

    def lower(i):      # the nearest known bound at or before i
        return next((b or 0 for b in reversed(bounds[:i + 1]) if b != api.UNKNOWN), 0)

    def upper(i):      # the nearest known bound at or after i
        return next((b or 0 for b in bounds[i:] if b != api.UNKNOWN), float("inf"))
    expected = tuple(i for i in range(len(bounds) - 1) if lower(i) < n <= upper(i + 1))
    if expected:
        assert isinstance(plan, api.LocatePlan) and (plan.files, plan.monotone) == (expected, True)
    else:
        assert isinstance(plan, str)


def _replica_positions(files) -> list[str]:
    """The position at every group end, and each with the domain's other servers' GTIDs."""
    out = set()
    with api.BinlogSeries([str(f) for f in files], use_index=False) as logs:
        for f in files:
            with Binlog(f) as b:
                ends = [g.end for g in b.groups()]
            for end in ends:
                st = logs.state_at(f, end).state
                pos = st.position()
                out.add(str(pos))
                for other in st:
                    if other != st.last(other.domain):
                        out.add(str(Position([other if p.domain == other.domain else p for p in pos])))
    return sorted(out)


@pytest.mark.parametrize("scenario", [M1011 / "nonmono", M118 / "nonmono", M1011 / "mixed"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_replica_start_index_equals_scan(tmp_path, scenario):
    """Issue 11 item 2: an index never changes a replica start (the scan is
    what a real 10.11 replica gets: tests/test_nonmono_live.py), at any layout."""
    files = copy_set(tmp_path, scenario)
    positions = _replica_positions(files)
    positions = positions[::max(1, len(positions) // 150)]
    if scenario.name == "nonmono" and scenario.parent == M1011:
        positions.append("0-1-277,1-1-287,2-2-256,5-1-102")     # the case
    with api.BinlogSeries([str(f) for f in files], use_index=False) as scan:
        expected = {}
        for p in positions:
            try:
                r = scan.replica_start(p)
                expected[p] = (r.file, r.first and r.first[:4])
            except NotFoundError as e:
                expected[p] = str(e)
    if scenario.name == "nonmono" and scenario.parent == M1011:
        first = expected["0-1-277,1-1-287,2-2-256,5-1-102"][1]
        assert (str(first[0]), first[2]) == ("5-1-50", 5440)
    for page_size, span in ((64, 1), (64, 256), (256, 1), (4096, 4096), (4096, 65536)):
        for f in files:
            build_index(f, page_size=page_size, span_min=span, max_ratio=None, force=True)
        wrong = []
        with api.BinlogSeries([str(f) for f in files]) as idx:
            for p in positions:
                try:
                    r = idx.replica_start(p)
                    mine = (r.file, r.first and r.first[:4])
                except NotFoundError as e:
                    mine = str(e)
                if mine != expected[p]:
                    wrong.append((page_size, span, p, mine, expected[p]))
        assert wrong == [], wrong[:3]


def test_directory_without_index_sorts_by_number(tmp_path):
    """Issue 11 item 3: master-bin.1000000 follows master-bin.999999 (no
    master-bin.index: the names decide the order)."""
    src = sorted((M1011 / "multifile").glob("master-bin.0*"))
    d = tmp_path / "wrapped"
    d.mkdir()
    numbers = [999998, 999999, 1000000, 1000001, 1000002]
    for f, n in zip(src, numbers):
        shutil.copyfile(f, d / f"master-bin.{n:06d}")
    assert [os.path.basename(f) for f in api.list_binlogs(d)] == [f"master-bin.{n:06d}" for n in numbers]
    oracle = json.loads((M1011 / "multifile" / "oracle.json").read_text())
    names = dict(zip((f.name for f in src), (f"master-bin.{n:06d}" for n in numbers)))
    with api.open_binlogs(d, use_index=False) as logs:
        for f in oracle["files"]:
            for g, start, end in f["groups"][::7]:
                loc = logs.locate(g)
                assert (os.path.basename(loc.file), loc.start, loc.end) == (names[f["name"]], start, end)


def test_directory_and_index_file_listing(tmp_path):
    files = copy_set(tmp_path, M118 / "multifile")
    d = files[0].parent
    assert api.list_binlogs(d) == [str(f) for f in files]
    assert api.list_binlogs(d / "master-bin.index") == [str(f) for f in files]
    (d / "master-bin.index").unlink()
    assert api.list_binlogs(d) == [str(f) for f in files]


def test_index_file_with_absolute_paths_of_another_root(tmp_path):
    """master-bin.index written by a server in a container or chroot names
    paths that do not exist here: the files beside the index are meant."""
    files = copy_set(tmp_path, M118 / "multifile")
    d = files[0].parent
    (d / "master-bin.index").write_text("".join(f"/srv/m118/binlog/{f.name}\n" for f in files))
    assert api.list_binlogs(d) == [str(f) for f in files]


def _gtid_event_in_head(path) -> int:
    with Binlog(path) as b:
        for g in b.groups():
            if g.start > b.body_start:
                return g.start
    raise AssertionError("no group")


def test_the_fingerprint_sees_content_behind_event_checksums(tmp_path):
    """In a binlog with checksums each event ends with the CRC32 of its own
    bytes, so a CRC32 over whole events depends on their lengths only: a
    GTID's seq_no changed (its event's CRC fixed) leaves the CRC32s of the
    fingerprint as they were. The Adler-32s see it: the index is stale, and
    lookups do not answer from it."""
    import zlib
    (binlog,) = [p for p in copy_set(tmp_path, M1011 / "multifile") if p.name.endswith("000020")]
    build_index(binlog, max_ratio=None)
    meta = IndexMeta.read(str(binlog) + ".idx")
    data = bytearray(binlog.read_bytes())
    at = _gtid_event_in_head(binlog)
    ln = int.from_bytes(data[at + 9:at + 13], "little")
    seq = int.from_bytes(data[at + 19:at + 27], "little")
    data[at + 19:at + 27] = (seq + 1000).to_bytes(8, "little")
    data[at + ln - 4:at + ln] = zlib.crc32(bytes(data[at:at + ln - 4])).to_bytes(4, "little")
    binlog.write_bytes(bytes(data))
    with Binlog(binlog) as b:
        assert b.event_ok(at)                       # a well-formed event: only the content tells
        now = IndexMeta.of(b)
        assert (now.head_crc32, now.tail_crc32) == (meta.head_crc32, meta.tail_crc32)   # CRC32s: blind
        assert now.head_adler32 != meta.head_adler32 and not meta.matches(b)
        status = open_index(b)
        assert status.state is IndexState.STALE and "content differs" in status.reason
        status.close()
        assert stored_facts(b) is None


def test_a_crc32_only_fingerprint_is_judged_as_a_servers_and_made_again(tmp_path):
    """An index stored by a gtidx that kept CRC32s only (``legacy``): it
    cannot tell the content, so the index is judged as a server's (record 0
    and the tail past the last record), its stored ranges are not used, and
    ``build`` makes it again."""
    (binlog,) = copy_set(tmp_path, M118 / "xa")
    idx = str(binlog) + ".idx"
    build_index(binlog, max_ratio=None)
    meta = IndexMeta.read(idx)
    with open(idx, "rb+") as f:
        meta.replace(head_adler32=None, tail_adler32=None).write(f.fileno(), idx)
    assert IndexMeta.read(idx).legacy
    with Binlog(binlog) as b:
        status = open_index(b)
        assert status.usable
        status.close()
        assert stored_facts(b) is None
    before = os.stat(idx).st_ino
    assert build_index(binlog, max_ratio=None).action == "built"
    assert os.stat(idx).st_ino != before and not IndexMeta.read(idx).legacy


def _count_digests(monkeypatch) -> list:
    """The digests of binlog bytes taken from now on (``digest_masked`` calls)."""
    import gtidx.index.meta as im
    digests = []
    real = im.digest_masked
    monkeypatch.setattr(im, "digest_masked", lambda *a: (digests.append(a), real(*a))[1])
    return digests


def _usable_index(binlog) -> bool:
    with Binlog(binlog) as b:
        status = open_index(b)
        status.close()
        return status.usable


def test_a_quiet_local_binlogs_identity_stands_for_its_content(tmp_path, monkeypatch):
    """A local binlog not written in the last seconds: its identity (device,
    inode, size, mtime, ctime) is recorded with its index like an object's
    ETag, and while it holds the content is not read again (no digest of
    the first and last 64 KiB). A touch changes it: the content is compared
    (and still matches). Rewritten in place at the same size with its mtime
    set back: the ctime tells, the content is compared, the index is stale."""
    (binlog,) = [p for p in copy_set(tmp_path, M1011 / "multifile") if p.name.endswith("000020")]
    old = binlog.stat()
    os.utime(binlog, ns=(old.st_atime_ns, old.st_mtime_ns - 10**10))     # quiet: written 10 s before
    build_index(binlog, max_ratio=None)
    meta = IndexMeta.read(str(binlog) + ".idx")
    assert meta.binlog_etag and meta.binlog_etag.startswith("stat:")
    digests = _count_digests(monkeypatch)
    assert _usable_index(binlog) and digests == []
    os.utime(binlog)                                       # touched: another identity, the same bytes
    assert _usable_index(binlog) and digests
    data = bytearray(binlog.read_bytes())
    at = _gtid_event_in_head(binlog)
    data[at + 19] ^= 1                                     # a seq_no byte (its event's CRC now wrong)
    st = binlog.stat()
    binlog.write_bytes(bytes(data))
    os.utime(binlog, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime set back; ctime cannot be
    with Binlog(binlog) as b:
        status = open_index(b)
        assert status.state is IndexState.STALE
        status.close()


def test_a_binlog_written_just_now_records_no_identity(tmp_path):
    """Within QUIET_S of its last write a file's timestamps may not move with
    a next write (one clock tick): then the content is always compared."""
    (binlog,) = copy_set(tmp_path, M118 / "xa")
    os.utime(binlog)
    build_index(binlog, max_ratio=None)
    assert IndexMeta.read(str(binlog) + ".idx").binlog_etag is None


def test_build_records_the_identity_an_index_made_while_written_lacks(tmp_path, monkeypatch):
    """An index made while its binlog was being written has no identity in
    its fingerprint; ``gtidx build`` over it once the binlog is quiet finds
    it valid and current, keeps it (same file) and records the identity
    (the content checked first), so that lookups no longer read the
    binlog's first and last 64 KiB to trust it."""
    import gtidx.index.meta as im
    (binlog,) = copy_set(tmp_path, M118 / "xa")
    os.utime(binlog)
    build_index(binlog, max_ratio=None)
    idx = str(binlog) + ".idx"
    meta = IndexMeta.read(idx)
    assert meta.binlog_etag is None
    inode = os.stat(idx).st_ino
    again = build_index(binlog, max_ratio=None)             # still not quiet: nothing to record yet
    assert again.action == "skipped" and again.recorded == ""
    st = binlog.stat()
    os.utime(binlog, ns=(st.st_atime_ns, st.st_mtime_ns - 10**10))
    again = build_index(binlog, max_ratio=None)
    assert (again.action, again.reason, again.recorded) == ("skipped", "index is valid and current", "identity")
    assert os.stat(idx).st_ino == inode
    with Binlog(binlog) as b:
        assert IndexMeta.read(idx) == meta.replace(binlog_etag=im.local_identity(b))
    digests = _count_digests(monkeypatch)
    assert _usable_index(binlog) and digests == []
    assert build_index(binlog, max_ratio=None).reason == "index is valid and current"


def test_our_fingerprint_spares_the_descent_to_the_last_record(tmp_path, monkeypatch):
    """Opening an index whose fingerprint of ours matches its binlog reads
    no path to its last record (the binlog is the one it was made of);
    without one (a server's index) the last record is still checked
    against the binlog's end."""
    calls = []
    real = IndexReader.last_offset
    monkeypatch.setattr(IndexReader, "last_offset", lambda self: (calls.append(1), real(self))[1])
    (binlog,) = [p for p in copy_set(tmp_path, M1011 / "multifile") if p.name.endswith("000020")]
    build_index(binlog, max_ratio=None)
    with Binlog(binlog) as b:
        status = open_index(b)
        assert status.usable and status.meta is not None and calls == []
        status.close()
    IndexMeta.remove(str(binlog) + ".idx")
    os.removexattr(str(binlog) + ".idx", "user.gtidx")
    with Binlog(binlog) as b:
        status = open_index(b)
        assert status.usable and status.meta is None and calls == [1]
        status.close()


def test_a_cold_lookup_opens_each_binlog_once(tmp_path, monkeypatch):
    """A fresh series answering one lookup reads each file's preamble once:
    the start states planning reads, the stored ranges and the lookup's own
    file share one open ``Binlog`` per file."""
    import gtidx.series.files as files_mod
    import gtidx.series.trust as trust_mod
    d = tmp_path / "multifile"
    shutil.copytree(M1011 / "multifile", d)
    list(admin.build(d))
    files = api.list_binlogs(d)
    with api.BinlogSeries(files) as logs:
        gtids = [str(g.gtid) for f in files[1:] for g in logs.binlog(f).groups()][::7]
    opened = []

    class Counting(Binlog):
        def __init__(self, path, *a, **kw):
            opened.append(os.path.basename(path))
            super().__init__(path, *a, **kw)
    for mod in (files_mod, trust_mod):
        monkeypatch.setattr(mod, "Binlog", Counting)
    for g in gtids:
        opened.clear()
        with api.BinlogSeries(files) as logs:
            logs.locate(g)
        assert sorted(opened) == sorted(set(opened)), (g, opened)


def test_the_pairs_going_down_come_from_the_stored_walk(tmp_path, monkeypatch):
    """``replica_start`` trusts an index record of a file only for pairs
    that grow all through it (``_File.pairs_going_down``). Where the build
    stored what its walk saw of the whole file, that set is its
    ``repeats``: exactly the pairs a walk over every group sees logged at
    or below an earlier seq (or the start state), with no walk of the
    index's records; without them, the records are walked."""
    walks = []
    real = IndexReader.records
    monkeypatch.setattr(IndexReader, "records", lambda self: (walks.append(1), real(self))[1])
    files = copy_set(tmp_path, M1011 / "nonmono") + copy_set(tmp_path, M1011 / "multifile")
    seen_down = 0
    for binlog in files:
        build_index(binlog, max_ratio=None)
        with Binlog(binlog) as b:
            start, last, exact = b.start_state, {}, set()
            for g in b.groups():
                key = (g.gtid.domain, g.gtid.server)
                before = last.get(key, start.get(*key))
                if before is not None and g.gtid.seq <= before:
                    exact.add(key)
                last[key] = g.gtid.seq
        walks.clear()
        f = SeriesFile(str(binlog), True)
        try:
            assert f.pairs_going_down() == exact and walks == [], binlog.name
        finally:
            f.close()
        seen_down += bool(exact)
        idx = str(binlog) + ".idx"
        with open(idx, "rb") as fh:
            IndexMeta.read(idx).replace(ranges=None, repeats=None).write(fh.fileno(), idx)
        f = SeriesFile(str(binlog), True)
        try:
            f.pairs_going_down()
            assert walks == [1], binlog.name
        finally:
            f.close()
    assert seen_down                      # the nonmono fixture has pairs that go down


def test_an_index_beside_a_vanished_directory_does_not_make_it_again(tmp_path):
    """A binlog directory renamed away (or removed) while an index for it is
    being written: the write fails, and the directory is not made again with
    a stray index in it (``gtidx tail`` found its directory recreated when it
    came back, test_tail_survives_its_directory_vanishing). Under an
    --index-dir the mirrored directories are made."""
    from gtidx.errors import GtidxIOError
    from gtidx.storage import LOCAL
    (binlog,) = copy_set(tmp_path, M118 / "xa")
    with Binlog(binlog) as b:
        meta = IndexMeta.of(b)
    gone = tmp_path / "gone" / "binlogs"
    with pytest.raises(GtidxIOError):
        LOCAL.write_index(str(gone / "master-bin.000001.idx"), b"x" * 4096, meta)
    assert not gone.exists() and not gone.parent.exists()
    LOCAL.write_index(str(gone / "master-bin.000001.idx"), b"x" * 4096, meta, make_dirs=True)
    assert (gone / "master-bin.000001.idx").stat().st_size == 4096
