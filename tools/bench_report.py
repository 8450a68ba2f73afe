"""`tools/bench report`: gtidx against what users would otherwise use, side by side.

One run, one machine, the same files for every contender. Each figure is a
ratio measured in the same round (this machine is shared and noisy), and the
rounds are repeated: the report gives min / median / max over the rounds.

    workload   4 closed binlogs of 256 MiB from a real MariaDB 10.11 (tools/make_workload)
    build      gtidx build vs a bare header walk (same process, same mmap) vs
               `mariadb-binlog FILE > /dev/null`; two files on two cores
    lookups    100 random targets (group boundaries) over the 4 files:
               by offset: gtidx through the index (warm, cold), gtidx scanning,
                 the live 10.11's BINLOG_GTID_POS (it scans), 11.8's (its index)
               by GTID: gtidx locate / replica_start (warm, cold), gtidx scanning,
                 python-mysql-replication streaming from the file start to the GTID,
                 a replica connecting at the GTID's position to 10.11 (scan) and 11.8 (index)
    cli        `gtidx seek` end to end vs `python -c pass` (interpreter start)
    startup    `gtidx seek` in a regular (non-editable) install vs `python -c 'import click'`
               and `python -c pass`, interleaved (tools/bench startup; the target: seek
               <= 1.2x import click)
    sizes      index size / binlog size per fixture, gtidx vs the server's own .idx
    tail       `gtidx tail` lag and CPU beside a 10.11 written at full speed and 5 MB/s
    spark      Spark locate vs a library loop (tools/bench spark, fewer lookups)
    changes    format("gtidx.changes") over the >= 4 GiB workload: every row, and with
               table / time / GTID filters pushed down (tools/bench changes)
    s3         the first file uploaded to a moto_server (tools/s3server.py) once: `build`
               from S3 (MB/s, GETs, PUTs) vs the local build and a download; one-shot
               seek/pos on S3 through the index (requests counted on the server, bytes
               read, ms over 50 seeded targets) vs downloading the object and scanning it
    cluster    Spark locate of 100,000 seeded GTIDs over the workload files on a
               standalone cluster (tools/spark_cluster.py: 1 master, 1 worker, 2 cores)
               vs local[2], alternating; every row compared between the two
    mysql      a 256 MiB MySQL 9.7 binlog (tools/make_mysql_workload): gtidx's index (size,
               build MB/s), seek/pos through it vs the server finding an auto-position start
               (a real replica connection: connect to first transaction) and
               `mysqlbinlog --include-gtids` (tools/bench mysql)

`--only s3,cluster` (any of tail, spark, changes, s3, cluster, startup, mysql) measures those
sections alone and merges them into the existing report.json (the other figures are
kept, not measured again; `rounds` is the main tables: build, lookups, CLI start, index sizes), with the workload files there are (one is made
if there is none; s3 uses the first, cluster all of them).

MariaDB 11.8 runs inside the Debian 13 root that ../shared/tools/mariadb-11.8.sh
builds (GTIDX_M118_ROOT, default /var/tmp/gtidx-ci-m118): a second, private
instance (its own datadir, socket and port) into which the first workload file
is replayed once (`mariadb-binlog | mariadb`, same GTIDs), so 11.8 answers from
its own index over the same transactions. Without the tool, that part is left
out and the report says so.

Writes bench/results/report.{json,md,png}; --docs also puts the Markdown
table and the chart into docs/benchmarks.md between the bench markers.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from argparse import Namespace
from types import SimpleNamespace
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from gtidx.index.build import build_index
from tools import bench_cli, bench_live, bench_spark
from tools.bench_common import (bare_walk, machine, machine_date, sample_gtids, spark_split, spread, spread_text,
                                three_digits)
from tools.bench_remote import (cluster_section, markdown_cluster, markdown_s3, s3_section, summarize_cluster,
                                summarize_s3)
from tools.bench_rounds import M118, build_round, cli_round, index_sizes, lookup_round, pick_targets
from tools.mariadb import MariaDB

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = ROOT / "bench" / "results"

# What the report measures with (``run``'s ``bench``; a test passes a fake): the
# sub-benchmarks it shows a section of, and the helpers its own rounds use.
MEASURES = SimpleNamespace(machine=machine, bare_walk=bare_walk, sample_gtids=sample_gtids,
                           bench_tail=bench_live.bench_tail, bench_spark=bench_spark.bench_spark,
                           bench_startup=bench_cli.bench_startup, bench_changes=bench_spark.bench_changes,
                           bench_mysql=bench_live.bench_mysql)


# -- machine ------------------------------------------------------------------------------------------

def machine_facts(bench) -> dict:
    mem = "?"
    try:
        kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    ver = subprocess.run(["mariadb-binlog", "--version"], capture_output=True, text=True).stdout.strip()
    return {"python_cpu": bench.machine(), "cores": os.cpu_count(), "memory": mem,
            "mariadb_binlog": ver, "date": machine_date(), "versions": versions()}


def versions() -> dict:
    """What the figures were measured with: gtidx (and its commit), whether
    its compiled walk was there, and the libraries it ran on."""
    from importlib import metadata
    out = {}
    for dist in ("gtidx", "pyspark", "pyarrow", "mysql-replication", "fsspec", "click"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    out["commit"] = commit or None
    try:
        import gtidx._skip  # noqa: F401
        out["compiled_walk"] = True
    except ImportError:
        out["compiled_walk"] = False
    return out


def versions_line(m: dict) -> str:
    v = m.get("versions")
    if not v:
        return ""
    libs = ", ".join(f"{k} {v[k]}" for k in ("pyspark", "pyarrow", "mysql-replication", "fsspec", "click") if v.get(k))
    return (f" gtidx {v.get('gtidx')} ({v.get('commit')}, compiled walk "
            f"{'on' if v.get('compiled_walk') else 'off'}); {libs}; {m.get('mariadb_binlog', '')}.")

# -- the report ---------------------------------------------------------------------------------------

SECTIONS = ("tail", "spark", "changes", "s3", "cluster", "startup", "mysql")     # measured on their own too: --only
ROUNDS = "rounds"        # --only rounds: the main tables (measure_rounds), the other sections kept


def parse_only(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in SECTIONS + (ROUNDS,)]
    if bad or not names:
        raise SystemExit(f"--only takes a comma-separated list of {', '.join((ROUNDS,) + SECTIONS)}; "
                         f"not {text!r}")
    return names


def workload_files(n: int | None) -> list[str]:
    """The closed workload binlogs (tools/make_workload): n of them, made if
    missing; None: all those already there (one made only if there is none)."""
    out = subprocess.run([str(HERE / "make_workload"), "--files", str(n or 1)], check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0::2][:n] if n else out[0::2]


def run_sections(bench, report: dict, names: list[str], files: list[str], args) -> None:
    """Measures the named sections into ``report`` (each replaces its own key only)."""
    for name in names:
        if name == "tail":
            report["tail"] = bench.bench_tail(Namespace(seconds=args.tail_seconds, idle=10.0, watch="poll,auto"))
        elif name == "spark":
            report["spark"] = bench.bench_spark(Namespace(lookups=args.spark_lookups, loop=args.spark_loop,
                                                          master="local[*]", seed=args.seed, repeats=3))
        elif name == "startup":
            report["startup"] = bench.bench_startup(Namespace(runs=args.startup_runs, venv=None))
        elif name == "changes":
            report["changes"] = bench.bench_changes(Namespace(master="local[*]", seed=args.seed, queries=None, file=None,
                                                              workload=None, no_spark=False))
        elif name == "mysql":
            report["mysql"] = bench.bench_mysql(Namespace(size_mb=256, targets=100, slow_targets=10, seed=args.seed))
        else:
            section = s3_section if name == "s3" else lambda *a: cluster_section(bench, *a)
            with tempfile.TemporaryDirectory(prefix=f"gtidx-bench-{name}-") as tmp:
                report[name] = section(files, args, tmp)


def measure_rounds(bench, report: dict, args) -> list[str]:
    """The main tables, into ``report``: build, lookups (the servers and
    python-mysql-replication too), CLI start and index sizes, ``args.rounds``
    rounds on the first 4 workload files (made if missing), which it
    returns; the machine's facts taken again."""
    files = workload_files(4)
    wl = json.loads((Path(files[0]).parent.parent / "workload.json").read_text())
    report.update({"machine": machine_facts(bench), "rounds": args.rounds, "targets": args.targets,
                   "slow_targets": args.slow_targets,
                   "workload": {"server": wl["server"], "files": [os.path.basename(f) for f in files],
                                "bytes": sum(os.path.getsize(f) for f in files)}})
    for key in ("m118_missing", "server_118", "m118_replay_s", "m118_via"):
        report.pop(key, None)
    print(f"workload: {len(files)} binlogs, {report['workload']['bytes'] / 2**20:.0f} MiB, from {wl['server']}")
    for f in files:
        build_index(f)
    root = Path(files[0]).parent.parent
    srv = MariaDB(root / "server", {"max_binlog_size": str(wl["size_mb"] * 1024 * 1024)})
    srv.binlog_dir = root / "binlog"
    srv.start()
    m118 = None
    if not args.no_118:
        try:
            t0 = time.monotonic()
            m118 = M118(files[0], args.targets, args.seed).start()
            print(f"MariaDB {m118.version}: {files[0]} replayed as {m118.binlog} "
                  f"({m118.replay_s} s; ready in {time.monotonic() - t0:.0f} s)")
        except Exception as e:
            report["m118_missing"] = str(e)
            print(f"MariaDB 11.8 left out: {e}")
    try:
        report["server"] = srv.sql("SELECT VERSION()")[0][0]
        if m118 is not None:
            report["server_118"] = m118.version
            report["m118_replay_s"] = m118.replay_s
        targets = pick_targets(files, args.targets, args.seed)
        rounds = {"build": [], "lookups": [], "cli": []}
        with tempfile.TemporaryDirectory(prefix="gtidx-bench-") as tmp, ProcessPoolExecutor(2) as pool:
            list(pool.map(abs, [0, 0]))            # start both workers before timing
            for r in range(args.rounds):
                t0 = time.monotonic()
                rounds["build"].append(build_round(bench, files, tmp, pool))
                rounds["lookups"].append(lookup_round(targets, args.slow_targets, srv, m118))
                rounds["cli"].append(cli_round(targets[-1]["file"], targets[-1]["gtid"], args.cli_reps))
                print(f"round {r + 1}/{args.rounds} in {time.monotonic() - t0:.0f} s")
        report["rounds_raw"] = rounds
        report["index_sizes"] = index_sizes(files, m118)
        if m118 is not None:
            report["m118_via"] = m118.via
    finally:
        srv.stop()
        if m118 is not None:
            m118.stop()
    return files


