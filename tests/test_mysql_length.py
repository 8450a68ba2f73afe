"""A MySQL GTID event's ``transaction_length`` is a cross-check, never a
jump (``MysqlBinlog._chained``; docs/design.md, "MySQL transaction_length").

A length that lies, its CRC32 recomputed as the server computes it, hides
no transaction: every command answers as the event walk (``groups``, the
scan: it reads no length) does, or reports the damage (CorruptBinlogError,
exit 3, one line with the path and the GTID event's offset). The compiled
walks (gtidx/_skip.c: ``mysql_walk``, ``skip``) are held to the pure-Python
walk, their definition, on every fixture and on forged and damaged files.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, ROOT, damaged, growing_copy, mysql_events, set_trx_length, trx_length_field
from gtidx import admin, api, filebuf
from gtidx.binlog import mysql as mysqlbinlog
from gtidx.errors import CorruptBinlogError, GtidxError
from gtidx.index.files import index_path
from gtidx.binlog.events import GROUP_RECORD
from gtidx.binlog.mysql import ANONYMOUS_GTID, GTID_LOG, GTID_TAGGED, LANDING, MysqlBinlog, MysqlGroup
from gtidx.mysqlgtid import GtidSet, uuid_text
from gtidx.index.mysql import MysqlRecordPolicy

MYSQL = FIXTURES / "mysql-9.7"
SINGLE = MYSQL / "single" / "binlog.000002"
FILES = sorted(p for d in MYSQL.iterdir() for p in d.glob("binlog.0*"))
# the files with GTID or ANONYMOUS_GTID events, whose length a test can rewrite
LYING = [p for p in FILES if any(t in (GTID_LOG, ANONYMOUS_GTID) for _, t, _ in mysql_events(p.read_bytes()))]
WIDTH_MAX = {0: 250, 2: 2**16 - 1, 3: 2**24 - 1, 8: 2**64 - 1}     # trx_length_field's widths


class Forged(NamedTuple):
    dir: Path
    path: Path
    good: list[MysqlGroup]      # the pristine file's transactions (the event walk's)
    liar: MysqlGroup            # the transaction whose GTID event lies
    hidden: MysqlGroup          # the next one, which the lie covers


def cover_next(tmp_path: Path) -> Forged:
    """The repro: single/binlog.000002, alone in a directory, one of its
    transactions stating a transaction_length that covers the next
    transaction too, its CRC32 recomputed."""
    data = bytearray(SINGLE.read_bytes())
    with MysqlBinlog(SINGLE) as b:
        good = list(b.groups())
    k = next(k for k in range(len(good) // 2, len(good) - 1)
             if data[good[k].start + 4] == GTID_LOG and good[k + 1].gtid is not None
             and trx_length_field(data, good[k].start)[1] == 2 and good[k].length + good[k + 1].length <= WIDTH_MAX[2])
    liar, hidden = good[k], good[k + 1]
    set_trx_length(data, liar.start, liar.length + hidden.length, fix_crc=True)
    d = tmp_path / "logs"
    d.mkdir()
    (d / SINGLE.name).write_bytes(bytes(data))
    return Forged(d, d / SINGLE.name, good, liar, hidden)


def gtidx(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "gtidx", *map(str, args)], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr.splitlines()


def scan_set(f: Forged, upto: int) -> str:
    """The GTID set at ``upto`` by the event walk: Previous_gtids and every transaction ending there or before."""
    with MysqlBinlog(f.path) as b:
        out = b.previous_gtids.copy()
    for g in f.good:
        if g.end <= upto and g.gtid is not None:
            out.add(*g.gtid)
    return out.one_line()


# -- the repro -----------------------------------------------------------------------------------

def test_a_length_covering_the_next_transaction_hides_nothing(tmp_path, build_walk):
    """The library: the scan still lists the covered transaction; the walks
    that jumped over it (``transactions``, the index build, ``seek``) report
    the lying GTID event instead of an answer without it; ``pos`` is the
    scan's set; ``build`` writes no index."""
    f = cover_next(tmp_path)
    with MysqlBinlog(f.path) as b:
        assert [g[:3] for g in b.groups()] == [g[:3] for g in f.good]
        seen = []
        with pytest.raises(CorruptBinlogError, match="transaction_length") as lie:
            for g in b.transactions():
                seen.append(g)
        assert seen == f.good[:f.good.index(f.liar)]         # the same, lengths too
        assert (lie.value.path, lie.value.offset) == (str(f.path), f.liar.start)
        assert f"offset {f.liar.start + f.liar.length + f.hidden.length}" in lie.value.message
        assert f"offset {f.hidden.start}" in lie.value.message
        for span in (1, 4096, 1 << 16):
            with pytest.raises(CorruptBinlogError) as e:
                MysqlRecordPolicy(span).records(b)
            assert (e.value.offset, e.value.message) == (lie.value.offset, lie.value.message)
    for g in (f.liar, f.hidden):
        with pytest.raises(CorruptBinlogError) as e:
            api.seek(str(g.gtid), f.dir)
        assert (e.value.offset, e.value.message) == (lie.value.offset, lie.value.message)
    first = api.seek(str(f.good[0].gtid), f.dir)        # met before the damage: answered
    assert (first.start, first.end) == (f.good[0].start, f.good[0].end)
    after = f.good[f.good.index(f.hidden) + 1]
    assert f.hidden.gtid in api.state_at(f.path, after.end).position
    assert api.state_at(f.path, after.end).position.one_line() == scan_set(f, after.end)
    results = list(admin.build(f.dir, force=True))
    assert len(results) == 1 and isinstance(results[0], CorruptBinlogError), results
    assert results[0].offset == f.liar.start
    assert not os.path.exists(index_path(f.path))


