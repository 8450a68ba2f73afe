"""Row changes as Arrow record batches (gtidx.rowbatch), by the definition
(``show.decode_group``): rows, order, batch bounds, filters, splits, memory
given back. The compiled decoder's equality is tests/test_rows_compiled.py."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gtidx import changes, rowbatch, show
from gtidx.binlog.mariadb import Binlog
from gtidx.binlog.walk import group_record_chunks
from gtidx.errors import CorruptBinlogError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BIGTRX = FIXTURES / "mariadb-10.11" / "bigtrx" / "master-bin.000004"
MIXED = FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002"


def defined(path, tables=None) -> list[dict]:
    """The definition's rows of a binlog, as ``ARROW_SCHEMA``'s Python values."""
    out = []
    with Binlog(path) as b:
        for g in b.groups():
            for r in show.decode_group(b, g, tables).rows:
                out.append({"gtid": str(g.gtid), "file": Path(path).name, "offset": g.start,
                            "timestamp": g.timestamp, "table": r.table, "op": r.op,
                            "before": _items(show.text_image(r.before)), "after": _items(show.text_image(r.after)),
                            "changed": r.changed, "unknown": r.unknown})
    return out


def _items(image):
    return None if image is None else list(image.items())


def pure_rows(path, **kw) -> list[dict]:
    with Binlog(path) as b:
        return [x for batch in rowbatch.batches(b, group_record_chunks(b), compiled=False, **kw)
                for x in batch.to_pylist()]


def test_batches_are_the_definition_cut_between_rows():
    """Batches of at most max_rows rows, cut inside big groups (the bigtrx
    fixture's 1000-row transactions), hold the definition's rows in order."""
    want = defined(BIGTRX)
    assert len(want) > 100
    with Binlog(BIGTRX) as b:
        got = list(rowbatch.batches(b, group_record_chunks(b), compiled=False, max_rows=7))
    assert all(x.num_rows <= 7 for x in got) and all(x.schema == rowbatch.ARROW_SCHEMA for x in got)
    assert [r for x in got for r in x.to_pylist()] == want


def test_table_and_time_filters_keep_what_the_definition_keeps():
    want = defined(MIXED)
    tables = sorted({r["table"] for r in want})
    assert len(tables) > 1
    assert pure_rows(MIXED, tables={tables[0]}) == [r for r in want if r["table"] == tables[0]]
    stamps = sorted({r["timestamp"] for r in want})
    lo, hi = stamps[len(stamps) // 3], stamps[2 * len(stamps) // 3]
    assert pure_rows(MIXED, lo=lo, hi=hi) == [r for r in want if lo <= r["timestamp"] <= hi]


def test_a_split_is_the_groups_starting_in_it():
    """Partitions [lo, hi) at group starts: together, every row once, in order."""
    src = changes.ChangeSource(str(MIXED))
    with Binlog(MIXED) as b:
        starts = [g.start for g in b.groups()]
        cuts = [starts[0], starts[len(starts) // 3], starts[len(starts) // 2], b.size + 1]
        got = []
        for lo, hi in zip(cuts, cuts[1:]):
            part = [r for x in rowbatch.source_batches(src, b, None, split=(lo, hi), compiled=False)
                    for r in x.to_pylist()]
            assert all(lo <= r["offset"] < hi for r in part)
            got += part
    assert got == defined(MIXED)


def test_damage_ends_the_batches_after_the_rows_before_it(tmp_path):
    """A damaged rows event: the rows before its group come out, then the error."""
    f = tmp_path / BIGTRX.name
    shutil.copy(BIGTRX, f)
    want = defined(BIGTRX)
    with Binlog(f) as b:
        groups = list(b.groups())
        victim = next(g for g in groups[len(groups) // 2:]
                      if any(e.type in (23, 30) for e in b.events_between(g.start, g.end)))
        ev = next(e for e in b.events_between(victim.start, victim.end) if e.type in (23, 30))
    data = bytearray(f.read_bytes())
    data[ev.offset + 30] ^= 0xFF
    f.write_bytes(bytes(data))
    got = []
    with Binlog(f) as b:
        with pytest.raises(CorruptBinlogError) as err:
            for x in rowbatch.batches(b, group_record_chunks(b), compiled=False, max_rows=5):
                got += x.to_pylist()
    assert err.value.offset == ev.offset
    assert got == [r for r in want if r["offset"] < victim.start]


def test_released_memory_is_read_again():
    """PreadBuffer.release gives pages back; a later fill reads them again."""
    with Binlog(MIXED) as b:
        size = b.size
        b.fill(0, size)
        whole = bytes(b.mapping[:size])
        b.release(0, size)
        b.fill(100, size - 100)
        assert bytes(b.mapping[100:size - 100]) == whole[100:size - 100]