def run(bench, args) -> dict:
    if args.rewrite:
        report = json.loads((RESULTS / "report.json").read_text())
        summarize(report)
        write(report, args.docs)
        return report
    only = parse_only(args.only)
    if only is not None:
        # these sections alone, merged into the report there is (the others kept as they are)
        path = RESULTS / "report.json"
        report = json.loads(path.read_text()) if path.exists() else {"machine": machine_facts(bench)}
        if ROUNDS in only:
            measure_rounds(bench, report, args)
        run_sections(bench, report, [n for n in only if n != ROUNDS],
                     workload_files(None) if {"s3", "cluster"} & set(only) else [], args)
        summarize(report)
        write(report, args.docs)
        return report
    report = {"machine": machine_facts(bench)}
    files = measure_rounds(bench, report, args)
    run_sections(bench, report, [n for n in SECTIONS if not getattr(args, f"no_{n}")], files, args)
    summarize(report)
    write(report, args.docs)
    return report


def write(report: dict, docs: bool) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "report.json").write_text(json.dumps(report, indent=1))
    md = markdown(report)
    (RESULTS / "report.md").write_text(md)
    if "lookups" in report:
        try:
            chart(report, RESULTS / "report.png")
        except ImportError as e:            # the chart needs the bench extra; the figures do not
            print(f"report.png not made ({e.name} is missing: pip install -e '.[bench]')", file=sys.stderr)
    print(md)
    if docs:
        update_docs(md)


