"""Row changes as Arrow record batches: what ``gtidx changes --parquet`` writes
and ``format("gtidx.changes")`` hands Spark.

A batch holds the changed rows of a run of event groups, in binlog order,
with the columns of ``changes.SCHEMA`` (``ARROW_SCHEMA``: map<string,string>
and array<string> as ``pa.map_`` and ``pa.list_`` of strings). Each value is
what ``show.decode_group`` gives, as text (``show.text_image``): that
function is the definition. Where the optional compiled ``gtidx._rows`` is
built, it decodes runs of groups straight into Arrow buffers (no Python
object per value) and hands back any group it cannot decode exactly as the
definition does (a column type it does not know, damage): those are decoded
by ``show.decode_group`` into the same batch, so the rows, their order and
the errors are the definition's either way.

Memory: a batch is at most ``MAX_ROWS`` rows or about ``MAX_BYTES`` bytes of
values (the compiled decoder cuts batches between groups, the definition
between rows), and the file's bytes are read a stretch (``SPAN``) at a time
and given back once decoded; a group longer than ``SPAN`` is decoded by the
definition, a rows event at a time: what is held does not grow with the
file or the group.

MySQL transactions (a source whose ``records`` is False) go through
``named_batches``: the compiled decoder told each one's gtid text, the
source's definition (``show_mysql``) for what it declines.

pyarrow is imported by this module: only the commands that make batches
import it.
"""
from __future__ import annotations

import bisect
import codecs
import importlib
import math
import os
from typing import Iterator

import pyarrow as pa

from . import rowarrow, show, show_rows
from .binlog.events import GROUP_RECORD, record_ends, record_starts
from .binlog.records import Group
from .binlog.walk import group_record_chunks
from .changes import SCHEMA
from .errors import GtidxError
from .gtid import Gtid

try:
    from . import _rows
except ImportError:                    # pragma: no cover - depends on the install
    _rows = None

# Decode with the compiled gtidx._rows where it is built (``batches``'
# ``compiled=None``); False: the definition alone, everywhere (a test, or a
# comparison of the two).
USE_COMPILED = _rows is not None

MAX_ROWS = 65_536           # rows per batch, at most
MAX_BYTES = 32 << 20        # and about this many bytes of values
SPAN = 64 << 20             # the file's bytes read (and released) this much at a time

_TYPES = {"string": pa.string(), "long": pa.int64(), "map<string,string>": pa.map_(pa.string(), pa.string()),
          "array<string>": pa.list_(pa.string())}
ARROW_SCHEMA = pa.schema([(name, _TYPES[kind]) for name, kind in SCHEMA])

_REC = GROUP_RECORD.size
_NO_LO, _NO_HI = -(1 << 63), (1 << 63) - 1


# -- the builders ---------------------------------------------------------------------

class PyBuilder:
    """A batch built from Python values: the builder where ``gtidx._rows`` is
    not built (or not wanted). ``add_row`` as the compiled ``Decoder``'s."""

    def __init__(self, file: str):
        self.file = file
        self.columns = [[] for _ in SCHEMA]
        self.rows = 0
        self.nbytes = 0
        self.groups = 0
        self.declined = 0

    def add_row(self, gtid, offset, timestamp, table, op, before, after, changed, unknown) -> None:
        for column, v in zip(self.columns, (gtid, self.file, offset, timestamp, table, op, before, after,
                                            changed, unknown)):
            column.append(v)
        self.rows += 1
        self.nbytes += sum(len(v) for image in (before, after) if image for v in image.values() if v)

    def finish(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(self.columns, ARROW_SCHEMA.types)],
                                           schema=ARROW_SCHEMA)
        for c in self.columns:
            c.clear()
        self.rows = self.nbytes = 0
        return batch


