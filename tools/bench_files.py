"""Benchmarks of one binlog file: the event-group walk (``scan``), the index
build (``build``) and lookups near the end (``lookup``), each against the
bare header walk or cold / warm / scanning variants of itself."""
from __future__ import annotations

import mmap
import os
import random
import statistics
import time
from pathlib import Path

from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.index.build import build_index
from tools.bench_common import bare_walk, interleaved, machine, minimal_walk, percentile, workload_file


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