def summarize(report: dict) -> None:
    """Per-round ratios, then min / median / max over the rounds (and each
    section measured apart, --only, summarized alone)."""
    if "s3" in report:
        summarize_s3(report["s3"])
    if "cluster" in report:
        summarize_cluster(report["cluster"])
    if "rounds_raw" not in report:
        return
    b = report["rounds_raw"]["build"]
    report["build"] = {name: {"MB_s": spread([r[name] for r in b]),
                              "x_gtidx": spread([r[name] / r["gtidx build"] for r in b])}
                       for name in b[0]}
    lk = report["rounds_raw"]["lookups"]
    base = {"offset": "offset: gtidx index, warm", "gtid": "gtid: gtidx locate, warm"}
    report["lookups"] = {}
    for name in lk[0]:
        ref = base[name.split(":")[0]]
        report["lookups"][name] = {
            "n": lk[0][name]["n"], "wrong": sum(r[name]["wrong"] for r in lk),
            "median_ms": spread([r[name]["median_ms"] for r in lk]),
            "p99_ms": spread([r[name]["p99_ms"] for r in lk]),
            "x_gtidx": spread([r[name]["median_ms"] / r[ref]["median_ms"] for r in lk])}
    c = report["rounds_raw"]["cli"]
    report["cli"] = {name: {"ms": spread([r[name] for r in c]),
                            "x_python": spread([r[name] / r["python -c pass"] for r in c])} for name in c[0]}

