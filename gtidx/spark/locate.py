"""``locate`` on Spark: every row of a DataFrame of GTIDs (or replication
positions) answered against the binlogs, one task per file touched
(planning: ``gtidx.spark.plan``; the rows' shuffle: ``gtidx.spark.shuffle``),
and ``locate_columns``, the per-file pass that answers a file's many GTIDs
as columns.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from .. import api
from ..binlog.mariadb import GROUP_RECORD
from ..errors import GtidxError, NotFoundError
from ..gtid import Gtid
from ..series.mysql import MysqlSeries
from .plan import MysqlPlan, Plan, summary, summary_of_entry
from .shuffle import PACK_ROWS, PACKED, chunks, pack, partition_codes, per_file, task_count
from .where import Where

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

PASS_PER_BYTE = api.PASS_PER_BYTE        # one pass over a file beats lookups from this on


def _not_found(value: str, reason: str) -> tuple:
    kind = "position" if value is not None and "," in value else "gtid"
    return (value, kind, None, None, None, None, None, None, False, reason)


def _answer_file(values: list, gtids: list, all_files: list[str], pass_per_byte: float,
                 plan: Plan | None = None, where: Where = Where()) -> list[tuple]:
    """All the GTIDs (and positions: None in ``gtids``) assigned to one file,
    answered together: the GTIDs by ``BinlogSeries.locate_many`` (per file one
    pass over its groups where it has many), taught the plan's ranges so that
    no executor walks a file for them."""
    with where.series(all_files) as logs:
        if plan is not None:
            plan.share(logs)
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


def _answer_rows_group(key, table, files: list[str], pass_per_byte: float, plan: MysqlPlan, where: "Where"):
    """``_answer_group`` for MysqlPlan's ASSIGNED rows: one file's rows
    answered row by row (``_answer_file``)."""
    values = table.column("gtid").to_pylist()
    if key[0].as_py() is None:
        return _rows_table([_not_found(v, why) for v, why in zip(values, table.column("reason").to_pylist())])
    return _rows_table(_answer_file(values, plan.gtids(values), files, pass_per_byte, plan, where))


def _answer_group(key, table, files: list[str], pass_per_byte: float, plan: Plan, where: "Where"):
    """One file's rows (``key``: its code; null: the rows no file answers),
    an Arrow table of ASSIGNED rows in, LOCATE_SCHEMA rows out, in order.
    The GTIDs (parsed by the planner) go to ``locate_columns``
    as columns: what it answers (a file's many GTIDs, by one pass) is built
    as columns too; the rest (few, not found there, positions, seq_nos beyond
    a signed long) row by row, by ``_answer_rows``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    if key[0].as_py() is None:
        return _rows_table([_not_found(v, why) for v, why in zip(table.column("gtid").to_pylist(),
                                                                  table.column("reason").to_pylist())])
    n = table.num_rows
    has = np.flatnonzero(pc.is_valid(table.column("seq")).to_numpy(zero_copy_only=False))
    with where.series(files) as logs:
        plan.share(logs)
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


def locate(spark: SparkSession, gtids: DataFrame, binlogs: "str | api.Listing", *, column: str | None = None,
           timings: dict | None = None, pass_per_byte: float = PASS_PER_BYTE,
           storage_options: dict | None = None, index_root: str | None = None,
           history: int | None = None, warnings=None) -> DataFrame:
    """Answer every row of ``gtids`` (a GTID, or a replication position with
    one GTID per domain, in ``column``: default the only column, or ``gtid``)
    against the binlogs at ``binlogs`` (a directory, a master-bin.index, a
    file; or a URL, ``s3://bucket/prefix/``, read by the executors themselves
    with ``storage_options``; or ``api.list_series``'s listing of them, not
    listed again; ``index_root``: indexes kept apart, as in ``gtidx.open``).
    They are listed once, on the driver. One output row per input row, in
    LOCATE_SCHEMA.

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
    listing = binlogs if isinstance(binlogs, api.Listing) else \
        api.list_series(binlogs, storage_options, index_root=index_root)
    kind = api.series_class(listing.flavor)      # the façade picks the series
    where = Where(storage_options, index_root, kind, warnings)
    other = _LOCATE_BY_SERIES.get(kind)
    if other is not None:
        return other(spark, gtids, listing, column, timings, pass_per_byte, where, history, t0)
    with where.open_listing(listing, history) as series:
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
    todo = [f for f in files if f not in known]
    summaries = [summary_of_entry(f, e, f == last) for f, e in known.items()]
    if todo:
        summaries += sc.parallelize([(f, f == last) for f in todo], task_count(sc, len(todo))) \
            .map(lambda fl: summary(*fl, where)).collect()
    by_file = {f: (start, end, ranges) for f, start, end, ranges in summaries}
    plan = Plan(files, [by_file[f][0] for f in files], by_file[last][1], [by_file[f][2] for f in files],
                 {f: e.raw for f, e in known.items()})

    def answer(key, table, p):
        return _answer_group(key, table, files, pass_per_byte, p, where)
    return _planned(spark, gtids, column, plan, len(todo), answer, timings, t0, timed=True)


def _planned(spark: SparkSession, gtids: DataFrame, column: str | None, plan, read: int, answer,
             timings: dict | None, t0: float, *, timed: bool) -> DataFrame:
    """The tail of either flavor's ``locate``, once its ``plan`` is made
    (``read``: the files the planning read): the plan broadcast, one task
    per file (``task_count``, ``partition_codes``), the planning's timings,
    and the two stages (``_shuffled``) over ``column`` of ``gtids``, each
    file's rows answered by ``answer(key, table, plan)``. ``timed``: the
    per-file and assignment timings are taken too (see ``locate``)."""
    sc = spark.sparkContext
    if column is None:
        column = "gtid" if "gtid" in gtids.columns else gtids.columns[0]
    bplan = sc.broadcast(plan)
    n = task_count(sc, len(plan.files))
    codes = partition_codes(n, len(plan.files))
    if timings is not None:
        timings["planning_s"] = time.perf_counter() - t0
        timings["planning_read"] = read

    assign_time = (sc.accumulator(0.0), sc.accumulator(0.0)) if timings is not None and timed else None
    if assign_time is not None:
        spent, cpu, touched_files = sc.accumulator(0.0), sc.accumulator(0.0), sc.accumulator(0)
        timings["per_file"], timings["per_file_cpu"], timings["files_touched"] = spent, cpu, touched_files
        timings["assign_s"], timings["assign_cpu"] = assign_time

        def answered(key, table):
            t, c = time.perf_counter(), time.process_time()
            out = answer(key, table, bplan.value)
            if key[0].as_py() is not None:
                spent.add(time.perf_counter() - t)
                cpu.add(time.process_time() - c)
                touched_files.add(1)
            return out
    else:
        def answered(key, table):
            return answer(key, table, bplan.value)
    return _shuffled(gtids.select(gtids[column].cast("string")), bplan, codes, n, answered, assign_time)


def _shuffled(values: DataFrame, bplan, codes: list[int], n: int, answer, assign_time=None) -> DataFrame:
    """locate's two stages, for either flavor's plan (``bplan``: broadcast,
    with ``assign_batch``): each input partition's values are planned (each
    its file's code, ``codes``) and its rows packed per file (``pack``); the
    packed rows go to their file's task (``repartition(n, file)``), which
    gathers each file's rows from every partition and answers them at once
    (``answer(key, table)``: the file's code, its ASSIGNED rows; ``per_file``).
    Arrow batches both ways; Spark moves one row per (input partition, file)
    in between, not one per value. ``assign_time``: two accumulators that
    get the planning's seconds and CPU seconds."""
    def assign(batches):
        p = bplan.value
        for texts in chunks(batches, PACK_ROWS):
            t, c = time.perf_counter(), time.process_time()
            a = p.assign_batch(texts, codes)
            out = pack(a, a.column(1))
            if assign_time is not None:         # our work alone: not the waits for Spark's batches
                assign_time[0].add(time.perf_counter() - t)
                assign_time[1].add(time.process_time() - c)
            yield out
    return values.mapInArrow(assign, PACKED).repartition(n, "file") \
        .mapInArrow(lambda batches: per_file(batches, answer), LOCATE_SCHEMA)


def _locate_mysql(spark: SparkSession, gtids: DataFrame, listing: api.Listing, column: str | None,
                  timings: dict | None, pass_per_byte: float, where: Where, history: int | None,
                  t0: float) -> DataFrame:
    """``locate`` on MySQL binlogs: the driver takes each file's
    Previous_gtids from its trusted catalog entry (``MysqlSeries.use_catalog``:
    the entries checked against the files' identities, or one LIST of an
    object-store prefix), else reads it (its preamble), and the rows are
    assigned with them (``MysqlPlan``, which hands the entries to the
    executors' series); one task per file answers its rows with
    ``MysqlSeries.locate_many`` (one pass over the file) and
    ``replica_start``. The answers are ``gtidx.open(binlogs)``'s."""
    with where.open_listing(listing, history) as series:
        files = series.files
        prevs, entries = [], {}
        for f in files:
            entry = series.cataloged(f)
            if entry is not None:           # checked against the file's identity (or a LIST): not read
                entries[f] = entry.raw
            try:
                prevs.append(series.previous_gtids(f).one_line())
            except GtidxError:
                prevs.append(None)          # its task gives the error
        read = len(files) - len(entries)

    def answer(key, table, p):
        return _answer_rows_group(key, table, files, pass_per_byte, p, where)
    return _planned(spark, gtids, column, MysqlPlan(files, prevs, entries), read, answer, timings, t0,
                    timed=False)


# The series whose binlogs Spark answers otherwise than MariaDB's (the series
# class is the façade's pick, ``api.series_class``): their ``locate``.
_LOCATE_BY_SERIES = {MysqlSeries: _locate_mysql}
