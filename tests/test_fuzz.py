"""Robustness (issue 7): the seeded mutation campaign of tools/fuzz over every
fixture and every fault kind, hypothesis over damaged indexes, MariaDB's own
binlog_gtid_index scenarios, and regressions for what the fuzzer found."""
from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, ROOT, answers_equal, fixture_files, fixture_id
from gtidx import api
from gtidx.index import format as fmt
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import CorruptIndexError, GtidxError, NotFoundError
from gtidx.gtid import Position
from gtidx.index.build import build_index
from gtidx.index.files import XATTR
from gtidx.index.reader import IndexReader
from gtidx.tail import IncrementalIndex
from tools import fuzz

M118 = FIXTURES / "mariadb-11.8"
M1011 = FIXTURES / "mariadb-10.11"
FUZZ = ROOT / "tools" / "fuzz"


def oracle_of(path: Path) -> dict:
    return next(f for f in json.loads((path.parent / "oracle.json").read_text())["files"]
                if f["name"] == path.name)


def wrong_answers(path, expected: dict, logs) -> list:
    return answers_equal(path, expected, logs, None)


# -- the campaign -------------------------------------------------------------------------

def test_brute_force_oracle_agrees_with_the_server_on_intact_binlogs():
    """The fuzzer judges damaged binlogs with its own event walk: on every intact
    fixture it must give exactly the server's BINLOG_GTID_POS answers."""
    for path, expected in fixture_files():
        if path.parent.name == "encrypted":
            continue
        offsets = [o for o, _ in expected["pos"]]
        got = fuzz.brute_positions(path.read_bytes(), offsets)
        for o, answer in expected["pos"]:
            theirs = None if answer is None else Position.parse(answer)
            assert got[o] == theirs, (fixture_id(path), o, got[o], answer)


def test_fuzz_campaign_every_fixture_every_fault_kind():
    """tools/fuzz as a user runs it (its own process: address-space limit, per-input
    time limit), one round: every fixture gets every fault kind once."""
    nfix = len(fuzz.fixture_files())
    runs = nfix * len(fuzz.FAULTS)
    out = subprocess.run([str(FUZZ), "--seed", "20261122", "--runs", str(runs),
                          "--json", "--quiet", "--timeout", "30"],
                         capture_output=True, text=True, timeout=240, env=dict(os.environ, PYTHON=sys.executable))
    res = json.loads(out.stdout)
    assert res["wrong_answers"] == 0 and res["crashes"] == 0 and res["hangs"] == 0, res["examples"]
    assert out.returncode == 0, out.stderr[-2000:]
    assert res["fixtures"] == nfix >= 30
    assert set(res["faults"]) == set(fuzz.FAULTS)
    assert res["inputs"] == runs and res["answers_checked"] > 10 * runs


def test_fuzz_reports_a_wrong_answer(monkeypatch):
    """The harness is not hollow: a lookup that lies is counted as a wrong answer."""
    real = api.BinlogSeries.state_at

    def lying(self, file, offset):
        r = real(self, file, offset)
        return r._replace(state=r.state.copy().update([(77, 7, 7)]))
    monkeypatch.setattr(api.BinlogSeries, "state_at", lying)
    stats = fuzz.campaign(1, 3, None, only="mariadb-11.8/xa", kinds=("idx_flip",))
    assert stats.wrong > 0 and stats.crashes == 0


# -- hypothesis: any mix of damage to an index, the intact binlog's answers -------------------

SMALL = [M118 / "xa" / "master-bin.000006", M1011 / "nonmono" / "master-bin.000008",
         M1011 / "multifile" / "master-bin.000019"]
_built: dict = {}


def _index_of(path: Path, page_size: int, tmp: Path) -> bytes:
    key = (path, page_size)
    if key not in _built:
        out = tmp / f"built-{page_size}.idx"
        build_index(path, out=str(out), page_size=page_size, span_min=1 if page_size == 64 else 2048,
                    max_ratio=None, force=True)
        _built[key] = out.read_bytes()
    return _built[key]


