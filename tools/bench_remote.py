"""The report's sections measured against something remote: an object store
(``s3_section``: builds and one-shot lookups on a moto_server, requests
counted) and a Spark standalone cluster against local mode
(``cluster_section``); each with its summary and its Markdown table."""
from __future__ import annotations

import os
import random
import statistics
import time
from pathlib import Path

from gtidx import admin, api
from tools.bench_common import machine_date, ms_since, spread, spread_text, three_digits
from tools.bench_rounds import build_one, pick_targets


# -- object storage: moto_server ------------------------------------------------------------------

S3_BUCKET = "gtidx-bench"


class StoreReads:
    """The bytes gtidx asks the object store for (every ranged GET and whole
    object read of FsspecStore), as (path, bytes), while in the block."""

    METHODS = ("cat", "read_bytes", "read_object")

    def __init__(self):
        self.log: list[tuple[str, int]] = []

    def __enter__(self) -> "StoreReads":
        from gtidx import storage
        self._cls = storage.FsspecStore
        self._saved = {name: self._cls.__dict__[name] for name in self.METHODS}
        log = self.log

        def counting(orig):
            def read(store, path, *a, **kw):
                data = orig(store, path, *a, **kw)
                log.append((path, 0 if data is None else len(data)))
                return data
            return read
        for name, orig in self._saved.items():
            setattr(self._cls, name, counting(orig))
        return self

    def __exit__(self, *exc) -> None:
        for name, orig in self._saved.items():
            setattr(self._cls, name, orig)

    def take(self, binlog: str) -> dict:
        """Bytes read since the last take: of ``binlog``, of index objects, of anything else
        (an index's fingerprint, a catalog); and the largest single read."""
        out = {"binlog_bytes": 0, "index_bytes": 0, "other_bytes": 0, "largest_read": 0}
        for path, n in self.log:
            kind = "binlog_bytes" if path == binlog else "index_bytes" if path.endswith(".idx") else "other_bytes"
            out[kind] += n
            out["largest_read"] = max(out["largest_read"], n)
        self.log.clear()
        return out


def _requests(reqs: list) -> dict:
    return {"gets": sum(r[0] == "GET" for r in reqs), "heads": sum(r[0] == "HEAD" for r in reqs),
            "puts": [p for m, p, _ in reqs if m == "PUT"], "requests": len(reqs)}


