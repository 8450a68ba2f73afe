"""gtidx benchmarks (kept out of the test run).

    tools/bench [report] [--rounds 3] [--docs]    gtidx vs the alternatives, side by side:
                                              bench/results/report.{json,md,png} (tools/bench_report.py)
    tools/bench report --only s3,cluster        some sections alone (tail, spark, s3, cluster), merged
                                              into the report.json there is, the rest not re-measured
    tools/bench scan   [--file F] [--runs 9]     group walk vs bare header walk
    tools/bench build  [--file F] [--runs 5]     index build vs bare header walk
    tools/bench lookup [--file F] [--n 200]      lookups by offset and by GTID near the end
    tools/bench build|lookup|spark ... --baseline DIR [--rounds 3]
                                              the same, run by this checkout and by DIR (another
                                              checkout) in turn, a process each: per-run figures
                                              and the ratio of medians (this / DIR)
    tools/bench tail   [--seconds 15] [--idle 10] [--watch poll,auto]   gtidx tail lag and CPU beside a live 10.11
    tools/bench spark  [--lookups 1000000]       Spark locate vs a library loop over >= 4 GiB
    tools/bench batch  [--repeat 30] [--baseline DIR]  seek --from / pos --from end to end (lookups/s),
                                              and at 1 M lines (peak RSS); DIR: another checkout, interleaved
    tools/bench startup [--runs 30] [--venv DIR] [--baseline DIR]
                                              `gtidx seek` start-up vs `python -c 'import click'`
                                              in a regular (non-editable) install, interleaved;
                                              DIR: another checkout's seek in every run too
    tools/bench changes [--file F] [--workload DIR] [--no-spark] [--memory]
                                              one 256 MiB binlog: gtidx changes --parquet on one
                                              core vs mariadb-binlog -v (rows/s, peak RSS, where the
                                              time goes); then format("gtidx.changes") rows/s over
                                              >= 4 GiB (DIR: another set), with pushed-down filters;
                                              --memory: peak RSS on 1 GiB of big transactions
    tools/bench changes --mysql F [--file M] [--runs 5]
                                              MySQL binlog F's row changes beside MariaDB binlog M's:
                                              rows/s, MB/s, gtidx changes --parquet wall, the ratios
    tools/bench mysql  [--targets 100]           MySQL 9.7 binlogs: gtidx's index vs the server's
                                              auto-position and mysqlbinlog --include-gtids
    tools/bench serve  [--s3-mb 1024] [--runs 2]  gtidx serve to one raw replica (bytes/s, time to first
                                              event deep in the archive, with and without indexes)
                                              beside a private MariaDB 10.11 serving the same >= 4 GiB;
                                              from moto_server too (tools/bench_serve.py)

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

This module is the one entry (``tools/bench <sub>``): it parses the options and
dispatches; the measuring lives in tools/bench_common.py (shared helpers),
bench_files.py (scan, build, lookup), bench_live.py (tail, mysql),
bench_spark.py (spark, changes), bench_rows.py (changes --memory), bench_cli.py (batch,
startup), bench_serve.py (serve); the report in
tools/bench_report.py, its main tables measured by bench_rounds.py and its S3
and cluster sections by bench_remote.py. None of them imports this module.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tools import bench_cli, bench_files, bench_live, bench_report, bench_rows, bench_serve, bench_spark
from tools.bench_common import BASELINE_FIGURES, against_baseline, child_argv


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    bench_report.add_arguments(sub.add_parser("report", help="gtidx vs the alternatives (the default)"))
    for name, runs in (("scan", 9), ("build", 5)):
        s = sub.add_parser(name)
        s.add_argument("--file", help="a binlog (default: the 256 MiB workload file)")
        s.add_argument("--runs", type=int, default=runs)
        s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("tail")
    s.add_argument("--seconds", type=float, default=15)
    s.add_argument("--idle", type=float, default=10, help="seconds of no writes for the idle CPU")
    s.add_argument("--watch", default="poll,auto",
                   help="tail --watch modes, in order (poll: every 200 ms, the behaviour before inotify)")
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("spark")
    s.add_argument("--lookups", type=int, default=1_000_000)
    s.add_argument("--repeats", type=int, default=3, help="runs again in the same session (the JVM warm)")
    s.add_argument("--loop", type=int, default=1_000_000, help="lookups timed in the library loop")
    s.add_argument("--master", default="local[*]")
    s.add_argument("--seed", type=int, default=5)
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("changes", help="row changes: one 256 MiB binlog beside mariadb-binlog, then "
                                         "format('gtidx.changes') rows/s over the 4 GiB workload")
    s.add_argument("--queries", help="only these: all,table,window,window-catalog,gtids (default: every one)")
    s.add_argument("--file", help="the one binlog (default: the 256 MiB workload file)")
    s.add_argument("--workload", metavar="DIR", help="Spark over the binlogs of DIR (default: the >= 4 GiB "
                                                      "workload); its missing indexes are built there")
    s.add_argument("--no-spark", action="store_true", help="the one binlog alone")
    s.add_argument("--mysql", metavar="FILE",
                   help="instead: MySQL's row changes beside MariaDB's (--file), rows/s and MB/s of each and their "
                        "ratio, in one run (tools/bench_rows.py; FILE: e.g. a tools/make_mysql_workload binlog)")
    s.add_argument("--runs", type=int, default=5, help="with --mysql: decodes of each binlog, interleaved")
    s.add_argument("--memory", action="store_true",
                   help="also the peak RSS of gtidx changes --parquet on a 1 GiB binlog of 1,000-row transactions "
                        "with 1 MiB blobs (tools/bench_rows.py; made once by a real 10.11)")
    s.add_argument("--master", default="local[*]")
    s.add_argument("--seed", type=int, default=5)
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("mysql", help="MySQL 9.7 binlogs: gtidx vs the server's auto-position and mysqlbinlog")
    s.add_argument("--size-mb", type=int, default=256)
    s.add_argument("--targets", type=int, default=100)
    s.add_argument("--slow-targets", type=int, default=10, help="targets for the server and mysqlbinlog")
    s.add_argument("--seed", type=int, default=3)
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("serve", help="gtidx serve beside a real MariaDB source: bytes/s, time to first event")
    s.add_argument("--dir", default="/var/tmp/gtidx-serve-bench",
                   help="the source server's copy of the archive, made once (not in CI)")
    s.add_argument("--s3-mb", type=int, default=1024, help="MiB of the archive uploaded to moto_server (0: none)")
    s.add_argument("--only", default="mariadb,local,s3", help="some of the sources alone: mariadb,local,s3")
    s.add_argument("--runs", type=int, default=2)
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
    s.add_argument("--baseline", metavar="DIR",
                   help="another checkout, installed in a venv of its own: its gtidx seek timed in every run, "
                        "back to back with this one's")
    s.add_argument("--venv", help="make (or reuse) the venv here; gtidx is reinstalled from this checkout "
                                  "(default: a temporary one)")
    s.add_argument("--json", help="also write the report here")
    s = sub.add_parser("lookup")
    s.add_argument("--file", help="a binlog (default: the 256 MiB workload file)")
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--json", help="also write the report here")
    for name in BASELINE_FIGURES:          # the same comparison with another checkout for each
        s = sub.choices[name]
        s.add_argument("--baseline", metavar="DIR",
                       help="another checkout (its C extension built): its own tools/bench %s run in turn with "
                            "this one's, a process each; per-run figures and the ratio of medians" % name)
        s.add_argument("--rounds", type=int, default=3, help="with --baseline: runs of each checkout, alternating")
    argv = sys.argv[1:] if argv is None else argv
    a = ap.parse_args(argv if argv and not argv[0].startswith("-") or "-h" in argv or "--help" in argv
                      else ["report", *argv])
    if a.cmd == "report":
        bench_report.run(bench_report.MEASURES, a)
        return 0
    if a.cmd in BASELINE_FIGURES and a.baseline:
        report = against_baseline(a.cmd, child_argv(argv[1:]), a.baseline, a.rounds, BASELINE_FIGURES[a.cmd])
        if a.json:
            Path(a.json).write_text(json.dumps(report, indent=1))
        return 0
    if a.cmd == "changes" and a.mysql:
        report = bench_rows.bench_mysql_changes(a)
        if a.json:
            Path(a.json).write_text(json.dumps(report, indent=1))
        return 0
    report = {"scan": bench_files.bench_scan, "build": bench_files.bench_build, "lookup": bench_files.bench_lookup,
              "tail": bench_live.bench_tail, "spark": bench_spark.bench_spark, "batch": bench_cli.bench_batch,
              "startup": bench_cli.bench_startup, "changes": bench_spark.bench_changes,
              "mysql": bench_live.bench_mysql, "serve": bench_serve.bench_serve}[a.cmd](a)
    if a.cmd == "changes" and a.memory:
        report["memory"] = bench_rows.bench_memory(a)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
