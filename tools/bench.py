"""gtidx benchmarks (kept out of the test run).

    tools/bench [report] [--rounds 3] [--docs]    gtidx vs the alternatives, side by side:
                                              bench/results/report.{json,md,png} (tools/bench_report.py)
    tools/bench report --only s3,cluster        some sections alone (tail, spark, s3, cluster), merged
                                              into the report.json there is, the rest not re-measured
    tools/bench scan   [--file F] [--runs 9]     group walk vs bare header walk
    tools/bench build  [--file F] [--runs 5]     index build vs bare header walk
    tools/bench lookup [--file F] [--n 200]      lookups by offset and by GTID near the end
    tools/bench tail   [--seconds 15]            gtidx tail lag and CPU beside a live 10.11
    tools/bench spark  [--lookups 1000000]       Spark locate vs a library loop over >= 4 GiB
    tools/bench batch  [--repeat 30] [--baseline DIR]  seek --from / pos --from end to end (lookups/s),
                                              and at 1 M lines (peak RSS); DIR: another checkout, interleaved
    tools/bench startup [--runs 30] [--venv DIR] `gtidx seek` start-up vs `python -c 'import click'`
                                              in a regular (non-editable) install, interleaved
    tools/bench changes                          format("gtidx.changes") rows/s over >= 4 GiB, with
                                              pushed-down filters (table, time, GTIDs)
    tools/bench mysql  [--targets 100]           MySQL 9.7 binlogs: gtidx's index vs the server's
                                              auto-position and mysqlbinlog --include-gtids

scan: the event-group walk (what `gtidx scan` and index builds do) against
the bare header walk, on a 256 MiB binlog written by a real MariaDB 10.11
(tools/make_workload makes it once, then it is reused). The two walks run
interleaved, in one process, on the same mmap, so the machine's noise hits
both alike; the figure is the ratio of medians (and of minimums).

The bare header walk unpacks each 19-byte event header with one precompiled
struct and adds the length, nothing else:

    while off <= last:
        timestamp, etype, server_id, length, next_pos, flags = unpack_from(mm, off)
        off += length

Also shown: the minimal walk (type and length only, no checks), the least
any Python loop over events can do.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import resource
import statistics
import struct
import subprocess
import tempfile
import sys
import time
from pathlib import Path

import random

from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.index.files import build_index

HERE = Path(__file__).resolve().parent

EVENT_HEADER = struct.Struct("<IBIIIH")    # the 19-byte common event header
TYPE_LENGTH = struct.Struct("<4xB4xI")      # just type and length


def bare_walk(mm) -> int:
    """The bare header walk: unpack each 19-byte event header, add its length."""
    unpack = EVENT_HEADER.unpack_from
    off = 4
    last = len(mm) - 19
    while off <= last:
        timestamp, etype, server_id, length, next_pos, flags = unpack(mm, off)
        off += length
    return off


def minimal_walk(mm) -> int:
    """The least any walk can do: type and length only, no checks at all."""
    unpack = TYPE_LENGTH.unpack_from
    off = 4
    last = len(mm) - 19
    while off <= last:
        etype, length = unpack(mm, off)
        off += length
    return off


def group_walk(b: Binlog) -> int:
    n = 0
    for _ in b.group_spans():
        n += 1
    return n


def group_objects(b: Binlog) -> int:
    n = 0
    for _ in b.groups():
        n += 1
    return n


def state_walk(b: Binlog) -> int:
    return len(b.state_at(b.size))


def workload_file() -> Path:
    out = subprocess.run([str(HERE / "make_workload"), "--files", "1"], check=True,
                         capture_output=True, text=True).stdout.split()
    return Path(out[0])


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.python_implementation()} {platform.python_version()}, {cpu}"


def bench_scan(args) -> dict:
    path = Path(args.file) if args.file else workload_file()
    with open(path, "rb") as f, Binlog(path) as b:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        size = len(mm)
        events = sum(1 for _ in b.headers())
        groups = group_walk(b)
        jobs = [("bare header walk", lambda: bare_walk(mm)),
                ("minimal type+length", lambda: minimal_walk(mm)),
                ("gtidx group walk", lambda: group_walk(b)),          # Binlog.group_spans()
                ("gtidx Group objects", lambda: group_objects(b)),    # Binlog.groups()
                ("gtidx state walk", lambda: state_walk(b))]          # Binlog.state_at(EOF)
        times = {name: [] for name, _ in jobs}
        for i in range(args.runs):
            for name, fn in (jobs if i % 2 == 0 else jobs[::-1]):   # alternate the order
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    base_med = statistics.median(times["bare header walk"])
    base_min = min(times["bare header walk"])
    report = {"file": str(path), "size": size, "events": events, "groups": groups,
              "runs": args.runs, "machine": machine(), "walks": {}}
    print(f"{path} ({size / 2**20:.0f} MiB, {events} events, {groups} groups), {args.runs} interleaved runs")
    print(f"  {'walk':<20} {'min s':>7} {'median':>7} {'max':>7} {'MiB/s':>7}  ratio vs bare (median / min)")
    for name, ts in times.items():
        med = statistics.median(ts)
        report["walks"][name] = {"min": min(ts), "median": med, "max": max(ts),
                                 "ratio_median": base_med / med, "ratio_min": base_min / min(ts)}
        print(f"  {name:<20} {min(ts):7.3f} {med:7.3f} {max(ts):7.3f} {size / med / 2**20:7.0f}  "
              f"{base_med / med:.2f} / {base_min / min(ts):.2f}")
    return report


def interleaved(jobs, runs: int) -> dict:
    """Run the jobs alternately (order flipped every run): noise hits all alike."""
    times = {name: [] for name, _ in jobs}
    for i in range(runs):
        for name, fn in (jobs if i % 2 == 0 else jobs[::-1]):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def bench_build(args) -> dict:
    """gtidx build (walk, record policy, pages, write, fsync) vs the bare walk."""
    path = Path(args.file) if args.file else workload_file()
    out = str(path) + ".bench.idx"
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        jobs = [("bare header walk", lambda: bare_walk(mm)),
                ("minimal type+length", lambda: minimal_walk(mm)),
                ("gtidx build", lambda: build_index(path, out=out, force=True))]
        times = interleaved(jobs, args.runs)
    res = build_index(path, out=out, force=True)
    os.unlink(out)
    size = path.stat().st_size
    base = statistics.median(times["bare header walk"])
    print(f"{path} ({size / 2**20:.0f} MiB): index {res.records} records, {res.pages} pages, "
          f"{res.size} bytes ({res.ratio:.3%} of the binlog), {args.runs} interleaved runs")
    report = {"file": str(path), "size": size, "records": res.records, "index_size": res.size,
              "machine": machine(), "runs": args.runs, "walks": {}}
    for name, ts in times.items():
        med = statistics.median(ts)
        report["walks"][name] = {"min": min(ts), "median": med, "max": max(ts), "ratio_median": base / med}
        print(f"  {name:<20} min {min(ts):6.3f}  median {med:6.3f}  max {max(ts):6.3f} s  "
              f"{size / med / 2**20:5.0f} MiB/s  {base / med:.2f}x the bare header walk")
    return report


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def bench_lookup(args) -> dict:
    """Lookups near the end of the file (last 10%): by offset (state_at) and by
    GTID (locate), warm (one open BinlogSeries, as a service keeps it) and cold (a
    new one per lookup, as one CLI call does minus interpreter start)."""
    path = Path(args.file) if args.file else workload_file()
    res = build_index(path)          # the default index (skipped when current)
    with Binlog(path) as b:
        spans = [(s, e, x) for s, e, x in b.group_spans() if s > b.size * 0.9]
    rnd = random.Random(args.seed)
    picks = rnd.sample(spans, min(args.n, len(spans)))
    offsets = [e for _, e, _ in picks]
    gtids = [f"{x[3]}-{x[1]}-{x[2]}" for _, _, x in picks]
    results = {}

    def measure(name, fn, items):
        ts = []
        for item in items:
            t0 = time.perf_counter_ns()
            fn(item)
            ts.append((time.perf_counter_ns() - t0) / 1e6)
        results[name] = {"n": len(ts), "median_ms": statistics.median(ts), "p99_ms": percentile(ts, 99)}

    with api.open_binlogs(path) as logs:
        logs.state_at(path, offsets[0])
        measure("offset, warm", lambda o: logs.state_at(path, o), offsets)
        measure("gtid, warm", logs.locate, gtids)
        vias = {logs.state_at(path, offsets[0]).via, logs.locate(gtids[0]).via}

    def cold_offset(o):
        with api.open_binlogs(path) as lg:
            lg.state_at(path, o)

    def cold_gtid(g):
        with api.open_binlogs(path) as lg:
            lg.locate(g)
    measure("offset, cold", cold_offset, offsets)
    measure("gtid, cold", cold_gtid, gtids)
    with api.open_binlogs(path, use_index=False) as scan:
        measure("offset, scan (no index)", lambda o: scan.state_at(path, o), offsets[:max(3, args.n // 20)])
    print(f"{path}: index {res.records} records ({res.action}), answers via {sorted(vias)}, "
          f"{len(offsets)} targets in the last 10%")
    for name, r in results.items():
        print(f"  {name:<24} median {r['median_ms']:7.3f} ms   p99 {r['p99_ms']:7.3f} ms   (n={r['n']})")
    return {"file": str(path), "machine": machine(), "lookups": results}


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _processed(idx: str):
    try:
        return json.loads(os.getxattr(idx, "user.gtidx")).get("processed")
    except (OSError, ValueError):
        return None


def _workload_procedure() -> str:
    from tools.make_workload import PROCEDURE
    return PROCEDURE


def bench_tail(args) -> dict:
    """A private 10.11 written at full speed (big transactions, >= 50 MB/s)
    and at 5 MB/s (the realistic small-transaction mix, throttled), with
    `gtidx tail` beside it at its defaults. Lag: how long ago the binlog
    reached the offset the tail has indexed, sampled every 20 ms. CPU: the
    tail process's user+system time over the wall time."""

    import tempfile
    import threading
    from tools.mariadb import MariaDB
    runs = {}
    with tempfile.TemporaryDirectory(prefix="gtidx-bench-tail-") as tmp:
        srv = MariaDB(Path(tmp) / "srv", {"max_binlog_size": str(1024 * 1024 * 1024)}).start()
        try:
            srv.sql("CREATE DATABASE w")
            # BLACKHOLE: rows are binlogged, not stored, so the server's binlog
            # rate is not capped by InnoDB on this 2-core machine.
            srv.sql("INSTALL SONAME 'ha_blackhole'")
            srv.sql("CREATE TABLE w.big (id BIGINT, c VARCHAR(4000)) ENGINE=BLACKHOLE")
            # the realistic small-transaction mix of tools/make_workload
            srv.sql("CREATE TABLE w.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, b INT, c VARCHAR(300))")
            srv.sql("CREATE TABLE w.m (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, c VARCHAR(100)) ENGINE=MyISAM")
            srv.sql(_workload_procedure())
            for mode, rate in (("max", None), ("5 MB/s", 5.0)):
                srv.sql("FLUSH BINARY LOGS")
                active = srv.sql("SHOW MASTER STATUS")[0][0]
                path = str(srv.binlog_dir / active)
                tail = subprocess.Popen([sys.executable, "-m", "gtidx", "tail", str(srv.binlog_dir),
                                         "--log-level", "warning"], cwd=HERE.parent)
                time.sleep(1.0)
                samples, sizes, stop = [], [], threading.Event()

                def sampler():
                    while not stop.is_set():
                        t = time.monotonic()
                        try:
                            sizes.append((t, os.path.getsize(path)))
                        except OSError:
                            return
                        p = _processed(path + ".idx")
                        if p is not None:
                            samples.append((t, p))
                        time.sleep(0.02)
                th = threading.Thread(target=sampler)
                cpu0, t0 = _cpu_seconds(tail.pid), time.monotonic()
                th.start()
                conn = srv.connect()
                cur = conn.cursor()
                start_size = os.path.getsize(path)
                i = 0
                while time.monotonic() - t0 < args.seconds:
                    if rate is None:
                        cur.execute("INSERT INTO w.big (id, c) SELECT seq, REPEAT('x', 3000) FROM w.seq_1_to_1000")
                    else:
                        cur.execute("CALL w.run(%s, 200)", (i,))
                        i += 200
                        written = (os.path.getsize(path) - start_size) / 2**20    # throttle to the rate
                        ahead = written / rate - (time.monotonic() - t0)
                        if ahead > 0:
                            time.sleep(ahead)
                wall = time.monotonic() - t0
                written = (os.path.getsize(path) - start_size) / 2**20
                time.sleep(1.0)                              # let it catch up before the CPU reading
                stop.set()
                th.join()
                cpu = _cpu_seconds(tail.pid) - cpu0
                tail.terminate()
                tail.wait()
                conn.close()
                lags = []
                for t, p in samples:                         # when did the binlog reach p?
                    reached = next((ts for ts, sz in sizes if sz >= p), t)
                    if t - t0 <= wall:
                        lags.append(max(0.0, t - reached))
                lag_bytes = []
                for t, sz in sizes:
                    prog = [p for ts, p in samples if ts <= t]
                    if prog and t - t0 <= wall:
                        lag_bytes.append(sz - prog[-1])
                runs[mode] = {"MB_per_s": written / wall, "seconds": wall,
                              "lag_s_median": statistics.median(lags), "lag_s_p99": percentile(lags, 99),
                              "lag_s_max": max(lags), "lag_bytes_median": statistics.median(lag_bytes),
                              "cpu_percent_of_a_core": 100 * cpu / (wall + 1.0)}
        finally:
            srv.stop()
    print(f"gtidx tail beside MariaDB 10.11, defaults (poll 200 ms, page 4096, span 64 KiB), "
          f"{args.seconds:.0f} s per rate")
    for mode, r in runs.items():
        print(f"  {mode:>7}: writing {r['MB_per_s']:5.1f} MB/s   lag median {r['lag_s_median']:.3f} s, "
              f"p99 {r['lag_s_p99']:.3f} s, max {r['lag_s_max']:.3f} s "
              f"(median {r['lag_bytes_median'] / 2**20:.1f} MiB behind)   tail CPU {r['cpu_percent_of_a_core']:.1f}% of a core")
    return {"machine": machine(), "runs": runs}


