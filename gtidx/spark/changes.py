"""Row changes on Spark: ``spark.read.format("gtidx.changes").load(PATH_OR_URL)``.

One row per changed row of every event group of the binlogs at PATH_OR_URL
(a directory, a ``master-bin.index``, one binlog, or a URL read by the
executors), in binlog order within each file, one partition per file read:

    gtid, file, offset, timestamp, table, op, before, after, changed, unknown

``offset`` and ``timestamp`` are the group's (its GTID event's offset, as
``gtidx show FILE OFFSET`` takes it, and its timestamp, unix seconds);
``file`` the binlog's name; ``table`` "db.tbl"; ``op`` insert, update or
delete; ``before``/``after`` map<string,string> (null where the op has no such
image), ``changed`` and ``unknown`` array<string>: what ``gtidx show --json``
gives for the row (``show.decode_group`` decodes it, here as there), with
each value ``show.as_text``: the JSON value's text (strings as they are,
numbers as JSON writes them, DECIMAL exact, binary data as hex digits, NULL
as null).

Filters the source applies itself (pushed down):

* ``table = ...`` / ``IN``: rows events of other tables are not decoded
  (their TABLE_MAP names are read, nothing more);
* ``timestamp`` comparisons (=, <, <=, >, >=, IN): groups outside the range
  are not decoded (their GTID event headers are read); with a catalog, a
  closed binlog whose entry says all its groups are older than the range is
  not opened (``BinlogSeries`` time rule, as ``at_time`` skips files). GTID
  timestamps can step back within a binlog, so no other file is skipped by
  time: a file's first group does not bound the others;
* ``gtid = ...`` / ``IN``: the driver locates each GTID as ``gtidx seek``
  does (``BinlogSeries.locate_many``: the planner on the files' start states
  and the catalog, the index to the record before the group); only the
  files holding them are read, and there only those groups are decoded.
  Every occurrence of a GTID logged more than once (gtid_strict_mode=OFF);
* ``file = ...`` / ``IN`` (binlog names): the other files are not read.

Options: ``storage_options`` (a JSON object, as for ``format("gtidx")``),
``index_root`` (where the indexes and catalog are, ``--index-dir``),
``history`` (which history of a catalog with several, for a GTID filter).
"""
from __future__ import annotations

import math
import os

from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, GreaterThan, GreaterThanOrEqual,
                                    In, InputPartition, IsNotNull, LessThan, LessThanOrEqual)

from .. import api, show, storage
from ..binlog.mariadb import Binlog, Group
from ..errors import BadInputError, CorruptBinlogError, GtidxError, NotFoundError
from ..gtid import Gtid
from .where import Where, parse_storage_options

CHANGES_SCHEMA = ("gtid string, file string, offset long, timestamp long, table string, op string, "
                  "before map<string,string>, after map<string,string>, changed array<string>, "
                  "unknown array<string>")

_NEVER_NULL = ("gtid", "file", "offset", "timestamp", "table", "op")
_COMPARE = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}


class ChangesDataSource(DataSource):
    """``spark.read.format("gtidx.changes").load(PATH_OR_URL)``: see the module."""

    @classmethod
    def name(cls) -> str:
        return "gtidx.changes"

    def schema(self) -> str:
        return CHANGES_SCHEMA

    def reader(self, schema) -> "ChangesReader":
        path = self.options.get("path")
        if not path:
            raise BadInputError("the gtidx.changes data source needs a path: "
                                "spark.read.format('gtidx.changes').load(DIR)")
        history = self.options.get("history")
        try:
            history = None if history in (None, "") else int(history)
        except ValueError:
            raise BadInputError(f"the gtidx.changes history option must be a number, not {history!r}") from None
        return ChangesReader(path, parse_storage_options(self.options.get("storage_options")),
                             self.options.get("index_root") or None, history)


