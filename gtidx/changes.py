"""Row changes: one record per changed row of the event groups of a series of
binlogs, in binlog order (``gtidx changes``, and the Spark source
``format("gtidx.changes")``, which plans and reads through this module).

A row is ``ChangedRow``: ``gtid``, ``file`` (the binlog's name), ``offset``
and ``timestamp`` (its group's: the GTID event's offset, as ``gtidx show
FILE OFFSET`` takes it, and its unix seconds), ``table`` ("db.tbl"), ``op``
(insert, update, delete), ``before``/``after`` (the row images, None where
the op has none), ``changed`` and ``unknown``: what ``show.decode_group``
says of the row, here as there (``gtidx show --json`` prints the same).

``Filters`` says which rows are asked for, and the reading does no more
than they need (``ChangeSource``):

* tables: rows events of other tables are not decoded (their TABLE_MAP
  names are read, nothing more);
* times (comparisons of a group's timestamp): groups outside the range are
  not decoded (their GTID event headers are read); with a catalog, a closed
  binlog whose entry says all its groups are older than the range is not
  opened (``BinlogSeries.older``, as ``at_time`` skips files). GTID
  timestamps can step back within a binlog, so no other file is skipped by
  time: a file's first group does not bound the others;
* GTIDs: each is located as ``gtidx seek`` locates it
  (``BinlogSeries.locate_many``: the planner on the files' start states and
  the catalog, the index to the record before the group); only the files
  holding them are read, and there only those groups are decoded. Every
  occurrence of a GTID logged more than once (gtid_strict_mode=OFF);
* file names: the other binlogs are not read.
"""
from __future__ import annotations

import math
import os
from typing import Iterator, NamedTuple

from . import api, show, storage
from .binlog.mariadb import Binlog, Group
from .errors import BadInputError, CorruptBinlogError, GtidxError, NotFoundError
from .gtid import Gtid
from .inputs import as_gtid, parse_time

# The columns of a row and their types, as Spark names them (the Spark source's
# schema; ``gtidx changes --parquet`` writes the same as Arrow types).
SCHEMA = (("gtid", "string"), ("file", "string"), ("offset", "long"), ("timestamp", "long"),
          ("table", "string"), ("op", "string"), ("before", "map<string,string>"),
          ("after", "map<string,string>"), ("changed", "array<string>"), ("unknown", "array<string>"))

# The comparisons a time condition may make: (op, value), op one of these.
TIME_OPS = ("=", "<", "<=", ">", ">=", "in")


class ChangedRow(NamedTuple):
    """One changed row (the module says what each field is). ``before`` and
    ``after`` hold the values ``show.decode_group`` gives (``show.json_image``:
    as ``--json`` writes them; ``show.text_image``: as text)."""
    gtid: str
    file: str
    offset: int
    timestamp: int
    table: str
    op: str
    before: dict | None
    after: dict | None
    changed: list | None
    unknown: list


class Filters:
    """Which rows are asked for; None (or no time condition): any.

    ``tables``: "db.tbl" names; ``gtids``: GTID texts (a row's gtid, in its
    canonical text, must be one of them: other texts match no row);
    ``files``: binlog names; ``times``: (op, value) conditions on a group's
    timestamp (``TIME_OPS``; "in": a set of values), every one must hold."""

    def __init__(self, tables=None, gtids=None, files=None, times=()):
        self.tables = None if tables is None else set(tables)
        self.gtids = None if gtids is None else set(gtids)
        self.files = None if files is None else set(files)
        self.times = list(times)

    def narrow(self, name: str, values) -> None:
        """Keep only ``values`` of ``tables``, ``gtids`` or ``files`` (``name``)."""
        have = getattr(self, name)
        setattr(self, name, set(values) if have is None else have & set(values))

    def bounds(self) -> tuple[float, float]:
        """The timestamps the time conditions allow: [lo, hi] (integers, or infinite)."""
        lo, hi = -math.inf, math.inf

        def up(v):                # the least integer >= v
            return math.ceil(v) if math.isfinite(v) else v

        def down(v):              # the greatest integer <= v
            return math.floor(v) if math.isfinite(v) else v
        for op, v in self.times:
            if op == "in":
                lo, hi = max(lo, up(min(v, default=math.inf))), min(hi, down(max(v, default=-math.inf)))
            if op in ("=", ">="):
                lo = max(lo, up(v))
            if op == ">":
                lo = max(lo, down(v) + 1)
            if op in ("=", "<="):
                hi = min(hi, down(v))
            if op == "<":
                hi = min(hi, up(v) - 1)
        return lo, hi

    def none_match(self) -> bool:
        """Can no row pass (an empty time range, no table or GTID left)?"""
        lo, hi = self.bounds()
        return lo > hi or self.gtids == set() or self.tables == set()

    def time_ok(self, ts: int) -> bool:
        """Does a group stamped ``ts`` pass every time condition?"""
        for op, v in self.times:
            if not (ts in v if op == "in" else ts == v if op == "=" else ts > v if op == ">" else
                    ts >= v if op == ">=" else ts < v if op == "<" else ts <= v):
                return False
        return True


