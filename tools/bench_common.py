"""What every benchmark measures with: the bare walks a figure is a ratio to,
the workload files, the machine's line, interleaved timing, percentiles, the
Spark run's split and the process tree's CPU; and the comparison with another
checkout (``--baseline DIR``: that tree's own ``tools/bench`` run in turn with
this one's, a process each, since both trees hold a module named gtidx)."""
from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import random

from gtidx.binlog.mariadb import Binlog

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


def interleaved(jobs, runs: int) -> dict:
    """Run the jobs alternately (order flipped every run): noise hits all alike."""
    times = {name: [] for name, _ in jobs}
    for i in range(runs):
        for name, fn in (jobs if i % 2 == 0 else jobs[::-1]):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]

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


# -- another checkout, interleaved ---------------------------------------------------------------------

def child_argv(argv: list[str], drop=("--baseline", "--json", "--rounds", "--venv")) -> list[str]:
    """``argv`` (a sub-benchmark's options) without the options that belong to
    the comparison itself (each given as ``--opt VALUE`` or ``--opt=VALUE``)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in drop:
            skip = True
        elif not a.startswith(tuple(d + "=" for d in drop)):
            out.append(a)
    return out


def against_baseline(sub: str, argv: list[str], baseline: str, rounds: int, figures) -> dict:
    """Runs ``tools/bench SUB ARGV --json F`` of this checkout and of the
    checkout ``baseline`` alternately (the order flipped every round, a new
    process each: both trees hold a module named gtidx, and each tree's
    ``tools/bench`` puts its own first on the module path), ``rounds`` times
    each; ``figures(report) -> {name: value}`` takes the figures compared
    from each run's JSON report. Prints every run's figures and, per
    figure, the ratio of the medians (this / baseline); returns them."""
    checkouts = {"this": HERE.parent, "baseline": Path(baseline).resolve()}
    for name, root in checkouts.items():
        if not (root / "tools" / "bench").exists():
            raise SystemExit(f"{root} has no tools/bench: --baseline names another checkout of gtidx")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHON"] = sys.executable
    runs: dict = {c: [] for c in checkouts}
    print(f"tools/bench {sub} {' '.join(argv)}: {rounds} runs each of this checkout ({checkouts['this']}) "
          f"and the baseline ({checkouts['baseline']}), alternating, a process each")
    with tempfile.TemporaryDirectory(prefix="gtidx-bench-baseline-") as tmp:
        for i in range(rounds):
            for c in (list(checkouts) if i % 2 == 0 else list(checkouts)[::-1]):
                out = Path(tmp) / f"{c}-{i}.json"
                p = subprocess.run([str(checkouts[c] / "tools" / "bench"), sub, *argv, "--json", str(out)],
                                   env=env, cwd=tmp, capture_output=True, text=True)
                if p.returncode != 0:
                    raise SystemExit(f"{c}'s tools/bench {sub} failed (exit {p.returncode}):\n"
                                     f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
                got = figures(json.loads(out.read_text()))
                runs[c].append(got)
                print(f"  run {i + 1} {c:<8} " + ", ".join(f"{k} {v:.4g}" for k, v in got.items()), flush=True)
    report = {"machine": machine(), "sub": sub, "argv": argv, "rounds": rounds,
              "checkouts": {c: str(r) for c, r in checkouts.items()}, "figures": {}}
    print(f"  {'figure':<36} {'this (median)':>14} {'baseline':>10}  this / baseline (per round: median, min-max)")
    for name in runs["this"][0]:
        this = [r[name] for r in runs["this"]]
        base = [r[name] for r in runs["baseline"]]
        ratio = statistics.median(this) / statistics.median(base) if statistics.median(base) else float("nan")
        # each round's two runs were back to back: their ratio has the machine's slower swings divided out
        per_round = [t / b for t, b in zip(this, base) if b]
        report["figures"][name] = {"this": this, "baseline": base, "ratio_of_medians": ratio,
                                   "ratio_per_round": per_round}
        print(f"  {name:<36} {statistics.median(this):14.4g} {statistics.median(base):10.4g}  {ratio:.3f}x"
              + (f"  ({statistics.median(per_round):.3f}, {min(per_round):.3f}-{max(per_round):.3f})"
                 if per_round else ""))
    return report


def build_figures(r: dict) -> dict:
    """``bench build``'s figures compared with a baseline: seconds (medians)."""
    return {"gtidx build s": r["walks"]["gtidx build"]["median"],
            "bare header walk s": r["walks"]["bare header walk"]["median"],
            "build / bare walk": r["walks"]["gtidx build"]["median"] / r["walks"]["bare header walk"]["median"]}


def lookup_figures(r: dict) -> dict:
    """``bench lookup``'s figures compared with a baseline: median ms of each kind."""
    return {f"{name} ms": v["median_ms"] for name, v in r["lookups"].items()}


def spark_figures(r: dict) -> dict:
    """``bench spark``'s figures compared with a baseline: seconds of the first
    locate of a session, and of the repeats (median)."""
    out = {"spark locate s (first)": r["spark_s"]}
    if r.get("repeats"):
        out["spark locate s (again, median)"] = statistics.median(x["spark_s"] for x in r["repeats"])
    return out


BASELINE_FIGURES = {"build": build_figures, "lookup": lookup_figures, "spark": spark_figures}


# -- figures as the report gives them --------------------------------------------------------------------

def ms_since(t0: int) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter_ns()``)."""
    return (time.perf_counter_ns() - t0) / 1e6


def spread(values) -> dict:
    """min / median / max of the values: how the report gives a figure measured over rounds."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def machine_date() -> str:
    """Now, as the report dates its figures (UTC, to the minute)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def three_digits(x: float) -> str:
    """Three significant digits (thousands separated): 0.171, 43.1, 1,379."""
    return f"{x:,.0f}" if x >= 999.5 else f"{float(f'{x:.3g}'):g}"


def spread_text(sp: dict) -> str:
    """A ``spread`` as the report's tables show it: median (min-max)."""
    return f"{three_digits(sp['median'])} ({three_digits(sp['min'])}-{three_digits(sp['max'])})"
