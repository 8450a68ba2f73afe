"""tools/bench_report.py's arithmetic: per-round ratios, then min/median/max,
and the Markdown it writes (the live measurements themselves run outside
the test suite: `tools/bench`)."""
from __future__ import annotations

import re

import pytest

from tools import bench_remote as rm
from tools import bench_report as br


def fake_report() -> dict:
    def lookups(k):
        return {"offset: gtidx index, warm": {"n": 100, "median_ms": 0.2 * k, "p99_ms": 0.4 * k, "wrong": 0},
                "gtid: gtidx locate, warm": {"n": 100, "median_ms": 0.25 * k, "p99_ms": 0.5, "wrong": 0},
                "offset: MariaDB 10.11 BINLOG_GTID_POS (scan)": {"n": 100, "median_ms": 30.0, "p99_ms": 80.0,
                                                                  "wrong": 1}}
    return {"machine": {"python_cpu": "CPython 3.11, cpu", "cores": 2, "memory": "24 GiB", "date": "today"},
            "rounds": 3, "targets": 100, "slow_targets": 10, "server": "10.11.x",
            "workload": {"server": "10.11.x", "files": ["a", "b", "c", "d"], "bytes": 4 << 28},
            "rounds_raw": {
                "build": [{"bare header walk": 800.0, "gtidx build": 700.0, "mariadb-binlog (decode)": 40.0},
                          {"bare header walk": 700.0, "gtidx build": 700.0, "mariadb-binlog (decode)": 35.0},
                          {"bare header walk": 750.0, "gtidx build": 500.0, "mariadb-binlog (decode)": 50.0}],
                "lookups": [lookups(1), lookups(2), lookups(1.5)],
                "cli": [{"python -c pass": 30.0, "gtidx seek --gtid G FILE": 90.0},
                        {"python -c pass": 40.0, "gtidx seek --gtid G FILE": 80.0},
                        {"python -c pass": 35.0, "gtidx seek --gtid G FILE": 70.0}]},
            "index_sizes": [{"set": "mariadb-11.8/mixed", "binlog_bytes": 1000, "gtidx_bytes": 3,
                             "gtidx_ratio": 0.003, "server_bytes": 3, "server_ratio": 0.003},
                            {"set": "mariadb-10.11/mixed", "binlog_bytes": 1000, "gtidx_bytes": 4,
                             "gtidx_ratio": 0.004, "server_bytes": None, "server_ratio": None}]}


def test_ratios_are_taken_within_each_round():
    r = fake_report()
    br.summarize(r)
    # build: contender / gtidx in each round: 800/700, 700/700, 750/500
    assert r["build"]["bare header walk"]["x_gtidx"] == {"min": 1.0, "median": 800 / 700, "max": 1.5}
    assert r["build"]["gtidx build"]["MB_s"] == {"min": 500.0, "median": 700.0, "max": 700.0}
    # lookups: against gtidx warm of the same kind (offset or gtid) in the same round
    srv = r["lookups"]["offset: MariaDB 10.11 BINLOG_GTID_POS (scan)"]
    assert srv["x_gtidx"] == pytest.approx({"min": 75, "median": 100, "max": 150})
    assert srv["wrong"] == 3
    assert r["lookups"]["gtid: gtidx locate, warm"]["x_gtidx"]["median"] == 1.0
    assert r["cli"]["gtidx seek --gtid G FILE"]["x_python"] == {"min": 2.0, "median": 2.0, "max": 3.0}


def test_markdown_tables_and_docs_block(tmp_path):
    r = fake_report()
    br.summarize(r)
    md = br.markdown(r)
    assert "| bare header walk | 750 (700-800) | 1.14 (1-1.5) |" in md
    assert "| offset: MariaDB 10.11 BINLOG_GTID_POS (scan) | 100 | 30 (30-30) | 80 (80-80) | " \
           "100 (75-150) | 3 |" in md
    assert "| mariadb-10.11/mixed | 1,000 | 0.40% | - |" in md
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"intro\n{br.BEGIN}\nold table\n{br.END}\noutro\n")
    br.update_docs(md, doc)
    text = doc.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith("outro\n")
    assert md in text and "bench/results/report.png" in text