def sample_gtids(files: list[str], n: int, seed: int) -> tuple[list[str], int]:
    """n GTIDs drawn (seeded) from the groups of the files, ~1% of them not in
    the binlogs (never written, and purged: before the first file); and how
    many groups there were."""
    rnd = random.Random(seed)
    population = []
    for f in files:
        with Binlog(f) as b:
            population += [f"{x[3]}-{x[1]}-{x[2]}" for _, _, x in b.group_spans()]
    wanted = rnd.sample(population, min(n, len(population)))
    for i in range(0, len(wanted), 100):
        d, s_, q = wanted[i].split("-")
        wanted[i] = f"{d}-{s_}-{int(q) + 10**9}" if i % 200 else f"{d}-{s_}-1"
    return wanted, len(population)


def big_workload() -> tuple[list[str], str, int]:
    """The >= 4 GiB workload (17 closed 256 MiB binlogs from a real 10.11, made
    once by tools/make_workload): its files, their directory, their bytes."""
    out = subprocess.run([str(HERE / "make_workload"), "--files", "17"], check=True,
                         capture_output=True, text=True).stdout.split()
    files = out[0::2]
    total = sum(os.path.getsize(f) for f in files)
    if total < 4 * 2**30:
        raise SystemExit(f"workload is {total / 2**30:.2f} GiB, the benchmark needs >= 4 GiB")
    return files, os.path.dirname(files[0]), total