def test_the_commands_on_a_length_covering_the_next_transaction(tmp_path):
    """``seek --gtid`` of the covered transaction: exit 3 and one line naming
    the file and the lying event (was: exit 1, "never written"); ``build``
    the same, and it leaves no index its own ``verify`` rejects; ``pos``
    after it is the scan's set (was: the index build left out the covered
    GTID, and pos answered from that index)."""
    f = cover_next(tmp_path)
    where = f"{f.path}, offset {f.liar.start}: "
    rc, out, err = gtidx("seek", "--gtid", f.hidden.gtid, f.dir)
    err = [line for line in err if not line.startswith("gtidx: warning: ")]     # no index: answered by scan
    assert (rc, out, len(err)) == (3, "", 1), (rc, out, err)
    assert err[0].startswith(f"gtidx: {where}") and "transaction_length" in err[0]
    rc, out, err = gtidx("seek", "--json", "--gtid", f.hidden.gtid, f.dir)
    doc = json.loads(out)["error"]
    assert rc == 3 and (doc["path"], doc["offset"], doc["exit_code"]) == (str(f.path), f.liar.start, 3)
    rc, out, err = gtidx("build", "-q", f.dir)
    assert rc == 3 and any(line.startswith(f"gtidx: {where}") for line in err), (rc, out, err)
    assert "Traceback" not in "\n".join(err)
    idx = index_path(f.path)
    if os.path.exists(idx):
        rc, out, err = gtidx("verify", idx)
        assert rc == 0, (out, err)
    after = f.good[f.good.index(f.hidden) + 1]
    for args in ((), ("--no-index",)):
        rc, out, err = gtidx("pos", "--json", *args, f.path, after.end)
        assert rc == 0, err
        assert json.loads(out)["position"] == scan_set(f, after.end)


# -- any lie ---------------------------------------------------------------------------------------

def _both(monkeypatch, fn):
    """``fn()`` with the compiled walks (``mysql_walk``, ``mysql_records``, ``skip``) and with the pure-Python walk."""
    assert mysqlbinlog._mysql_walk is not None and mysqlbinlog._skip is not None, "gtidx._skip is not built"
    assert mysqlbinlog._mysql_records is not None, "gtidx._skip is not built"
    compiled = fn()
    monkeypatch.setattr(mysqlbinlog, "_mysql_walk", None)
    monkeypatch.setattr(mysqlbinlog, "_mysql_records", None)
    monkeypatch.setattr(mysqlbinlog, "_skip", None)
    try:
        pure = fn()
    finally:
        monkeypatch.undo()
    return compiled, pure