def test_the_bench_block_lives_in_docs_benchmarks():
    """The report's target is docs/benchmarks.md (the README links to it):
    its markers are there, once, and its chart link resolves from docs/."""
    doc = br.ROOT / "docs" / "benchmarks.md"
    text = doc.read_text()
    assert text.count(br.BEGIN) == 1 and text.count(br.END) == 1
    assert br.BEGIN not in (br.ROOT / "README.md").read_text()
    link = re.search(r"!\[gtidx vs alternatives\]\(([^)]+)\)", text.split(br.BEGIN, 1)[1]).group(1)
    assert (doc.parent / link).resolve() == (br.RESULTS / "report.png").resolve()


# -- the sections measured alone too (--only): object storage, the standalone cluster ----------------

def _lookup(ms, gets, heads=2, binlog=196608, index=4096, other=300, ok=True):
    return {"ms": ms, "gets": gets, "heads": heads, "puts": [], "requests": gets + heads,
            "binlog_bytes": binlog, "index_bytes": index, "other_bytes": other, "largest_read": 65536, "ok": ok}


def fake_s3() -> dict:
    build = {"gets": 38, "heads": 3, "requests": 43, "binlog_bytes": 1 << 28, "index_bytes": 0, "other_bytes": 0,
             "largest_read": 8 << 20, "puts": ["/b/w/master-bin.000001.idx", "/b/w/.master-bin.000001.idx.gtidx"]}
    return {"date": "today", "file": "master-bin.000001", "bytes": 256 << 20, "targets": 3, "downloads": 1,
            "builds": 2, "seed": 7, "upload_s": 5.0,
            "lookups": {rm.S3_SEEK: [_lookup(40.0, 6), _lookup(20.0, 5), _lookup(30.0, 6, ok=False)],
                        rm.S3_SEEK_DL: [_lookup(5000.0, 33, 1, binlog=1 << 28, index=0, other=0)]},
            "build_raw": [{**build, "s3_MB_s": 40.0, "local_MB_s": 400.0, "download_MB_s": 60.0},
                          {**build, "s3_MB_s": 50.0, "local_MB_s": 250.0, "download_MB_s": 50.0}]}


def test_s3_summary_spreads_over_targets_and_builds():
    s3 = fake_s3()
    rm.summarize_s3(s3)
    seek = s3["summary"][rm.S3_SEEK]
    assert seek["n"] == 3 and seek["wrong"] == 1
    assert seek["ms"] == {"min": 20.0, "median": 30.0, "max": 40.0}
    assert seek["gets"] == {"median": 6, "max": 6} and seek["heads"] == {"median": 2, "max": 2}
    assert seek["index_bytes"] == {"median": 4396, "max": 4396}       # the index and its fingerprint
    b = s3["build"]
    assert b["s3_MB_s"] == {"min": 40.0, "median": 45.0, "max": 50.0}
    # the ratio to the local build taken within each build: 40/400, 50/250
    assert b["x_local"] == pytest.approx({"min": 0.1, "median": 0.15, "max": 0.2})
    assert b["puts"] == [".master-bin.000001.idx.gtidx", "master-bin.000001.idx"]
    assert b["puts_per_build"] == {"median": 2, "max": 2} and b["largest_read"] == 8 << 20