def tree_cpu() -> dict:
    """CPU seconds (user + system) used so far by this process's descendants,
    by command name (``java``: Spark's JVM; ``python``: its Python workers),
    dead children that were waited for included: read from /proc, so that a
    Spark run's CPU can be split whatever else runs on the machine."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    name, rest = f.read().rsplit(")", 1)
                fields = rest.split()
                children.setdefault(int(fields[1]), []).append((int(pid), name.split("(", 1)[1], fields))
            except (OSError, IndexError):
                pass
    out: dict = {}
    todo = [os.getpid()]
    while todo:
        for pid, name, fields in children.get(todo.pop(), []):
            out[name] = out.get(name, 0.0) + sum(int(x) for x in fields[11:15]) / tick
            todo.append(pid)
    return out


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


def spark_split(s: dict) -> dict:
    """Where a Spark locate run's time went (``bench_spark``'s figures, or
    a repeat's): planning (on the driver, and the input rows' on the
    executors, their task time spread over the cores), the per-file tasks'
    time spread over the cores, and the rest, Spark's own (Arrow transfer,
    shuffle, scheduling, waits)."""
    per_file = s["per_file_task_s_total"] / s["cores"]
    rows = (s.get("assign_s_total") or 0.0) / s["cores"]
    planning = s["planning_s"] + rows
    return {"planning_s": s["planning_s"], "rows_s": rows, "planning_total_s": planning, "per_file_s": per_file,
            "per_file_s_total": s["per_file_task_s_total"], "overhead_s": s["spark_s"] - planning - per_file}


def bench_spark(args) -> dict:
    """1 M lookups over >= 4 GiB of binlogs from a real 10.11 (tools/make_workload,
    17 closed files of 256 MiB): Spark's locate (local[*]) against one process
    calling BinlogSeries.locate in a loop."""
    files, directory, total = big_workload()
    t0 = time.perf_counter()
    list(api.build(directory))          # missing indexes only; current ones are skipped
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
    """Row changes on Spark (``format("gtidx.changes")``, local[*]) over the
    >= 4 GiB workload (17 closed 256 MiB binlogs from a real 10.11): every
    changed row; one rarely written table (``w.m``, its filter pushed down);
    a one-minute timestamp window, without and with a catalog (which lets
    whole files go unread); and 1,000 GTIDs (located through the indexes).
    Beside it, one process decoding one file (rows per second of one core)."""
    files, directory, total = big_workload()
    list(api.build(directory))          # missing indexes only
    from gtidx.spark.changes import ChangesReader
    small = min(files, key=os.path.getsize)
    reader = ChangesReader(small)
    t0 = time.perf_counter()
    with Binlog(small) as b:
        one_rows = sum(1 for _ in reader.rows(b, None))
    one_s = time.perf_counter() - t0
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
            api.build_catalog(directory, index_root=cat)
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
                load0 = os.getloadavg()[0]
                t0 = time.perf_counter()
                n = df.count()
                s = time.perf_counter() - t0
                runs[name] = {"rows": n, "s": s, "rows_s": n / s, "load_average": max(load0, os.getloadavg()[0])}
                print(f"  {name}: {n:,} rows in {s:.1f} s = {n / s:,.0f} rows/s")
    finally:
        spark.stop()
    return {"machine": machine(), "files": len(files), "bytes": total, "cores": cores, "runs": runs,
            "catalog_s": catalog_s, "one_process": {"file_bytes": os.path.getsize(small), "rows": one_rows,
                                                    "s": one_s, "rows_s": one_rows / one_s}}


def _first_sent(srv, executed: str, timeout: float = 600) -> tuple[str, float]:
    """A real replica connection to the MySQL server with auto-position
    (COM_BINLOG_DUMP_GTID, the server's own ``mysqlbinlog`` client: it
    speaks tagged sets, which mysql-replication 1.0.17 cannot): the GTID of
    the first transaction the server sends a replica whose executed set is
    ``executed``, and the seconds from connecting to receiving it."""
    sock = "/" + os.path.relpath(srv.socket, srv.root)
    cmd = ["chroot", str(srv.root), "mysqlbinlog", "--read-from-remote-source=BINLOG-DUMP-GTIDS",
           f"--exclude-gtids={executed}", f"--socket={sock}", "--user=root", "--connection-server-id=4242",
           "--to-last-log", ""]          # no file named: the server picks it from the files' Previous_gtids
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if "GTID_NEXT=" in line and "AUTOMATIC" not in line:
                return line.split("'")[1], time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                break
        raise SystemExit(f"the server sent no transaction for {executed[:80]}...: {proc.stderr.read()[:300]}")
    finally:
        proc.kill()
        proc.wait()


def bench_mysql(args) -> dict:
    """MySQL 9.7 binlogs (tools/make_mysql_workload: one closed ~256 MiB
    binlog, ~600,000 transactions): gtidx's index build (MB/s, index size
    ratio), ``seek --gtid`` through the index (warm, cold) and ``pos``
    against what users have without gtidx: the server finding an
    auto-position start (a real replica connection: time to the first
    transaction it sends) and ``mysqlbinlog --include-gtids`` on the file.
    Every answer is checked: gtidx's against the walk, the server's first
    transaction against the target."""
    import random as _random
    from gtidx.binlog.mysql import MysqlBinlog
    from tools.make_mysql_workload import DEFAULT_DIR, make
    from tools.mysql97 import MySQL97
    meta = make(DEFAULT_DIR, args.size_mb)
    path = str(DEFAULT_DIR / meta["file"])
    size = os.path.getsize(path)
    srv = MySQL97().ensure()
    if (srv.datadir / meta["file"]).stat().st_size != size:
        raise SystemExit(f"the server's {meta['file']} is not the workload's copy (remake it: "
                         f"rm -r {DEFAULT_DIR})")
    t0 = time.perf_counter()
    with MysqlBinlog(path) as b:
        prev = b.previous_gtids.copy()
        groups = [g for g in b.groups() if g.gtid is not None]
    walk_s = time.perf_counter() - t0
    rnd = _random.Random(args.seed)
    picks = sorted(rnd.sample(range(len(groups)), args.targets))
    executed, sets, i = prev.copy(), {}, 0
    for k in picks:                         # the executed set just before each target
        while i < k:
            executed.add(*groups[i].gtid)
            i += 1
        sets[k] = executed.one_line()
    t0 = time.perf_counter()
    built = list(api.build(path, force=True))
    build_s = time.perf_counter() - t0
    idx = path + ".idx"
    report = {"machine": machine(), "server": meta["server"], "file_bytes": size, "transactions": len(groups),
              "targets": len(picks), "walk_MB_s": size / 1e6 / walk_s, "build_MB_s": size / 1e6 / build_s,
              "index_bytes": os.path.getsize(idx), "index_ratio": os.path.getsize(idx) / size,
              "build": [str(x) for x in built][:1]}
    wrong = 0
    warm = []
    with api.open_binlogs(path) as logs:
        for k in picks:
            t0 = time.perf_counter_ns()
            loc = logs.locate(str(groups[k].gtid))
            warm.append((time.perf_counter_ns() - t0) / 1e6)
            wrong += (loc.start, loc.end) != (groups[k].start, groups[k].end)
    cold = []
    for k in picks:
        t0 = time.perf_counter_ns()
        with api.open_binlogs(path) as logs:
            loc = logs.locate(str(groups[k].gtid))
        cold.append((time.perf_counter_ns() - t0) / 1e6)
        wrong += (loc.start, loc.end) != (groups[k].start, groups[k].end)
    pos = []
    for k in picks:
        t0 = time.perf_counter_ns()
        st = api.state_at(path, groups[k].start)
        pos.append((time.perf_counter_ns() - t0) / 1e6)
        wrong += st.position.one_line() != sets[k]
    server, server_wrong = [], 0
    slow = picks[::max(1, len(picks) // args.slow_targets)][:args.slow_targets]
    for k in slow:
        gtid, s_ = _first_sent(srv, sets[k])
        server.append(s_ * 1000)
        server_wrong += gtid != str(groups[k].gtid)
    tool = []
    for k in slow:
        t0 = time.perf_counter()
        with open(os.devnull, "wb") as null:
            subprocess.run(["chroot", str(srv.root), "mysqlbinlog", f"--include-gtids={groups[k].gtid}",
                            "/" + os.path.relpath(srv.datadir / meta["file"], srv.root)], stdout=null, check=True)
        tool.append((time.perf_counter() - t0) * 1000)

    def med(v):
        return {"n": len(v), "median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v),
                "p99_ms": percentile(v, 99)}
    report["lookups"] = {"seek --gtid: gtidx index, warm": med(warm), "seek --gtid: gtidx, cold (open + lookup)":
                         med(cold), "pos: gtidx, cold (open + lookup)": med(pos),
                         "replica start: MySQL server (auto-position, connect to first transaction)": med(server),
                         "mysqlbinlog --include-gtids=G FILE": med(tool)}
    report["wrong"] = wrong + server_wrong
    for name, v in report["lookups"].items():
        print(f"  {name}: median {v['median_ms']:.3f} ms ({v['min_ms']:.3f}-{v['max_ms']:.3f}), n={v['n']}")
    print(f"  walk {report['walk_MB_s']:.0f} MB/s, build {report['build_MB_s']:.0f} MB/s, index "
          f"{report['index_ratio']:.2%} of the binlog; wrong answers: {report['wrong']}")
    return report


# Runs the command in its argv[2:] and writes its peak RSS (bytes) to the file argv[1]. The command
# is started from this small process: a child's ru_maxrss starts at its parent's resident size when
# it execs (fork and vfork alike), which for the benchmark itself would hide the command's own.
_PEAK_RSS = """import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(p.pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _measured(cmd: list, env: dict, out: Path, peak: bool = False) -> tuple[float, float, int | None, int]:
    """Run ``cmd`` (stdout to the file ``out``, from its directory): (seconds,
    CPU seconds (user + system: what a busy machine's other work changes
    least), with ``peak`` its peak RSS in bytes (its own, through
    ``_PEAK_RSS``), exit status)."""
    rss = out.with_suffix(".rss")
    with open(out, "wb") as f:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(rss), *cmd] if peak else cmd, stdout=f,
                           stderr=subprocess.DEVNULL, env=env, cwd=out.parent)
        seconds = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, int(rss.read_text()) if peak else None, p.returncode