def _charset_tables(dbms: str = "mariadb") -> tuple[bytes, bytes]:
    """``kinds`` and ``charmaps`` for ``gtidx._rows.Decoder``: per character set
    id, how ``show_rows.Table`` decodes a column in it (the encoding
    mysql-replication names for ``dbms``'s ids, ``bytes.decode``, hex where
    that fails): 1 UTF-8,
    2 never text (binary, or an encoding Python does not know), 3 + k the
    single-byte encoding whose 256 code points are ``charmaps[k]`` (u32,
    0xFFFFFFFF: a byte the codec refuses), 0 anything else (the group is
    decoded by the definition)."""
    from pymysqlreplication.constants import CHARSET
    kinds = bytearray(b"\x01" * 65536)       # an id mysql-replication does not know: UTF-8, as show_rows
    maps, known = [], {}
    for i in range(65536):
        cs = CHARSET.charset_by_id(str(i), dbms)
        if cs is None:
            continue
        if i == show_rows.CHARSET_BINARY:
            kinds[i] = 2
            continue
        enc = cs.encoding
        if enc not in known:
            known[enc] = _kind(enc, maps)
        kinds[i] = known[enc]
    return bytes(kinds), b"".join(maps)


def _kind(encoding: str | None, maps: list) -> int:
    if encoding is None:
        return 1
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return 2                  # decoding raises LookupError: the value stays bytes
    if name == "utf-8":
        return 1
    single = name in ("latin-1", "iso8859-1", "ascii")
    if not single:
        try:
            single = hasattr(importlib.import_module(f"encodings.{name.replace('-', '_')}"), "decoding_table")
        except ImportError:
            single = False
    if not single or len(maps) > 250:
        return 0
    table = bytearray()
    for b in range(256):
        try:
            ch = bytes([b]).decode(encoding)
            table += ord(ch).to_bytes(4, "little") if len(ch) == 1 else b"\xff\xff\xff\xff"
        except UnicodeDecodeError:
            table += b"\xff\xff\xff\xff"
    maps.append(bytes(table))
    return 2 + len(maps)


_tables: dict = {}         # dbms -> _charset_tables(dbms), made once


def _decoder(b, tables, name: str, dbms: str = "mariadb"):
    if dbms not in _tables:
        _tables[dbms] = _charset_tables(dbms)
    kinds, charmaps = _tables[dbms]
    return _rows.Decoder(kinds, charmaps, b.checksum_len, tables, name)


def batch_from(parts) -> pa.RecordBatch:
    """The compiled ``Decoder.finish()``'s buffers as a record batch."""
    return rowarrow.batch_from(parts, ARROW_SCHEMA)


# -- reading ----------------------------------------------------------------------------------

def _group(rec: tuple) -> Group:
    start, end, seq, ts, server, domain, flags2 = rec
    return Group(Gtid(domain, server, seq), start, end, ts, flags2)


def _fallback(builder, finish, b, rec: tuple, tables, max_rows: int, max_bytes: int):
    """The definition's rows of one group, added to ``builder``: the batches
    that fill up on the way (a big group is cut between its rows)."""
    g = _group(rec)
    gtid, text, add = str(g.gtid), show.text_image, builder.add_row
    for r in show.group_rows(b, g, tables, release=True):
        add(gtid, g.start, g.timestamp, r.table, r.op, text(r.before), text(r.after), r.changed, r.unknown)
        if builder.rows >= max_rows or builder.nbytes >= max_bytes:
            yield finish()


def batches(b, record_chunks, *, tables=None, lo=None, hi=None, compiled: bool | None = None,
            stats: dict | None = None, max_rows: int = MAX_ROWS, max_bytes: int = MAX_BYTES
            ) -> Iterator[pa.RecordBatch]:
    """The changed rows of the groups ``record_chunks`` names (bytes of
    GROUP_RECORDs, in file order, such as ``walk.group_record_chunks``
    yields) in the open binlog ``b``, as record batches. ``tables``: only
    these "db.tbl"; ``lo``/``hi``: only groups stamped in [lo, hi].
    ``compiled``: True the compiled decoder (ImportError without it), False
    the definition alone, None the compiled where it is built and
    ``USE_COMPILED``. ``stats``
    (a dict) gets "groups" (decoded), "declined" (by the compiled decoder)
    and "rows". A ``GtidxError`` reading a group ends the batches: the rows
    before it are yielded first."""
    if compiled and _rows is None:
        raise ImportError("gtidx._rows is not built")
    use_c = _rows is not None and (USE_COMPILED if compiled is None else compiled)
    name = os.path.basename(b.path)
    wanted = frozenset(tables) if tables is not None else None
    lo = _NO_LO if lo is None else max(lo, _NO_LO)
    hi = _NO_HI if hi is None else min(hi, _NO_HI)
    builder = _decoder(b, wanted, name) if use_c else PyBuilder(name)
    finish = (lambda: batch_from(builder.finish())) if use_c else builder.finish
    rows = 0
    try:
        for batch in _decode(b, record_chunks, builder, finish, use_c, wanted, lo, hi, max_rows, max_bytes):
            rows += batch.num_rows
            yield batch
    finally:
        if stats is not None:
            stats["groups"] = stats.get("groups", 0) + builder.groups
            stats["declined"] = stats.get("declined", 0) + builder.declined
            stats["rows"] = stats.get("rows", 0) + rows


