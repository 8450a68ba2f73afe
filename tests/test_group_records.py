"""``Binlog.group_records`` (the compiled group walk, gtidx/_skip.c ``groups``)
against its definition, ``walk.group_walk`` (``group_spans``).

``group_records`` packs every group of ``group_spans`` as a GROUP_RECORD;
where ``gtidx._skip`` is built, C walks the groups while nothing is unusual
and ``group_walk`` takes over where something is. These tests hold the records
(or the error) equal to ``group_spans`` packed, with and without the C walk,
on every fixture binlog, from any group boundary, through tiny windows
(groups longer than the largest window), with C's buffer filling up after a
record or two, on damaged copies and on copies cut as a server writes them."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gtidx.filebuf
from gtidx.binlog import walk
from gtidx.binlog.mariadb import GROUP_RECORD, Binlog
from gtidx.errors import GtidxError

from conftest import damaged, fixture_files, fixture_id, growing_copy


def _spans_packed(path, start=None):
    """The definition: group_spans, packed; or the error it raises."""
    try:
        with Binlog(path) as b:
            return b"".join(GROUP_RECORD.pack(s, e, seq, ts, server, domain, flags2)
                            for s, e, (ts, server, seq, domain, flags2) in b.group_spans(start))
    except GtidxError as e:
        return (type(e).__name__, str(e), e.offset)


def _records(path, start=None):
    try:
        with Binlog(path) as b:
            return b.group_records(start)
    except GtidxError as e:
        return (type(e).__name__, str(e), e.offset)


def _both(monkeypatch, path, start=None):
    """group_records with the compiled walk and without it, and the definition."""
    import gtidx._skip
    monkeypatch.setattr(walk, "_groups", gtidx._skip.groups)
    compiled = _records(path, start)
    monkeypatch.setattr(walk, "_groups", None)
    pure = _records(path, start)
    monkeypatch.setattr(walk, "_groups", gtidx._skip.groups)
    return compiled, pure, _spans_packed(path, start)


def test_the_compiled_group_walk_is_built():
    import gtidx._skip
    assert walk._groups is gtidx._skip.groups


@pytest.mark.parametrize("path", [p for p, _ in fixture_files()], ids=lambda p: fixture_id(p))
def test_group_records_are_the_group_walk(monkeypatch, path):
    compiled, pure, definition = _both(monkeypatch, path)
    assert compiled == definition
    assert pure == definition


def test_group_records_from_any_group_boundary(monkeypatch):
    path = max((p for p, _ in fixture_files()), key=lambda p: p.stat().st_size)
    with Binlog(path) as b:
        ends = [e for _, e, _ in b.group_spans()]
    for start in ends[:: max(1, len(ends) // 20)] + ends[-2:]:
        compiled, pure, definition = _both(monkeypatch, path, start)
        assert compiled == definition == pure, start


@pytest.mark.parametrize("window", [32, 97, 1000])
def test_group_records_through_tiny_windows(monkeypatch, window):
    """Windows smaller than most groups: C stops where a header or a GTID
    head does not fit, the window moves; where no group ends in the largest
    window, ``group_walk`` walks that group and C goes on after it."""
    monkeypatch.setattr(gtidx.filebuf, "WINDOW_FIRST", window)
    monkeypatch.setattr(gtidx.filebuf, "WINDOW", window)
    for path, _ in fixture_files()[::2]:
        compiled, pure, definition = _both(monkeypatch, path)
        assert compiled == definition == pure, path


@pytest.mark.parametrize("chunk", [1, 2, 7])
def test_group_records_when_the_buffer_fills(monkeypatch, chunk):
    monkeypatch.setattr(walk, "_GROUP_CHUNK", chunk)
    for path, _ in fixture_files()[::3]:
        compiled, pure, definition = _both(monkeypatch, path)
        assert compiled == definition == pure, path


MIXED = next(p for p, _ in fixture_files() if "mixed" in str(p))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.one_of(st.none(), st.floats(0.05, 1)), window=st.sampled_from([None, 64, 500]))
def test_damaged_binlogs_give_the_same_records(monkeypatch, tmp_path_factory, flips, cut, window):
    """Bytes overwritten anywhere (lengths, types, GTID heads) and files cut
    short: the same records, or the same error at the same offset."""
    if window is not None:
        monkeypatch.setattr(gtidx.filebuf, "WINDOW_FIRST", window)
        monkeypatch.setattr(gtidx.filebuf, "WINDOW", window)
    data = damaged(MIXED.read_bytes(), flips, cut)
    path = tmp_path_factory.mktemp("dmg") / MIXED.name
    path.write_bytes(data)
    compiled, pure, definition = _both(monkeypatch, path)
    assert compiled == definition
    assert pure == definition
    os.unlink(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.floats(0, 1))
def test_growing_binlogs_give_the_same_records(monkeypatch, tmp_path_factory, at):
    """A file as its server has it while writing (IN_USE, cut anywhere): the
    tail is ``group_walk``'s, the last group only once it is complete."""
    whole = MIXED.read_bytes()
    path = tmp_path_factory.mktemp("grow") / MIXED.name
    path.write_bytes(growing_copy(whole, max(4, int(at * len(whole)))))
    compiled, pure, definition = _both(monkeypatch, path)
    assert compiled == definition
    assert pure == definition
    os.unlink(path)


def test_groups_refuses_bad_arguments():
    from gtidx._skip import groups
    out = bytearray(GROUP_RECORD.size)
    with pytest.raises(ValueError):
        groups(b"x" * 40, 0, 0, 40, b"\0" * 255, 162, 36, out)
    with pytest.raises(ValueError):
        groups(b"x" * 40, -1, 0, 40, bytes(256), 162, 36, out)
    with pytest.raises(ValueError):
        groups(b"x" * 40, 0, 0, 40, bytes(256), 162, 8, out)
    with pytest.raises(BufferError):
        groups(b"x" * 40, 0, 0, 40, bytes(256), 162, 36, b"read-only")
    with pytest.raises(TypeError):
        groups(b"x" * 40, 0)
