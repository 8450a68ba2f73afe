"""Batch lookups on Spark (PySpark 4.1+; ``pip install 'gtidx[spark]'``).

    from gtidx import spark as gs
    out = gs.locate(spark, spark.read.text("gtids.txt"), "/data/binlogs")   # gtid, file, start, end, ...
    gs.build(spark, "/data/binlogs").show()
    gs.register(spark); spark.read.format("gtidx").load("/data/binlogs")    # every event group, for SQL

``locate`` plans so that the work grows with the files touched, not with
files x GTIDs:

1. one small job reads each file's summary on the executors: its start
   state (GTID_LIST), per (domain, server) the seq range it logs and whether
   it goes down there (what ``build`` stored with the index, else one walk
   of the file), and, for the last file, its end state (index, then a short
   scan). When the binlogs have a catalog (``gtidx.catalog``), the driver
   reads it once and takes the summary of every file whose entry is current
   from it, as ``gtidx.open`` does (``BinlogSeries.use_catalog``: one history,
   or ``history``; the newest file opened to check its entry): the job reads
   only the others, and the executors get the entries with the plan;
2. each GTID is assigned to its file with the summaries alone (broadcast),
   by the planner of ``BinlogSeries.locate`` (``api.plan_locate``): not in these
   binlogs when the latest state lacks it (never written) or the earliest
   has it (purged); else the last file whose start state does not have it
   yet. A GTID whose (domain, server) went backwards (gtid_strict_mode=OFF)
   can be in several files: it goes to the first of them, whose task answers
   it with ``BinlogSeries.locate`` (every file that can hold it, first occurrence).
   The input column comes as Arrow batches (``mapInArrow``), each planned at
   once (numpy over each pair's ``api.PlanTable``);
3. the values go to their file's task packed: each input partition sends
   one row per file it has values for (``_pack``: their planned rows as
   Arrow), not one per value, and ``repartition(n, file)`` moves those. The
   task gathers each file's rows from every partition and answers them
   together: ``locate_columns`` answers a file's
   many GTIDs as columns by one pass over its groups (``Binlog.group_records``,
   the group walk in C where it is built; a pass costs what ~2000 index
   lookups cost on a 256 MiB file), taught the plan's ranges (no walk);
   ``BinlogSeries.locate_many`` the others (few: index lookups), positions
   ``replica_start``.

Each row's answer is what ``gtidx.open(binlogs).locate(gtid)`` gives (a
position with several domains: ``replica_start``), found or not.

MySQL binlogs (``api.binlogs_flavor``): the driver reads each file's
Previous_gtids, a row goes to the file holding its GTID (or, a GTID set, to
a replica's start file), and one task per file answers them
(``MysqlSeries.locate_many``: one pass over the file; ``replica_start``).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, NamedTuple

from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, In, InputPartition
from pyspark.sql.types import (BooleanType, LongType, StringType, StructField,
                               StructType)

from .. import api, catalog, storage
from ..errors import BadInputError, GtidxError, NotFoundError
from ..liblog import about_a_file, log
from ..gtid import BinlogState, Gtid, Position

if TYPE_CHECKING:
    import pyarrow as pa

LOCATE_SCHEMA = StructType([
    StructField("gtid", StringType()),         # the input row, as given
    StructField("kind", StringType()),         # "gtid" or "position"
    StructField("file", StringType()),
    StructField("start", LongType()),          # GTID event offset (position: where the server starts)
    StructField("end", LongType()),            # just after the group's last event
    StructField("resume", LongType()),         # where a reader continues after it
    StructField("timestamp", LongType()),      # the GTID event's timestamp (position: first group sent)
    StructField("first_gtid", StringType()),   # position: the first group a replica gets
    StructField("found", BooleanType()),
    StructField("reason", StringType()),       # why not found
])

BUILD_SCHEMA = StructType([
    StructField("binlog", StringType()), StructField("index", StringType()),
    StructField("action", StringType()), StructField("reason", StringType()),
    StructField("records", LongType()), StructField("size", LongType()),
    StructField("binlog_size", LongType()), StructField("ratio", StringType()),
    StructField("seconds", StringType()), StructField("error", StringType()),
])

# The planner's rows (``_Plan.assign_batch``): the input value, the index of
# the file whose task answers it (null: none, ``reason`` says why) and the
# GTID parsed (null for a position, or a seq_no beyond a signed long).
ASSIGNED = "gtid string, file int, domain long, server long, seq long, reason string"
ASSIGNED_NAMES = ["gtid", "file", "domain", "server", "seq", "reason"]
# What locate's shuffle moves of them: per input partition and file, one row
# holding that file's ASSIGNED rows packed (an Arrow IPC stream): Spark moves
# a row per (partition, file), not per value (``_pack``, ``_unpack``).
PACKED = "file int, rows binary"
PACK_ROWS = 1 << 20                      # input rows planned and packed at once, at most

GROUPS_SCHEMA = ("file string, gtid string, domain long, server long, seq decimal(20,0), "
                 "start long, end long, timestamp long, flags int")

PASS_PER_BYTE = api.PASS_PER_BYTE        # one pass over a file beats lookups from this on


# -- locate ---------------------------------------------------------------------------------------

def _summary(path: str, last: bool, where: "_Where") -> tuple[str, str, str | None, list | None]:
    """(file, start state, end state for the last file, seq ranges): what
    planning needs; ``api.UNKNOWN`` for a state a damaged binlog does not
    give, None for its ranges (the lookups that need that file then fail with
    its error, the others are answered). The ranges
    (``BinlogSeries.seq_ranges``, [[domain, server, lowest, highest, goes
    down], ...]) are what build stored with the index, else one walk of the
    file: with them the plan is exact (a seq that steps back and recovers
    inside a binlog cannot hide a GTID from it)."""
    start = end = api.UNKNOWN
    ranges = None
    try:
        with where.series([path]) as logs:
            start = str(logs.start_state(path))
            end = str(logs.end_state()) if last else None
            ranges = [[d, s, lo, hi, down] for (d, s), (lo, hi, down) in logs.seq_ranges(path).items()]
    except GtidxError:
        pass
    return path, start, end, ranges


def _from_entry(path: str, entry, last: bool) -> tuple[str, str, str | None, list]:
    """``_summary`` of a file from its catalog entry (``BinlogSeries.cataloged``)."""
    return (path, str(entry.start), str(entry.end) if last else None,
            [[d, s, lo, hi, down] for (d, s), (lo, hi, down) in entry.seq_ranges().items()])


class _Plan:
    """The summaries, and the assignment of one GTID to its file (the rules of
    BinlogSeries.locate); picklable, so it is broadcast to the executors."""

    def __init__(self, files: list[str], starts: list[str], latest: str, ranges: list,
                 entries: dict | None = None):
        self.files = files
        self.starts = starts          # text, parsed lazily on each executor
        self.latest = latest
        self.ranges = ranges          # per file: _summary's ranges, or None
        self.entries = entries or {}  # path -> its catalog entry's JSON object, where planned from it
        self._parsed = None
        self._planners = {}           # (domain, server) -> its api.PlanTable
        self._learned = None          # (domain, server) -> (dipped file indexes, {file index: range})

    def _states(self):
        if self._parsed is None:
            self._parsed = ([_parse_state(s) for s in self.starts], _parse_state(self.latest))
        return self._parsed

    def assign(self, value: str | None) -> tuple[int | None, Gtid | None, str | None]:
        """(file index, the GTID or None for a position, None), or (None,
        None, why) when no file is to answer it: a GTID goes where
        ``BinlogSeries.locate`` finds it (text without a comma, parsed as
        ``locate`` parses it), a replication position (a comma) where
        ``replica_start`` starts."""
        if value is None:
            return None, None, "empty input row"
        try:
            if "," in value:
                pos, g = Position.parse(value), None
            else:
                g = Gtid.parse(value)
        except GtidxError as e:
            return None, None, str(e)
        if g is None:
            # A replica position: the newest file whose start state is before it.
            starts, _ = self._states()
            for i in range(len(self.files) - 1, -1, -1):
                if starts[i] != api.UNKNOWN and starts[i].is_before(pos):
                    return i, None, None
            return len(self.files) - 1, None, None       # replica_start explains the refusal
        return self._file_of(self.plan(g)), g, None

    def _file_of(self, plan: api.LocatePlan | str) -> int:
        # "not here" by the plan alone is not certain (a seq_no may step back
        # and recover inside a binlog): BinlogSeries.locate decides, in the last file's task
        return len(self.files) - 1 if isinstance(plan, str) else plan.files[0]

    def assign_batch(self, texts, codes=None) -> "pa.RecordBatch":
        """``assign`` for an Arrow array of input values, as an ASSIGNED
        batch. Values that are plainly ``D-S-N`` (at most 9, 9 and 18
        digits, seq_no not 0: in range) are parsed and planned as columns
        (numpy: each pair's PlanTable searched for all its seq_nos at once);
        the others one by one. ``codes``: the value the file column gets for
        each file index (default: the index)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        n = len(texts)
        fast = pc.fill_null(pc.match_substring_regex(texts, r"^[0-9]{1,9}-[0-9]{1,9}-[0-9]{1,18}$"), False)
        idx = np.flatnonzero(fast.to_numpy(zero_copy_only=False))
        plain = texts if len(idx) == n else texts.take(pa.array(idx))
        nums = pc.cast(pc.list_flatten(pc.split_pattern(plain, "-")), pa.int64()).to_numpy().reshape(-1, 3)
        good = nums[:, 2] != 0                        # seq_no 0: Gtid.parse says why, below
        idx, nums = idx[good], nums[good]
        domain = np.zeros(n, np.int64)
        server = np.zeros(n, np.int64)
        seq = np.zeros(n, np.int64)
        has_gtid = np.zeros(n, bool)
        file = np.full(n, -1, np.int32)
        reason = {}                                   # row -> why no file answers it
        domain[idx], server[idx], seq[idx], has_gtid[idx] = nums[:, 0], nums[:, 1], nums[:, 2], True
        keys = (nums[:, 0] << 32) | nums[:, 1]
        for key in np.unique(keys):
            sel = keys == key
            table = self._table((int(key) >> 32, int(key) & 0xFFFFFFFF))
            points = np.array([min(p, 2**63 - 1) for p in table.points], np.int64)
            files = np.array([self._file_of(p) for p in table.plans], np.int32)
            file[idx[sel]] = files[np.searchsorted(points, nums[sel, 2], side="right")]
        done = np.zeros(n, bool)
        done[idx] = True
        rest = np.flatnonzero(~done)
        values = texts.take(pa.array(rest)).to_pylist() if len(rest) else []
        for i, v in zip(rest.tolist(), values):
            f, g, why = self.assign(v)
            if f is not None:
                file[i] = f
            else:
                reason[i] = why
            if g is not None and g.seq < 2**63:
                domain[i], server[i], seq[i], has_gtid[i] = g.domain, g.server, g.seq, True
        absent = ~has_gtid
        none = file < 0
        if codes is not None:
            file = np.asarray(codes, np.int32)[np.where(none, 0, file)]
        if reason:
            why = [None] * n
            for i, text in reason.items():
                why[i] = text
            reasons = pa.array(why, pa.string())
        else:
            reasons = pa.nulls(n, pa.string())
        return pa.RecordBatch.from_arrays(
            [texts.cast(pa.string()), pa.array(file, mask=none),
             pa.array(domain, mask=absent), pa.array(server, mask=absent), pa.array(seq, mask=absent),
             reasons], names=ASSIGNED_NAMES)

    def plan(self, g: Gtid) -> api.LocatePlan | str:
        """``api.Planner`` on the summaries, with the seq ranges of every file
        that has them (each pair's plans tabulated once: ``_table``)."""
        return self._table((g.domain, g.server)).plan(g.seq)

    def _table(self, key: tuple) -> api.PlanTable:
        table = self._planners.get(key)
        if table is None:
            starts, latest = self._states()
            planner = api.Planner([st if st == api.UNKNOWN else st.get(*key) for st in starts + [latest]])
            dipped, ranges = self._per_pair().get(key, (set(), {}))
            known = {i: ranges.get(i) for i, r in enumerate(self.ranges) if r is not None}
            table = self._planners[key] = planner.table(dipped, known)
        return table

    def _per_pair(self) -> dict:
        if self._learned is None:
            self._learned = {}
            for i, rows in enumerate(self.ranges):
                for d, s, lo, hi, down in rows or ():
                    dipped, ranges = self._learned.setdefault((d, s), (set(), {}))
                    ranges[i] = (lo, hi)
                    if down:
                        dipped.add(i)
        return self._learned

    def teach(self, logs: api.BinlogSeries) -> None:
        """Give ``logs`` the ranges of every file (its lookups need no walk)
        and the catalog entries the plan was made from (their files' start
        states need no read; each is checked when its file is opened)."""
        if self.entries:
            logs.trust({f: catalog.Entry.of(raw) for f, raw in self.entries.items()})
        for f, rows in zip(self.files, self.ranges):
            if rows is not None and f not in self.entries:
                logs.teach(f, {(d, s): (lo, hi, down) for d, s, lo, hi, down in rows})

    def __getstate__(self):
        return {"files": self.files, "starts": self.starts, "latest": self.latest, "ranges": self.ranges,
                "entries": self.entries}

    def __setstate__(self, state):
        self.__init__(state["files"], state["starts"], state["latest"], state["ranges"], state["entries"])


class _MysqlPlan:
    """MySQL binlogs: each file's Previous_gtids (text, parsed lazily on each
    executor) and the assignment of a row to the file whose task answers it
    (``mysqlapi.holder``: a GTID to the file holding it; a GTID set, a
    replica's, to its start file); picklable, broadcast."""

    def __init__(self, files: list[str], prevs: list[str | None]):
        self.files = files
        self.prevs = prevs
        self._parsed = None

    def _sets(self):
        from ..mysqlgtid import GtidSet
        if self._parsed is None:
            self._parsed = [None if p is None else GtidSet.parse(p) for p in self.prevs]
        return self._parsed

    def assign(self, value: str | None) -> tuple[int | None, str | None]:
        """(file index, None) or (None, why no file answers it). A file
        whose Previous_gtids could not be read stops the bisection there:
        its task gives its error."""
        from ..series.mysql import holder, parse_spec
        from ..mysqlgtid import MysqlGtid
        if value is None:
            return None, "empty input row"
        try:
            spec = parse_spec(value)
        except GtidxError as e:
            return None, str(e)
        sets = self._sets()
        if isinstance(spec, MysqlGtid):
            known = [s for s in sets if s is not None]
            if len(known) < len(sets):
                return len(sets) - 1, None          # unread Previous_gtids: the series decides
            i = holder(sets, spec)
            return (0 if i is None else i), None    # purged: the first file's task says so
        for i in range(len(sets) - 1, -1, -1):
            if sets[i] is not None and sets[i].issubset(spec):
                return i, None
        return len(sets) - 1, None                  # replica_start explains the refusal

    def assign_batch(self, texts, codes=None) -> "pa.RecordBatch":
        import pyarrow as pa
        file, reason = [], []
        for v in texts.to_pylist():
            f, why = self.assign(v)
            file.append(None if f is None else (codes[f] if codes is not None else f))
            reason.append(why)
        nulls = pa.nulls(len(file), pa.int64())
        return pa.RecordBatch.from_arrays([texts.cast(pa.string()), pa.array(file, pa.int32()), nulls, nulls,
                                           nulls, pa.array(reason, pa.string())], names=ASSIGNED_NAMES)

    def teach(self, logs) -> None:
        pass

    def gtids(self, values: list) -> list:
        """The rows of one task as ``_answer_file`` takes them: the GTID, or
        None for a replica's set."""
        from ..series.mysql import parse_spec
        from ..mysqlgtid import MysqlGtid
        out = []
        for v in values:
            try:
                spec = parse_spec(v)
            except GtidxError:
                spec = None
            out.append(spec if isinstance(spec, MysqlGtid) else None)
        return out

    def __getstate__(self):
        return {"files": self.files, "prevs": self.prevs}

    def __setstate__(self, state):
        self.__init__(state["files"], state["prevs"])


class _Where(NamedTuple):
    """Where the binlogs and indexes are, as each executor opens them itself
    (shipped in the closures: an executor needs no local copy of anything):
    ``storage_options`` for URLs (``storage.resolve``; without them, the
    executor's own AWS_* variables, profile or instance role) and the
    ``index_root`` (``BinlogSeries``); ``mysql``: MySQL binlogs
    (``mysqlapi.MysqlSeries``)."""
    storage_options: dict | None = None
    index_root: str | None = None
    mysql: bool = False
    warnings: object = None      # an accumulator (``warnings_accumulator``) the executors' warnings go to

    def series(self, files: list[str]) -> api.BinlogSeries:
        _ToDriver.route(self.warnings)
        if self.mysql:
            from ..series.mysql import MysqlSeries
            return MysqlSeries(files, storage_options=self.storage_options, index_root=self.index_root)
        return api.BinlogSeries(files, storage_options=self.storage_options, index_root=self.index_root)

    def open(self, binlogs: str, history: int | None = None) -> api.BinlogSeries:
        """The binlogs at ``binlogs`` with their catalog, as ``gtidx.open`` has them."""
        _ToDriver.route(self.warnings)
        return api.BinlogSeries.from_path(binlogs, storage_options=self.storage_options,
                                          index_root=self.index_root, history=history)


class _ListParam(AccumulatorParam):
    """An accumulator of lists: each task's items appended."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):
        a.extend(b)
        return a


def warnings_accumulator(sc):
    """An accumulator for ``locate(warnings=...)``: the library's warnings on
    the executors, as (path or None, what) pairs, in place of their stderr."""
    return sc.accumulator([], _ListParam())


def say_warnings(acc) -> None:
    """The executors' warnings gathered in ``acc`` (after the action that ran
    them), each once, through the library's logger on the driver: the CLI
    says them once per command, the files counted."""
    for path, what in dict.fromkeys(tuple(x) for x in acc.value):
        if path is None:
            log.warning("%s", what)
        else:
            log.warning("%s: %s", path, what)


class _ToDriver:
    """In an executor (a Spark task runs), the library's warnings go to the
    accumulator of the ``_Where`` that opened the series last, when it has
    one, else to stderr as Python's last resort says them. On the driver
    nothing changes: its logger is the caller's (the CLI's)."""

    acc = None
    handler = None

    @classmethod
    def route(cls, acc) -> None:
        from pyspark import TaskContext
        if TaskContext.get() is None:
            return
        cls.acc = acc
        if cls.handler is None:
            import logging

            class Handler(logging.Handler):
                def emit(self, record):
                    if cls.acc is None:
                        sys.stderr.write(record.getMessage() + "\n")
                        return
                    cls.acc.add([about_a_file(record) or (None, record.getMessage())])
            cls.handler = Handler(logging.WARNING)
            logging.getLogger("gtidx").addHandler(cls.handler)


def _parse_state(text: str):
    return api.UNKNOWN if text == api.UNKNOWN else BinlogState.parse(text)


def _not_found(value: str, reason: str) -> tuple:
    kind = "position" if value is not None and "," in value else "gtid"
    return (value, kind, None, None, None, None, None, None, False, reason)


def _answer_file(values: list, gtids: list, all_files: list[str], pass_per_byte: float,
                 plan: _Plan | None = None, where: _Where = _Where()) -> list[tuple]:
    """All the GTIDs (and positions: None in ``gtids``) assigned to one file,
    answered together: the GTIDs by ``BinlogSeries.locate_many`` (per file one
    pass over its groups where it has many), taught the plan's ranges so that
    no executor walks a file for them."""
    with where.series(all_files) as logs:
        if plan is not None:
            plan.teach(logs)
        return _answer_rows(logs, values, gtids, pass_per_byte)


def _answer_rows(logs: api.BinlogSeries, values: list, gtids: list, pass_per_byte: float) -> list[tuple]:
    """``_answer_file`` on a series already open and taught."""
    out = []
    wanted = [g for g in gtids if g is not None]
    found = logs.locate_many(wanted, pass_per_byte=pass_per_byte) if wanted else {}
    for v, g in zip(values, gtids):
        if g is not None:
            r = found[g]
            if isinstance(r, NotFoundError):
                out.append(_not_found(v, r.message))
            elif isinstance(r, GtidxError):      # a damaged binlog this GTID needs: its error
                out.append(_not_found(v, str(r)))
            else:
                out.append((v, "gtid", r.file, r.start, r.end, r.resume, r.timestamp, None, True, None))
            continue
        try:
            r = logs.replica_start(v)
        except GtidxError as e:
            out.append(_not_found(v, e.message))
            continue
        first = r.first
        out.append((v, "position", r.file, r.offset, None,
                    first.start if first is not None and first.file == r.file else None,
                    first.timestamp if first else None, str(first.gtid) if first else None, True, None))
    return out


def _rows_table(rows: list[tuple]) -> "pa.Table":
    """LOCATE_SCHEMA rows (tuples) as an Arrow table."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    schema = to_arrow_schema(LOCATE_SCHEMA)
    columns = list(zip(*rows)) if rows else [[] for _ in LOCATE_SCHEMA]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema)], schema=schema)


