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
  opened (``BinlogSeries.older``, as ``at_time`` skips files), nor, on
  MySQL binlogs, one whose entry says all are newer (``newer``: its first
  timestamp less the largest step back bounds them). GTID timestamps can
  step back within a binlog, so no other file is skipped by time: a file's
  first group alone does not bound the others;
* GTIDs: each is located as ``gtidx seek`` locates it
  (``BinlogSeries.locate_many``: the planner on the files' start states and
  the catalog, the index to the record before the group); only the files
  holding them are read, and there only those groups are decoded. Every
  occurrence of a GTID logged more than once (gtid_strict_mode=OFF);
* file names: the other binlogs are not read.

A big binlog can be read in pieces (``ChangeSource.splits``: Spark's
partitions), each the groups that start in [lo, hi), lo a group's start:
groups carry their own TABLE_MAPs, so a piece decodes alone, and the pieces
in order give the file's rows in order.

MySQL binlogs: ``ChangeSource.source`` (what ``changes`` and the Spark
source make) gives a ``MysqlChangeSource`` for them (the façade reads the
flavor where it lists the files: ``api.flavor_pick``); its files are
opened, walked, cut and decoded as ``mysqlchanges.MysqlReading`` says,
which also says what the columns hold there. The filters and the planning
are this class's, the same for both.
"""
from __future__ import annotations

import bisect
import math
import os
from typing import Iterator, NamedTuple

from . import api, show, storage
from .binlog.events import BOUNDARY_TYPES, GTID, record_starts
from .binlog.mariadb import Binlog
from .binlog.records import Group
from .binlog.walk import group_record_chunks
from .errors import BadInputError, CorruptBinlogError, GtidxError, NotFoundError
from .gtid import Gtid
from .index.files import IndexRoot, open_index
from .inputs import as_gtid, as_path, parse_time
from .mysqlchanges import MysqlReading
from .mysqlgtid import MysqlGtid

# The columns of a row and their types, as Spark names them (the Spark source's
# schema; ``gtidx changes --parquet`` writes the same as Arrow types).
SCHEMA = (("gtid", "string"), ("file", "string"), ("offset", "long"), ("timestamp", "long"),
          ("table", "string"), ("op", "string"), ("before", "map<string,string>"),
          ("after", "map<string,string>"), ("changed", "array<string>"), ("unknown", "array<string>"))

# The comparisons a time condition may make: (op, value), op one of these.
TIME_OPS = ("=", "<", "<=", ">", ">=", "in")

# A binlog bigger than this is read in pieces of about this many bytes (``ChangeSource.splits``).
SPLIT_BYTES = 64 << 20
# The ``hi`` of a binlog's last piece: up to its end, as the file is when the piece is read.
SPLIT_END = (1 << 63) - 1


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
                 index_root: str | None = None, history: int | None = None, listing=None):
        self.path = path
        self.filters = filters if filters is not None else Filters()
        self.storage_options = storage_options
        self.index_root = index_root
        self.history = history
        # listed once (the GTID and time filters open it), its flavor read there
        if listing is None:
            listing = api.list_series(path, storage_options, index_root=index_root, catalog=False)
        self.listing = listing.checked()
        self.files = self.listing.files

    @staticmethod
    def source(path: str, filters: Filters | None = None, **kw) -> "ChangeSource":
        """The change source of the binlogs at ``path`` (``ChangeSource``'s
        arguments): ``MysqlChangeSource`` for MySQL binlogs, else this class;
        the façade decides from the listing (``api.flavor_pick``)."""
        listing = api.list_series(path, kw.get("storage_options"), index_root=kw.get("index_root"), catalog=False)
        return api.flavor_pick(listing.flavor, ChangeSource, MysqlChangeSource)(path, filters, listing=listing, **kw)

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
        if (lo > -math.inf or hi < math.inf) and len(files) > 1:
            files = self._in_time(files, lo, hi)
        return [(p, None) for p in files]

    def _series(self):
        return api.series_class(self.listing.flavor).from_listing(
            self.listing, storage_options=self.storage_options, index_root=self.index_root, history=self.history)

    def _in_time(self, files: list[str], lo, hi) -> list[str]:
        """``files`` without the closed binlogs whose trusted catalog entry
        says every group is older than ``lo`` (``older``, as ``at_time``
        skips files) or stamped after ``hi`` (``newer``: where the flavor's
        catalog bounds a file's lowest timestamp, MySQL's); the series decides."""
        try:
            series = self._series()
        except GtidxError:       # no usable catalog (several histories...): every file is read
            return files
        with series:
            newest = series.files[-1]
            return [p for p in files if p == newest or not (
                (lo > -math.inf and series.older(p, lo)) or (hi < math.inf and series.newer(p, hi)))]

    def _located(self, files: set, lo, hi) -> list[tuple[str, list]]:
        """The groups of the GTIDs asked for, per file in binlog order: [(file,
        [(start, end, gtid text)])], from ``locate_many``."""
        wanted = {}
        for text in self.filters.gtids:
            try:
                g = self.parse_gtid(text)
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

    # -- pieces of a big binlog ---------------------------------------------------------
    def size(self, path: str) -> int:
        """The size of binlog ``path`` (one of ``files``): as the listing's
        LIST saw it (objects), else its store's (a stat; a HEAD)."""
        store, where = storage.resolve(path, self.storage_options)
        directory, name = store.split(where)
        listed = self.listing.listings.get(directory, {}).get(name)
        return listed[0] if listed is not None else store.size(where)

    def splits(self, path: str, split_bytes: int = SPLIT_BYTES) -> list[tuple[int, int] | None]:
        """The pieces binlog ``path`` (one of ``files``) is read in, in file
        order: each the ``split`` of ``rowbatch.source_batches``, (lo, hi):
        the groups that start in [lo, hi), lo a group's start, the last hi
        ``SPLIT_END``; [None]: the whole file in one piece (a file of at most
        ``split_bytes``: not opened).

        A piece starts at the first group start at or after each multiple of
        ``split_bytes`` (so pieces are about ``split_bytes``, a group never
        cut). The group starts come from the binlog's index where it has a
        usable one (``open_index``, beside the binlog or under
        ``index_root``: its records' offsets are group boundaries), each
        offset taken checked first (``group_start_at``: a whole GTID event
        there, or after the events that stand between groups: an index is
        metadata, and a record that points inside a group would cut it); one
        that fails, and the whole file's split points come from the header
        walk instead. Past the index's last record (it stops at 4 GiB; a
        growing file's lags), and without an index, from one walk of the
        group headers (``walked_points``). A walk that meets damage keeps
        the points before it: the piece holding the damage ends with the
        error."""
        if self.size(path) <= split_bytes:
            return [None]
        with self.open(path) as b:
            points = self.split_points(b, split_bytes)
            start = b.body_start
        bounds = [start] + points + [SPLIT_END]
        return [(lo, hi) for lo, hi in zip(bounds, bounds[1:])] if points else [None]

    def split_points(self, b: Binlog, split_bytes: int) -> list[int]:
        """The starts of ``b``'s pieces after its first (``splits`` says
        where they come from)."""
        points = self._indexed_points(b, split_bytes)
        if points is None:
            points = []
        start = points[-1] if points else b.body_start
        if b.size - start > split_bytes:
            points += walked_points(b, split_bytes, start)
        return points

    def _indexed_points(self, b: Binlog, split_bytes: int) -> list[int] | None:
        """The split points of ``b`` from its index, each checked; None: no
        usable index, or a point that fails its check."""
        root = None if self.index_root is None else IndexRoot(as_path(self.index_root, "index_root"),
                                                              self.storage_options)
        status = open_index(b, index_root=root)
        try:
            if not status.usable:
                return None
            offsets = [r.offset for r in status.reader.records()]
        except GtidxError:
            return None
        finally:
            status.close()
        points, beyond = [], split_bytes
        for off in offsets:
            if off >= beyond and b.body_start < off < b.size:
                start = group_start_at(b, off)
                if start is False:
                    return None
                if start is not None and (not points or start > points[-1]):
                    points.append(start)
                beyond = (off // split_bytes + 1) * split_bytes
        return points

    # -- reading ------------------------------------------------------------------------
    # What a flavor's source says of its files (MySQL's: ``mysqlchanges.MysqlReading``).
    records = True            # groups as GROUP_RECORD runs (``rowbatch``: the compiled decoder reads those)
    never_null = ("gtid", "file", "offset", "timestamp", "table", "op")     # the columns no row has null

    def resolved_store(self, path: str):
        """The store binlog ``path`` (one of ``files``) is read through."""
        return storage.resolve(path, self.storage_options)[0]

    def open(self, path: str) -> Binlog:
        """The binlog ``path`` (one of ``files``), open, through its store."""
        return Binlog(path, self.resolved_store(path))

    @staticmethod
    def parse_gtid(text):
        """A GTID of these binlogs, from its text (a BadInputError if it is none: MySQL's text refused)."""
        return as_gtid(text)

    @staticmethod
    def gtid_text(group) -> str | None:
        """A group's ``gtid`` column: its GTID's text."""
        return str(group.gtid)

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

    def groups(self, b: Binlog, spans: list | None, split: tuple[int, int] | None = None
               ) -> Iterator[tuple[Group, str | None]]:
        """The groups of ``b`` the filters keep, with the gtid text asked for
        (None: the group's own): those located (``spans``), else every group
        (or those that start in ``split`` [lo, hi), lo a group's start) whose
        timestamp passes (headers only)."""
        ok = self.filters.time_ok if self.filters.times else None
        if spans is not None:
            for (ts, server, seq, domain, flags2), text, start, end in self.walked(b, spans):
                if ok is None or ok(ts):
                    yield Group(Gtid(domain, server, seq), start, end, ts, flags2), text
            return
        lo, hi = split if split is not None else (None, SPLIT_END)
        for start, end, (ts, server, seq, domain, flags2) in b.group_spans(lo):
            if start >= hi:
                return
            if ok is None or ok(ts):
                yield Group(Gtid(domain, server, seq), start, end, ts, flags2), None

    @staticmethod
    def decode(b: Binlog, group: Group, tables) -> list:
        """The rows of one group (``show.decode_group``'s)."""
        return show.decode_group(b, group, tables).rows

    def rows(self, b: Binlog, spans: list | None, split: tuple[int, int] | None = None) -> Iterator[ChangedRow]:
        """The rows of ``b`` (open) the filters keep, in binlog order
        (``split``: of the groups that start in [lo, hi))."""
        name = os.path.basename(b.path)
        tables = frozenset(self.filters.tables) if self.filters.tables is not None else None
        for g, text in self.groups(b, spans, split):
            rows = self.decode(b, g, tables)
            if not rows:
                continue
            gtid = text or self.gtid_text(g)
            for r in rows:
                yield ChangedRow(gtid, name, g.start, g.timestamp, r.table, r.op, r.before, r.after,
                                 r.changed, r.unknown)


class MysqlChangeSource(MysqlReading, ChangeSource):
    """``ChangeSource`` on MySQL binlogs: its files opened, walked, cut and
    decoded as ``mysqlchanges.MysqlReading`` says (the columns' meaning for
    MySQL is said there); the filters and the planning are ``ChangeSource``'s."""


def group_start_at(b: Binlog, offset: int) -> int | bool | None:
    """The group start at ``offset``, a group boundary an index record
    names, checked: the GTID event there, or past the events that stand
    between groups there (``BOUNDARY_TYPES``: a BINLOG_CHECKPOINT, the
    ROTATE after the last group); None: the file ends first; False: no
    whole event where one must be (``Binlog.event_ok``: its CRC32 too,
    where the binlog has them), or an event that lies inside a group (the
    record points inside one)."""
    while offset < b.size:
        head = b.event_header(offset) if b.event_ok(offset) else None
        if head is None:
            return False
        if head[1] == GTID:
            return offset
        if head[1] not in BOUNDARY_TYPES:
            return False
        offset += head[3]
    return None if offset == b.size else False


def walked_points(b: Binlog, split_bytes: int, start: int) -> list[int]:
    """The first group start at or after each multiple of ``split_bytes``
    past ``start`` (a group start) in ``b``, from one walk of its group
    headers from ``start``; a walk that meets damage: the points before it."""
    points, beyond = [], (start // split_bytes + 1) * split_bytes
    walk = group_record_chunks(b, start)
    try:
        for chunk in walk:
            starts = record_starts(chunk)
            k = bisect.bisect_left(starts, beyond)
            while k < len(starts):
                points.append(starts[k])
                beyond = (starts[k] // split_bytes + 1) * split_bytes
                k = bisect.bisect_left(starts, beyond, k)
    except GtidxError:
        pass                    # the piece that reaches the damage reads it, and ends with its error
    finally:
        walk.close()
    return points


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
                      gtids=None if gtids is None else [_gtid_text(g) for g in _many(gtids)])
    if since is not None:
        filters.times.append((">=", parse_time(since)))
    if until is not None:
        filters.times.append(("<", parse_time(until)))
    return _binlogs(path, filters, dict(storage_options=storage_options, index_root=index_root, history=history),
                    reader or ChangeSource.rows)


def _gtid_text(value) -> str:
    """A GTID filter's canonical text: MariaDB's (``as_gtid``) or MySQL's
    (``uuid:n``, ``uuid:tag:n``); the binlogs read say which can match."""
    if isinstance(value, MysqlGtid) or (isinstance(value, str) and value.count(":") in (1, 2)):
        return str(value if isinstance(value, MysqlGtid) else MysqlGtid.parse(value))
    return str(as_gtid(value))


def _many(values) -> list:
    return [values] if isinstance(values, (str, Gtid, MysqlGtid)) else list(values)


def _table(name) -> str:
    if not isinstance(name, str) or not name.partition(".")[1] or name.startswith(".") or name.endswith("."):
        raise BadInputError(f"table {name!r} is not a db.tbl name")
    return name


def _binlogs(path: str, filters: Filters, kw: dict, reader) -> Iterator[BinlogChanges]:
    source = ChangeSource.source(path, filters, **kw)
    for text in filters.gtids or ():
        source.parse_gtid(text)         # a GTID of the other flavor's syntax: bad input
    planned = source.plan()
    for n, (binlog, spans) in enumerate(planned, 1):
        yield BinlogChanges(binlog, n, len(planned), _read(source, binlog, spans, reader))


def _read(source: ChangeSource, binlog: str, spans, reader) -> Iterator:
    try:
        with source.open(binlog) as b:
            yield from reader(source, b, spans)
    except GtidxError as e:
        yield e


__all__ = ["SCHEMA", "SPLIT_BYTES", "SPLIT_END", "ChangedRow", "Filters", "ChangeSource", "MysqlChangeSource",
           "BinlogChanges",
           "changes", "group_start_at", "walked_points"]