idx_damage = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 24), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 24)),
    st.tuples(st.just("splice"), st.integers(0, 1 << 24), st.integers(0, 1 << 24), st.integers(1, 200)),
    st.tuples(st.just("page_copy"), st.integers(0, 1 << 16), st.integers(0, 1 << 16)),
    st.tuples(st.just("page_swap"), st.integers(0, 1 << 16), st.integers(0, 1 << 16)),
)


def damage(data: bytearray, op) -> bytearray:
    n = len(data)
    if n < 64:
        return data
    ps = struct.unpack_from("<I", data, 8)[0] if fmt.valid_page_size(struct.unpack_from("<I", data, 8)[0]) else 64
    npages = max(1, n // ps)
    kind = op[0]
    if kind == "flip":
        data[op[1] % n] ^= 1 << op[2]
    elif kind == "truncate":
        del data[op[1] % n:]
    elif kind == "splice":
        a, b, ln = op[1] % n, op[2] % n, op[3]
        data[b:b + ln] = data[a:a + ln]
    elif kind in ("page_copy", "page_swap") and n >= 2 * ps:
        i, j = op[1] % npages, op[2] % npages
        pi, pj = bytes(data[i * ps:(i + 1) * ps]), bytes(data[j * ps:(j + 1) * ps])
        data[j * ps:(j + 1) * ps] = pi
        if kind == "page_swap":
            data[i * ps:(i + 1) * ps] = pj
    return data


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.sampled_from(range(len(SMALL))), st.sampled_from([64, 256]),
       st.lists(idx_damage, min_size=1, max_size=3), st.booleans())
def test_damaged_index_answers_like_a_scan(tmp_path_factory, which, page_size, ops, keep_xattr):
    src = SMALL[which]
    tmp = tmp_path_factory.mktemp("hyp")
    binlog = tmp / src.name
    shutil.copyfile(src, binlog)
    raw = _index_of(binlog, page_size, tmp)
    data = bytearray(raw)
    for op in ops:
        data = damage(data, op)
    if fuzz.well_formed_forgery(bytes(data), raw):
        return           # whole pages moved into a node that still checks out: a forgery, see tools/fuzz
    if any(op[0] in ("page_copy", "page_swap") for op in ops) and _cont_moves(raw, ops):
        return           # a continuation page moved: nothing ties it to its node, see tools/fuzz
    idx = tmp / (src.name + ".idx")
    idx.write_bytes(bytes(data))
    if keep_xattr:
        clean = tmp / "fp.idx"
        build_index(binlog, out=str(clean), page_size=page_size, max_ratio=None, force=True)
        os_xattr = __import__("os").getxattr(clean, XATTR)
        __import__("os").setxattr(idx, XATTR, os_xattr)
    with api.BinlogSeries([str(binlog)]) as logs:
        assert wrong_answers(binlog, oracle_of(src), logs) == []