class ChangeSource:
    """The binlogs at ``path`` (a file, directory, ``master-bin.index`` or
    URL) and the rows ``filters`` ask of them: ``plan`` says which binlogs to
    read and, for GTIDs, which groups (on one machine: Spark's driver);
    ``rows`` reads one (anywhere: Spark's executors; the object is pickled)."""

    def __init__(self, path: str, filters: Filters | None = None, *, storage_options: dict | None = None,
                 index_root: str | None = None, history: int | None = None):
        self.path = path
        self.filters = filters if filters is not None else Filters()
        self.storage_options = storage_options
        self.index_root = index_root
        self.history = history
        self.listing = api.list_path(path, storage_options)      # once: the GTID and time filters open it
        self.files = self.listing.files

    # -- planning -----------------------------------------------------------------------
    def plan(self) -> list[tuple[str, list | None]]:
        """The binlogs to read, in binlog order: (path, spans), spans None
        (every group the time conditions keep) or the located groups
        [(start, end, gtid text)]."""
        f = self.filters
        if f.none_match():
            return []
        lo, hi = f.bounds()
        files = [p for p in self.files if f.files is None or os.path.basename(p) in f.files]
        if f.gtids is not None:
            return self._located(set(files), lo, hi)
        if lo > -math.inf and len(files) > 1:
            files = self._not_older(files, lo)
        return [(p, None) for p in files]

    def _series(self) -> api.BinlogSeries:
        return api.BinlogSeries.from_listing(self.listing, storage_options=self.storage_options,
                                             index_root=self.index_root, history=self.history)

    def _not_older(self, files: list[str], lo) -> list[str]:
        """``files`` without the closed binlogs whose catalog entry says every
        group is older than ``lo`` (``BinlogSeries`` decides, as ``at_time``)."""
        try:
            series = self._series()
        except GtidxError:       # no usable catalog (several histories...): every file is read
            return files
        with series:
            newest = series.files[-1]
            return [p for p in files if p == newest or not series.older(p, lo)]

    def _located(self, files: set, lo, hi) -> list[tuple[str, list]]:
        """The groups of the GTIDs asked for, per file in binlog order: [(file,
        [(start, end, gtid text)])], from ``locate_many``."""
        wanted = {}
        for text in self.filters.gtids:
            try:
                g = Gtid.parse(text)
            except GtidxError:
                continue                # not a GTID: no row's gtid is this text
            if str(g) == text:          # a row's gtid text is canonical
                wanted[g] = text
        if not wanted:
            return []
        per_file: dict = {}
        with self._series() as series:
            for g, loc in series.locate_many(list(wanted)).items():
                if isinstance(loc, NotFoundError):
                    continue
                if isinstance(loc, GtidxError):
                    raise loc
                if not loc.occurrences and not lo <= loc.timestamp <= hi:
                    continue
                for occ in loc.occurrences or (loc,):      # each read for its timestamp by its reader
                    if occ.file in files:
                        per_file.setdefault(occ.file, set()).add((occ.start, occ.end, wanted[g]))
            order = {p: i for i, p in enumerate(series.files)}
        return [(p, sorted(per_file[p])) for p in sorted(per_file, key=order.get)]

    # -- reading ------------------------------------------------------------------------
    def open(self, path: str) -> Binlog:
        """The binlog ``path`` (one of ``files``), open, through its store."""
        return Binlog(path, storage.resolve(path, self.storage_options)[0])

    @staticmethod
    def walked(b: Binlog, spans: list) -> Iterator[tuple[tuple, str, int, int]]:
        """The located groups ``spans`` of ``b`` as their walk reads them:
        (the GTID event's (timestamp, server_id, seq, domain, flags2), the
        gtid text asked for, start, end); a span that does not walk as
        located is a CorruptBinlogError."""
        for start, end, text in spans:
            begin, stop, head = next(b.group_spans(start))
            if (begin, stop) != (start, end):
                raise CorruptBinlogError(f"the group of {text} located at {start}-{end} walks as "
                                         f"{begin}-{stop}", path=b.path, offset=start)
            yield head, text, start, end

    def groups(self, b: Binlog, spans: list | None) -> Iterator[tuple[Group, str | None]]:
        """The groups of ``b`` the filters keep, with the gtid text asked for
        (None: the group's own): those located (``spans``), else every group
        whose timestamp passes (headers only)."""
        ok = self.filters.time_ok if self.filters.times else None
        if spans is not None:
            for (ts, server, seq, domain, flags2), text, start, end in self.walked(b, spans):
                if ok is None or ok(ts):
                    yield Group(Gtid(domain, server, seq), start, end, ts, flags2), text
            return
        for start, end, (ts, server, seq, domain, flags2) in b.group_spans():
            if ok is None or ok(ts):
                yield Group(Gtid(domain, server, seq), start, end, ts, flags2), None

    def rows(self, b: Binlog, spans: list | None) -> Iterator[ChangedRow]:
        """The rows of ``b`` (open) the filters keep, in binlog order."""
        name = os.path.basename(b.path)
        tables = frozenset(self.filters.tables) if self.filters.tables is not None else None
        for g, text in self.groups(b, spans):
            changes = show.decode_group(b, g, tables)
            if not changes.rows:
                continue
            gtid = text or str(g.gtid)
            for r in changes.rows:
                yield ChangedRow(gtid, name, g.start, g.timestamp, r.table, r.op, r.before, r.after,
                                 r.changed, r.unknown)