def outcome(path: Path, jump: bool = True) -> dict:
    """What the MySQL walks give for ``path``: its transactions, from the
    start and from a few boundaries, and index records for some spans; for
    a walk that raises, what it yielded before and the error."""
    out = {}
    try:
        b = MysqlBinlog(path)
    except GtidxError as e:
        return {"open": (type(e).__name__, e.offset, e.message)}
    with b:
        starts = [None]
        try:
            for i, g in enumerate(b.groups()):
                if i % 7 == 1:
                    starts.append(g.start)
        except GtidxError:
            pass

        def walk(start):
            seen = []
            try:
                for g in b.transactions(start, jump=jump):
                    seen.append(tuple(g))
            except GtidxError as e:
                return seen, (type(e).__name__, e.offset, e.message)
            return seen, None
        def runs(start, limit=None):
            """``transaction_runs``, each transaction as (gtid text, start, end, timestamp)."""
            seen = []
            try:
                for item in b.transaction_runs(start, limit):
                    if isinstance(item, MysqlGroup):
                        seen.append((item.gtid and str(item.gtid), item.start, item.end, item.timestamp))
                    else:
                        records, texts = item
                        seen += [(t, *GROUP_RECORD.unpack_from(records, i * GROUP_RECORD.size)[:2],
                                  GROUP_RECORD.unpack_from(records, i * GROUP_RECORD.size)[3])
                                 for i, t in enumerate(texts)]
            except GtidxError as e:
                return seen, (type(e).__name__, e.offset, e.message)
            return seen, None
        for start in starts:
            out[f"transactions from {start}"] = walk(start)
            out[f"runs from {start}"] = runs(start)
        if len(starts) > 2:
            out[f"runs from {starts[1]} to {starts[2]}"] = runs(starts[1], starts[2])
        for span in (1, 700, 1 << 16):
            try:
                out[f"records {span}"] = MysqlRecordPolicy(span, jump=jump).records(b)
            except GtidxError as e:
                out[f"records {span}"] = (type(e).__name__, e.offset, e.message)
    return out


def assert_runs_agree(out: dict, name: str) -> None:
    """``out[name]`` (``transaction_runs`` from a start, to a limit) is the
    walk of ``transactions`` from that start up to the limit: the same
    transactions, and its error where it reaches it."""
    start, *limit = (int(x) if x != "None" else None for x in name.split()[2::2])
    seen, error = out[f"transactions from {start}"]
    want = [(g[0] and str(g[0]), *g[1:4]) for g in seen if not limit or g[1] < limit[0]]
    got_seen, got_error = out[name]
    if not limit or got_error is not None:
        assert got_error == error, name
    assert got_seen == want, name