def locate_columns(logs: api.BinlogSeries, domain, server, seq, *, pass_per_byte: float = PASS_PER_BYTE) -> tuple:
    """``BinlogSeries.locate_many``'s pass, for columns of GTIDs (numpy
    arrays or sequences: domain, server, seq_no; seq_no from 1 to
    2**64 - 2): ``(file, start, end, timestamp)``, numpy arrays, ``file``
    the index of the GTID's binlog in ``logs.files``, -1 where this gave no
    answer. Answered here are the GTIDs ``locate_many`` answers by its pass,
    as it answers them: those whose plan (``BinlogSeries.plan_table``, every
    binlog learned) is one file in which their (domain, server) only grows,
    in a file that has more than ``pass_per_byte`` of them per byte, found
    in it (the first group with that GTID: ``Binlog.group_records``, the
    group walk in C where it is built, matched with numpy). The others (-1:
    few in their file, not there, a seq_no that went back, a file that
    cannot be read) are ``locate_many``'s to answer."""
    import numpy as np
    from ..binlog.mariadb import GROUP_RECORD
    domain = np.asarray(domain, np.uint64)
    server = np.asarray(server, np.uint64)
    seq = np.asarray(seq, np.uint64)
    n = len(seq)
    file = np.full(n, -1, np.int32)
    start = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    timestamp = np.zeros(n, np.int64)
    if n <= len(logs.files):            # a few: as locate_many, one by one
        return file, start, end, timestamp
    pair = (domain << np.uint64(32)) | server
    planned = np.full(n, -1, np.int32)
    for key in np.unique(pair):
        rows = np.flatnonzero(pair == key)
        table = logs.plan_table(int(key) >> 32, int(key) & 0xFFFFFFFF)
        points = np.array([min(p, 2**64 - 1) for p in table.points], np.uint64)
        one = np.array([-1 if isinstance(p, str) or not p.monotone or len(p.files) != 1 else p.files[0]
                        for p in table.plans], np.int32)
        planned[rows] = one[np.searchsorted(points, seq[rows], side="right")]
    fields = np.dtype({"names": ["start", "end", "seq", "timestamp", "server", "domain"],
                       "formats": ["<u8", "<u8", "<u8", "<u4", "<u4", "<u4"],
                       "offsets": [0, 8, 16, 24, 28, 32], "itemsize": GROUP_RECORD.size})
    for i in np.unique(planned[planned >= 0]):
        rows = np.flatnonzero(planned == i)
        try:
            b = logs.binlog(logs.files[i])
            if len(rows) <= b.size * pass_per_byte:
                continue                # few: locate_many's index lookups
            groups = np.frombuffer(b.group_records(), fields)
        except GtidxError:
            continue                    # each GTID's own lookup says what failed
        keys = (groups["domain"].astype(np.uint64) << np.uint64(32)) | groups["server"]
        for key in np.unique(pair[rows]):
            want = rows[pair[rows] == key]
            at = np.flatnonzero(keys == key)
            seqs = groups["seq"][at]
            order = np.argsort(seqs, kind="stable")     # equal seq_nos: the first in the file first
            k = np.minimum(np.searchsorted(seqs[order], seq[want]), max(len(at) - 1, 0))
            hit = seqs[order][k] == seq[want] if len(at) else np.zeros(len(want), bool)
            found = want[hit]
            g = at[order[k[hit]]]
            file[found] = i
            start[found] = groups["start"][g]
            end[found] = groups["end"][g]
            timestamp[found] = groups["timestamp"][g]
    return file, start, end, timestamp