def _decode(b, record_chunks, builder, finish, use_c, wanted, lo, hi, max_rows, max_bytes):
    unpack = GROUP_RECORD.unpack_from
    try:
        for chunk in record_chunks:
            n = len(chunk) // _REC
            ends = record_ends(chunk)
            i = 0
            while i < n:
                if not use_c:
                    rec = unpack(chunk, i * _REC)
                    i += 1
                    if lo <= rec[3] <= hi:
                        yield from _fallback(builder, finish, b, rec, wanted, max_rows, max_bytes)
                        builder.groups += 1
                        b.release(rec[0], rec[1])
                    continue
                # a stretch of groups whose bytes are read at once; a group
                # longer than SPAN alone, by the definition (cut between rows)
                first, end = unpack(chunk, i * _REC)[:2]
                if end - first > SPAN:
                    yield from _fallback(builder, finish, b, unpack(chunk, i * _REC), wanted, max_rows, max_bytes)
                    b.release(first, end)
                    i += 1
                    continue
                stop = bisect.bisect_right(ends, first + SPAN, i)
                last_end = ends[stop - 1]
                b.fill(first, last_end)
                while i < stop:
                    i, status = builder.decode(b.mapping, chunk, i, stop, lo, hi, max_rows, max_bytes)
                    if status == 2:         # declined: the definition decodes it
                        yield from _fallback(builder, finish, b, unpack(chunk, i * _REC), wanted, max_rows,
                                             max_bytes)
                        i += 1
                    elif status == 1:
                        yield finish()
                b.release(first, last_end)
        if builder.rows:
            yield finish()
    except GtidxError:
        if builder.rows:            # the rows before the error, then the error
            yield finish()
        raise


def source_batches(source, b, spans, *, split: tuple[int, int] | None = None, compiled: bool | None = None,
                   stats: dict | None = None, max_rows: int = MAX_ROWS, max_bytes: int = MAX_BYTES
                   ) -> Iterator[pa.RecordBatch]:
    """The rows ``source`` (a ``changes.ChangeSource``: its filters) wants
    of the open binlog ``b``, as record batches: the located groups
    ``spans`` (``ChangeSource.plan``'s), or every group, or (``split``) the
    groups that start in [lo, hi) (lo a group's start: a partition of a big
    binlog). ``ChangeSource.rows``, in Arrow: a source whose groups are
    not GROUP_RECORD runs (``records`` False: MySQL's) has its rows built
    by ``PyBuilder`` (``rows_batches``)."""
    if not source.records:
        if _rows is not None and (USE_COMPILED if compiled is None else compiled):
            return named_batches(source, b, source.runs(b, spans, split), stats=stats, max_rows=max_rows,
                                 max_bytes=max_bytes)
        if compiled:
            raise ImportError("gtidx._rows is not built")
        return rows_batches(source.rows(b, spans, split), os.path.basename(b.path), stats=stats,
                            max_rows=max_rows, max_bytes=max_bytes)
    f = source.filters
    lo, hi = f.bounds()
    chunks = _located(source, b, spans) if spans is not None else _split(b, split) if split else \
        group_record_chunks(b)
    if any(op == "in" for op, _ in f.times):
        chunks = _time_kept(chunks, f.time_ok)
    return batches(b, chunks, tables=f.tables, lo=None if lo == -math.inf else int(lo),
                   hi=None if hi == math.inf else int(hi), compiled=compiled, stats=stats, max_rows=max_rows,
                   max_bytes=max_bytes)