def _lie(data: bytes, off: int, ln: int, ends: list[int], kind: str, d: int) -> int:
    """A transaction_length of ``kind`` for the GTID event at ``off`` (its
    length ``ln``; ``ends``: the ends of its transaction and the ones after
    it), in the width it has."""
    true = ends[0] - off
    value = {"longer": true + d, "shorter": true - d, "zero": 0, "past EOF": len(data) - off + d,
             "own event": ln, "any": d * 7919, "true": true,
             "covers the next": ends[min(len(ends) - 1, 1 + d % 3)] - off}[kind]
    return max(0, min(value, WIDTH_MAX[trx_length_field(data, off)[1]]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.tuples(st.sampled_from(LYING), st.floats(0, 1)),
       kind=st.sampled_from(["covers the next", "longer", "shorter", "zero", "past EOF", "own event", "any",
                             "true"]),
       d=st.integers(1, 70000))
def test_any_lie_in_a_length_gives_the_scans_answer_or_an_error(tmp_path_factory, monkeypatch, pick, kind, d):
    """One GTID event's transaction_length rewritten (to the end of one of
    the next transactions, longer, shorter, zero, past the end of the file,
    its own event's length, anything; or left true), its CRC32 recomputed: every walk gives what the event walk gives,
    or CorruptBinlogError at that event after exactly the event walk's
    transactions before it. Never another answer. Compiled and pure-Python
    walks alike."""
    src, where = pick
    data = bytearray(src.read_bytes())
    gtids = [(o, ln) for o, t, ln in mysql_events(data) if t in (GTID_LOG, ANONYMOUS_GTID)]
    off, ln = gtids[min(len(gtids) - 1, int(where * len(gtids)))]
    with MysqlBinlog(src) as b:
        crc = b.checksum_len
        ends = [g.end for g in b.groups() if g.start >= off]
    set_trx_length(data, off, _lie(data, off, ln, ends, kind, d), fix_crc=bool(crc))
    path = tmp_path_factory.mktemp("lie") / src.name
    path.write_bytes(bytes(data))
    scan = outcome(path, jump=False)
    compiled, pure = _both(monkeypatch, lambda: outcome(path))
    assert compiled == pure
    seen, error = scan["transactions from None"]
    assert error is None
    for name, got in compiled.items():
        if name.startswith("transactions"):
            start = None if name.endswith("None") else int(name.rsplit(" ", 1)[1])
            want = [g for g in seen if start is None or g[1] >= start]
            got_seen, got_error = got
            if got_error is None:
                assert got_seen == want, name
            else:
                assert got_error[:2] == ("CorruptBinlogError", off) and "transaction_length" in got_error[2], name
                assert got_seen == want[:len(got_seen)] and (got_seen[-1][2] if got_seen else off) == off, name
        elif name.startswith("runs"):
            assert_runs_agree(compiled, name)
        elif not isinstance(got, list):
            assert got[:2] == ("CorruptBinlogError", off) and "transaction_length" in got[2], name
        else:
            assert got == scan[name], name
    if kind == "true":
        assert compiled["transactions from None"] == scan["transactions from None"]
    os.unlink(path)


# -- the compiled walk against the pure one -----------------------------------------------------------

@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_compiled_and_pure_walks_are_equal(monkeypatch, path):
    """Every MySQL fixture: the compiled walks give what the pure-Python
    walk gives, and both what the event walk gives."""
    compiled, pure = _both(monkeypatch, lambda: outcome(path))
    assert compiled == pure
    scan = outcome(path, jump=False)
    assert {k: v for k, v in compiled.items() if k in scan} == scan
    for name in compiled:
        if name.startswith("runs"):
            assert_runs_agree(compiled, name)


@pytest.mark.parametrize("window", [32, 97, 4096])
def test_compiled_and_pure_walks_through_small_windows(monkeypatch, window):
    """Windows smaller than a transaction, or than a GTID event: the
    compiled walk stops where its window ends (or hands the transaction to
    the Python walk), the same answers."""
    for path in LYING:
        monkeypatch.setattr(filebuf, "WINDOW_FIRST", window)
        monkeypatch.setattr(filebuf, "WINDOW", window)
        monkeypatch.setattr(mysqlbinlog, "RUN_BYTES", window)        # the runs' stretches too,
        monkeypatch.setattr(mysqlbinlog, "RUN_RECORDS", 2)           # and a few records a run
        compiled, pure = _both(monkeypatch, lambda: outcome(path))      # (restores the window too)
        assert compiled == pure == outcome(path), path


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.one_of(st.none(), st.floats(0.05, 1)), growing=st.booleans())
def test_damaged_mysql_binlogs_walk_alike(tmp_path_factory, monkeypatch, flips, cut, growing):
    """Bytes overwritten anywhere (lengths, types, GTID events), files cut
    short, still being written: the compiled and the pure-Python walk give
    the same transactions and records, or the same error at the same offset."""
    data = damaged(SINGLE.read_bytes(), flips, cut)
    path = tmp_path_factory.mktemp("dmg") / SINGLE.name
    path.write_bytes(growing_copy(data, len(data)) if growing else data)
    compiled, pure = _both(monkeypatch, lambda: outcome(path))
    assert compiled == pure
    os.unlink(path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_compiled_walk_takes_what_it_can(path):
    """``mysql_walk`` itself over a whole fixture in one buffer: it takes
    every transaction up to the ROTATE/STOP that closes the file, or up to
    the first GTID_TAGGED event (left to the Python walk), and hands back
    their GTIDs; its own CRC32 agrees with the server's (zlib's). A GTID
    event whose CRC32 fails stops it there."""
    from gtidx._skip import mysql_walk
    data = path.read_bytes()
    with MysqlBinlog(path) as b:
        groups, start, crc = list(b.groups()), b.body_start, b.checksum_len
    last = groups[-1].end if groups else start
    expected = next((g.start for g in groups if data[g.start + 4] == GTID_TAGGED), last)
    stop, runs, code = mysql_walk(data, start, 0, len(data), crc, len(data) + 1, LANDING)
    assert (stop, code) == (expected, 2)
    taken = [g for g in groups if g.end <= stop]
    assert GtidSet.from_intervals((uuid_text(u), "", lo, hi) for u, lo, hi in runs) == \
        GtidSet([g.gtid for g in taken if g.gtid is not None])
    if crc and len(taken) > 2:
        g = taken[len(taken) // 2]
        bad = bytearray(data)
        bad[g.start + int.from_bytes(data[g.start + 9:g.start + 13], "little") - 1] ^= 1
        assert mysql_walk(bytes(bad), start, 0, len(data), crc, len(data) + 1, LANDING)[::2] == (g.start, 2)