def _cont_moves(raw: bytes, ops) -> bool:
    ps = struct.unpack_from("<I", raw, 8)[0]
    npages = max(1, len(raw) // ps)
    return any(fuzz.continuation_only(raw, (op[1] % npages + 1, op[2] % npages + 1))
               for op in ops if op[0] in ("page_copy", "page_swap"))


# -- regressions: pages with valid CRCs in the wrong place ----------------------------------------

def _leaf_pages(data: bytes) -> list[int]:
    r = IndexReader(data)
    return [p for p in range(1, r.npages + 1) if r._flags(p) & fmt.IS_LEAF and not r._flags(p) & fmt.IS_CONT]


@pytest.mark.parametrize("how", ["copy", "swap", "insert", "delete"])
def test_spliced_whole_pages_never_give_a_wrong_answer(tmp_path, how):
    """Found by tools/fuzz (idx_page_splice): a leaf page copied over another
    (or pages shifted by one) kept valid CRCs and the descent trusted them,
    answering state_at with another leaf's states. Lookups now check every key
    against the range its separators allow."""
    src = M118 / "xa" / "master-bin.000006"
    binlog = tmp_path / src.name
    shutil.copyfile(src, binlog)
    build_index(binlog, page_size=64, span_min=1, max_ratio=None)
    idx = Path(str(binlog) + ".idx")
    raw = idx.read_bytes()
    ps = 64
    pages = [raw[i:i + ps] for i in range(0, len(raw), ps)]
    leaves = _leaf_pages(raw)
    expected = oracle_of(src)
    tried = 0
    for k in range(1, len(leaves) - 1, max(1, len(leaves) // 12)):
        i, j = leaves[k], leaves[k + 1]
        new = list(pages)
        if how == "copy":
            new[j - 1] = pages[i - 1]
        elif how == "swap":
            new[i - 1], new[j - 1] = pages[j - 1], pages[i - 1]
        elif how == "insert":
            new.insert(j - 1, pages[i - 1])
        else:
            del new[i - 1]
        idx.write_bytes(b"".join(new))
        with api.BinlogSeries([str(binlog)]) as logs:
            assert wrong_answers(binlog, expected, logs) == [], (how, i, j)
        tried += 1
    assert tried >= 10


def test_separator_disagreeing_with_its_leaf_is_caught_by_a_lookup():
    """Found by tools/fuzz (idx_reseal): a separator whose GTIDs differ from the
    leaf first key that repeats it (the page's CRC recomputed) gave the
    separator's state. The lookup that passes a separator now checks the
    leaf's first key against it (the spec's worked example: root page 3's
    separator 0x2ad [0-1-2] repeats leaf 2's first key)."""
    from gtidx.index.writer import write_records
    pages = [bytearray(p) for p in write_records([(0x11d, []), (0x20e, [(0, 1, 1)]), (0x2ad, [(0, 1, 2)])], 64)]
    assert IndexReader(b"".join(pages)).at_offset(0x2ad).state.get(0, 1) == 2
    struct.pack_into("<Q", pages[2], 4 + 4 + 8 + 8, 99)          # the separator's seq_no: 2 -> 99
    fmt.seal(pages[2])
    r = IndexReader(b"".join(bytes(p) for p in pages))
    with pytest.raises(CorruptIndexError, match="not its separator"):
        r.at_offset(0x2ad)
    with pytest.raises(CorruptIndexError):
        r.check()
    assert r.at_offset(0x2ac).offset == 0x20e                   # the left subtree is still fine



def test_leaf_repeating_its_separator_in_another_order():
    """A leaf's first key holding its separator's GTIDs in another order
    (domain 0's last server 1 instead of 2; the CRC recomputed): check()
    reports it (applying the key would change the state); a lookup, which
    never applies that key, answers the separator's state, the true one."""
    from gtidx.index.writer import write_records
    pages = [bytearray(p) for p in write_records(
        [(0x11d, []), (0x20e, [(0, 1, 1)]), (0x2ad, [(0, 1, 2), (0, 2, 3)])], 64)]
    a = fmt.payload_start(2) + fmt.KEY_HEADER_SIZE              # page 2 (leaf 2): its first key's GTIDs
    b, end = a + fmt.GTID_SIZE, a + 2 * fmt.GTID_SIZE
    pages[1][a:end] = pages[1][b:end] + pages[1][a:b]
    fmt.seal(pages[1])
    r = IndexReader(b"".join(bytes(p) for p in pages))
    with pytest.raises(CorruptIndexError, match="not its separator") as e:
        r.check()
    assert e.value.page == 2
    assert r.at_offset(0x2ad).state.last(0).server == 2

# -- MariaDB's mysql-test binlog_gtid_index scenarios that tests/test_index.py lacks ----------------
# (there already: a CRC byte flipped at EOF-2, page sizes 64/512/16384 with span_min 1
#  in test_every_oracle_answer_through_gtidx_indexes)

@pytest.mark.parametrize("scenario", [M118 / "multifile", M1011 / "mixed"], ids=["11.8", "10.11"])
def test_corrupted_first_page_answers_by_scan(tmp_path, scenario, caplog):
    d = tmp_path / "b"
    shutil.copytree(scenario, d)
    files = sorted(p for p in d.iterdir() if p.name[-6:].isdigit())
    for f in files:
        build_index(f, page_size=256, span_min=1, max_ratio=None, force=True)
        idx = Path(str(f) + ".idx")
        data = bytearray(idx.read_bytes())
        data[40] ^= 0xFF                      # inside page 1 (header, first leaf)
        idx.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="gtidx"):
        with api.BinlogSeries([str(f) for f in files]) as logs:
            for f in files:
                assert wrong_answers(f, oracle_of(scenario / f.name), logs) == []
                assert logs.state_at(f, 4).via == "scan"
    assert sum("no usable index" in r.getMessage() for r in caplog.records) == len(files)


def test_deleted_index_answers_by_scan_then_rebuilt(tmp_path):
    d = tmp_path / "b"
    shutil.copytree(M118 / "multifile", d)
    files = sorted(p for p in d.iterdir() if p.name[-6:].isdigit())
    with api.BinlogSeries([str(f) for f in files]) as logs:     # the server's own indexes
        for f in files:
            assert logs.state_at(f, f.stat().st_size).via == "index"
    for f in files:
        Path(str(f) + ".idx").unlink()
    with api.BinlogSeries([str(f) for f in files]) as logs:
        for f in files:
            assert wrong_answers(f, oracle_of(M118 / "multifile" / f.name), logs) == []
            assert logs.state_at(f, f.stat().st_size).via == "scan"
    for f in files:
        assert build_index(f, page_size=64, span_min=1, max_ratio=None).action == "built"
    with api.BinlogSeries([str(f) for f in files]) as logs:
        for f in files:
            assert wrong_answers(f, oracle_of(M118 / "multifile" / f.name), logs) == []


def state_or_none(logs, binlog, offset):
    try:
        return logs.state_at(binlog, offset)
    except NotFoundError:
        return None


@pytest.mark.parametrize("page_size", [64, 512, 16384])
def test_hot_and_cold_answers_are_equal(tmp_path, page_size):
    """binlog_gtid_index's hot/cold test: the same lookups while the binlog
    grows and its index is being written (complete pages plus a scan), and
    after it is closed and the index finished, equal each other and the server."""
    src = M1011 / "multifile" / "master-bin.000020"
    data = src.read_bytes()
    expected = oracle_of(src)
    binlog = tmp_path / src.name
    inc = IncrementalIndex(str(binlog), page_size=page_size, span_min=1)
    hot_via_index = 0
    for cut in (len(data) // 3, 2 * len(data) // 3, len(data) - 1):
        part = bytearray(data[:cut])
        part[21] |= 1                           # IN_USE: the server is writing it
        binlog.write_bytes(bytes(part))
        with Binlog(binlog) as b:
            if cut == len(data) // 3:
                inc.start(b)
            inc.advance(b)
        with api.BinlogSeries([str(binlog)]) as hot, api.BinlogSeries([str(binlog)], use_index=False) as scan:
            for offset, answer in expected["pos"]:
                if offset > cut:
                    continue
                h, s = state_or_none(hot, binlog, offset), state_or_none(scan, binlog, offset)
                assert (h and h.position) == (s and s.position), offset
                hot_via_index += h is not None and h.via == "index"
    binlog.write_bytes(data)
    with Binlog(binlog) as b:
        inc.finish(b, max_ratio=None)
    with api.BinlogSeries([str(binlog)]) as cold:
        assert wrong_answers(binlog, expected, cold) == []
        assert cold.state_at(binlog, len(data)).via == "index"
    # 16 KiB pages: this 120 KB binlog's index has no complete page before it is
    # finished (like the server's 0-byte .idx of its active binlog): hot = scan
    assert hot_via_index > 0 if page_size < 16384 else hot_via_index == 0


def test_seq_no_0_is_corruption_for_lookups_too(tmp_path):
    """Found by tools/fuzz (bin_u32): a GTID event whose seq_no was zeroed made
    the group walk (and so build) raise "GTID event with seq_no 0", while
    state_at applied it and answered with a state holding seq_no 0 (which no
    brute-force reading of the bytes supports). Both now say it is corrupt."""
    src = M118 / "xa" / "master-bin.000006"
    data = bytearray(src.read_bytes())
    with Binlog(src) as b:
        g = list(b.groups())[10]
    struct.pack_into("<Q", data, g.start + 19, 0)
    binlog = tmp_path / src.name
    binlog.write_bytes(bytes(data))
    with api.BinlogSeries([str(binlog)]) as logs:
        assert logs.state_at(binlog, g.start).via == "scan"       # before it: fine
        with pytest.raises(GtidxError, match="seq_no 0"):
            logs.state_at(binlog, g.end)
    with pytest.raises(GtidxError, match="seq_no 0"):
        build_index(binlog)