def _answer_group(key, table, files: list[str], pass_per_byte: float, plan: _Plan, where: "_Where"):
    """One file's rows (``key``: its code; null: the rows no file answers),
    an Arrow table of ASSIGNED rows in, LOCATE_SCHEMA rows out, in order.
    The GTIDs (parsed by the planner) go to ``locate_columns``
    as columns: what it answers (a file's many GTIDs, by one pass) is built
    as columns too; the rest (few, not found there, positions, seq_nos beyond
    a signed long) row by row, by ``_answer_rows``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    if where.mysql:                           # MySQL binlogs: _MysqlPlan's ASSIGNED rows, row by row
        values = table.column("gtid").to_pylist()
        if key[0].as_py() is None:
            return _rows_table([_not_found(v, why) for v, why in zip(values, table.column("reason").to_pylist())])
        return _rows_table(_answer_file(values, plan.gtids(values), files, pass_per_byte, plan, where))
    if key[0].as_py() is None:
        return _rows_table([_not_found(v, why) for v, why in zip(table.column("gtid").to_pylist(),
                                                                  table.column("reason").to_pylist())])
    n = table.num_rows
    has = np.flatnonzero(pc.is_valid(table.column("seq")).to_numpy(zero_copy_only=False))
    with where.series(files) as logs:
        plan.teach(logs)
        done = np.zeros(n, bool)
        parts, order = [], []
        if len(has):
            cols = [table.column(c).take(pa.array(has)).to_numpy() for c in ("domain", "server", "seq")]
            fi, start, end, ts = locate_columns(logs, *cols, pass_per_byte=pass_per_byte)
            hit = fi >= 0
            rows = has[hit]
            if len(rows):
                done[rows] = True
                k = len(rows)
                names = pa.DictionaryArray.from_arrays(pa.array(fi[hit], pa.int32()), pa.array(logs.files))
                parts.append(pa.Table.from_arrays(
                    [table.column("gtid").take(pa.array(rows)), pa.array(["gtid"] * k, pa.string()),
                     names.cast(pa.string()), pa.array(start[hit]), pa.array(end[hit]), pa.array(end[hit]),
                     pa.array(ts[hit]), pa.nulls(k, pa.string()), pa.array(np.ones(k, bool)),
                     pa.nulls(k, pa.string())], schema=_rows_table([]).schema))
                order.append(rows)
        rest = np.flatnonzero(~done)
        if len(rest):
            sub = table.take(pa.array(rest))
            values = sub.column("gtid").to_pylist()
            gtids = [None if q is None else Gtid(d, s, q) for d, s, q in
                     zip(*(sub.column(c).to_pylist() for c in ("domain", "server", "seq")))]
            for i, v in enumerate(values):
                if gtids[i] is None and "," not in v:
                    gtids[i] = Gtid.parse(v)            # a seq_no beyond a signed long: its text
            parts.append(_rows_table(_answer_rows(logs, values, gtids, pass_per_byte)))
            order.append(rest)
    out = pa.concat_tables(parts) if parts else _rows_table([])
    if len(parts) > 1:
        out = out.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))
    return out


def _codes(n: int, count: int) -> list[int]:
    """``count`` distinct ints, the i-th of which Spark's hash partitioning
    into ``n`` (``repartition(n, col)`` of an int column: pmod(murmur3 hash,
    n)) puts in partition i % n: locate's file column holds them in place of
    the file indexes, so that each task gets its own files, evenly (hashing
    the indexes themselves gives some tasks several files and others none)."""
    per = [[] for _ in range(n)]
    k = 0
    while any(len(per[j]) < len(range(j, count, n)) for j in range(n)):
        per[_spark_hash_int(k) % n].append(k)
        k += 1
    return [per[i % n][i // n] for i in range(count)]


def _spark_hash_int(k: int) -> int:
    """Spark's ``hash()`` of an int (Murmur3_x86_32.hashInt, seed 42), what
    its hash partitioning takes the partition from (a test compares it with
    Spark's own)."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF
    k1 = rotl((k & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h = (rotl(42 ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4
    h = (h ^ (h >> 16)) * 0x85EBCA6B & 0xFFFFFFFF
    h = (h ^ (h >> 13)) * 0xC2B2AE35 & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def locate(spark: SparkSession, gtids: DataFrame, binlogs: str, *, column: str | None = None,
           timings: dict | None = None, pass_per_byte: float = PASS_PER_BYTE,
           storage_options: dict | None = None, index_root: str | None = None,
           history: int | None = None, warnings=None) -> DataFrame:
    """Answer every row of ``gtids`` (a GTID, or a replication position with
    one GTID per domain, in ``column``: default the only column, or ``gtid``)
    against the binlogs at ``binlogs`` (a directory, a master-bin.index, a
    file; or a URL, ``s3://bucket/prefix/``, read by the executors themselves
    with ``storage_options``; ``index_root``: indexes kept apart, as in
    ``gtidx.open``). One output row per input row, in LOCATE_SCHEMA.

    When the binlogs have a catalog (``gtidx catalog build``), planning takes
    each file's summary from its entry, as ``gtidx.open`` does (read on the
    driver once; the newest file opened to check its entry): only the files
    without a current entry are read by the summary job. Several histories
    in the catalog: ``history`` picks one, else ``api.SeveralHistories``
    (BadInputError), as in the library.

    ``timings``, if given, receives ``planning_s`` and ``planning_read`` (the
    files the summary job read) now and, once an action has run on the
    result, the per-file task time in ``timings["per_file"].value`` (an
    accumulator: seconds summed over files), the CPU time of the same in
    ``per_file_cpu`` (less where the tasks waited for a core),
    ``files_touched``, and ``assign_s`` and ``assign_cpu``: the seconds
    (summed over tasks) and CPU seconds the tasks that plan the input rows
    spend planning and packing them (not reading or writing Spark's batches).
    ``pass_per_byte``: from how many GTIDs per byte of a file on one pass over
    it beats index lookups. ``warnings``: an accumulator
    (``warnings_accumulator``) that takes the executors' warnings (an index
    that cannot be used...) instead of their stderr; ``say_warnings`` says
    them on the driver once an action has run."""
    t0 = time.perf_counter()
    sc = spark.sparkContext
    if api.binlogs_flavor(binlogs, storage_options) == "mysql":
        return _locate_mysql(spark, gtids, binlogs, column, timings, pass_per_byte,
                             _Where(storage_options, index_root, True, warnings), history, t0)
    where = _Where(storage_options, index_root, warnings=warnings)
    with where.open(binlogs, history) as series:
        files = series.files
        last = files[-1]
        known = {}
        for f in files:
            try:
                entry = series.cataloged(f, check=f == last)     # the newest: opened and compared (end state)
            except GtidxError:
                entry = None          # unreadable: the summary job says so (UNKNOWN), as without a catalog
            if entry is not None:
                known[f] = entry
    if column is None:
        column = "gtid" if "gtid" in gtids.columns else gtids.columns[0]
    todo = [f for f in files if f not in known]
    summaries = [_from_entry(f, e, f == last) for f, e in known.items()]
    if todo:
        summaries += sc.parallelize([(f, f == last) for f in todo], _tasks(sc, len(todo))) \
            .map(lambda fl: _summary(*fl, where)).collect()
    by_file = {f: (start, end, ranges) for f, start, end, ranges in summaries}
    plan = _Plan(files, [by_file[f][0] for f in files], by_file[last][1], [by_file[f][2] for f in files],
                 {f: e.raw for f, e in known.items()})
    bplan = sc.broadcast(plan)
    n = _tasks(sc, len(files))
    codes = _codes(n, len(files))
    if timings is not None:
        timings["planning_s"] = time.perf_counter() - t0
        timings["planning_read"] = len(todo)

    assign_time = (sc.accumulator(0.0), sc.accumulator(0.0)) if timings is not None else None
    if timings is not None:
        spent, cpu, touched_files = sc.accumulator(0.0), sc.accumulator(0.0), sc.accumulator(0)
        timings["per_file"], timings["per_file_cpu"], timings["files_touched"] = spent, cpu, touched_files
        timings["assign_s"], timings["assign_cpu"] = assign_time

        def answer(key, table):
            t, c = time.perf_counter(), time.process_time()
            out = _answer_group(key, table, files, pass_per_byte, bplan.value, where)
            if key[0].as_py() is not None:
                spent.add(time.perf_counter() - t)
                cpu.add(time.process_time() - c)
                touched_files.add(1)
            return out
    else:
        def answer(key, table):
            return _answer_group(key, table, files, pass_per_byte, bplan.value, where)
    return _shuffled(gtids.select(gtids[column].cast("string")), bplan, codes, n, answer, assign_time)


TASKS_PER_CORE = 2                       # locate's tasks (summaries, answers): at most this many per core


def _tasks(sc, files: int) -> int:
    """How many tasks answer locate's rows: one per file, up to
    TASKS_PER_CORE per core; then files share them evenly (``_codes``)."""
    return max(1, min(files, sc.defaultParallelism * TASKS_PER_CORE))


def _shuffled(values: DataFrame, bplan, codes: list[int], n: int, answer, assign_time=None) -> DataFrame:
    """locate's two stages, for either flavor's plan (``bplan``: broadcast,
    with ``assign_batch``): each input partition's values are planned (each
    its file's code, ``codes``) and its rows packed per file (``_pack``); the
    packed rows go to their file's task (``repartition(n, file)``), which
    gathers each file's rows from every partition and answers them at once
    (``answer(key, table)``: the file's code, its ASSIGNED rows; ``_per_file``).
    Arrow batches both ways; Spark moves one row per (input partition, file)
    in between, not one per value. ``assign_time``: two accumulators that
    get the planning's seconds and CPU seconds."""
    def assign(batches):
        p = bplan.value
        for texts in _chunks(batches, PACK_ROWS):
            t, c = time.perf_counter(), time.process_time()
            a = p.assign_batch(texts, codes)
            out = _pack(a, a.column(1))
            if assign_time is not None:         # our work alone: not the waits for Spark's batches
                assign_time[0].add(time.perf_counter() - t)
                assign_time[1].add(time.process_time() - c)
            yield out
    return values.mapInArrow(assign, PACKED).repartition(n, "file") \
        .mapInArrow(lambda batches: _per_file(batches, answer), LOCATE_SCHEMA)


def _chunks(batches, rows: int):
    """The first column of Arrow ``batches``, as arrays of at most about
    ``rows`` values (whole batches put together)."""
    import pyarrow as pa
    held, count = [], 0
    for b in batches:
        held.append(b.column(0))
        count += len(b)
        if count >= rows:
            yield pa.concat_arrays(held)
            held, count = [], 0
    if held:
        yield pa.concat_arrays(held)


def _pack(batch, file) -> "pa.RecordBatch":
    """A PACKED batch: per distinct ``file`` code (null: the rows no file
    answers), one row with those rows of ``batch`` (in their order) as an
    Arrow IPC stream."""
    import numpy as np
    import pyarrow as pa
    codes = file.fill_null(-1).to_numpy() if file.null_count else file.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    keys, starts = np.unique(codes[order], return_index=True)
    packed = []
    for a, b in zip(starts, list(starts[1:]) + [len(order)]):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch.take(pa.array(order[a:b])))
        packed.append(sink.getvalue().to_pybytes())
    return pa.RecordBatch.from_arrays([pa.array(keys, pa.int32(), mask=keys == -1), pa.array(packed, pa.binary())],
                                      names=["file", "rows"])


def _unpack(blobs) -> "pa.Table":
    """The rows of PACKED rows' ``rows`` (bytes each), in order, as one table."""
    import pyarrow as pa
    return pa.concat_tables([pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in blobs])


def _per_file(batches, answer):
    """A task's PACKED batches (the rows of its files: ``repartition`` by
    file) gathered by file, each file's rows answered at once
    (``answer(key, table)``: the file's code, a table of its rows)."""
    import pyarrow as pa
    by_code = {}
    for b in batches:
        for code, blob in zip(b.column(0).to_pylist(), b.column(1).to_pylist()):
            by_code.setdefault(code, []).append(blob)
    for code, blobs in by_code.items():
        yield from answer([pa.scalar(code, pa.int32())], _unpack(blobs)).to_batches()


def _locate_mysql(spark: SparkSession, gtids: DataFrame, binlogs: str, column: str | None, timings: dict | None,
                  pass_per_byte: float, where: _Where, history: int | None, t0: float) -> DataFrame:
    """``locate`` on MySQL binlogs: the driver reads each file's
    Previous_gtids (its preamble) and the rows are assigned with them
    (``_MysqlPlan``); one task per file answers its rows with
    ``MysqlSeries.locate_many`` (one pass over the file) and
    ``replica_start``. The answers are ``gtidx.open(binlogs)``'s."""
    from ..series.mysql import MysqlSeries
    sc = spark.sparkContext
    with MysqlSeries.from_path(binlogs, storage_options=where.storage_options, index_root=where.index_root,
                               history=history) as series:
        files = series.files
        prevs = []
        for f in files:
            try:
                prevs.append(series.previous_gtids(f).one_line())
            except GtidxError:
                prevs.append(None)          # its task gives the error
    if column is None:
        column = "gtid" if "gtid" in gtids.columns else gtids.columns[0]
    plan = _MysqlPlan(files, prevs)
    bplan = sc.broadcast(plan)
    n = _tasks(sc, len(files))
    codes = _codes(n, len(files))
    if timings is not None:
        timings["planning_s"] = time.perf_counter() - t0
        timings["planning_read"] = len(files)

    def answer(key, table):
        return _answer_group(key, table, files, pass_per_byte, bplan.value, where)
    return _shuffled(gtids.select(gtids[column].cast("string")), bplan, codes, n, answer)


# -- build -------------------------------------------------------------------------------------------

def _build_one(path: str, kw: dict) -> tuple:
    """``api.build`` of one file (``kw``: its keywords, ``storage_options``
    and ``index_root`` among them), as a BUILD_SCHEMA row."""
    try:
        r = next(iter(api.build([path], **kw)))
    except GtidxError as e:
        r = e
    if isinstance(r, GtidxError):
        return (path, api.index_path(path), "failed", "", 0, 0, 0, "", "", str(r))
    return (r.binlog, r.index, r.action, r.reason, r.records, r.size, r.binlog_size,
            f"{r.ratio:.6f}", f"{r.seconds:.4f}", "")


def build(spark: SparkSession, binlogs: str, *, storage_options: dict | None = None, **kw) -> DataFrame:
    """Build the missing or stale index of every binlog at ``binlogs`` (a
    path or a URL, as for ``locate``), one task per file; one summary row per
    file (``api.build`` keywords pass through: ``index_root``, ``page_size``...).
    Each executor reads its binlog and writes its index itself."""
    files = api.list_binlogs(binlogs, storage_options=storage_options)
    kw["storage_options"] = storage_options
    rdd = spark.sparkContext.parallelize(files, len(files)).map(lambda f: _build_one(f, kw))
    return spark.createDataFrame(rdd, BUILD_SCHEMA)


# -- a data source: every event group, for SQL ---------------------------------------------------------

class GtidxDataSource(DataSource):
    """``spark.read.format("gtidx").load(DIR)``: one row per event group of
    every binlog in DIR (file, gtid, domain, server, seq, start, end,
    timestamp, flags); for MySQL binlogs one per transaction, ``gtid`` its
    text (``uuid[:tag]:gno``; null: anonymous), domain, server, seq and flags
    null. DIR may be a URL (``s3://bucket/prefix/``), read by
    the executors; ``.option("storage_options", json.dumps({...}))`` passes
    fsspec options (default: the AWS_* variables each executor has). Filters
    ``file = ...``/``file IN (...)`` (file names as in the binlog list) skip
    whole files; ``domain = ...``/``IN`` skip groups."""

    @classmethod
    def name(cls) -> str:
        return "gtidx"

    def schema(self) -> str:
        return GROUPS_SCHEMA

    def reader(self, schema) -> "_GroupsReader":
        path = self.options.get("path")
        if not path:
            raise GtidxError("gtidx data source needs a path: spark.read.format('gtidx').load(DIR)")
        return _GroupsReader(path, _options(self.options.get("storage_options")))


def _options(text: str | None) -> dict | None:
    """The data source's ``storage_options`` option: a JSON object."""
    if not text:
        return None
    import json
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise BadInputError("the gtidx data source's storage_options option must be a JSON object",
                            hint='.option("storage_options", json.dumps({"endpoint_url": ...}))')
    return value


class _GroupsReader(DataSourceReader):
    def __init__(self, path: str, storage_options: dict | None = None):
        self.storage_options = storage_options
        self.files = api.list_binlogs(path, storage_options=storage_options)
        self.file_names: set | None = None
        self.domains: set | None = None

    def pushFilters(self, filters):
        for f in filters:
            values = None
            if isinstance(f, EqualTo):
                values = {f.value}
            elif isinstance(f, In):
                values = set(f.value)
            if values is not None and f.attribute == ("file",):
                self.file_names = values if self.file_names is None else self.file_names & values
            elif values is not None and f.attribute == ("domain",):
                self.domains = values if self.domains is None else self.domains & values
            else:
                yield f

    def partitions(self):
        files = [f for f in self.files
                 if self.file_names is None or os.path.basename(f) in self.file_names]
        return [InputPartition(f) for f in files]

    def read(self, partition):
        from decimal import Decimal
        path = partition.value
        if path is None:                 # no file passed the filters: Spark reads InputPartition(None)
            return
        from ..binlog.mysql import MysqlBinlog, open_binlog
        name = os.path.basename(path)
        domains = self.domains
        with open_binlog(path, storage.resolve(path, self.storage_options)[0]) as b:
            if isinstance(b, MysqlBinlog):
                # a MySQL binlog's transactions: the GTID's text (uuid[:tag]:gno; null: anonymous), no
                # domain, server or seq_no (so a domain filter keeps none of them), no MariaDB flags
                if domains is None:
                    for t in b.transactions():
                        yield (name, None if t.gtid is None else str(t.gtid), None, None, None, t.start, t.end,
                               t.timestamp, None)
                return
            for begin, end, (ts, server, seq, domain, flags2) in b.group_spans():
                if domains is not None and domain not in domains:
                    continue
                yield (name, f"{domain}-{server}-{seq}", domain, server, Decimal(seq), begin, end, ts, flags2)


def register(spark: SparkSession) -> None:
    """Register ``format("gtidx")`` and ``format("gtidx.changes")`` (row
    changes, ``gtidx.changes``), and let their filters be pushed down."""
    from .changes import ChangesDataSource
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(GtidxDataSource)
    spark.dataSource.register(ChangesDataSource)


LOOPBACK = "127.0.0.1"


def session(master: str = "local[*]", app: str = "gtidx", host: str | None = None,
            conf: dict | None = None) -> SparkSession:
    """A SparkSession for gtidx's CLI: quiet, no UI, pushdown on, source registered.

    The driver and its block manager listen on and advertise ``host``: by
    default $SPARK_LOCAL_IP when set, else 127.0.0.1, so that a session opens
    no port on the machine's network interfaces. On a cluster, whose executors
    must reach the driver, give the driver's address: ``session(master,
    host="10.0.0.5")``, or ``SPARK_LOCAL_IP=10.0.0.5 gtidx spark ...``; or build
    your own SparkSession and call ``register(spark)``. Local sessions run their
    Python workers with this interpreter unless $PYSPARK_PYTHON names another.
    ``conf``: more Spark settings (``{"spark.submit.pyFiles": "gtidx-py.zip",
    "spark.executorEnv.AWS_ENDPOINT_URL": ...}``).
    """
    from pyspark import SparkConf, SparkContext
    host = host or os.environ.get("SPARK_LOCAL_IP") or LOOPBACK
    os.environ.setdefault("SPARK_LOCAL_IP", host)          # read by the JVM when it starts
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {"spark.driver.host": host, "spark.driver.bindAddress": host, "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",      # the CLI draws its own (or none: --quiet)
                "spark.sql.python.filterPushdown.enabled": "true",
                # the driver logs errors only (Spark's default profile prints notes at start-up)
                "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:" + QUIET_LOG4J,
                **(conf or {})}
    spark_conf = SparkConf().setMaster(master).setAppName(app).setAll(list(settings.items()))
    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        SparkContext(conf=spark_conf, gateway=_quiet_gateway(spark_conf))   # the JVM this process starts
    spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


QUIET_LOG4J = os.path.join(os.path.dirname(__file__), "spark-log4j2.properties")
# What the driver JVM prints on stderr when it starts, outside any logger's level: Spark's
# launcher adds --add-modules=jdk.incubator.vector and the JVM says so; Spark's logging, in
# a Python driver, says which level it set and how to change it.
JVM_NOTES = (b"WARNING: Using incubator modules", b'Setting default log level to "',
             b"To adjust logging level use sc.setLogLevel(")


def _quiet_gateway(conf):
    """The py4j gateway with the driver JVM's stderr read through a pipe:
    every line goes on to our stderr but the JVM's own start-up notes
    (``JVM_NOTES``). pyspark's ``launch_gateway(popen_kwargs=...)``."""
    from pyspark.java_gateway import launch_gateway
    r, w = os.pipe()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": w})
    finally:
        os.close(w)

    def forward():
        with os.fdopen(r, "rb") as lines:
            for line in lines:
                if not line.startswith(JVM_NOTES):
                    sys.stderr.buffer.write(line)
                    sys.stderr.flush()
    threading.Thread(target=forward, name="gtidx-jvm-stderr", daemon=True).start()
    return gateway


class SparkProgress(NamedTuple):
    """What the driver can see of a CLI run, for its ``progress`` callback."""
    phase: str           # "planning", "locating", "counting" (locate); "building indexes" (build)
    tasks_done: int      # tasks finished in this phase's Spark jobs (stages not yet planned: not counted)
    tasks: int           # tasks in this phase's stages known so far
    elapsed: float       # seconds since the run began (starting Spark included)


class _Watch:
    """Reports the phase of a run and its Spark tasks done, polling the status
    tracker (``statusTracker()``: the driver's own bookkeeping, no extra job)
    in a daemon thread every ``interval`` seconds, and once more at each phase
    change and at the end. Each phase's jobs run in their own job group."""

    def __init__(self, progress, interval: float = 0.25):
        self.progress = progress
        self.interval = interval
        self.t0 = time.monotonic()
        self.sc = None
        self.phase = ""
        self.group = None
        self._n = 0
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()     # one report at a time: the poller's or the driver's

    def enter(self, phase: str) -> None:
        if self.progress is None:
            return
        self._report()                      # the phase that ends, as it ends
        with self._lock:
            self.phase = phase
            if self.sc is not None:
                self._n += 1
                self.group = f"gtidx-{id(self):x}-{self._n}"
                self.sc.setJobGroup(self.group, f"gtidx: {phase}")
        self._report()

    def attach(self, sc) -> None:
        """The SparkContext is up: start polling."""
        self.sc = sc
        if self.progress is not None:
            self._thread = threading.Thread(target=self._poll, name="gtidx-progress", daemon=True)
            self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.progress is not None:
            self._report()

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._report()

    def _report(self) -> None:
        with self._lock:
            done = total = 0
            if self.sc is not None and self.group is not None:
                try:
                    done, total = self._tasks(self.sc.statusTracker(), self.group)
                except Exception:     # the context is stopping: no count, the work goes on
                    pass
            if self.phase:
                self.progress(SparkProgress(self.phase, done, total, time.monotonic() - self.t0))

    @staticmethod
    def _tasks(tracker, group: str) -> tuple[int, int]:
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is None or (job.status == "SUCCEEDED" and stage.numCompletedTasks == 0):
                    continue          # not planned yet, or skipped (its shuffle output reused)
                done += stage.numCompletedTasks
                total += stage.numTasks
        return done, total


def locate_to_parquet(gtids_path: str, binlogs: str, out: str, master: str = "local[*]",
                      progress=None, storage_options: dict | None = None,
                      index_root: str | None = None, history: int | None = None) -> tuple[int, int]:
    """``gtidx spark locate``: the GTIDs of a .txt/.csv/.parquet file located
    in ``binlogs`` (a path or URL, with ``storage_options``, ``index_root``
    and ``history`` as for ``locate``), written to ``out`` (parquet,
    overwritten); (rows, found). ``progress``: called with a SparkProgress as
    phases and tasks advance."""
    _Where(storage_options, index_root).open(binlogs, history).close()   # several histories: before Spark starts
    watch = _Watch(progress)
    spark = session(master)
    try:
        watch.attach(spark.sparkContext)
        watch.enter("planning")
        warned = warnings_accumulator(spark.sparkContext)
        df = locate(spark, read_gtids(spark, gtids_path), binlogs, storage_options=storage_options,
                    index_root=index_root, history=history, warnings=warned)
        watch.enter("locating")
        df.write.mode("overwrite").parquet(out)
        say_warnings(warned)
        watch.enter("counting")
        done = spark.read.parquet(out)
        return done.count(), done.filter("found").count()
    finally:
        watch.close()
        spark.stop()


def build_rows(binlogs: str, master: str = "local[*]", progress=None, **kw) -> list[dict]:
    """``gtidx spark build``: ``build`` on its own session, one dict per file.
    ``progress``: as for ``locate_to_parquet`` (one task per file)."""
    watch = _Watch(progress)
    spark = session(master)
    try:
        watch.attach(spark.sparkContext)
        watch.enter("building indexes")
        return [r.asDict() for r in build(spark, binlogs, **kw).collect()]
    finally:
        watch.close()
        spark.stop()


def read_gtids(spark: SparkSession, path: str) -> DataFrame:
    """GTIDs from a .txt (one per line), .csv (a ``gtid`` column, else the
    first) or .parquet file."""
    lower = path.lower()
    if lower.endswith(".parquet") or os.path.isdir(path):
        return spark.read.parquet(path)
    if lower.endswith(".csv"):
        return spark.read.option("header", True).csv(path)
    return spark.read.text(path).withColumnRenamed("value", "gtid")


__all__ = ["locate", "build", "register", "session", "read_gtids", "locate_to_parquet", "build_rows",
           "GtidxDataSource", "SparkProgress",
           "LOCATE_SCHEMA", "BUILD_SCHEMA"]