def s3_section(files: list[str], args, tmp: str) -> dict:
    """The first workload file uploaded to a moto_server once; then: ``build``
    from S3 (MB/s, requests, PUTs) against the same build of the local file and
    a plain download; one-shot ``seek --gtid`` / ``pos`` on S3 through the index
    (a fresh gtidx.open per lookup: requests counted on the server, bytes
    read by gtidx) against downloading the object and scanning it locally."""
    from tools.s3server import MotoServer
    src = files[0]
    size = os.path.getsize(src)
    key = f"workload/{os.path.basename(src)}"
    url = f"s3://{S3_BUCKET}/{key}"
    out = {"date": machine_date(), "file": os.path.basename(src), "bytes": size, "targets": args.s3_targets,
           "downloads": args.s3_downloads, "builds": args.s3_builds, "seed": args.seed,
           "lookups": {}, "build_raw": []}
    with MotoServer(Path(tmp)) as srv, StoreReads() as reads:
        client = srv.bucket(S3_BUCKET)
        t0 = time.perf_counter()
        client.upload_file(src, S3_BUCKET, key)
        out["upload_s"] = time.perf_counter() - t0
        opts = srv.storage_options()
        print(f"s3: {src} uploaded to moto_server in {out['upload_s']:.1f} s")
        # build: from S3 (forced: one full read and the PUTs each time), the same file locally, a download
        local_idx = os.path.join(tmp, "local.idx")
        os.mkdir(os.path.join(tmp, "download"))
        copy = os.path.join(tmp, "download", os.path.basename(src))
        for r in range(args.s3_builds):
            srv.requests()
            reads.take(url)
            t0 = time.perf_counter()
            [res] = list(admin.build(url, storage_options=opts, force=True))
            s3_s = time.perf_counter() - t0
            if isinstance(res, Exception):
                raise res
            row = {"s3_MB_s": size / 1e6 / s3_s, **_requests(srv.requests()), **reads.take(url)}
            row["local_MB_s"] = size / 1e6 / build_one(src, local_idx)
            t0 = time.perf_counter()
            client.download_file(S3_BUCKET, key, copy)
            row["download_MB_s"] = size / 1e6 / (time.perf_counter() - t0)
            srv.requests()
            out["build_raw"].append(row)
            print(f"  build {r + 1}: S3 {row['s3_MB_s']:.0f} MB/s ({row['gets']} GETs, largest "
                  f"{row['largest_read'] / 2**20:.1f} MiB, PUTs {row['puts']}); local {row['local_MB_s']:.0f} MB/s; "
                  f"download {row['download_MB_s']:.0f} MB/s")
        # lookups
        targets = pick_targets([src], args.s3_targets, args.seed)
        with api.BinlogSeries([src]) as logs:
            truth_pos = [str(logs.state_at(src, t["end"]).position) for t in targets]
            truth_start = [logs.locate(t["gtid"]).start for t in targets]
        look = out["lookups"]

        def one(name, fn, expect, reqs_reads=True):
            srv.requests()
            reads.take(url)
            t0 = time.perf_counter_ns()
            got = fn()
            ms = ms_since(t0)
            row = {"ms": ms, **_requests(srv.requests()), **reads.take(url), "ok": str(got) == str(expect)}
            look.setdefault(name, []).append(row)

        def seek(g):
            with api.open_binlogs(url, storage_options=opts) as lg:
                loc = lg.locate(g)
                return loc.start if loc.via == "index" else f"via {loc.via}"

        def pos(off):
            st = api.state_at(url, off, storage_options=opts)
            return st.position if st.via == "index" else f"via {st.via}"
        for i, t in enumerate(targets):
            one(S3_SEEK, lambda: seek(t["gtid"]), truth_start[i])
            one(S3_POS, lambda: pos(t["end"]), truth_pos[i])
        step = max(1, len(targets) // max(1, args.s3_downloads))
        for i in list(range(0, len(targets), step))[:args.s3_downloads]:
            t = targets[i]

            def scan_seek(c):
                with api.BinlogSeries([c], use_index=False) as lg:
                    return lg.locate(t["gtid"]).start

            def scan_pos(c):
                with api.BinlogSeries([c], use_index=False) as lg:
                    return lg.state_at(c, t["end"]).position
            for name, question, want in ((S3_SEEK_DL, scan_seek, truth_start[i]),
                                         (S3_POS_DL, scan_pos, truth_pos[i])):
                os.unlink(copy)
                srv.requests()
                t0 = time.perf_counter_ns()
                client.download_file(S3_BUCKET, key, copy)
                got = question(copy)
                ms = ms_since(t0)
                row = {"ms": ms, **_requests(srv.requests()), "binlog_bytes": os.path.getsize(copy),
                       "index_bytes": 0, "other_bytes": 0, "ok": str(got) == str(want)}
                look.setdefault(name, []).append(row)
        for name, rows in look.items():
            print(f"  {name}: median {statistics.median(r['ms'] for r in rows):.1f} ms over {len(rows)}")
    return out


S3_SEEK = "gtid: gtidx seek on S3, through its index"
S3_POS = "offset: gtidx pos on S3, through its index"
S3_SEEK_DL = "gtid: download the object, gtidx scan"
S3_POS_DL = "offset: download the object, gtidx scan"


def summarize_s3(s3: dict) -> None:
    """Per contender: ms per lookup (min / median / max over the targets),
    requests and bytes (median and max); per build: MB/s over the builds."""
    def mm(values):
        return {"median": statistics.median(values), "max": max(values)}
    s3["summary"] = {name: {"n": len(rows), "ms": spread([r["ms"] for r in rows]),
                            "gets": mm([r["gets"] for r in rows]), "heads": mm([r["heads"] for r in rows]),
                            "binlog_bytes": mm([r["binlog_bytes"] for r in rows]),
                            "index_bytes": mm([r["index_bytes"] + r["other_bytes"] for r in rows]),
                            "wrong": sum(not r["ok"] for r in rows)}
                     for name, rows in s3["lookups"].items()}
    b = s3["build_raw"]
    s3["build"] = {"s3_MB_s": spread([r["s3_MB_s"] for r in b]), "local_MB_s": spread([r["local_MB_s"] for r in b]),
                   "download_MB_s": spread([r["download_MB_s"] for r in b]),
                   "x_local": spread([r["s3_MB_s"] / r["local_MB_s"] for r in b]),
                   "gets": mm([r["gets"] for r in b]), "largest_read": max(r["largest_read"] for r in b),
                   "puts": sorted({os.path.basename(p) for r in b for p in r["puts"]}),
                   "puts_per_build": mm([len(r["puts"]) for r in b])}


def _mm(v: dict, fmt=lambda x: f"{x:,.0f}") -> str:
    return fmt(v["median"]) if v["median"] == v["max"] else f"{fmt(v['median'])} ({fmt(v['max'])})"


def markdown_s3(s3: dict) -> list[str]:
    b = s3["build"]
    lines = ["", f"**Object storage** (moto_server, a separate process on 127.0.0.1; one workload file, "
             f"{s3['file']}, {s3['bytes'] / 2**20:.0f} MiB, uploaded once; {s3['targets']} random targets, "
             f"seed {s3['seed']}, a fresh `gtidx.open` per lookup; the downloads get {s3['downloads']} of them; "
             f"requests counted on the server, bytes as gtidx read them; measured {s3['date']} on a shared machine)",
             "", "| question: contender | n | ms per lookup, median (min-max) | GET + HEAD, median (max) | "
             "binlog bytes, median (max) | index bytes, median (max) | wrong |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, v in s3["summary"].items():
        lines.append(f"| {name} | {v['n']} | {spread_text(v['ms'])} | {_mm(v['gets'])} + {_mm(v['heads'])} | "
                     f"{_mm(v['binlog_bytes'])} | {_mm(v['index_bytes'])} | {v['wrong']} |")
    lines += ["", f"| build ({len(s3['build_raw'])} of each) | MB/s, median (min-max) | / the local build's |",
              "|---|---:|---:|",
              f"| gtidx build from S3 ({_mm(b['gets'])} GETs, largest {b['largest_read'] / 2**20:.0f} MiB; "
              f"{_mm(b['puts_per_build'])} PUTs: {', '.join(b['puts'])}) | {spread_text(b['s3_MB_s'])} | {spread_text(b['x_local'])} |",
              f"| gtidx build of the local file | {spread_text(b['local_MB_s'])} | 1 |",
              f"| download alone (boto3 download_file) | {spread_text(b['download_MB_s'])} | - |"]
    return lines


# -- Spark: a standalone cluster against local mode ------------------------------------------------------

CLUSTER_CORES = 2


def cluster_section(bench, files: list[str], args, tmp: str) -> dict:
    """``gs.locate`` of the same seeded GTIDs (~1% not in the binlogs) over the
    workload files on a standalone cluster (1 master, 1 worker with 2 cores,
    separate JVMs from the PySpark install, tools/spark_cluster.py) and in
    local[2], alternating; executors get this checkout's gtidx as a zip and
    run a Python without it installed; every row compared between the modes,
    a sample with the library's answer. The binlogs are the local workload
    files (the executors run on this machine), linked into a directory of
    the run with their indexes beside them."""
    from gtidx import spark as gs
    from tools.spark_cluster import StandaloneCluster, gtidx_zip, node_python
    here = Path(tmp) / "cluster-binlogs"
    here.mkdir()
    for f in files:
        (here / os.path.basename(f)).symlink_to(f)
    for r in admin.build(str(here)):
        if isinstance(r, Exception):
            raise r
    t0 = time.perf_counter()
    wanted, groups = bench.sample_gtids(files, args.cluster_lookups, args.seed)
    print(f"cluster: {len(wanted)} lookups over {len(files)} files ({groups} groups), sampled in "
          f"{time.perf_counter() - t0:.1f} s")
    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = str(node_python(Path(tmp)))
    zipped = str(gtidx_zip(Path(tmp) / "gtidx-py.zip"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    t0 = time.perf_counter()
    cluster = StandaloneCluster(Path(tmp) / "spark", cores=CLUSTER_CORES, memory="2g", env=env)
    out = {"date": machine_date(), "files": [os.path.basename(f) for f in files],
           "bytes": sum(os.path.getsize(f) for f in files), "lookups": len(wanted), "seed": args.seed,
           "cores": CLUSTER_CORES, "cluster_start_s": time.perf_counter() - t0, "runs": []}
    answers = {}
    try:
        # the driver's JVM first, untimed: then every session start is a SparkContext's alone
        from pyspark import SparkContext
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        t0 = time.perf_counter()
        SparkContext._ensure_initialized()
        out["driver_jvm_start_s"] = time.perf_counter() - t0
        modes = [f"local[{CLUSTER_CORES}]", cluster.url]
        for r in range(args.cluster_rounds):
            for master in (modes if r % 2 == 0 else modes[::-1]):
                mode = "local" if master.startswith("local") else "cluster"
                t0 = time.perf_counter()
                spark = gs.session(master, app=f"gtidx-bench-{mode}",
                                   conf={"spark.submit.pyFiles": zipped, "spark.cores.max": str(CLUSTER_CORES),
                                         "spark.executor.memory": "1g"})
                spark.sparkContext.addPyFile(zipped)
                start_s = time.perf_counter() - t0
                try:
                    df = spark.createDataFrame([(g,) for g in wanted], "gtid string")
                    df = df.repartition(CLUSTER_CORES).cache()
                    df.count()
                    t0 = time.perf_counter()
                    rows = gs.locate(spark, df, str(here)).collect()
                    locate_s = time.perf_counter() - t0
                finally:
                    spark.stop()
                got = sorted((r.gtid, r.file, r.start, r.end, r.resume, r.found) for r in rows)
                answers.setdefault(mode, got)
                out["runs"].append({"mode": mode, "master": master, "session_s": start_s, "locate_s": locate_s,
                                    "rows": len(rows), "found": sum(r.found for r in rows),
                                    "same_as_first": got == answers[mode]})
                print(f"  {mode} ({master}): {locate_s:.1f} s for {len(rows)} lookups; session {start_s:.1f} s")
    finally:
        cluster.stop()
        if saved is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = saved
    out["equal"] = answers["local"] == answers["cluster"] and all(r["same_as_first"] for r in out["runs"])
    rnd = random.Random(args.seed)
    sample = rnd.sample(answers["cluster"], min(1000, len(answers["cluster"])))
    wrong = 0
    with api.open_binlogs(str(here)) as logs:
        for g, file, start, end, resume, found in sample:
            try:
                loc = logs.locate(g)
                mine = (loc.file, loc.start, loc.end, loc.resume, True)
            except Exception:
                mine = (None, None, None, None, False)
            wrong += mine != (file, start, end, resume, found)
    out["library_checked"], out["library_wrong"] = len(sample), wrong
    return out


def summarize_cluster(c: dict) -> None:
    """Per mode: locate seconds (min / median / max over the runs) and
    lookups per second; the cluster's time over local mode's, run by run
    in order (each cluster run against the local run next to it)."""
    by = {m: [r for r in c["runs"] if r["mode"] == m] for m in ("local", "cluster")}
    c["summary"] = {m: {"locate_s": spread([r["locate_s"] for r in rs]),
                        "per_s": spread([c["lookups"] / r["locate_s"] for r in rs]),
                        "session_s": spread([r["session_s"] for r in rs])} for m, rs in by.items()}
    c["x_local"] = spread([cl["locate_s"] / lo["locate_s"] for lo, cl in zip(by["local"], by["cluster"])])


def markdown_cluster(c: dict) -> list[str]:
    runs = len(c["runs"]) // 2
    lines = ["", f"**Spark locate: a standalone cluster vs local mode** ({c['lookups']:,} lookups, seeded, ~1% "
             f"not in the binlogs, over {len(c['files'])} workload binlog(s), {c['bytes'] / 2**30:.2f} GiB, "
             f"local files; {c['cores']} cores each way; {runs} run{'s' if runs > 1 else ''} each, alternating; answers equal between the "
             f"modes: {'yes' if c['equal'] else 'NO'}, {c['library_checked']:,} rows checked against the library: "
             f"{c['library_wrong']} wrong; the locate and its collect timed, not the session's start nor the "
             f"cluster's ({c['cluster_start_s']:.0f} s to a registered worker); measured {c['date']} on a shared "
             "machine)", "",
             "| mode | locate s, median (min-max) | lookups/s, median | time / local mode's |",
             "|---|---:|---:|---:|"]
    names = {"local": f"local[{c['cores']}] (one JVM)",
             "cluster": f"standalone: 1 master, 1 worker, {c['cores']} cores (separate JVMs)"}
    for m in ("local", "cluster"):
        v = c["summary"][m]
        ratio = "1" if m == "local" else spread_text(c["x_local"])
        lines.append(f"| {names[m]} | {spread_text(v['locate_s'])} | {three_digits(v['per_s']['median'])} | {ratio} |")
    return lines
