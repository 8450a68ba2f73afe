"""Spark benchmarks over the >= 4 GiB workload: locate against a library loop
and against Spark's own floor (``spark``), and row changes (``changes``):
one 256 MiB binlog side by side with mariadb-binlog (``gtidx changes
--parquet`` on one core, where the time goes), then ``format("gtidx.changes")``
rows per second with filters pushed down."""
from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gtidx import admin, api
from gtidx.binlog.mariadb import Binlog
from tools.bench_common import HERE, big_workload, machine, sample_gtids, spark_split, tree_cpu, workload_file


def spark_floor(spark, df, gs) -> dict:
    """What Spark alone costs for locate's shape, in the same session: the
    input rows through a mapInArrow that gives each a file (ASSIGNED's
    columns) and packs them per file (shuffle.pack, PACKED), the repartition by file, a mapInArrow that
    unpacks them (shuffle.per_file) and answers every row with constants
    (LOCATE_SCHEMA), the same count; wall and CPU seconds. And ``in_out_s``:
    Spark's least for any locate that takes the rows into Python and gives
    answers back, one mapInArrow from the input rows to constant answers
    (LOCATE_SCHEMA) and the count, no shuffle (median of 3 runs; ``in_out_runs``)."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from gtidx.spark.shuffle import chunks, pack, per_file, task_count
    schema = to_arrow_schema(gs.LOCATE_SCHEMA)
    parts = task_count(spark.sparkContext, 18)

    def tag(batches):                 # rows of ASSIGNED's shape, a file each
        for texts in chunks(batches, gs.PACK_ROWS):
            n = len(texts)
            file = pa.array(np.arange(n, dtype=np.int32) % 18)
            number = pa.array(np.arange(n, dtype=np.int64))
            yield pack(pa.RecordBatch.from_arrays([texts, file, number, number, number, pa.nulls(n, pa.string())],
                                   names=gs.ASSIGNED_NAMES), file)

    def constant(key, table):
        n = len(table)
        zero = pa.array(np.zeros(n, np.int64))
        return pa.Table.from_arrays(
            [table.column(0), pa.array(["gtid"] * n), pa.array(["master-bin.000001"] * n), zero, zero, zero, zero,
             pa.nulls(n, pa.string()), pa.array(np.ones(n, bool)), pa.nulls(n, pa.string())], schema=schema)
    cpu0, driver0 = tree_cpu(), time.process_time()
    t0 = time.perf_counter()
    df.mapInArrow(tag, gs.PACKED).repartition(parts, "file") \
        .mapInArrow(lambda batches: per_file(batches, constant), gs.LOCATE_SCHEMA).filter("found").count()
    wall = time.perf_counter() - t0
    cpu1 = tree_cpu()
    cpu = {k: v - cpu0.get(k, 0.0) for k, v in cpu1.items() if v - cpu0.get(k, 0.0) > 0.005}
    cpu["driver"] = time.process_time() - driver0

    def straight(batches):
        for b in batches:
            yield from constant(None, pa.Table.from_batches([b])).to_batches()
    in_out = []
    for _ in range(3):
        t0 = time.perf_counter()
        df.mapInArrow(straight, gs.LOCATE_SCHEMA).filter("found").count()
        in_out.append(time.perf_counter() - t0)
    return {"s": wall, "cpu_s": cpu, "in_out_s": statistics.median(in_out), "in_out_runs": in_out}

def bench_spark(args) -> dict:
    """1 M lookups over >= 4 GiB of binlogs from a real 10.11 (tools/make_workload,
    17 closed files of 256 MiB): Spark's locate (local[*]) against one process
    calling BinlogSeries.locate in a loop."""
    files, directory, total = big_workload()
    t0 = time.perf_counter()
    list(admin.build(directory))          # missing indexes only; current ones are skipped
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    wanted, groups = sample_gtids(files, args.lookups, args.seed)
    sample_s = time.perf_counter() - t0
    print(f"{len(files)} binlogs, {total / 2**30:.2f} GiB, {groups} groups; "
          f"indexes built in {build_s:.1f} s; {len(wanted)} lookups sampled in {sample_s:.1f} s")
    from gtidx import spark as gs
    t0 = time.perf_counter()
    spark = gs.session(args.master, app="gtidx-bench")
    start_s = time.perf_counter() - t0
    try:
        df = spark.createDataFrame([(g,) for g in wanted], "gtid string")
        df = df.repartition(spark.sparkContext.defaultParallelism).cache()
        df.count()
        timings = {}
        cpu0, driver0 = tree_cpu(), time.process_time()
        t0 = time.perf_counter()
        result = gs.locate(spark, df, directory, timings=timings)
        found = result.filter("found").count()
        spark_s = time.perf_counter() - t0
        cpu1 = tree_cpu()
        cpu = {k: v - cpu0.get(k, 0.0) for k, v in cpu1.items() if v - cpu0.get(k, 0.0) > 0.005}
        cpu["driver"] = time.process_time() - driver0
        load = os.getloadavg()[0]       # the machine is shared: how busy it was during the run (1 min)
        repeats = []                    # the same locate again in the same session: the JVM warm
        for _ in range(args.repeats):
            again = {}
            t1 = time.perf_counter()
            n_again = gs.locate(spark, df, directory, timings=again).filter("found").count()
            s_again = time.perf_counter() - t1
            if n_again != found:
                raise SystemExit(f"a repeated run found {n_again}, the first {found}")
            repeats.append({"spark_s": s_again, "planning_s": again["planning_s"],
                            "per_file_task_s_total": again["per_file"].value,
                            "assign_s_total": again["assign_s"].value})
        floor = spark_floor(spark, df, gs)
        per_file = timings["per_file"].value
        per_file_cpu = timings["per_file_cpu"].value if "per_file_cpu" in timings else None
        assign_cpu = timings["assign_cpu"].value if "assign_cpu" in timings else None
        assign_s = timings["assign_s"].value if "assign_s" in timings else None
        cores = spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
    loop_n = min(len(wanted), args.loop)
    t0 = time.perf_counter()
    loop_found = 0
    with api.open_binlogs(directory) as logs:
        for g in wanted[:loop_n]:
            try:
                logs.locate(g)
                loop_found += 1
            except Exception:
                pass
    loop_s = (time.perf_counter() - t0) * len(wanted) / loop_n
    if loop_n == len(wanted) and loop_found != found:
        raise SystemExit(f"Spark found {found}, the library loop {loop_found}")
    report = {"machine": machine(), "files": len(files), "bytes": total, "lookups": len(wanted),
              "found": found, "spark_s": spark_s, "spark_session_start_s": start_s,
              "planning_s": timings["planning_s"], "per_file_task_s_total": per_file,
              "per_file_cpu_s_total": per_file_cpu, "assign_cpu_s_total": assign_cpu, "assign_s_total": assign_s,
              "cpu_s": cpu, "floor": floor, "load_average": load, "cores": cores, "repeats": repeats,
              "files_touched": timings["files_touched"].value,
              "loop_s": loop_s, "loop_measured_lookups": loop_n, "build_s": build_s}
    print(f"  spark locate (local, {cores} cores): {spark_s:.1f} s for {len(wanted)} lookups "
          f"({len(wanted) / spark_s:,.0f}/s), {found} found; session start {start_s:.1f} s (not counted)")
    split = spark_split(report)
    print(f"    planning {split['planning_total_s']:.2f} s (file summaries, broadcast {split['planning_s']:.2f} s; "
          f"the rows on the executors {split['rows_s']:.2f} s on {cores} cores); per-file tasks "
          f"{per_file:.1f} s summed over {timings['files_touched'].value} files "
          f"({'' if per_file_cpu is None else f'CPU {per_file_cpu:.1f} s, '}load average {load:.1f}) "
          f"(= {split['per_file_s']:.1f} s on {cores} cores); Spark overhead (Arrow transfer, shuffle, "
          f"scheduling) ~{split['overhead_s']:.1f} s ({split['overhead_s'] / spark_s:.0%} of the total)")
    if per_file_cpu is not None:
        total_cpu = sum(cpu.values())
        ours = per_file_cpu + (assign_cpu or 0.0) + cpu["driver"]
        print(f"    CPU: {total_cpu:.1f} s in all (JVM {cpu.get('java', 0.0):.1f}, Python workers "
              f"{cpu.get('python', 0.0):.1f}, driver {cpu['driver']:.1f}); ours: per-file tasks {per_file_cpu:.1f}, "
              f"planning the rows {assign_cpu or 0.0:.1f}, the driver's planning {cpu['driver']:.1f}; "
              f"Spark's own (the rest) {total_cpu - ours:.1f} s ({(total_cpu - ours) / total_cpu:.0%} of the CPU)")
    print(f"  Spark's floor (the same stages moving the same rows, no gtidx work; run after, warm): "
          f"{floor['s']:.1f} s, CPU {sum(floor['cpu_s'].values()):.1f} s (JVM {floor['cpu_s'].get('java', 0.0):.1f}, "
          f"Python workers {floor['cpu_s'].get('python', 0.0):.1f}); rows in and out of Python alone (one "
          f"mapInArrow, constant answers, no shuffle): {floor['in_out_s']:.2f} s")
    for i, r in enumerate(repeats):
        sp = spark_split(dict(r, cores=cores))
        print(f"  again in the same session ({i + 1}): {r['spark_s']:.1f} s ({len(wanted) / r['spark_s']:,.0f}/s); "
              f"planning {sp['planning_total_s']:.2f} s, per-file {sp['per_file_s']:.1f} s on {cores} "
              f"cores, Spark overhead ~{sp['overhead_s']:.1f} s ({sp['overhead_s'] / r['spark_s']:.0%})")
    print(f"  library loop (one process, BinlogSeries.locate per GTID): {loop_s:.1f} s"
          f"{'' if loop_n == len(wanted) else f' (extrapolated from {loop_n})'}"
          f" -> Spark is {loop_s / spark_s:.1f}x faster")
    return report


def bench_changes(args) -> dict:
    """Row changes. First one binlog (``--file``, default the 256 MiB
    workload file from a real 10.11), side by side in one run
    (``one_file_changes``): mariadb-binlog's decoding, ``gtidx changes
    --parquet`` on one core, and where gtidx's time goes. Then Spark
    (``format("gtidx.changes")``, local[*]) over the >= 4 GiB workload (17
    closed 256 MiB binlogs; ``--workload DIR``: the binlogs of DIR instead,
    to try the code on a small set; ``--no-spark``: not at all): every
    changed row (each binlog in partitions of ``split_bytes``, 64 MiB); one
    rarely written table (``w.m``, its filter pushed down); a one-minute
    timestamp window, without and with a catalog (which lets whole files go
    unread); and 1,000 GTIDs (located through the indexes)."""
    file = Path(args.file) if getattr(args, "file", None) else workload_file()
    with tempfile.TemporaryDirectory(prefix="gtidx-bench-changes-") as tmp:
        one = one_file_changes(file, tmp)
    report = {"machine": machine(), "one_file": one}
    if getattr(args, "no_spark", False):
        return report
    if getattr(args, "workload", None):
        files = api.list_binlogs(args.workload)
        directory, total = str(args.workload), sum(os.path.getsize(f) for f in files)
    else:
        files, directory, total = big_workload()
    list(admin.build(directory))          # missing indexes only
    # a one-minute window in the middle of the workload's time, and 1,000 GTIDs drawn from it
    with Binlog(files[len(files) // 2]) as b:
        stamps = [x[0] for _, _, x in b.group_spans()]
    mid = stamps[len(stamps) // 2]
    wanted, _ = sample_gtids(files[:3], 1000, args.seed)
    from gtidx import spark as gs
    spark = gs.session(args.master, app="gtidx-bench-changes")
    cores = spark.sparkContext.defaultParallelism
    runs = {}
    try:
        src = spark.read.format("gtidx.changes")
        with tempfile.TemporaryDirectory(prefix="gtidx-bench-cat-") as cat:
            t0 = time.perf_counter()
            admin.build_catalog(directory, index_root=cat)
            catalog_s = time.perf_counter() - t0
            window = f"timestamp BETWEEN {mid} AND {mid + 59}"
            gtid_in = "gtid IN (" + ", ".join(f"'{g}'" for g in wanted) + ")"
            queries = [("all", "every row", src.load(directory)),
                       ("table", "table = 'w.m' (pushed down)", src.load(directory).where("table = 'w.m'")),
                       ("window", "one-minute timestamp window, no catalog", src.load(directory).where(window)),
                       ("window-catalog", "one-minute timestamp window, with a catalog",
                        src.option("index_root", cat).load(directory).where(window)),
                       ("gtids", "gtid IN 1,000 GTIDs (located through the indexes)",
                        src.load(directory).where(gtid_in))]
            for key, name, df in queries:
                if args.queries and key not in args.queries.split(","):
                    continue
                partitions = df.rdd.getNumPartitions() if key == "all" else None
                load0 = os.getloadavg()[0]
                t0 = time.perf_counter()
                n = df.count()
                s = time.perf_counter() - t0
                runs[name] = {"rows": n, "s": s, "rows_s": n / s, "load_average": max(load0, os.getloadavg()[0])}
                if partitions is not None:
                    runs[name]["partitions"] = partitions
                print(f"  {name}: {n:,} rows in {s:.1f} s = {n / s:,.0f} rows/s"
                      + ("" if partitions is None else f" ({partitions} partitions)"))
    finally:
        spark.stop()
    return dict(report, files=len(files), bytes=total, cores=cores, runs=runs, catalog_s=catalog_s)


def _run(argv: list[str], **kw) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, peak RSS in bytes, exit status) of one
    command, this child's own (``os.wait4``: not the other children's)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, **kw)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, p.returncode


def one_file_changes(file: Path, tmp: str) -> dict:
    """One binlog's row changes, side by side in one run, each command on
    core 0 (``taskset -c 0``, where there is one):

    * ``mariadb-binlog -v --base64-output=DECODE-ROWS FILE > /dev/null``
      (the server's C decoder, the rows printed as pseudo-SQL);
    * ``gtidx changes --parquet OUT FILE`` (this checkout, its own process):
      rows/s, peak RSS; the rows counted from the Parquet files' metadata,
      and mariadb-binlog's rows/s counted with them;
    * in this process, where gtidx's time goes: ``rowbatch.source_batches``
      timed batch by batch (decoding and building the batch), the time in
      building Arrow arrays of it (``PyBuilder.finish``, or the compiled
      decoder's ``batch_from``) apart, and each batch written to Parquet
      (``ParquetWriter.write_batch``, the CLI's writer) timed apart: the
      shares of decoding, Arrow and Parquet writing."""
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    size = os.path.getsize(file)
    out = {"file": str(file), "file_bytes": size, "pinned": bool(pin)}
    tool = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if tool:
        wall, cpu, rss, rc = _run(pin + [tool, "-v", "--base64-output=DECODE-ROWS", str(file)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        out["mariadb_binlog"] = {"tool": os.path.basename(tool), "s": wall, "cpu_s": cpu, "rss_bytes": rss,
                                 "exit": rc}
        print(f"  {os.path.basename(tool)} -v --base64-output=DECODE-ROWS > /dev/null: {wall:.1f} s "
              f"(CPU {cpu:.1f} s), exit {rc}")
    parquet = os.path.join(tmp, "parquet")
    os.mkdir(parquet)
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    wall, cpu, rss, rc = _run(pin + [sys.executable, "-m", "gtidx", "changes", "--quiet", "--parquet", parquet,
                                     str(file)], env=env, stdout=subprocess.DEVNULL)
    import pyarrow.parquet as pq
    rows = sum(pq.ParquetFile(os.path.join(parquet, f)).metadata.num_rows for f in os.listdir(parquet))
    out["gtidx_parquet"] = {"s": wall, "cpu_s": cpu, "rss_bytes": rss, "exit": rc, "rows": rows,
                            "rows_s": rows / wall}
    print(f"  gtidx changes --parquet (one core): {rows:,} rows in {wall:.1f} s (CPU {cpu:.1f} s) = "
          f"{rows / wall:,.0f} rows/s, peak RSS {rss / 2**20:.0f} MiB, exit {rc}")
    if "mariadb_binlog" in out:
        m = out["mariadb_binlog"]
        m["rows_s"] = rows / m["s"]
        out["ratio"] = (rows / wall) / m["rows_s"]
        print(f"  {m['tool']}: {m['rows_s']:,.0f} rows/s; gtidx / {m['tool']}: {out['ratio']:.2f}x")
    out["split"] = time_split(file, os.path.join(tmp, "split.parquet"))
    sp = out["split"]
    print(f"  in one process ({'compiled' if sp['compiled'] else 'pure Python'} decoder): {sp['rows']:,} rows in "
          f"{sp['total_s']:.1f} s; decoding {sp['decode_s']:.1f} s ({sp['decode_s'] / sp['total_s']:.0%}), "
          f"Arrow {sp['arrow_s']:.1f} s ({sp['arrow_s'] / sp['total_s']:.0%}), Parquet writing "
          f"{sp['parquet_s']:.1f} s ({sp['parquet_s'] / sp['total_s']:.0%})")
    return out


def time_split(file: Path, target: str) -> dict:
    """``one_file_changes``' in-process split: every batch of ``file``
    (``rowbatch.source_batches``), the Arrow building timed apart, each
    written to the Parquet file ``target``."""
    import pyarrow.parquet as pq
    from gtidx import rowbatch
    from gtidx.changes import ChangeSource
    arrow = [0.0]

    def timed(fn):
        def inner(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                arrow[0] += time.perf_counter() - t
        return inner
    finish, batch_from = rowbatch.PyBuilder.finish, rowbatch.batch_from
    rowbatch.PyBuilder.finish, rowbatch.batch_from = timed(finish), timed(batch_from)
    source, stats, made, written, rows = ChangeSource(str(file)), {}, 0.0, 0.0, 0
    try:
        with source.open(str(file)) as b, pq.ParquetWriter(target, rowbatch.ARROW_SCHEMA) as writer:
            batches = rowbatch.source_batches(source, b, None, stats=stats)
            while True:
                t0 = time.perf_counter()
                batch = next(batches, None)
                t1 = time.perf_counter()
                made += t1 - t0
                if batch is None:
                    break
                writer.write_batch(batch)
                written += time.perf_counter() - t1
                rows += batch.num_rows
    finally:
        rowbatch.PyBuilder.finish, rowbatch.batch_from = finish, batch_from
    return {"compiled": importlib.util.find_spec("gtidx._rows") is not None, "rows": rows, "decode_s": made - arrow[0], "arrow_s": arrow[0],
            "parquet_s": written, "total_s": made + written, "groups": stats.get("groups", 0),
            "declined": stats.get("declined", 0)}