def test_s3_markdown_rows():
    s3 = fake_s3()
    rm.summarize_s3(s3)
    md = "\n".join(rm.markdown_s3(s3))
    assert f"| {rm.S3_SEEK} | 3 | 30 (20-40) | 6 + 2 | 196,608 | 4,396 | 1 |" in md
    assert f"| {rm.S3_SEEK_DL} | 1 | 5,000 (5,000-5,000) | 33 + 1 | 268,435,456 | 0 | 0 |" in md
    assert "| gtidx build from S3 (38 GETs, largest 8 MiB; 2 PUTs: .master-bin.000001.idx.gtidx, " \
           "master-bin.000001.idx) | 45 (40-50) | 0.15 (0.1-0.2) |" in md
    assert "3 random targets, seed 7" in md and "shared machine" in md
    # a median below the max shows both
    assert rm._mm({"median": 5, "max": 6}) == "5 (6)" and rm._mm({"median": 6, "max": 6}) == "6"


def fake_cluster() -> dict:
    def run(mode, s):
        return {"mode": mode, "master": mode, "session_s": 1.0, "locate_s": s, "rows": 1000, "found": 990,
                "same_as_first": True}
    return {"date": "today", "files": ["master-bin.000001"], "bytes": 1 << 30, "lookups": 1000, "seed": 7,
            "cores": 2, "cluster_start_s": 9.0, "equal": True, "library_checked": 1000, "library_wrong": 0,
            "runs": [run("local", 2.0), run("cluster", 3.0), run("cluster", 5.0), run("local", 4.0)]}


def test_cluster_ratio_pairs_each_cluster_run_with_a_local_run():
    c = fake_cluster()
    rm.summarize_cluster(c)
    assert c["summary"]["local"]["locate_s"] == {"min": 2.0, "median": 3.0, "max": 4.0}
    assert c["summary"]["cluster"]["per_s"] == pytest.approx({"min": 200.0, "median": 800 / 3, "max": 1000 / 3})
    # 3/2 and 5/4: within each round, not the ratio of the medians (4/3)
    assert c["x_local"] == {"min": 1.25, "median": 1.375, "max": 1.5}
    md = "\n".join(rm.markdown_cluster(c))
    assert "| local[2] (one JVM) | 3 (2-4) | 375 | 1 |" in md
    assert "| standalone: 1 master, 1 worker, 2 cores (separate JVMs) | 4 (3-5) | 267 | 1.38 (1.25-1.5) |" in md
    assert "1,000 lookups" in md and "2 runs each" in md and "modes: yes" in md and "(9 s to a registered" in md


def test_only_parses_the_section_names():
    assert br.parse_only(None) is None
    assert br.parse_only("s3, cluster") == ["s3", "cluster"]
    for bad in ("s3,lookups", "", ","):
        with pytest.raises(SystemExit):
            br.parse_only(bad)


def test_only_merges_into_the_report_without_measuring_the_rest(tmp_path, monkeypatch):
    """--only tail: the other sections of report.json are kept as they are
    (the fake bench measures nothing else: any other call would fail)."""
    import json
    from argparse import Namespace
    monkeypatch.setattr(br, "RESULTS", tmp_path)
    old = fake_report()
    (tmp_path / "report.json").write_text(json.dumps(old))
    tail = {"runs": {"max": {"MB_per_s": 90.0, "lag_s_median": 0.1, "lag_s_p99": 0.2,
                             "cpu_percent_of_a_core": 1.0}}}

    class Bench:
        @staticmethod
        def bench_tail(a):
            assert a.seconds == 3
            return tail
    args = Namespace(rewrite=False, only="tail", docs=False, tail_seconds=3)
    br.run(Bench, args)
    new = json.loads((tmp_path / "report.json").read_text())
    assert new["tail"] == tail
    assert {k: new[k] for k in old} == old
    assert "| max: 90.0 MB/s | 0.100 | 0.200 | 1.0 |" in (tmp_path / "report.md").read_text()
    assert "| bare header walk | 750 (700-800) |" in (tmp_path / "report.md").read_text()


