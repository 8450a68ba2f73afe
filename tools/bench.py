"""gtidx benchmarks (kept out of the test run).

    tools/bench [report] [--rounds 3] [--readme]  gtidx vs the alternatives, side by side:
                                              bench/results/report.{json,md,png} (tools/bench_report.py)
    tools/bench report --only s3,cluster        some sections alone (tail, spark, s3, cluster), merged
                                              into the report.json there is, the rest not re-measured
    tools/bench scan   [--file F] [--runs 9]     group walk vs bare header walk
    tools/bench build  [--file F] [--runs 5]     index build vs bare header walk
    tools/bench lookup [--file F] [--n 200]      lookups by offset and by GTID near the end
    tools/bench tail   [--seconds 15]            gtidx tail lag and CPU beside a live 10.11
    tools/bench spark  [--lookups 1000000]       Spark locate vs a library loop over >= 4 GiB
    tools/bench batch  [--repeat 30]             seek --from / pos --from end to end (lookups/s)

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
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import random

from gtidx import api
from gtidx.binlog import Binlog
from gtidx.indexfile import build_index

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
    input rows through a mapInArrow that gives each a file (SHUFFLED), the
    repartition by file, a mapInArrow that answers every row with constants
    (LOCATE_SCHEMA), the same count; wall and CPU seconds."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    schema = to_arrow_schema(gs.LOCATE_SCHEMA)
    parts = max(1, spark.sparkContext.defaultParallelism * 4)

    def tag(batches):
        for b in batches:
            file = np.arange(len(b), dtype=np.int32) % 18
            yield pa.RecordBatch.from_arrays([b.column(0), pa.array(file)], names=["gtid", "file"])

    def answer(batches):
        for b in batches:
            n = len(b)
            zero = pa.array(np.zeros(n, np.int64))
            yield pa.RecordBatch.from_arrays(
                [b.column(0), pa.array(["gtid"] * n), pa.array(["master-bin.000001"] * n), zero, zero, zero, zero,
                 pa.nulls(n, pa.string()), pa.array(np.ones(n, bool)), pa.nulls(n, pa.string())], schema=schema)
    cpu0, driver0 = tree_cpu(), time.process_time()
    t0 = time.perf_counter()
    df.mapInArrow(tag, gs.SHUFFLED).repartition(parts, "file").mapInArrow(answer, gs.LOCATE_SCHEMA) \
        .filter("found").count()
    wall = time.perf_counter() - t0
    cpu1 = tree_cpu()
    cpu = {k: v - cpu0.get(k, 0.0) for k, v in cpu1.items() if v - cpu0.get(k, 0.0) > 0.005}
    cpu["driver"] = time.process_time() - driver0
    return {"s": wall, "cpu_s": cpu}


def bench_spark(args) -> dict:
    """1 M lookups over >= 4 GiB of binlogs from a real 10.11 (tools/make_workload,
    17 closed files of 256 MiB): Spark's locate (local[*]) against one process
    calling BinlogSeries.locate in a loop."""
    out = subprocess.run([str(HERE / "make_workload"), "--files", "17"], check=True,
                         capture_output=True, text=True).stdout.split()
    files = out[0::2]
    directory = os.path.dirname(files[0])
    total = sum(os.path.getsize(f) for f in files)
    if total < 4 * 2**30:
        raise SystemExit(f"workload is {total / 2**30:.2f} GiB, the benchmark needs >= 4 GiB")
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
        floor = spark_floor(spark, df, gs)
        per_file = timings["per_file"].value
        per_file_cpu = timings["per_file_cpu"].value if "per_file_cpu" in timings else None
        assign_cpu = timings["assign_cpu"].value if "assign_cpu" in timings else None
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
              "per_file_cpu_s_total": per_file_cpu, "assign_cpu_s_total": assign_cpu,
              "cpu_s": cpu, "floor": floor, "load_average": load, "cores": cores,
              "files_touched": timings["files_touched"].value,
              "loop_s": loop_s, "loop_measured_lookups": loop_n, "build_s": build_s}
    print(f"  spark locate (local, {cores} cores): {spark_s:.1f} s for {len(wanted)} lookups "
          f"({len(wanted) / spark_s:,.0f}/s), {found} found; session start {start_s:.1f} s (not counted)")
    print(f"    planning (file summaries, broadcast) {timings['planning_s']:.2f} s; per-file tasks "
          f"{per_file:.1f} s summed over {timings['files_touched'].value} files "
          f"({'' if per_file_cpu is None else f'CPU {per_file_cpu:.1f} s, '}load average {load:.1f}) "
          f"(= {per_file / cores:.1f} s on {cores} cores); Spark overhead (Arrow transfer, shuffle, "
          f"scheduling) ~{spark_s - timings['planning_s'] - per_file / cores:.1f} s "
          f"({(spark_s - timings['planning_s'] - per_file / cores) / spark_s:.0%} of the total)")
    if per_file_cpu is not None:
        total_cpu = sum(cpu.values())
        ours = per_file_cpu + (assign_cpu or 0.0) + cpu["driver"]
        print(f"    CPU: {total_cpu:.1f} s in all (JVM {cpu.get('java', 0.0):.1f}, Python workers "
              f"{cpu.get('python', 0.0):.1f}, driver {cpu['driver']:.1f}); ours: per-file tasks {per_file_cpu:.1f}, "
              f"planning the rows {assign_cpu or 0.0:.1f}, the driver's planning {cpu['driver']:.1f}; "
              f"Spark's own (the rest) {total_cpu - ours:.1f} s ({(total_cpu - ours) / total_cpu:.0%} of the CPU)")
    print(f"  Spark's floor (the same stages moving the same rows, no gtidx work; run after, warm): "
          f"{floor['s']:.1f} s, CPU {sum(floor['cpu_s'].values()):.1f} s (JVM {floor['cpu_s'].get('java', 0.0):.1f}, "
          f"Python workers {floor['cpu_s'].get('python', 0.0):.1f})")
    print(f"  library loop (one process, BinlogSeries.locate per GTID): {loop_s:.1f} s"
          f"{'' if loop_n == len(wanted) else f' (extrapolated from {loop_n})'}"
          f" -> Spark is {loop_s / spark_s:.1f}x faster")
    return report


def bench_batch(args) -> dict:
    """``gtidx seek --from`` and ``gtidx pos --from`` end to end (a process
    each, start-up included) on a copy of the bundled multifile fixture with
    its indexes: every GTID of the fixture, and every offset of its oracle,
    ``--repeat`` times over, in file order; lookups per second (median of
    ``--runs``), and the answers checked against single calls (a sample)."""
    import shutil
    import tempfile
    src = HERE.parent / "fixtures" / "mariadb-10.11" / "multifile"
    oracle = json.loads((src / "oracle.json").read_text())
    gtidx_cmd = [sys.executable, "-m", "gtidx"]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "multifile"
        shutil.copytree(src, d)
        subprocess.run(gtidx_cmd + ["build", "-q", str(d)], check=True, capture_output=True)
        gtids = [g for f in oracle["files"] for g, _, _ in f["groups"]] * args.repeat
        offsets = [f"{d / f['name']} {off}" for f in oracle["files"] for off, _ in f["pos"]] * args.repeat
        (d / "gtids.txt").write_text("\n".join(gtids) + "\n")
        (d / "offsets.txt").write_text("\n".join(offsets) + "\n")
        jobs = {"seek --from": (["seek", "--json", "--from", str(d / "gtids.txt"), str(d)], gtids),
                "pos --from": (["pos", "--json", "--from", str(d / "offsets.txt")], offsets)}
        report = {"machine": machine(), "repeat": args.repeat, "runs": args.runs, "batches": {}}
        for name, (cmd, lines) in jobs.items():
            times, out = [], None
            for _ in range(args.runs):
                t0 = time.perf_counter()
                p = subprocess.run(gtidx_cmd + cmd, capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
                out = p.stdout.splitlines()
            assert len(out) == len(lines), (name, len(out), len(lines))
            wrong = 0
            for line, got in list(zip(lines, out))[::max(1, len(lines) // 50)]:
                single = ["seek", "--json", "--gtid", line, str(d)] if name.startswith("seek") else \
                    ["pos", "--json", *line.rsplit(" ", 1)]
                want = subprocess.run(gtidx_cmd + single, capture_output=True, text=True).stdout.strip()
                a, b = json.loads(got), json.loads(want) if want else None
                if b is None:
                    wrong += "error" not in a
                else:
                    wrong += {k: v for k, v in a.items() if k != "via"} != {k: v for k, v in b.items() if k != "via"}
            med = statistics.median(times)
            report["batches"][name] = {"lookups": len(lines), "median_s": med, "min_s": min(times),
                                       "max_s": max(times), "per_s": len(lines) / med, "checked_wrong": wrong}
            print(f"  {name:<12} {len(lines):>7} lookups  median {med:6.3f} s (min {min(times):.3f}, max "
                  f"{max(times):.3f})  {len(lines) / med:9,.0f} lookups/s end to end  (sampled vs single "
                  f"calls: {wrong} wrong)")
    return report


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
    s.add_argument("--loop", type=int, default=1_000_000, help="lookups timed in the library loop")
    s.add_argument("--master", default="local[*]")
    s.add_argument("--seed", type=int, default=5)
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("batch", help="seek --from / pos --from end to end on the multifile fixture")
    s.add_argument("--repeat", type=int, default=30, help="each GTID / offset this many times")
    s.add_argument("--runs", type=int, default=5)
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
              "spark": bench_spark, "batch": bench_batch}[a.cmd](a)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