def markdown(r: dict) -> str:
    m = r["machine"]
    if "rounds_raw" not in r:        # sections measured alone (--only) and nothing else yet
        lines = [f"Machine: {m['python_cpu']}, {m['cores']} cores, {m['memory']}; {m['date']}.{versions_line(m)}"]
        return "\n".join(lines + _markdown_sections(r)) + "\n"
    lines = [f"Machine: {m['python_cpu']}, {m['cores']} cores, {m['memory']}; {m['date']}.{versions_line(m)} "
             f"Servers: MariaDB {r['server']}" + (f" and {r['server_118']}" if "server_118" in r else "")
             + f". Workload: {len(r['workload']['files'])} binlogs, {r['workload']['bytes'] / 2**20:.0f} MiB "
             f"written by {r['workload']['server']}. {r['rounds']} rounds; figures are median (min-max) "
             "over the rounds, ratios taken within each round.", ""]
    lines += ["**Build** (one 256 MiB binlog)", "",
              "| contender | MB/s | MB/s / gtidx build's |", "|---|---:|---:|"]
    for name, v in r["build"].items():
        lines.append(f"| {name} | {spread_text(v['MB_s'])} | {spread_text(v['x_gtidx'])} |")
    lines += ["", f"**Lookups** ({r['targets']} random targets (group boundaries) over the workload; "
              f"python-mysql-replication, ~30 s a target, gets {r['slow_targets']} of them; the 11.8 rows "
              "run on its replayed copy of the first file, 100 targets there)", "",
              "| question: contender | n | median ms | p99 ms | time / gtidx warm | wrong |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, v in r["lookups"].items():
        lines.append(f"| {name} | {v['n']} | {spread_text(v['median_ms'])} | {spread_text(v['p99_ms'])} | "
                     f"{spread_text(v['x_gtidx'])} | {v['wrong']} |")
    if "m118_missing" in r:
        lines.append(f"\nMariaDB 11.8 left out: {r['m118_missing']}")
    lines += ["", "**CLI start** (end to end, median of the repetitions)", "",
              "| command | ms | / `python -c pass` |", "|---|---:|---:|"]
    for name, v in r["cli"].items():
        lines.append(f"| `{name}` | {spread_text(v['ms'])} | {spread_text(v['x_python'])} |")
    lines += ["", "**Index size** (default build: 4 KiB pages, span_min 64 KiB, 2% budget)", "",
              "| binlogs | binlog bytes | gtidx .idx | server .idx |", "|---|---:|---:|---:|"]
    for row in r["index_sizes"]:
        srv = "-" if row["server_ratio"] is None else f"{row['server_ratio']:.2%}"
        lines.append(f"| {row['set']} | {row['binlog_bytes']:,} | {row['gtidx_ratio']:.2%} | {srv} |")
    return "\n".join(lines + _markdown_sections(r)) + "\n"


def _markdown_sections(r: dict) -> list[str]:
    """The sections that are also measured alone (--only)."""
    lines = []
    if "tail" in r:
        lines += ["", "**gtidx tail** beside a live 10.11 (defaults; one run of 10 s per rate; poll: every 200 ms, "
                  "the tail before inotify; auto: woken by inotify)", "",
                  "| watch, write rate | lag median s | lag p99 s | tail CPU % of a core |", "|---|---:|---:|---:|"]
        for mode, v in r["tail"]["runs"].items():
            if "lag_s_p99" not in v:                 # idle: CPU only
                lines.append(f"| {mode} (no writes) | - | - | {v['cpu_percent_of_a_core']:.2f} |")
                continue
            lines.append(f"| {mode}: {v['MB_per_s']:.1f} MB/s | {v['lag_s_median']:.3f} | {v['lag_s_p99']:.3f} | "
                         f"{v['cpu_percent_of_a_core']:.1f} |")
    if "spark" in r:
        s = r["spark"]
        split = spark_split(s)
        lines += ["", f"**Spark** (one run; local, {s['cores']} cores): {s['lookups']:,} lookups over {s['files']} binlogs "
                  f"({s['bytes'] / 2**30:.2f} GiB) in {s['spark_s']:.1f} s = {s['lookups'] / s['spark_s']:,.0f}/s; "
                  f"a one-process library loop: {s['lookups'] / s['loop_s']:,.0f}/s; "
                  f"Spark is {s['loop_s'] / s['spark_s']:.1f}x the loop.",
                  "", "| Spark locate, split | s | share |", "|---|---:|---:|"]
        for name, key in ((f"planning (file summaries, plan broadcast: {s['planning_s']:.2f} s; the rows, "
                           f"on the executors: {split['rows_s']:.2f} s)", "planning_total_s"),
                          (f"per-file work ({split['per_file_s_total']:.1f} s summed over {s['files_touched']} "
                           f"files / {s['cores']} cores)", "per_file_s"),
                          ("Spark's own overhead (the rest: Arrow transfer, shuffle, scheduling)", "overhead_s")):
            lines.append(f"| {name} | {split[key]:.2f} | {split[key] / s['spark_s']:.0%} |")
        if s.get("per_file_cpu_s_total") is not None:
            lines += ["", f"The per-file tasks used {s['per_file_cpu_s_total']:.1f} s of CPU of their "
                      f"{s['per_file_task_s_total']:.1f} s (the rest waiting for a core: load average "
                      f"{s['load_average']:.1f} on {s['cores']} cores during the run)."]
        if s.get("cpu_s"):
            c = spark_cpu_split(s)
            lines += ["", f"CPU of the run, whatever else the machine ran: {c['total']:.1f} s (JVM "
                      f"{s['cpu_s'].get('java', 0.0):.1f}, Python workers {s['cpu_s'].get('python', 0.0):.1f}, "
                      f"driver {s['cpu_s']['driver']:.1f}): per-file work {c['per_file']:.1f} s, planning "
                      f"{c['planning']:.1f} s (driver, and the rows on the executors), Spark's own "
                      f"{c['spark']:.1f} s ({c['spark'] / c['total']:.0%})."]
        if s.get("repeats"):
            runs = [dict(r, cores=s["cores"], spark_s=r["spark_s"]) for r in s["repeats"]]
            totals = spread([r["spark_s"] for r in runs])
            shares = spread([spark_split(r)["overhead_s"] / r["spark_s"] for r in runs])
            per = spread([spark_split(r)["per_file_s"] for r in runs])
            lines += ["", f"The same locate again in the same session (the JVM warm), {len(runs)} runs: "
                      f"{spread_text(totals)} s = {s['lookups'] / totals['median']:,.0f}/s; per-file work {spread_text(per)} s on "
                      f"{s['cores']} cores; Spark's own overhead {shares['median']:.0%} ({shares['min']:.0%}-"
                      f"{shares['max']:.0%}) of the run. The first run of a session above pays the JVM's warm-up."]
        if s.get("floor"):
            f = s["floor"]
            lines += ["", f"Spark's floor for this shape (the same stages moving the same rows, no gtidx work, "
                      f"in the same session, after the run): {f['s']:.1f} s, CPU {sum(f['cpu_s'].values()):.1f} s "
                      f"(JVM {f['cpu_s'].get('java', 0.0):.1f}, Python workers {f['cpu_s'].get('python', 0.0):.1f})."
                      + (f" Its least for any locate that takes the rows into Python and gives answers back (one "
                         f"mapInArrow from the input to constant answers, no shuffle): {f['in_out_s']:.2f} s."
                         if "in_out_s" in f else "")]
    if "changes" in r:
        lines += markdown_changes(r["changes"])
    if "mysql" in r:
        lines += markdown_mysql(r["mysql"])
    return lines + (markdown_s3(r["s3"]) if "s3" in r else []) + \
        (markdown_cluster(r["cluster"]) if "cluster" in r else []) + \
        (markdown_startup(r["startup"]) if "startup" in r else [])


def markdown_mysql(m: dict) -> list[str]:
    """tools/bench mysql's figures: gtidx on a MySQL binlog vs the server and mysqlbinlog."""
    lines = ["", f"**MySQL binlogs** (one {m['file_bytes'] / 2**20:.0f} MiB binlog of {m['transactions']:,} "
             f"transactions written by MySQL {m['server']}; {m['targets']} random targets, the server and "
             f"`mysqlbinlog` {m['lookups'][next(k for k in m['lookups'] if 'MySQL server' in k)]['n']} of them): "
             f"gtidx's index {m['index_bytes']:,} bytes = {m['index_ratio']:.2%} of the binlog, built at "
             f"{m['build_MB_s']:,.0f} MB/s (the event walk alone: {m['walk_MB_s']:,.0f} MB/s); "
             f"wrong answers: {m['wrong']}.", "",
             "| question: contender | n | median ms | min-max ms | p99 ms |", "|---|---:|---:|---:|---:|"]
    for name, v in m["lookups"].items():
        lines.append(f"| {name} | {v['n']} | {three_digits(v['median_ms'])} | {three_digits(v['min_ms'])}-{three_digits(v['max_ms'])} | "
                     f"{three_digits(v['p99_ms'])} |")
    return lines


def markdown_startup(s: dict) -> list[str]:
    """tools/bench startup's figures (one run of interleaved repetitions)."""
    lines = ["", f"**CLI start-up** in a regular install ({s['runs']} interleaved runs; `gtidx seek` finds a GTID "
             f"through the index of a copy of fixtures/{s['fixture']})", "",
             "| command | median ms | p25-p75 | min-max |", "|---|---:|---:|---:|"]
    for name, v in s["ms"].items():
        lines.append(f"| `{name}` | {three_digits(v['median'])} | {three_digits(v['p25'])}-{three_digits(v['p75'])} | {three_digits(v['min'])}-{three_digits(v['max'])} |")
    r = s["ratio_per_run"]
    lines += ["", f"`gtidx seek` / `import click`: {s['ratio_seek_to_click']:.2f} (run by run: median "
              f"{r['median']:.2f}, {r['min']:.2f}-{r['max']:.2f}; the target: <= 1.2). gtidx's own start-up "
              f"{s['own_ms']:.1f} ms = {s['own_share_of_click']:.0%} of `import click`; click's "
              f"{s['framework_ms']:.1f} ms over the interpreter's."]
    if "exit_spared_ms" in s:
        lines += ["", f"Part of that is the exit: gtidx's console entry freezes the objects alive when the command "
                  f"ends (`gc.freeze`), so that the interpreter's last garbage collections skip them. The same "
                  f"exit spares `import click` {s['exit_spared_ms']:.1f} ms; with it on both sides, gtidx's own "
                  f"imports and work take {s['own_same_exit_ms']:.1f} ms."]
    if s.get("cpu_ms"):
        c = s["cpu_ms"]
        lines += ["", "CPU time (user + system; what a shared machine's load leaves alone), median: "
                  + ", ".join(f"`{k}` {three_digits(v['median'])} ms" for k, v in c.items())
                  + f"; seek / import click {s['cpu_ratio_seek_to_click']:.2f} (run by run: median "
                  f"{s['cpu_ratio_per_run']['median']:.2f}). Load average during the runs: "
                  f"{s['load_average'][0]:.1f}."]
    if s.get("import_profile_ms"):
        prof = s["import_profile_ms"]
        lines += ["", f"Where it goes: the modules a lookup imports beyond click's, self time (`python -X "
                  f"importtime`, min over runs), {sum(prof.values()):.1f} ms in all: "
                  + ", ".join(f"{m} {v:.2f}" for m, v in list(prof.items())[:12]) + "."]
    return lines


def markdown_changes(c: dict) -> list[str]:
    """The row changes section: the one binlog side by side (``one_file``),
    then the Spark queries (``runs``); a report made before the one-file
    part had ``one_process`` instead (one process's rows/s)."""
    lines = markdown_one_file(c["one_file"]) if "one_file" in c else []
    if "runs" not in c:
        return lines
    head = (f"**Row changes on Spark** (`format(\"gtidx.changes\")`, one run; local, {c['cores']} cores; "
            f"{c['files']} binlogs, {c['bytes'] / 2**30:.2f} GiB)")
    if "one_process" in c:
        one = c["one_process"]
        head += (f": one process decoding a {one['file_bytes'] / 2**20:.0f} MiB binlog alone gives "
                 f"{one['rows_s']:,.0f} rows/s (one core; the row decoding is mysql-replication's).")
    else:
        head += ": each binlog in partitions of about 64 MiB (`split_bytes`), Arrow batches to Spark."
    lines += ["", head, "", "| query | rows | s | rows/s | load average |", "|---|---:|---:|---:|---:|"]
    for name, v in c["runs"].items():
        load = "?" if v.get("load_average") is None else f"{v['load_average']:.1f}"
        lines.append(f"| {name} | {v['rows']:,} | {v['s']:.1f} | {v['rows_s']:,.0f} | {load} |")
    every = c["runs"].get("every row")
    split = c.get("one_file", {}).get("split")
    if every and every.get("partitions"):
        text = (f"Every row: {every['partitions']} partitions, {every['rows_s'] / c['cores']:,.0f} rows/s per core")
        if split and split["decode_s"] + split["arrow_s"] > 0:
            ours = every["rows"] * (split["decode_s"] + split["arrow_s"]) / split["rows"]
            spent = every["s"] * c["cores"]
            text += (f"; at the one-process rate, decoding and Arrow would take {ours:,.0f} of the run's "
                     f"{spent:,.0f} core-seconds: Spark's own (and waiting for a core) ~{max(0.0, 1 - ours / spent):.0%}")
        lines += ["", text + "."]
    return lines


def markdown_one_file(o: dict) -> list[str]:
    """One binlog, side by side (``bench_spark.one_file_changes``)."""
    g, sp = o["gtidx_parquet"], o["split"]
    core = "each command on core 0 (taskset)" if o.get("pinned") else "not pinned to a core (no taskset)"
    decoder = "compiled decoder" if sp["compiled"] else "pure-Python decoder"
    lines = ["", f"**Row changes, one binlog** (`tools/bench changes`, one run; one {o['file_bytes'] / 2**20:.0f} MiB "
             f"binlog, {g['rows']:,} changed rows; {core}):", "",
             "| what | s | CPU s | rows/s | rows per CPU second | peak RSS |", "|---|---:|---:|---:|---:|---:|"]
    m = o.get("mariadb_binlog")
    if m:
        lines.append(f"| `{m['tool']} -v --base64-output=DECODE-ROWS > /dev/null` | {m['s']:.1f} | {m['cpu_s']:.1f} | "
                     f"{m['rows_s']:,.0f} | {g['rows'] / m['cpu_s']:,.0f} | {m['rss_bytes'] / 2**20:.0f} MiB |")
    lines.append(f"| `gtidx changes --parquet` ({decoder}) | {g['s']:.1f} | {g['cpu_s']:.1f} | {g['rows_s']:,.0f} | "
                 f"{g['rows'] / g['cpu_s']:,.0f} | {g['rss_bytes'] / 2**20:.0f} MiB |")
    text = ""
    if m:
        text = (f"gtidx / {m['tool']}: {o['ratio']:.2f}x the rows/s on one core (the target: 2x), "
                f"{m['cpu_s'] / g['cpu_s']:.2f}x per CPU second (what a core shared with other work does not "
                "inflate). ")
    total = sp["total_s"]
    text += (f"Where gtidx's time goes (in one process, the {decoder}; {sp['rows']:,} rows in {total:.1f} s): "
             f"decoding {sp['decode_s'] / total:.0%}, building Arrow arrays {sp['arrow_s'] / total:.0%}, "
             f"writing Parquet {sp['parquet_s'] / total:.0%}.")
    return lines + ["", text]


def spark_cpu_split(s: dict) -> dict:
    """A Spark locate run's CPU (tools/bench spark's ``cpu_s``: the JVM, the
    Python workers, the driver), split into the per-file tasks', planning's
    (the driver's, and the tasks that plan the input rows) and the rest,
    Spark's own: not inflated by waits for a core on a busy machine."""
    total = sum(s["cpu_s"].values())
    per_file = s["per_file_cpu_s_total"]
    planning = s["cpu_s"]["driver"] + (s.get("assign_cpu_s_total") or 0.0)
    return {"total": total, "per_file": per_file, "planning": planning, "spark": total - per_file - planning}


def chart(r: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    look = r["lookups"]
    names = list(look)
    med = [look[n]["median_ms"]["median"] for n in names]
    lo = [look[n]["median_ms"]["median"] - look[n]["median_ms"]["min"] for n in names]
    hi = [look[n]["median_ms"]["max"] - look[n]["median_ms"]["median"] for n in names]
    build = r["build"]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 9), gridspec_kw={"height_ratios": [3, 1]})
    colors = ["tab:green" if "gtidx" in n and "scan" not in n else "tab:gray" for n in names]
    a1.barh(names, med, xerr=[lo, hi], color=colors)
    a1.set_xscale("log")
    a1.invert_yaxis()
    a1.set_xlabel("median lookup time, ms (log; bars: min-max over rounds)")
    a1.tick_params(axis="y", labelsize=8)
    bn = list(build)
    a2.barh(bn, [build[n]["MB_s"]["median"] for n in bn],
            color=["tab:green" if n.startswith("gtidx") else "tab:gray" for n in bn])
    a2.invert_yaxis()
    a2.set_xlabel("build / decode throughput, MB/s")
    a2.tick_params(axis="y", labelsize=8)
    fig.suptitle(f"gtidx vs alternatives ({r['machine']['date']}, {r['machine']['cores']} cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


BEGIN, END = "<!-- bench-report:begin -->", "<!-- bench-report:end -->"


def update_docs(md: str, doc: Path = ROOT / "docs" / "benchmarks.md") -> None:
    """Replace what lies between the bench markers of ``doc`` (the reference
    page of the benchmarks) with the chart and ``md``; the chart is linked
    relative to ``doc``'s directory, so it shows where the page is read."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc.name} has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    chart_link = os.path.relpath(RESULTS / "report.png", doc.parent)
    body = f"{BEGIN}\n![gtidx vs alternatives]({chart_link})\n\n{md}{END}"
    doc.write_text(head + body + tail)


def add_arguments(s) -> None:
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--targets", type=int, default=100, help="random lookup targets (fast contenders)")
    s.add_argument("--slow-targets", type=int, default=10, help="targets for python-mysql-replication streaming")
    s.add_argument("--cli-reps", type=int, default=10)
    s.add_argument("--seed", type=int, default=7)
    s.add_argument("--tail-seconds", type=float, default=10)
    s.add_argument("--spark-lookups", type=int, default=200_000)
    s.add_argument("--spark-loop", type=int, default=5_000)
    s.add_argument("--no-118", action="store_true", help="leave MariaDB 11.8 out")
    s.add_argument("--no-tail", action="store_true")
    s.add_argument("--no-spark", action="store_true")
    s.add_argument("--no-changes", action="store_true")
    s.add_argument("--s3-targets", type=int, default=50, help="random targets of the seeks on S3")
    s.add_argument("--s3-downloads", type=int, default=3, help="of them, answered by downloading and scanning")
    s.add_argument("--s3-builds", type=int, default=3, help="builds from S3 (each also builds locally, downloads)")
    s.add_argument("--no-s3", action="store_true")
    s.add_argument("--cluster-lookups", type=int, default=100_000,
                   help="GTIDs located by Spark, on the standalone cluster and in local mode")
    s.add_argument("--cluster-rounds", type=int, default=2, help="runs of each mode, alternating")
    s.add_argument("--no-cluster", action="store_true")
    s.add_argument("--startup-runs", type=int, default=30, help="interleaved runs of the start-up section")
    s.add_argument("--no-startup", action="store_true")
    s.add_argument("--no-mysql", action="store_true")
    s.add_argument("--only", metavar="SECTIONS",
                   help=f"measure only these ({','.join(SECTIONS)}; comma-separated) and merge them into "
                        "bench/results/report.json: the other figures there are kept, not measured again; "
                        "s3 and cluster use the workload files there are (one made if there is none)")
    s.add_argument("--docs", action="store_true", help="also update docs/benchmarks.md's bench block")
    s.add_argument("--rewrite", action="store_true",
                   help="measure nothing: rewrite the .md, .png (and docs/benchmarks.md) from bench/results/report.json")