def test_markdown_of_sections_alone():
    """A report with only sections measured alone (no report.json before)."""
    r = {"machine": {"python_cpu": "CPython", "cores": 2, "memory": "24 GiB", "date": "today"},
         "s3": fake_s3(), "cluster": fake_cluster()}
    br.summarize(r)
    md = br.markdown(r)
    assert md.startswith("Machine: CPython, 2 cores, 24 GiB; today.\n")
    assert "**Object storage**" in md and "**Spark locate: a standalone cluster vs local mode**" in md


def test_spark_section_shows_the_split():
    """Planning (the driver's, and the input rows' on the executors, spread
    over the cores), per-file work (summed task time over the cores) and
    Spark's own overhead (the rest), each with its share of the run."""
    from tools.bench_common import spark_split
    r = {"machine": {"python_cpu": "CPython", "cores": 2, "memory": "24 GiB", "date": "today"},
         "spark": {"machine": "CPython", "files": 18, "bytes": 4 << 30, "lookups": 1_000_000, "found": 993_000,
                   "spark_s": 10.0, "spark_session_start_s": 9.0, "planning_s": 1.0, "per_file_task_s_total": 12.0,
                   "assign_s_total": 1.0, "cores": 2, "files_touched": 18, "loop_s": 250.0,
                   "loop_measured_lookups": 5000, "build_s": 0.3}}
    assert spark_split(r["spark"]) == {"planning_s": 1.0, "rows_s": 0.5, "planning_total_s": 1.5,
                                             "per_file_s": 6.0, "per_file_s_total": 12.0, "overhead_s": 2.5}
    md = br.markdown(r)
    assert "1,000,000 lookups over 18 binlogs (4.00 GiB) in 10.0 s = 100,000/s" in md
    assert ("| planning (file summaries, plan broadcast: 1.00 s; the rows, on the executors: 0.50 s) "
            "| 1.50 | 15% |") in md
    assert "| per-file work (12.0 s summed over 18 files / 2 cores) | 6.00 | 60% |" in md
    assert "| Spark's own overhead (the rest: Arrow transfer, shuffle, scheduling) | 2.50 | 25% |" in md
    assert "used" not in md
    r["spark"].update(per_file_cpu_s_total=9.0, load_average=3.5)
    assert "The per-file tasks used 9.0 s of CPU of their 12.0 s (the rest waiting for a core: load average " \
           "3.5 on 2 cores during the run)." in br.markdown(r)


def test_changes_section_gives_rows_per_second_per_query():
    r = {"machine": {"python_cpu": "CPython", "cores": 2, "memory": "24 GiB", "date": "today"},
         "changes": {"files": 17, "bytes": 4 << 30, "cores": 2, "catalog_s": 5.0,
                     "one_process": {"file_bytes": 8 << 20, "rows": 42_000, "s": 3.0, "rows_s": 14_000.0},
                     "runs": {"every row": {"rows": 20_000_000, "s": 800.0, "rows_s": 25_000.0,
                                            "load_average": 2.5}}}}
    md = br.markdown(r)
    assert "one process decoding a 8 MiB binlog alone gives 14,000 rows/s" in md
    assert "| every row | 20,000,000 | 800.0 | 25,000 | 2.5 |" in md