class BinlogChanges(NamedTuple):
    """The rows of one binlog, the ``number``-th of the ``count`` to read."""
    path: str           # the binlog (a path or URL)
    number: int         # 1 .. count
    count: int
    rows: Iterator      # ChangedRow (or what the reader makes), in binlog order; then the GtidxError
                        # that ended the reading, if one did


def changes(path: str | os.PathLike = ".", *, tables=None, since=None, until=None, gtids=None,
            storage_options: dict | None = None, index_root=None, history: int | None = None,
            reader=None) -> Iterator[BinlogChanges]:
    """The changed rows of the binlogs at ``path`` (a file, directory,
    ``master-bin.index`` or URL), per binlog in binlog order. ``tables``:
    "db.tbl" names; ``since``/``until``: the groups stamped at or after
    ``since`` and before ``until`` (``parse_time``'s forms: ``until`` is where
    a restore to that time stops, as ``at_time``); ``gtids``: the groups of
    these GTIDs (``as_gtid``), each located as ``seek`` does. The arguments
    are checked here (a ``BadInputError``); the binlogs are listed and the
    reading planned when the iteration starts. A binlog whose reading fails
    (a damaged rows event, a corrupt file) ends its rows with the
    ``GtidxError``, and the next binlogs are read. ``reader``: how a binlog is
    read, ``reader(source, b, spans)`` (default ``ChangeSource.rows``; Arrow
    record batches: ``rowbatch.source_batches``), its items the ``rows``."""
    path = os.fspath(path)
    filters = Filters(tables=None if tables is None else [_table(t) for t in _many(tables)],
                      gtids=None if gtids is None else [str(as_gtid(g)) for g in _many(gtids)])
    if since is not None:
        filters.times.append((">=", parse_time(since)))
    if until is not None:
        filters.times.append(("<", parse_time(until)))
    return _binlogs(path, filters, dict(storage_options=storage_options, index_root=index_root, history=history),
                    reader or ChangeSource.rows)


def _many(values) -> list:
    return [values] if isinstance(values, (str, Gtid)) else list(values)


def _table(name) -> str:
    if not isinstance(name, str) or not name.partition(".")[1] or name.startswith(".") or name.endswith("."):
        raise BadInputError(f"table {name!r} is not a db.tbl name")
    return name


def _binlogs(path: str, filters: Filters, kw: dict, reader) -> Iterator[BinlogChanges]:
    source = ChangeSource(path, filters, **kw)
    planned = source.plan()
    for n, (binlog, spans) in enumerate(planned, 1):
        yield BinlogChanges(binlog, n, len(planned), _read(source, binlog, spans, reader))


def _read(source: ChangeSource, binlog: str, spans, reader) -> Iterator:
    try:
        with source.open(binlog) as b:
            yield from reader(source, b, spans)
    except GtidxError as e:
        yield e


__all__ = ["SCHEMA", "ChangedRow", "Filters", "ChangeSource", "BinlogChanges", "changes"]
