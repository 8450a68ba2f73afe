"""Memory of ``gtidx changes --parquet`` on a big binlog of big transactions
(``tools/bench changes --memory``).

The binlog, written by a real 10.11 (``tools/mariadb.py``) and cached: about
1 GiB of 1,000-row transactions whose rows hold a 1 KiB blob, every 100th a
1 MiB one (about 11 MiB per transaction: the compiled decoder's groups), and
now and then a transaction of 200 rows of 1 MiB blobs (200 MiB: longer than
``rowbatch.SPAN``, decoded by the definition a rows event at a time). The
figure: the peak RSS of ``gtidx changes --parquet`` on it (the child's
``ru_maxrss``), its wall time and rows/s, the rows checked against the
binlog's count. Not part of CI: making the binlog takes minutes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.mariadb import MariaDB

DEFAULT_DIR = Path(os.environ.get("GTIDX_BENCH_DIR", Path.home() / ".cache" / "gtidx" / "workload")).parent / "blobs"
TARGET = 1 << 30


def make_blob_binlog(root: Path = DEFAULT_DIR) -> dict:
    """The binlog (made once, then reused): {"path", "size", "rows"}."""
    meta_path = root / "blobs.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if Path(meta["path"]).exists():
            return meta
    srv = MariaDB(root / "server", {"max_binlog_size": str(TARGET), "max_allowed_packet": "64M"})
    srv.binlog_dir = root / "binlog"
    rows = 0
    with srv:
        srv.sql("CREATE DATABASE IF NOT EXISTS w")
        srv.sql("CREATE TABLE IF NOT EXISTS w.b (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, b LONGBLOB) "
                "ENGINE=InnoDB")
        srv.sql("FLUSH BINARY LOGS")
        first = srv.sql("SHOW BINARY LOGS")[-1][0]
        n = 0
        while srv.sql("SHOW BINARY LOGS")[-1][0] == first:       # until the server rotates at TARGET
            if n % 20 == 10:
                srv.sql("INSERT INTO w.b (a, b) SELECT seq, REPEAT('z', 1 << 20) FROM w.seq_1_to_200")
                rows += 200
            else:
                srv.sql("INSERT INTO w.b (a, b) SELECT seq, IF(seq % 100 = 0, REPEAT('x', 1 << 20), "
                        "REPEAT('y', 1024)) FROM w.seq_1_to_1000")
                rows += 1000
            n += 1
        srv.sql("FLUSH BINARY LOGS")
    path = root / "binlog" / first
    meta = {"path": str(path), "size": path.stat().st_size, "rows": rows}
    meta_path.write_text(json.dumps(meta))
    return meta


def bench_memory(args) -> dict:
    """Peak RSS, wall time and rows/s of ``gtidx changes --parquet`` on the blob binlog."""
    meta = make_blob_binlog(DEFAULT_DIR)
    out = Path(tempfile.mkdtemp(prefix="gtidx-mem-"))
    try:
        t0 = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "gtidx", "changes", "--quiet", "--parquet", str(out),
                                  meta["path"]])
        _, status, usage = os.wait4(child.pid, 0)          # this child's own peak, not the server's
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if child.returncode:
            raise SystemExit(f"gtidx changes exited {child.returncode}")
        peak = usage.ru_maxrss
        import pyarrow.parquet as pq
        got = pq.ParquetFile(out / (Path(meta["path"]).name + ".parquet")).metadata.num_rows
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if got != meta["rows"]:
        raise SystemExit(f"gtidx changes wrote {got} rows, the binlog holds {meta['rows']}")
    result = {"binlog_bytes": meta["size"], "rows": got, "seconds": round(wall, 2),
              "rows_per_s": round(got / wall), "peak_rss_mib": round(peak / 1024, 1)}
    print(json.dumps(result))
    return result


def bench_mysql_changes(args) -> dict:
    """MySQL and MariaDB row changes side by side (``tools/bench changes
    --mysql FILE``): the Arrow batches of one binlog of each flavor
    (``--mysql``: e.g. a ``tools/make_mysql_workload`` binlog; ``--file``: a
    MariaDB one, default the 256 MiB workload file), decoded in this process
    as ``gtidx changes --parquet`` decodes them (``rowbatch.source_batches``,
    the compiled decoder where built), ``--runs`` times, the flavors
    interleaved so the machine's noise hits both alike: rows/s and MB/s
    (medians), then ``gtidx changes --parquet`` end to end once each (wall,
    peak RSS), and MySQL's rows/s as a fraction of MariaDB's."""
    import statistics
    from gtidx import changes, rowbatch
    from tools.bench_common import machine, workload_file
    files = {"mysql": Path(args.mysql), "mariadb": Path(args.file) if args.file else workload_file()}
    times: dict = {k: [] for k in files}
    rows: dict = {}

    def decode(path: Path) -> int:
        n = 0
        for one in changes.changes(str(path), reader=lambda s, b, sp: rowbatch.source_batches(s, b, sp)):
            for x in one.rows:
                if isinstance(x, Exception):
                    raise x
                n += x.num_rows
        return n
    for _ in range(args.runs):
        for k, path in files.items():
            t0 = time.perf_counter()
            rows[k] = decode(path)
            times[k].append(time.perf_counter() - t0)
    report = {"machine": machine(), "compiled": rowbatch.USE_COMPILED, "runs": args.runs}
    for k, path in files.items():
        size = path.stat().st_size
        s = statistics.median(times[k])
        with tempfile.TemporaryDirectory(prefix="gtidx-bench-mysql-") as tmp:
            t0 = time.perf_counter()
            child = subprocess.Popen([sys.executable, "-m", "gtidx", "changes", "--quiet", "--parquet",
                                      str(Path(tmp) / "out.parquet"), str(path)])
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - t0
        if status:
            raise SystemExit(f"gtidx changes exited {status >> 8} on {path}")
        report[k] = {"file": str(path), "bytes": size, "rows": rows[k], "s": s, "rows_s": rows[k] / s,
                     "mb_s": size / s / 2**20, "cli_wall_s": wall, "cli_peak_rss_mb": usage.ru_maxrss / 1024}
        print(f"  {k}: {path.name} {size / 2**20:.1f} MiB, {rows[k]:,} rows in {s:.3f} s (median of {args.runs}) "
              f"= {rows[k] / s:,.0f} rows/s, {size / s / 2**20:.1f} MB/s; gtidx changes --parquet {wall:.2f} s "
              f"wall, {usage.ru_maxrss / 1024:.0f} MB peak RSS")
    report["mysql_over_mariadb_rows_s"] = report["mysql"]["rows_s"] / report["mariadb"]["rows_s"]
    report["mysql_over_mariadb_mb_s"] = report["mysql"]["mb_s"] / report["mariadb"]["mb_s"]
    print(f"  MySQL / MariaDB: rows/s {report['mysql_over_mariadb_rows_s']:.2f}, "
          f"MB/s {report['mysql_over_mariadb_mb_s']:.2f}")
    return report