def test_changes_section_puts_one_binlog_beside_mariadb_binlog():
    """The one binlog: both commands' rows/s and peak RSS, the ratio, the
    shares of decoding, Arrow and Parquet; Spark: per core, and its share."""
    one = {"file_bytes": 256 << 20, "pinned": True,
           "mariadb_binlog": {"tool": "mariadb-binlog", "s": 10.0, "cpu_s": 9.0, "rss_bytes": 8 << 20, "exit": 0,
                              "rows_s": 100_000.0},
           "gtidx_parquet": {"s": 100.0, "cpu_s": 99.0, "rss_bytes": 300 << 20, "exit": 0, "rows": 1_000_000,
                             "rows_s": 10_000.0},
           "ratio": 0.1,
           "split": {"compiled": False, "rows": 1_000_000, "decode_s": 60.0, "arrow_s": 20.0, "parquet_s": 20.0,
                     "total_s": 100.0, "groups": 5, "declined": 0}}
    r = {"machine": {"python_cpu": "CPython", "cores": 2, "memory": "24 GiB", "date": "today"},
         "changes": {"machine": "x", "one_file": one}}
    md = br.markdown(r)
    assert "| `mariadb-binlog -v --base64-output=DECODE-ROWS > /dev/null` | 10.0 | 9.0 | 100,000 | 111,111 | 8 MiB |" \
        in md
    assert "| `gtidx changes --parquet` (pure-Python decoder) | 100.0 | 99.0 | 10,000 | 10,101 | 300 MiB |" in md
    assert "gtidx / mariadb-binlog: 0.10x the rows/s on one core (the target: 2x), 0.09x per CPU second" in md
    assert "decoding 60%, building Arrow arrays 20%, writing Parquet 20%." in md
    assert "Row changes on Spark" not in md
    r["changes"].update(files=17, bytes=4 << 30, cores=2, catalog_s=1.0,
                        runs={"every row": {"rows": 20_000_000, "s": 1000.0, "rows_s": 20_000.0, "partitions": 70}})
    md = br.markdown(r)
    assert ("Every row: 70 partitions, 10,000 rows/s per core; at the one-process rate, decoding and Arrow would "
            "take 1,600 of the run's 2,000 core-seconds: Spark's own (and waiting for a core) ~20%.") in md


def test_spark_section_splits_the_cpu_and_shows_the_floor():
    """The run's CPU (JVM, Python workers, driver: not inflated by a busy
    machine) split into per-file work, planning and Spark's own, and Spark's
    floor for the same shape."""
    r = {"machine": {"python_cpu": "CPython", "cores": 2, "memory": "24 GiB", "date": "today"},
         "spark": {"machine": "CPython", "files": 18, "bytes": 4 << 30, "lookups": 1_000_000, "found": 993_000,
                   "spark_s": 10.0, "spark_session_start_s": 9.0, "planning_s": 1.0, "per_file_task_s_total": 12.0,
                   "per_file_cpu_s_total": 2.5, "assign_cpu_s_total": 0.5, "load_average": 1.0,
                   "cpu_s": {"java": 4.0, "python": 4.0, "driver": 0.5},
                   "floor": {"s": 3.0, "cpu_s": {"java": 2.5, "python": 0.5, "driver": 0.0}, "in_out_s": 0.8},
                   "cores": 2, "files_touched": 18, "loop_s": 250.0, "loop_measured_lookups": 5000, "build_s": 0.3}}
    assert br.spark_cpu_split(r["spark"]) == {"total": 8.5, "per_file": 2.5, "planning": 1.0, "spark": 5.0}
    md = br.markdown(r)
    assert "CPU of the run, whatever else the machine ran: 8.5 s (JVM 4.0, Python workers 4.0, driver 0.5): " \
           "per-file work 2.5 s, planning 1.0 s (driver, and the rows on the executors), Spark's own 5.0 s (59%)." in md
    assert "no gtidx work, in the same session, after the run): 3.0 s, CPU 3.0 s (JVM 2.5, Python workers 0.5). " \
           "Its least for any locate that takes the rows into Python and gives answers back (one mapInArrow from " \
           "the input to constant answers, no shuffle): 0.80 s." in md


def test_store_reads_sorts_bytes_by_object():
    reads = rm.StoreReads()
    reads.log += [("s3://b/k", 65536), ("s3://b/k.idx", 4096), ("s3://b/.k.idx.gtidx", 300), ("s3://b/k", 1000)]
    assert reads.take("s3://b/k") == {"binlog_bytes": 66536, "index_bytes": 4096, "other_bytes": 300,
                                      "largest_read": 65536}
    assert reads.log == [] and reads.take("s3://b/k")["binlog_bytes"] == 0