def _number(v) -> float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class ChangesReader(DataSourceReader):
    """The planning (driver) and the reading (executors) of ``gtidx.changes``."""

    def __init__(self, path: str, storage_options: dict | None = None, index_root: str | None = None,
                 history: int | None = None):
        self.path = path
        self.where = Where(storage_options, index_root)
        self.history = history
        self.listing = api.list_path(path, storage_options)      # once: the GTID and time filters open it
        self.files = self.listing.files
        self.tables: set | None = None
        self.gtids: set | None = None          # the texts asked for (a row's gtid text must be one)
        self.file_names: set | None = None
        self.times: list = []                  # (op, value): every one must hold for a group's timestamp

    # -- driver ----------------------------------------------------------------------------
    def pushFilters(self, filters):
        for f in filters:
            attr = f.attribute[0] if len(f.attribute) == 1 else None
            values = {f.value} if isinstance(f, EqualTo) else set(f.value) if isinstance(f, In) else None
            if attr in ("table", "gtid", "file") and values is not None \
                    and all(isinstance(v, str) for v in values):
                name = {"table": "tables", "gtid": "gtids", "file": "file_names"}[attr]
                have = getattr(self, name)
                setattr(self, name, values if have is None else have & values)
            elif isinstance(f, IsNotNull) and attr in _NEVER_NULL:
                continue                        # every row has them (Spark adds these beside = and IN)
            elif attr == "timestamp" and isinstance(f, In) and all(_number(v) is not None for v in f.value):
                self.times.append(("in", frozenset(f.value)))
            elif attr == "timestamp" and type(f) in _COMPARE and _number(f.value) is not None:
                self.times.append((_COMPARE[type(f)], f.value))
            else:
                yield f

    def _bounds(self) -> tuple[float, float]:
        """The timestamps the filters allow: [lo, hi] (integers, or infinite)."""
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

    def partitions(self):
        lo, hi = self._bounds()
        if lo > hi or self.gtids == set() or self.tables == set():
            return []
        files = [f for f in self.files if self.file_names is None or os.path.basename(f) in self.file_names]
        if self.gtids is not None:
            return [InputPartition((f, spans)) for f, spans in self._located(set(files), lo, hi)]
        if lo > -math.inf and len(files) > 1:
            files = self._not_older(files, lo)
        return [InputPartition((f, None)) for f in files]

    def _series(self) -> api.BinlogSeries:
        return api.BinlogSeries.from_listing(self.listing, storage_options=self.where.storage_options,
                                             index_root=self.where.index_root, history=self.history)

    def _not_older(self, files: list[str], lo) -> list[str]:
        """``files`` without the closed binlogs whose catalog entry says every
        group is older than ``lo`` (``BinlogSeries`` decides, as ``at_time``)."""
        try:
            series = self._series()
        except GtidxError:       # no usable catalog (several histories...): every file is read
            return files
        with series:
            newest = series.files[-1]
            return [f for f in files if f == newest or not series.older(f, lo)]

    def _located(self, files: set, lo, hi) -> list[tuple[str, list]]:
        """The groups of the GTIDs asked for, per file in binlog order: [(file,
        [(start, end, gtid text)])], from ``locate_many``."""
        wanted = {}
        for text in self.gtids:
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
                for occ in loc.occurrences or (loc,):      # each read for its timestamp by its task
                    if occ.file in files:
                        per_file.setdefault(occ.file, set()).add((occ.start, occ.end, wanted[g]))
            order = {f: i for i, f in enumerate(series.files)}
        return [(f, sorted(per_file[f])) for f in sorted(per_file, key=order.get)]

    # -- executors ---------------------------------------------------------------------------
    def _time_ok(self, ts: int) -> bool:
        for op, v in self.times:
            if not (ts in v if op == "in" else ts == v if op == "=" else ts > v if op == ">" else
                    ts >= v if op == ">=" else ts < v if op == "<" else ts <= v):
                return False
        return True

    def groups(self, b: Binlog, spans: list | None):
        """The groups of ``b`` the filters keep: those located, else every
        group whose timestamp passes (headers only)."""
        ok = self._time_ok if self.times else None
        if spans is not None:
            for start, end, text in spans:
                begin, stop, (ts, server, seq, domain, flags2) = next(b.group_spans(start))
                if (begin, stop) != (start, end):
                    raise CorruptBinlogError(f"the group of {text} located at {start}-{end} walks as "
                                             f"{begin}-{stop}", path=b.path, offset=start)
                if ok is None or ok(ts):
                    yield Group(Gtid(domain, server, seq), start, end, ts, flags2), text
            return
        for start, end, (ts, server, seq, domain, flags2) in b.group_spans():
            if ok is None or ok(ts):
                yield Group(Gtid(domain, server, seq), start, end, ts, flags2), None

    def rows(self, b: Binlog, spans: list | None):
        """The rows of ``b`` (open): tuples of CHANGES_SCHEMA."""
        name = os.path.basename(b.path)
        tables = frozenset(self.tables) if self.tables is not None else None
        text_image = show.text_image
        for g, text in self.groups(b, spans):
            changes = show.decode_group(b, g, tables)
            if not changes.rows:
                continue
            gtid = text or str(g.gtid)
            for r in changes.rows:
                yield (gtid, name, g.start, g.timestamp, r.table, r.op, text_image(r.before),
                       text_image(r.after), r.changed, r.unknown)

    def read(self, partition):
        spec = partition.value
        if spec is None:                 # no file passed the filters: Spark reads InputPartition(None)
            return
        path, spans = spec
        with Binlog(path, storage.resolve(path, self.where.storage_options)[0]) as b:
            yield from self.rows(b, spans)


__all__ = ["ChangesDataSource", "CHANGES_SCHEMA"]
