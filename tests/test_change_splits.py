"""Pieces of a big binlog (``ChangeSource.splits``, Spark's partitions of
``format("gtidx.changes")``): each starts at the first group start at or
after a multiple of the piece size, from the index where its records check
out, else from one walk of the group headers; the pieces' rows, in order, are
the whole file's. Without Spark (tests/test_spark_changes.py has it)."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from conftest import FIXTURES, copy_set, forge_index_record
from gtidx import changes, rowbatch
from gtidx.binlog.mariadb import Binlog
from gtidx.changes import SPLIT_END, ChangeSource
from gtidx.index.files import open_index

SPLIT = 4096


def table(src: ChangeSource, path: str, splits) -> pa.Table:
    """The rows of ``path`` read piece by piece (``splits``), in order."""
    with src.open(path) as b:
        batches = [batch for s in splits for batch in rowbatch.source_batches(src, b, None, split=s)]
    return pa.Table.from_batches(batches, schema=rowbatch.ARROW_SCHEMA)


def first_at_or_after(offsets: list[int], size: int, body_start: int) -> list[int]:
    """The rule, spelt out: per multiple of SPLIT, the first of ``offsets``
    at or after it (past the first group, before the end)."""
    return sorted({min(o for o in offsets if o >= m) for m in range(SPLIT, size, SPLIT)
                   if any(o >= m for o in offsets)} - {o for o in offsets if o <= body_start or o >= size})


def check_pieces(src: ChangeSource, path: str, splits: list, points: list[int]) -> None:
    """``splits`` are the pieces at ``points`` and read the whole file's rows."""
    with src.open(path) as b:
        body_start = b.body_start
    assert [lo for lo, _ in splits] == [body_start] + points
    assert [hi for _, hi in splits] == points + [SPLIT_END]
    whole = table(src, path, [None])
    assert whole.num_rows and table(src, path, splits).equals(whole)


def walks(monkeypatch) -> list:
    """The header walks the planning makes (their start offsets)."""
    made, real = [], changes.group_record_chunks

    def counting(b, start=None):
        made.append(start)
        return real(b, start)
    monkeypatch.setattr(changes, "group_record_chunks", counting)
    return made


def test_without_an_index_the_points_come_from_one_header_walk(tmp_path, monkeypatch):
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=False)
    src = ChangeSource(str(d))
    made = walks(monkeypatch)
    for path in src.files:
        made.clear()
        splits = src.splits(path, SPLIT)
        with Binlog(path) as b:
            starts = [start for start, _, _ in b.group_spans()]
            points = first_at_or_after(starts, b.size, b.body_start)
        assert len(made) == 1 and len(points) > 10
        check_pieces(src, path, splits, points)


def test_with_an_index_the_points_are_its_records_then_a_walk_past_them(tmp_path, monkeypatch):
    """The index's records (a group end each; the last one's, before the
    ROTATE, no group start: not a point), then, past the last point, the
    header walk from there (the rest is more than a piece)."""
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile")      # indexed: a record every 4 KiB
    src = ChangeSource(str(d))
    made = walks(monkeypatch)
    for path in src.files:
        made.clear()
        splits = src.splits(path, SPLIT)
        with Binlog(path) as b:
            status = open_index(b)
            starts = [start for start, _, _ in b.group_spans()]
            records = [r.offset for r in status.reader.records() if r.offset in starts]
            status.close()
            points = first_at_or_after(records, b.size, b.body_start)
            last = points[-1]
            tail = sorted({min(s for s in starts if s >= m) for m in range(last // SPLIT * SPLIT + SPLIT, b.size, SPLIT)
                           if any(s >= m for s in starts)})
        assert len(points) > 10
        assert made == ([last] if b.size - last > SPLIT else [])
        check_pieces(src, path, splits, points + tail)


@pytest.mark.parametrize("lie", ["inside a group", "no event boundary"])
def test_a_forged_index_record_is_checked_and_the_walk_used(tmp_path, monkeypatch, lie):
    """A record moved to the next event of its group (a whole event, its
    CRC32 right: not a GTID) or a byte on (no event there): the points come
    from the header walk, the rows are the whole file's."""
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile")
    path = str(sorted(d.glob("master-bin.0*[0-9]"))[1])
    step = (lambda b, off: off + b.event_header(off)[3]) if lie == "inside a group" else (lambda b, off: off + 1)
    old, new = forge_index_record(path, step)
    with Binlog(path) as b:
        status = open_index(b)
        assert status.usable and new in [r.offset for r in status.reader.records()]
        status.close()
        if lie == "inside a group":
            assert b.event_ok(new)                      # a CRC32 check alone would take it
        starts = [start for start, _, _ in b.group_spans()]
        points = first_at_or_after(starts, b.size, b.body_start)
        body_start = b.body_start
    made = walks(monkeypatch)
    src = ChangeSource(str(d))
    splits = src.splits(path, SPLIT)
    assert made == [body_start]                         # the whole file's header walk
    check_pieces(src, path, splits, points)


def test_a_small_file_is_one_piece_and_not_opened(tmp_path, monkeypatch):
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=False)
    src = ChangeSource(str(d))
    opened = []
    init = Binlog.__init__
    monkeypatch.setattr(Binlog, "__init__", lambda b, path, *a, **kw: (opened.append(path), init(b, path, *a, **kw))[1])
    for path in src.files:
        assert src.splits(path, os.path.getsize(path)) == [None]
        assert src.splits(path) == [None]                   # SPLIT_BYTES: 64 MiB
    assert opened == []
    # bigger than a piece, but no group start past the first multiple: one piece
    one = src.files[0]
    assert src.splits(one, os.path.getsize(one) - 1) == [None]
    assert opened == [one]