def test_startup_section():
    """tools/bench startup's figures as the report shows them, alone (--only startup)."""
    ms = {"python -c pass": {"min": 10.0, "median": 12.0, "max": 20.0, "p25": 11.0, "p75": 13.0},
          "python -c 'import click'": {"min": 30.0, "median": 35.0, "max": 50.0, "p25": 33.0, "p75": 38.0},
          "gtidx seek --gtid G FILE": {"min": 40.0, "median": 49.0, "max": 70.0, "p25": 45.0, "p75": 52.0},
          "import click; gc.freeze()": {"min": 28.0, "median": 30.0, "max": 40.0, "p25": 29.0, "p75": 31.0}}
    r = {"machine": {"python_cpu": "CPython", "cores": 2, "memory": "24 GiB", "date": "today"},
         "startup": {"runs": 30, "fixture": "mariadb-10.11/mixed/master-bin.000002", "ms": ms,
                     "ratio_seek_to_click": 1.4, "ratio_per_run": {"min": 1.1, "median": 1.38, "max": 1.9},
                     "own_ms": 14.0, "framework_ms": 23.0, "own_share_of_click": 0.4, "load_average": [1.5, 1, 1],
                     "cpu_ms": {k: {**v, "median": v["median"] - 2} for k, v in ms.items()},
                     "cpu_ratio_seek_to_click": 47 / 33, "cpu_ratio_per_run": {"min": 1.2, "median": 1.41, "max": 1.6},
                     "import_profile_ms": {"gtidx.api": 2.25, "json.decoder": 1.04},
                     "exit_spared_ms": 5.0, "own_same_exit_ms": 19.0}}
    br.summarize(r)
    md = br.markdown(r)
    assert "**CLI start-up** in a regular install (30 interleaved runs;" in md
    assert "| `gtidx seek --gtid G FILE` | 49 | 45-52 | 40-70 |" in md
    assert "`gtidx seek` / `import click`: 1.40 (run by run: median 1.38, 1.10-1.90; the target: <= 1.2)" in md
    assert "14.0 ms = 40% of `import click`" in md
    assert ("`gtidx seek --gtid G FILE` 47 ms, `import click; gc.freeze()` 28 ms; seek / import click 1.42 "
            "(run by run: median 1.41)") in md
    assert "| `import click; gc.freeze()` | 30 | 29-31 | 28-40 |" in md
    assert "The same exit spares `import click` 5.0 ms; with it on both sides, gtidx's own imports and work take 19.0 ms." in md
    assert "Load average during the runs: 1.5." in md and "3.3 ms in all: gtidx.api 2.25, json.decoder 1.04." in md
    assert br.parse_only("startup") == ["startup"]


def test_mysql_section_sets_gtidx_beside_the_server():
    r = {"machine": {"python_cpu": "CPython", "cores": 2, "memory": "24 GiB", "date": "today"},
         "mysql": {"server": "9.7.4-2", "file_bytes": 256 << 20, "transactions": 600_000, "targets": 100,
                   "walk_MB_s": 40.0, "build_MB_s": 500.0, "index_bytes": 100_000, "index_ratio": 0.0004,
                   "wrong": 0, "lookups": {
                       "seek --gtid: gtidx index, warm": {"n": 100, "median_ms": 0.2, "min_ms": 0.1,
                                                          "max_ms": 0.5, "p99_ms": 0.5},
                       "replica start: MySQL server (auto-position, connect to first transaction)":
                           {"n": 10, "median_ms": 900.0, "min_ms": 20.0, "max_ms": 1800.0, "p99_ms": 1800.0}}}}
    md = br.markdown(r)
    assert "**MySQL binlogs** (one 256 MiB binlog of 600,000 transactions written by MySQL 9.7.4-2; 100 random " \
           "targets, the server and `mysqlbinlog` 10 of them)" in md
    assert "| seek --gtid: gtidx index, warm | 100 | 0.2 | 0.1-0.5 | 0.5 |" in md
    assert "wrong answers: 0." in md