def rows_batches(rows, name: str, *, stats: dict | None = None, max_rows: int = MAX_ROWS,
                 max_bytes: int = MAX_BYTES) -> Iterator[pa.RecordBatch]:
    """``ChangedRow``s (of the binlog ``name``, in order) as record batches
    of at most ``max_rows`` rows or about ``max_bytes`` bytes of values; a
    ``GtidxError`` ends them, after a batch of the rows before it. ``stats``
    gets "rows" (and "groups", "declined": none here)."""
    builder, text, count = PyBuilder(name), show.text_image, 0
    try:
        for r in rows:
            builder.add_row(r.gtid, r.offset, r.timestamp, r.table, r.op, text(r.before), text(r.after),
                            r.changed, r.unknown)
            if builder.rows >= max_rows or builder.nbytes >= max_bytes:
                count += builder.rows
                yield builder.finish()
        if builder.rows:
            count += builder.rows
            yield builder.finish()
    except GtidxError:
        if builder.rows:
            count += builder.rows
            yield builder.finish()
        raise
    finally:
        if stats is not None:
            stats["rows"] = stats.get("rows", 0) + count


def named_batches(source, b, groups, *, stats: dict | None = None, max_rows: int = MAX_ROWS,
                  max_bytes: int = MAX_BYTES) -> Iterator[pa.RecordBatch]:
    """The rows of ``groups`` ((group, gtid text asked for or None), in file
    order, each with ``start``, ``end``, ``timestamp``: the MySQL
    transactions ``source.groups`` keeps; or a run the compiled walk made,
    ``(GROUP_RECORDs, gtid texts)``: ``source.runs``) of the open binlog ``b``, as
    record batches, decoded by the compiled decoder told each one's gtid
    text (``source.gtid_text``: None, anonymous, declined), a stretch of
    about ``SPAN`` bytes at a time; what it declines, and a transaction
    longer than ``SPAN``, by the source's definition (``source.decode``:
    ``show_mysql.decode_transaction``); a compressed transaction, declined
    in the file, is handed over once more as its inner events
    (``source.unpacked``). The same rows, order and errors as
    ``rows_batches(source.rows(...))``; ``stats`` as ``batches``' ("groups":
    decoded by the compiled decoder; "declined": handed back, a compressed
    transaction decoded from its inner events too)."""
    wanted = frozenset(source.filters.tables) if source.filters.tables is not None else None
    name = os.path.basename(b.path)
    builder = _decoder(b, wanted, name, "mysql")
    finish = (lambda: batch_from(builder.finish()))
    rows = 0
    try:
        for batch in _named(source, b, groups, builder, finish, wanted, max_rows, max_bytes):
            rows += batch.num_rows
            yield batch
    finally:
        if stats is not None:
            stats["groups"] = stats.get("groups", 0) + builder.groups
            stats["declined"] = stats.get("declined", 0) + builder.declined
            stats["rows"] = stats.get("rows", 0) + rows