def bench_batch(args) -> dict:
    """``gtidx seek --from`` and ``gtidx pos --from`` end to end (a process
    each, start-up included) on a copy of the bundled multifile fixture with
    its indexes: every GTID of the fixture, and every offset of its oracle,
    ``--repeat`` times over, in file order; lookups per second (median of
    ``--runs``; and per CPU second, which a busy machine disturbs less),
    and the answers checked against single calls (a sample).
    Then each batch at ``--rss-lines`` lines (1,000,000: the same lines over
    and over): its peak RSS (``_PEAK_RSS``) and lookups/s. With ``--baseline
    DIR`` (another checkout, its C extension built), every run is made by
    both checkouts in turn, interleaved, so that the machine's noise hits
    both alike."""
    import shutil
    import tempfile
    src = HERE.parent / "fixtures" / "mariadb-10.11" / "multifile"
    oracle = json.loads((src / "oracle.json").read_text())
    gtidx_cmd = [sys.executable, "-m", "gtidx"]
    checkouts = {"this": HERE.parent, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    # each checkout's gtidx, and no other: run from the temporary directory (python -m puts the
    # current directory first on the module path), with the checkout alone on PYTHONPATH
    envs = {name: dict(os.environ, PYTHONPATH=str(root)) for name, root in checkouts.items()}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "multifile"
        shutil.copytree(src, d)
        subprocess.run(gtidx_cmd + ["build", "-q", str(d)], check=True, capture_output=True, env=envs["this"],
                       cwd=tmp)
        gtids = [g for f in oracle["files"] for g, _, _ in f["groups"]]
        offsets = [f"{d / f['name']} {off}" for f in oracle["files"] for off, _ in f["pos"]]
        jobs = {"seek --from": (["seek", "--json", "--from", str(d / "gtids.txt"), str(d)], gtids),
                "pos --from": (["pos", "--json", "--from", str(d / "offsets.txt")], offsets)}
        report = {"machine": machine(), "repeat": args.repeat, "runs": args.runs, "rss_lines": args.rss_lines,
                  "checkouts": {name: str(root) for name, root in checkouts.items()}, "batches": {}}
        out = Path(tmp) / "out.txt"
        for name, (cmd, one) in jobs.items():
            lines = one * args.repeat
            Path(cmd[3]).write_text("\n".join(lines) + "\n")
            times, cpus, got = {c: [] for c in checkouts}, {c: [] for c in checkouts}, None
            for _ in range(args.runs):
                for c in checkouts:
                    seconds, cpu, _, _ = _measured(gtidx_cmd + cmd, envs[c], out)
                    times[c].append(seconds)
                    cpus[c].append(cpu)
                    answers = out.read_text().splitlines()
                    assert len(answers) == len(lines), (name, c, len(answers), len(lines))
                    got = answers if c == "this" else got
            wrong = 0
            for line, got in list(zip(lines, got))[::max(1, len(lines) // 50)]:
                single = ["seek", "--json", "--gtid", line, str(d)] if name.startswith("seek") else \
                    ["pos", "--json", *line.rsplit(" ", 1)]
                want = subprocess.run(gtidx_cmd + single, capture_output=True, text=True, env=envs["this"],
                                      cwd=tmp).stdout.strip()
                a, b = json.loads(got), json.loads(want) if want else None
                if b is None or "error" in b:       # a line without an answer: its single call's error
                    wrong += a != {"input": line, "error": (b or {}).get("error", a.get("error"))}
                else:
                    wrong += {k: v for k, v in a.items() if k != "via"} != {k: v for k, v in b.items() if k != "via"}
            entry = report["batches"][name] = {"lookups": len(lines), "checked_wrong": wrong}
            for c in checkouts:
                med, cpu = statistics.median(times[c]), statistics.median(cpus[c])
                entry[c] = {"median_s": med, "min_s": min(times[c]), "max_s": max(times[c]),
                            "per_s": len(lines) / med, "cpu_median_s": cpu, "per_cpu_s": len(lines) / cpu}
                print(f"  {name:<12} {c:<8} {len(lines):>7} lookups  median {med:6.3f} s (min {min(times[c]):.3f}, "
                      f"max {max(times[c]):.3f})  {len(lines) / med:9,.0f} lookups/s end to end, "
                      f"{len(lines) / cpu:9,.0f} per CPU second"
                      + (f"  (sampled vs single calls: {wrong} wrong)" if c == "this" else ""))
            entry.update(entry["this"])         # the checkout's own figures where the report reads them
            if args.rss_lines:
                many = (one * (args.rss_lines // len(one) + 1))[:args.rss_lines]
                Path(cmd[3]).write_text("\n".join(many) + "\n")
                for c in checkouts:
                    seconds, cpu, rss, rc = _measured(gtidx_cmd + cmd, envs[c], out, peak=True)
                    with open(out, "rb") as f:
                        answered = sum(1 for _ in f)
                    assert answered == len(many), (name, c, answered, len(many))
                    entry[c]["rss_lines"] = {"lines": len(many), "seconds": seconds, "per_s": len(many) / seconds,
                                             "cpu_s": cpu, "per_cpu_s": len(many) / cpu, "peak_rss_MB": rss / 1e6,
                                             "exit": rc}
                    print(f"  {name:<12} {c:<8} {len(many):>7} lookups  {seconds:6.3f} s  {len(many) / seconds:9,.0f} "
                          f"lookups/s, {len(many) / cpu:9,.0f} per CPU second  peak RSS {rss / 1e6:7.1f} MB")
    return report


# A bundled binlog (1 MB, 661 groups of 6 (domain, server) pairs) and a GTID near its end,
# found through the index gtidx builds for a copy of it (as a user's lookups are).
STARTUP_FIXTURE = ("mariadb-10.11", "mixed", "master-bin.000002", "2-2-225")
FROZEN_CLICK = "import click; gc.freeze()"


def startup_venv(venv: Path) -> Path:
    """A regular (non-editable) install of this checkout and click into the
    venv ``venv`` (made if missing; gtidx reinstalled each time, so that the
    figures are the checkout's): its python."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # --no-deps: a lookup needs click alone (show's mysql-replication and PyMySQL are
    # imported by that command only); pip compiles the .pyc files as a user's install has them
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    str(HERE.parent), "click"], check=True)
    return py


def bench_startup(args) -> dict:
    """CLI start-up in a regular install: ``gtidx seek --gtid G FILE`` (a
    GTID found through the index of a copy of a bundled fixture) against
    ``python -c 'import click'`` (the floor of any click CLI) and ``python -c
    pass`` (the interpreter), run interleaved (order flipped every run) in
    the venv's interpreter, with the .pyc caches in use (no
    PYTHONDONTWRITEBYTECODE) and this checkout off the module path. The
    target (issue 16): seek / import click <= 1.2, that is our own start-up
    cost (seek - import click) at most a fifth of the framework's."""
    import shutil
    import tempfile
    kind, scenario, name, gtid = STARTUP_FIXTURE
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")}
    with tempfile.TemporaryDirectory(prefix="gtidx-bench-startup-") as tmp:
        venv = Path(args.venv) if args.venv else Path(tmp) / "venv"
        t0 = time.perf_counter()
        py = startup_venv(venv)
        install_s = time.perf_counter() - t0
        gtidx_exe = str(venv / "bin" / "gtidx")
        binlog = Path(tmp) / name
        shutil.copyfile(HERE.parent / "fixtures" / kind / scenario / name, binlog)
        subprocess.run([gtidx_exe, "build", "-q", str(binlog)], env=env, cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        # the last: click with the exit gtidx's console entry has (gc.freeze at the end, cli.main),
        # so that the report shows what that exit spares apart from gtidx's own imports and work
        jobs = {"python -c pass": [str(py), "-c", "pass"],
                "python -c 'import click'": [str(py), "-c", "import click"],
                "gtidx seek --gtid G FILE": [gtidx_exe, "seek", "--gtid", gtid, str(binlog)],
                FROZEN_CLICK: [str(py), "-c", "import click, gc; gc.freeze()"]}
        answer = subprocess.run(jobs["gtidx seek --gtid G FILE"], env=env, cwd=tmp, capture_output=True,
                                text=True)
        if answer.returncode != 0 or not answer.stdout.endswith("(via index)\n"):
            raise SystemExit(f"gtidx seek did not answer through the index: {answer.stdout}{answer.stderr}")
        for cmd in jobs.values():        # warm: the page cache, and .pyc files pip did not write
            subprocess.run(cmd, env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        items = list(jobs.items())
        times = {k: [] for k in jobs}
        cpu = {k: [] for k in jobs}      # the child's user + system time: what a shared machine's load spares
        for i in range(args.runs):
            for k, cmd in (items if i % 2 == 0 else items[::-1]):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
                times[k].append((time.perf_counter() - t0) * 1e3)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[k].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3)
        profile = import_profile(py, ["import click"], jobs["gtidx seek --gtid G FILE"][1:], env, tmp,
                                 max(5, args.runs // 3))
    med = {k: statistics.median(v) for k, v in times.items()}
    click_ms, pass_ms, seek_ms = med["python -c 'import click'"], med["python -c pass"], med["gtidx seek --gtid G FILE"]
    # per run (the three measured back to back): the ratio's own spread
    ratios = [s / c for s, c in zip(times["gtidx seek --gtid G FILE"], times["python -c 'import click'"])]
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    cpu_ratios = [s / c for s, c in zip(cpu["gtidx seek --gtid G FILE"], cpu["python -c 'import click'"])]
    frozen_ms = med[FROZEN_CLICK]
    report = {"machine": machine(), "load_average": os.getloadavg(), "runs": args.runs,
              "fixture": f"{kind}/{scenario}/{name}", "gtid": gtid,
              "install_s": install_s, "ms": {k: {"min": min(v), "median": med[k], "max": max(v),
                                                 "p25": percentile(v, 25), "p75": percentile(v, 75)}
                                             for k, v in times.items()},
              "ratio_seek_to_click": seek_ms / click_ms,
              "ratio_per_run": {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)},
              "own_ms": seek_ms - click_ms, "framework_ms": click_ms - pass_ms,
              "own_share_of_click": (seek_ms - click_ms) / click_ms, "import_profile_ms": profile,
              "exit_spared_ms": click_ms - frozen_ms, "own_same_exit_ms": seek_ms - frozen_ms,
              "cpu_ms": {k: {"min": min(v), "median": cpu_med[k], "max": max(v)} for k, v in cpu.items()},
              "cpu_ratio_seek_to_click": cpu_med["gtidx seek --gtid G FILE"] / cpu_med["python -c 'import click'"],
              "cpu_ratio_per_run": {"min": min(cpu_ratios), "median": statistics.median(cpu_ratios),
                                    "max": max(cpu_ratios)},
              "raw_ms": times, "raw_cpu_ms": cpu}
    print(f"CLI start-up, regular install ({venv}), {args.runs} interleaved runs, {machine()}")
    print(f"  {'command':<28} {'median ms':>9} {'min':>7} {'p25':>7} {'p75':>7} {'max':>7}")
    for k, v in report["ms"].items():
        print(f"  {k:<28} {v['median']:9.1f} {v['min']:7.1f} {v['p25']:7.1f} {v['p75']:7.1f} {v['max']:7.1f}")
    print(f"  seek / import click: {report['ratio_seek_to_click']:.2f} (per run: median "
          f"{report['ratio_per_run']['median']:.2f}, {report['ratio_per_run']['min']:.2f}-"
          f"{report['ratio_per_run']['max']:.2f}); our own cost {report['own_ms']:.1f} ms = "
          f"{report['own_share_of_click']:.0%} of import click (target <= 20%); click itself "
          f"{report['framework_ms']:.1f} ms over the interpreter's {pass_ms:.1f} ms")
    print(f"  the frozen exit (gc.freeze) spares import click {report['exit_spared_ms']:.1f} ms; with that exit "
          f"on both sides, gtidx's own imports and work take {report['own_same_exit_ms']:.1f} ms")
    print("  CPU time (user + system, median): " + ", ".join(f"{k} {v:.1f} ms" for k, v in cpu_med.items())
          + f"; seek / import click {report['cpu_ratio_seek_to_click']:.2f} (per run: median "
          f"{report['cpu_ratio_per_run']['median']:.2f}); load average {report['load_average'][0]:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"  where gtidx's own start-up goes: the modules `import click` does not import, self time "
          f"(python -X importtime, min of {max(5, args.runs // 3)} runs), {sum(profile.values()):.1f} ms in all:")
    print("    " + ", ".join(f"{m} {v:.2f}" for m, v in list(profile.items())[:16]))
    return report


def import_profile(py, base: list[str], argv: list[str], env: dict, cwd: str, runs: int) -> dict:
    """{module: self import time in ms, min over ``runs``} of the modules that
    ``python -m gtidx ARGV`` imports and ``python -c BASE`` does not, the
    costliest first (runpy's own modules left out)."""
    def times(cmd) -> dict:
        err = subprocess.run([str(py), "-X", "importtime", *cmd], env=env, cwd=cwd, capture_output=True,
                             text=True).stderr
        out = {}
        for line in err.splitlines():
            parts = line.split("|")
            if line.startswith("import time:") and len(parts) == 3 and parts[0].split(":")[1].strip().isdigit():
                out[parts[2].strip()] = int(parts[0].split(":")[1]) / 1e3
        return out
    skip = set(times(["-c", *base])) | set(times(["-c", "import runpy"]))
    mins: dict = {}
    for _ in range(runs):
        for m, t in times(["-m", "gtidx", *argv]).items():
            if m not in skip:
                mins[m] = min(t, mins.get(m, t))
    return dict(sorted(mins.items(), key=lambda kv: -kv[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    from tools import bench_report
    bench_report.add_arguments(sub.add_parser("report", help="gtidx vs the alternatives (the default)"))
    for name, runs in (("scan", 9), ("build", 5)):
        s = sub.add_parser(name)
        s.add_argument("--file", help="a binlog (default: the 256 MiB workload file)")
        s.add_argument("--runs", type=int, default=runs)
        s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("tail")
    s.add_argument("--seconds", type=float, default=15)
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("spark")
    s.add_argument("--lookups", type=int, default=1_000_000)
    s.add_argument("--repeats", type=int, default=3, help="runs again in the same session (the JVM warm)")
    s.add_argument("--loop", type=int, default=1_000_000, help="lookups timed in the library loop")
    s.add_argument("--master", default="local[*]")
    s.add_argument("--seed", type=int, default=5)
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("changes", help="format('gtidx.changes') rows/s over the 4 GiB workload")
    s.add_argument("--queries", help="only these: all,table,window,window-catalog,gtids (default: every one)")
    s.add_argument("--master", default="local[*]")
    s.add_argument("--seed", type=int, default=5)
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("mysql", help="MySQL 9.7 binlogs: gtidx vs the server's auto-position and mysqlbinlog")
    s.add_argument("--size-mb", type=int, default=256)
    s.add_argument("--targets", type=int, default=100)
    s.add_argument("--slow-targets", type=int, default=10, help="targets for the server and mysqlbinlog")
    s.add_argument("--seed", type=int, default=3)
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("batch", help="seek --from / pos --from end to end on the multifile fixture")
    s.add_argument("--repeat", type=int, default=30, help="each GTID / offset this many times")
    s.add_argument("--runs", type=int, default=5)
    s.add_argument("--rss-lines", type=int, default=1_000_000,
                   help="then a batch of this many lines each: peak RSS and lookups/s (0: none)")
    s.add_argument("--baseline", help="another checkout (its C extension built): each run by both, interleaved")
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("startup", help="gtidx seek start-up vs import click, in a regular install")
    s.add_argument("--runs", type=int, default=30)
    s.add_argument("--venv", help="make (or reuse) the venv here; gtidx is reinstalled from this checkout "
                                  "(default: a temporary one)")
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("lookup")
    s.add_argument("--file", help="a binlog (default: the 256 MiB workload file)")
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--json", help="also write the report here")
    argv = sys.argv[1:] if argv is None else argv
    a = ap.parse_args(argv if argv and not argv[0].startswith("-") or "-h" in argv or "--help" in argv
                      else ["report", *argv])
    if a.cmd == "report":
        bench_report.run(sys.modules[__name__], a)
        return 0
    report = {"scan": bench_scan, "build": bench_build, "lookup": bench_lookup, "tail": bench_tail,
              "spark": bench_spark, "batch": bench_batch, "startup": bench_startup,
              "changes": bench_changes, "mysql": bench_mysql}[a.cmd](a)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