def test_spark_section_shows_the_warm_runs():
    r = {"machine": {"python_cpu": "CPython", "cores": 2, "memory": "24 GiB", "date": "today"},
         "spark": {"machine": "CPython", "files": 18, "bytes": 4 << 30, "lookups": 1_000_000, "found": 993_000,
                   "spark_s": 8.0, "spark_session_start_s": 9.0, "planning_s": 1.0, "per_file_task_s_total": 4.0,
                   "cores": 2, "files_touched": 18, "loop_s": 250.0, "loop_measured_lookups": 5000, "build_s": 0.3,
                   "repeats": [{"spark_s": 4.0, "planning_s": 0.5, "per_file_task_s_total": 4.0},
                               {"spark_s": 5.0, "planning_s": 0.5, "per_file_task_s_total": 4.0}]}}
    md = br.markdown(r)
    assert "The same locate again in the same session (the JVM warm), 2 runs: 4.5 (4-5) s = 222,222/s; " \
           "per-file work 2 (2-2) s on 2 cores; Spark's own overhead 44% (38%-50%) of the run." in md


def test_baseline_comparison_alternates_and_divides_medians(tmp_path, monkeypatch, capsys):
    """--baseline DIR: each checkout's own tools/bench runs in turn (the order
    flipped every round), the figures come from each run's --json, and the
    ratio is of the medians; the comparison's own options are not passed on."""
    import json
    import os
    from tools import bench_common
    log = tmp_path / "order.log"
    for name, spark_s in (("this", [10.0, 12.0, 11.0]), ("base", [20.0, 22.0, 24.0])):
        root = tmp_path / name
        (root / "tools").mkdir(parents=True)
        script = root / "tools" / "bench"
        # the nth run of this checkout answers its nth figure; it logs its name and argv
        script.write_text(f"""#!/bin/sh
echo "{name} $*" >> {log}
n=$(grep -c '^{name} ' {log})
case $n in 1) s={spark_s[0]};; 2) s={spark_s[1]};; *) s={spark_s[2]};; esac
eval out=\\${{$#}}
echo '{{"spark_s": '$s', "repeats": [{{"spark_s": 1.0}}, {{"spark_s": 3.0}}]}}' > "$out"
""")
        script.chmod(0o755)
    monkeypatch.setattr(bench_common, "HERE", tmp_path / "this" / "tools")
    argv = bench_common.child_argv(["--lookups", "20000", "--baseline", str(tmp_path / "base"), "--rounds=3",
                                    "--json", "x.json", "--repeats", "1", "--venv", "v"])
    assert argv == ["--lookups", "20000", "--repeats", "1"]
    r = bench_common.against_baseline("spark", argv, str(tmp_path / "base"), 3, bench_common.spark_figures)
    order = [line.split()[0] for line in log.read_text().splitlines()]
    assert order == ["this", "base", "base", "this", "this", "base"]
    assert all(line.split()[1:4] == ["spark", "--lookups", "20000"] for line in log.read_text().splitlines())
    first = r["figures"]["spark locate s (first)"]
    assert first == {"this": [10.0, 12.0, 11.0], "baseline": [20.0, 22.0, 24.0], "ratio_of_medians": 0.5,
                     "ratio_per_round": [0.5, 12.0 / 22.0, 11.0 / 24.0]}
    assert r["figures"]["spark locate s (again, median)"]["ratio_of_medians"] == 1.0
    out = capsys.readouterr().out
    assert "run 2 baseline spark locate s (first) 22" in out and "0.500x  (0.500, 0.458-0.545)" in out
    assert os.path.basename(r["checkouts"]["baseline"]) == "base" and json.dumps(r)