def _named(source, b, groups, builder, finish, wanted, max_rows, max_bytes):
    pack, text = GROUP_RECORD.pack, show.text_image
    # the time conditions' bounds: the decoder passes over the records of a run outside them (the
    # groups handed one by one are the source's, already kept; "in" sets: no runs, see ``source.runs``)
    lo, hi = source.filters.bounds()
    lo = _NO_LO if lo == -math.inf else max(int(lo), _NO_LO)
    hi = _NO_HI if hi == math.inf else min(int(hi), _NO_HI)

    def definition(g, gtid):
        into, done = builder, finish
        if gtid is None:        # anonymous: a null gtid, which the compiled batch cannot hold
            if builder.rows:
                yield finish()
            into = PyBuilder(os.path.basename(b.path))
            done = into.finish
        for r in source.decode(b, g, wanted):
            into.add_row(gtid, g.start, g.timestamp, r.table, r.op, text(r.before), text(r.after), r.changed,
                         r.unknown)
            if into.rows >= max_rows or into.nbytes >= max_bytes:
                yield done()
        if into is not builder and into.rows:
            yield done()
    def inner(plain, g, gtid):
        """The compiled decoder on a compressed transaction's inner events
        (``plain``, framed as the file's): did it decode them?"""
        record = pack(0, len(plain), g.start, g.timestamp, 0, 0, 0)
        while True:
            status = builder.decode(plain, record, 0, 1, _NO_LO, _NO_HI, max_rows, max_bytes, [gtid])[1]
            if status != 1:
                return status == 0
            yield finish()
    def decoded(chunk, gtids, group_at):
        """The run of GROUP_RECORDs ``chunk`` (gtid texts ``gtids``; ``group_at(i)``:
        the i-th as a group, for what the decoder declines) decoded."""
        first, last_end = record_starts(chunk)[0], record_ends(chunk)[-1]
        b.fill(first, last_end)
        i, n = 0, len(gtids)
        while i < n:
            i, status = builder.decode(b.mapping, chunk, i, n, lo, hi, max_rows, max_bytes, gtids)
            if status == 2:         # declined: its inner events (compressed), else the definition
                g = group_at(i)
                plain = source.unpacked(b, g) if gtids[i] is not None else None
                if plain is None or not (yield from inner(plain, g, gtids[i])):
                    yield from definition(g, gtids[i])
                i += 1
            elif status == 1:
                yield finish()
        b.release(first, last_end)

    def walked_at(chunk):
        return lambda i: next(b.transactions(record_starts(chunk)[i]))
    try:
        run, gtids, records = [], [], []
        walk = iter(groups)
        pending = next(walk, None)
        while pending is not None:
            if type(pending[0]) is bytes:               # a run the compiled walk made: (records, gtid texts)
                yield from decoded(pending[0], pending[1], walked_at(pending[0]))
                pending = next(walk, None)
                continue
            g, asked = pending
            if g.end - g.start > SPAN:                  # alone, by the definition
                yield from definition(g, asked or source.gtid_text(g))
                b.release(g.start, g.end)
                pending = next(walk, None)
                continue
            run.clear(), gtids.clear(), records.clear()
            while pending is not None and type(pending[0]) is not bytes:
                g, asked = pending
                if g.end - g.start > SPAN or (run and g.end - run[0].start > SPAN):
                    break
                run.append(g)
                gtids.append(asked or source.gtid_text(g))
                records.append(pack(g.start, g.end, g.start, g.timestamp, 0, 0, 0))   # seq: the offset column
                pending = next(walk, None)
            yield from decoded(b"".join(records), list(gtids), run.__getitem__)
        if builder.rows:
            yield finish()
    except GtidxError:
        if builder.rows:            # the rows before the error, then the error
            yield finish()
        raise


def _located(source, b, spans) -> Iterator[bytes]:
    pack = GROUP_RECORD.pack
    yield b"".join(pack(start, end, seq, ts, server, domain, flags2)
                   for (ts, server, seq, domain, flags2), _, start, end in source.walked(b, spans))


def _split(b, split: tuple[int, int]) -> Iterator[bytes]:
    lo, hi = split
    walk = group_record_chunks(b, lo)
    try:
        for chunk in walk:
            starts = record_starts(chunk)
            k = bisect.bisect_left(starts, hi)
            if k:
                yield chunk[:k * _REC]
            if k < len(starts):
                return
    finally:
        walk.close()


def _time_kept(chunks, ok) -> Iterator[bytes]:
    for chunk in chunks:
        yield b"".join(chunk[i:i + _REC] for i in range(0, len(chunk), _REC)
                       if ok(GROUP_RECORD.unpack_from(chunk, i)[3]))


def binlog_table(path, *, tables=None, compiled: bool | None = None, stats: dict | None = None) -> pa.Table:
    """Every changed row of the binlog ``path`` (``batches`` over all its groups)."""
    from .binlog.mariadb import Binlog
    with Binlog(path) as b:
        return pa.Table.from_batches(list(batches(b, group_record_chunks(b), tables=tables, compiled=compiled,
                                                  stats=stats)), schema=ARROW_SCHEMA)


__all__ = ["ARROW_SCHEMA", "MAX_ROWS", "MAX_BYTES", "PyBuilder", "batches", "source_batches", "rows_batches",
           "named_batches",
           "binlog_table",
           "batch_from"]
