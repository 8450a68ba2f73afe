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

import datetime
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from argparse import Namespace
from types import SimpleNamespace
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = ROOT / "bench" / "results"
SHARED_TOOL = ROOT.parent / "shared" / "tools" / "mariadb-11.8.sh"
M118_ROOT = Path(os.environ.get("GTIDX_M118_ROOT", "/var/tmp/gtidx-ci-m118"))
M118_DIR = "/srv/gtidx-bench"          # inside the 11.8 root
M118_PORT = 3319                        # the shared tool's instance has 3318

from gtidx import api  # noqa: E402
from gtidx.binlog.mariadb import Binlog  # noqa: E402
from gtidx.gtid import Position  # noqa: E402
from gtidx.index.files import build_index  # noqa: E402
from tools import bench_cli, bench_live, bench_spark  # noqa: E402
from tools.bench_common import bare_walk, machine, sample_gtids, spark_split  # noqa: E402
from tools.mariadb import MariaDB  # noqa: E402

# What the report measures with (``run``'s ``bench``; a test passes a fake): the
# sub-benchmarks it shows a section of, and the helpers its own rounds use.
MEASURES = SimpleNamespace(machine=machine, bare_walk=bare_walk, sample_gtids=sample_gtids,
                           bench_tail=bench_live.bench_tail, bench_spark=bench_spark.bench_spark,
                           bench_startup=bench_cli.bench_startup, bench_changes=bench_spark.bench_changes,
                           bench_mysql=bench_live.bench_mysql)


def _ms(t0: int) -> float:
    return (time.perf_counter_ns() - t0) / 1e6


def spread(values) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


# -- machine ------------------------------------------------------------------------------------------

def machine_date() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


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


# -- build --------------------------------------------------------------------------------------------

def _build_one(path: str, out: str) -> float:
    t0 = time.perf_counter()
    build_index(path, out=out, force=True)
    return time.perf_counter() - t0


BUILD_TRIES = 3     # build_round: the best of this many tries of each short run (0.3 s each)


def build_round(bench, files: list[str], tmp: str, pool) -> dict:
    """One round: MB/s of each contender on files[0]; two files on two cores
    (files[0] and the largest of the others: a short binlog among the
    workload's would make the pair measure one file). The header walk, the
    build and the pair are each the best of BUILD_TRIES tries (as timeit
    takes): a run lasts about 0.3 s, and a moment of the shared machine's
    other work in it only ever slows it. mariadb-binlog runs once (seconds)."""
    import mmap
    f0, f1 = files[0], max(files[1:], key=os.path.getsize)
    size0 = os.path.getsize(f0)
    mb = size0 / 1e6

    def best(run) -> float:
        times = []
        for _ in range(BUILD_TRIES):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        return min(times)

    def pair():
        jobs = [pool.submit(_build_one, f, os.path.join(tmp, f"two{i}.idx")) for i, f in enumerate((f0, f1))]
        for j in jobs:
            j.result()
    out = {}
    with open(f0, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        out["bare header walk"] = mb / best(lambda: bench.bare_walk(mm))
        mm.close()
    out["gtidx build"] = mb / best(lambda: _build_one(f0, os.path.join(tmp, "one.idx")))
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run(["mariadb-binlog", f0], stdout=null, stderr=subprocess.DEVNULL, check=True)
    out["mariadb-binlog (decode)"] = mb / (time.perf_counter() - t0)
    out["gtidx build, 2 files on 2 cores"] = (size0 + os.path.getsize(f1)) / 1e6 / best(pair)
    return out


# -- lookups ------------------------------------------------------------------------------------------

def pick_targets(files: list[str], n: int, seed: int) -> list[dict]:
    """n random event groups over the files: their file, start, end and GTID,
    and the state just before them (the replica position that asks for them)."""
    rnd = random.Random(seed)
    spans = []
    for f in files:
        with Binlog(f) as b:
            spans += [(f, s, e, x) for s, e, x in b.group_spans()]
    picks = sorted(rnd.sample(spans, n), key=lambda p: (p[0], p[1]))
    out = []
    with api.BinlogSeries(files) as logs:
        for f, s, e, x in picks:
            g = f"{x[3]}-{x[1]}-{x[2]}"
            before = logs.state_at(f, s).position
            out.append({"file": f, "start": s, "end": e, "gtid": g, "before": str(before)})
    return out


def _stream(settings: dict, **kw):
    # its advice to set binlog_row_metadata=FULL (a warning per connection) is noise here
    logging.getLogger("pymysqlreplication").setLevel(logging.ERROR)
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent
    return BinLogStreamReader(connection_settings=settings, server_id=random.randrange(1000, 1 << 30),
                              is_mariadb=True, blocking=False, only_events=[MariadbGtidEvent], **kw)


def _stream_to_gtid(settings: dict, file: str, gtid: str) -> int:
    """What a user of python-mysql-replication does to find a GTID: stream
    the file from its start and stop at the GTID event."""
    stream = _stream(settings, log_file=os.path.basename(file), log_pos=4, resume_stream=True)
    try:
        for ev in stream:
            if ev.gtid == gtid:
                return ev.packet.log_pos
        raise RuntimeError(f"{gtid} not streamed from {file}")
    finally:
        stream.close()


def _replica_first(settings: dict, position: str) -> str:
    """A replica connecting with this GTID position: the server finds where
    to start (10.11 scans the binlog, 11.8 descends its index) and sends the
    first group; the time to that first GTID event is its lookup."""
    stream = _stream(settings, auto_position=position)
    try:
        for ev in stream:
            return ev.gtid
        raise RuntimeError(f"nothing sent after {position}")
    finally:
        stream.close()


def _server_pos(conn, file: str, offset: int) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (os.path.basename(file), offset))
        answer = cur.fetchone()[0]
    return str(Position.parse(answer)) if answer is not None else None    # canonical order


class Timer:
    """Times one contender over its targets; counts answers that differ from gtidx's."""

    def __init__(self):
        self.results = {}

    def run(self, name: str, fn, items, expect=None):
        ts, wrong = [], 0
        for i, item in enumerate(items):
            t0 = time.perf_counter_ns()
            got = fn(item)
            ts.append(_ms(t0))
            if expect is not None and str(got) != str(expect[i]):
                wrong += 1
        self.results[name] = {"n": len(ts), "median_ms": statistics.median(ts),
                              "p99_ms": sorted(ts)[min(len(ts) - 1, round(0.99 * (len(ts) - 1)))],
                              "wrong": wrong}


def lookup_round(targets: list[dict], n_slow: int, srv, m118) -> dict:
    files = sorted({t["file"] for t in targets})
    offsets = [(t["file"], t["end"]) for t in targets]
    gtids = [t["gtid"] for t in targets]
    slow = targets[:: max(1, len(targets) // n_slow)][:n_slow]
    tm = Timer()
    with api.BinlogSeries(files) as logs:
        truth = [str(logs.state_at(f, o).position) for f, o in offsets]
        starts = [logs.locate(g).start for g in gtids]
        tm.run("offset: gtidx index, warm", lambda fo: logs.state_at(*fo).position, offsets, truth)
        tm.run("gtid: gtidx locate, warm", lambda g: logs.locate(g).start, gtids, starts)
        tm.run("gtid: gtidx replica_start, warm", lambda t: logs.replica_start(t["before"]).first.gtid,
               targets, gtids)

    def cold_offset(fo):
        with api.BinlogSeries(files) as lg:
            return lg.state_at(*fo).position

    def cold_gtid(g):
        with api.BinlogSeries(files) as lg:
            return lg.locate(g).start
    tm.run("offset: gtidx index, cold", cold_offset, offsets, truth)
    tm.run("gtid: gtidx locate, cold", cold_gtid, gtids, starts)
    with api.BinlogSeries(files, use_index=False) as scan:
        tm.run("offset: gtidx scan, no index", lambda fo: scan.state_at(*fo).position, offsets, truth)
        tm.run("gtid: gtidx scan, no index", lambda g: scan.locate(g).start, gtids, starts)
    conn = srv.connect()
    try:
        tm.run("offset: MariaDB 10.11 BINLOG_GTID_POS (scan)", lambda fo: _server_pos(conn, *fo), offsets, truth)
    finally:
        conn.close()
    settings = srv.connection_settings()
    # ~9 MB/s: 30 s per target on average, so only a spread-out subset
    tm.run("gtid: python-mysql-replication stream from file start",
           lambda t: _stream_to_gtid(settings, t["file"], t["gtid"]), slow)
    tm.run("gtid: replica connect to MariaDB 10.11 (scan)", lambda t: _replica_first(settings, t["before"]),
           targets, gtids)
    if m118 is not None:
        m118.round(tm)
    return tm.results


# -- MariaDB 11.8, a private instance in the shared tool's Debian 13 root ------------------------------

class M118:
    """A private MariaDB 11.8 with the first workload file replayed into it."""

    def __init__(self, source: str, n: int, seed: int):
        self.root = M118_ROOT
        self.dir = self.root / M118_DIR.lstrip("/")
        self.socket = str(self.dir / "mysqld.sock")
        self.source, self.n, self.seed = source, n, seed
        self.binlog = None

    def _chroot(self, *cmd, **kw):
        return subprocess.run(["chroot", str(self.root), *cmd], check=True, **kw)

    def start(self) -> "M118":
        if not (self.root / "usr/sbin/mariadbd").exists():
            if not SHARED_TOOL.exists():
                raise RuntimeError(f"no MariaDB 11.8: {SHARED_TOOL} is missing")
            subprocess.run(["bash", str(SHARED_TOOL), str(self.root)], check=True, capture_output=True)
        for sub, how in (("proc", ["-t", "proc", "proc"]), ("dev", ["--bind", "/dev"])):
            if subprocess.run(["mountpoint", "-q", str(self.root / sub)]).returncode:
                subprocess.run(["mount", *how, str(self.root / sub)], check=True)
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        (self.dir / "binlog").mkdir(exist_ok=True)
        (self.dir / "my.cnf").write_text(f"""[mariadbd]
datadir={M118_DIR}/data
socket={M118_DIR}/mysqld.sock
port={M118_PORT}
bind-address=127.0.0.1
server_id=1
log_bin={M118_DIR}/binlog/master-bin
max_binlog_size=1G
binlog_format=ROW
binlog_checksum=CRC32
skip-name-resolve
innodb_flush_log_at_trx_commit=0
innodb_buffer_pool_size=256M
sync_binlog=0
max_allowed_packet=64M
pid-file={M118_DIR}/mysqld.pid
log-error={M118_DIR}/err.log
user=mysql
""")
        self._chroot("chown", "-R", "mysql:mysql", M118_DIR)
        if not (self.dir / "data" / "mysql").exists():
            self._chroot("mariadb-install-db", f"--defaults-file={M118_DIR}/my.cnf", "--user=mysql",
                         "--force", "--skip-name-resolve", capture_output=True)
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        subprocess.Popen(["chroot", str(self.root), "mariadbd", f"--defaults-file={M118_DIR}/my.cnf"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                self.sql("SELECT 1")
                break
            except Exception:
                time.sleep(0.3)
        else:
            raise RuntimeError(f"MariaDB 11.8 did not start: see {self.dir / 'err.log'}")
        self.version = self.sql("SELECT VERSION()")[0][0]
        self._replay()
        return self

    def stop(self) -> None:
        try:
            os.kill(int((self.dir / "mysqld.pid").read_text()), 15)
        except (OSError, ValueError):
            pass

    def connect(self):
        import pymysql
        return pymysql.connect(unix_socket=self.socket, user="root", password="", autocommit=True)

    def sql(self, q):
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(q)
                return cur.fetchall()
        finally:
            conn.close()

    def settings(self) -> dict:
        return {"unix_socket": self.socket, "user": "root", "password": ""}

    def _replay(self) -> None:
        """Replay the source binlog once (same GTIDs), in a binlog of its own,
        closed (so the server has written its whole index)."""
        marker = self.dir / "replayed.json"
        src = {"source": self.source, "size": os.path.getsize(self.source)}
        if marker.exists():
            m = json.loads(marker.read_text())
            if m.get("source") == src["source"] and m.get("size") == src["size"] and \
                    (self.dir / "binlog" / m["binlog"]).exists():
                self.binlog = str(self.dir / "binlog" / m["binlog"])
                self.replay_s = m["seconds"]
                return
        self.sql("FLUSH BINARY LOGS")
        name = self.sql("SHOW MASTER STATUS")[0][0]
        t0 = time.monotonic()
        dump = subprocess.Popen(["mariadb-binlog", self.source], stdout=subprocess.PIPE)
        subprocess.run(["mariadb", "-S", self.socket, "-uroot", "--max-allowed-packet=64M"],
                       stdin=dump.stdout, check=True)
        dump.stdout.close()
        if dump.wait():
            raise RuntimeError("mariadb-binlog failed")
        self.sql("FLUSH BINARY LOGS")
        self.replay_s = round(time.monotonic() - t0, 1)
        self.binlog = str(self.dir / "binlog" / name)
        marker.write_text(json.dumps({**src, "binlog": name, "seconds": self.replay_s}))

    def targets(self) -> list[dict]:
        return pick_targets([self.binlog], self.n, self.seed)

    def round(self, tm: Timer) -> None:
        ts = self.targets_cache = getattr(self, "targets_cache", None) or self.targets()
        path = self.binlog
        offsets = [t["end"] for t in ts]
        with api.open_binlogs(path) as logs:
            truth = [str(logs.state_at(path, o).position) for o in offsets]
            tm.run("offset: gtidx reading 11.8's own index, warm", lambda o: logs.state_at(path, o).position,
                   offsets, truth)
            self.via = logs.state_at(path, offsets[0]).via
        conn = self.connect()
        try:
            tm.run("offset: MariaDB 11.8 BINLOG_GTID_POS (its index)", lambda o: _server_pos(conn, path, o),
                   offsets, truth)
        finally:
            conn.close()
        tm.run("gtid: replica connect to MariaDB 11.8 (its index)",
               lambda t: _replica_first(self.settings(), t["before"]), ts, [t["gtid"] for t in ts])


# -- CLI start ----------------------------------------------------------------------------------------

def cli_round(binlog: str, gtid: str, reps: int) -> dict:
    exe = shutil.which("gtidx")
    seek = [exe, "seek", "--gtid", gtid, binlog] if exe else [sys.executable, "-m", "gtidx", "seek",
                                                                "--gtid", gtid, binlog]
    jobs = {"python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import gtidx.cli'": [sys.executable, "-c", "import gtidx.cli"],
            "gtidx seek --gtid G FILE": seek}
    # as a user runs them: the .pyc caches written and used (a shell's PYTHONDONTWRITEBYTECODE
    # would time the compiling of every module changed since its cache was last written)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for cmd in jobs.values():
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    times = {k: [] for k in jobs}
    for i in range(reps):
        for name, cmd in (list(jobs.items()) if i % 2 == 0 else list(jobs.items())[::-1]):
            t0 = time.perf_counter_ns()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
            times[name].append(_ms(t0))
    return {k: statistics.median(v) for k, v in times.items()}


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
            [res] = list(api.build(url, storage_options=opts, force=True))
            s3_s = time.perf_counter() - t0
            if isinstance(res, Exception):
                raise res
            row = {"s3_MB_s": size / 1e6 / s3_s, **_requests(srv.requests()), **reads.take(url)}
            row["local_MB_s"] = size / 1e6 / _build_one(src, local_idx)
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
            ms = _ms(t0)
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
                ms = _ms(t0)
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
        lines.append(f"| {name} | {v['n']} | {_s(v['ms'])} | {_mm(v['gets'])} + {_mm(v['heads'])} | "
                     f"{_mm(v['binlog_bytes'])} | {_mm(v['index_bytes'])} | {v['wrong']} |")
    lines += ["", f"| build ({len(s3['build_raw'])} of each) | MB/s, median (min-max) | / the local build's |",
              "|---|---:|---:|",
              f"| gtidx build from S3 ({_mm(b['gets'])} GETs, largest {b['largest_read'] / 2**20:.0f} MiB; "
              f"{_mm(b['puts_per_build'])} PUTs: {', '.join(b['puts'])}) | {_s(b['s3_MB_s'])} | {_s(b['x_local'])} |",
              f"| gtidx build of the local file | {_s(b['local_MB_s'])} | 1 |",
              f"| download alone (boto3 download_file) | {_s(b['download_MB_s'])} | - |"]
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
    for r in api.build(str(here)):
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
        ratio = "1" if m == "local" else _s(c["x_local"])
        lines.append(f"| {names[m]} | {_s(v['locate_s'])} | {_f(v['per_s']['median'])} | {ratio} |")
    return lines


# -- index sizes --------------------------------------------------------------------------------------

def index_sizes(workload: list[str], m118) -> list[dict]:
    rows = []
    sets = sorted(p for p in (ROOT / "fixtures").glob("mariadb-*/*") if p.is_dir())
    with tempfile.TemporaryDirectory(prefix="gtidx-bench-sizes-") as tmp:
        def measure(label, binlogs, server_idx):
            total = ours = theirs = 0
            have_theirs = True
            for i, f in enumerate(binlogs):
                try:
                    r = build_index(f, out=os.path.join(tmp, f"{i}.idx"), force=True)
                except Exception:      # encrypted / compressed-only sets gtidx refuses
                    return
                total += os.path.getsize(f)
                ours += r.size
                server = str(f) + ".idx"       # only an 11.8 wrote these
                if server_idx and os.path.exists(server):
                    theirs += os.path.getsize(server)
                else:
                    have_theirs = False
            rows.append({"set": label, "binlog_bytes": total, "gtidx_bytes": ours,
                         "gtidx_ratio": ours / total,
                         "server_bytes": theirs if have_theirs else None,
                         "server_ratio": theirs / total if have_theirs else None})
        for s in sets:
            binlogs = sorted(str(p) for p in s.glob("master-bin.[0-9]*") if not p.name.endswith(".idx"))
            if binlogs:
                measure(f"{s.parent.name}/{s.name}", binlogs, s.parent.name == "mariadb-11.8")
        measure("workload (10.11, 4 x 256 MiB)", workload[:4], False)
        if m118 is not None:
            measure("workload file 1 replayed on 11.8", [m118.binlog], True)
    return rows


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
            report["tail"] = bench.bench_tail(Namespace(seconds=args.tail_seconds))
        elif name == "spark":
            report["spark"] = bench.bench_spark(Namespace(lookups=args.spark_lookups, loop=args.spark_loop,
                                                          master="local[*]", seed=args.seed, repeats=3))
        elif name == "startup":
            report["startup"] = bench.bench_startup(Namespace(runs=args.startup_runs, venv=None))
        elif name == "changes":
            report["changes"] = bench.bench_changes(Namespace(master="local[*]", seed=args.seed, queries=None))
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


def _f(x: float) -> str:
    """Three significant digits (thousands separated): 0.171, 43.1, 1,379."""
    return f"{x:,.0f}" if x >= 999.5 else f"{float(f'{x:.3g}'):g}"


def _s(sp: dict) -> str:
    return f"{_f(sp['median'])} ({_f(sp['min'])}-{_f(sp['max'])})"


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
        lines.append(f"| {name} | {_s(v['MB_s'])} | {_s(v['x_gtidx'])} |")
    lines += ["", f"**Lookups** ({r['targets']} random targets (group boundaries) over the workload; "
              f"python-mysql-replication, ~30 s a target, gets {r['slow_targets']} of them; the 11.8 rows "
              "run on its replayed copy of the first file, 100 targets there)", "",
              "| question: contender | n | median ms | p99 ms | time / gtidx warm | wrong |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, v in r["lookups"].items():
        lines.append(f"| {name} | {v['n']} | {_s(v['median_ms'])} | {_s(v['p99_ms'])} | "
                     f"{_s(v['x_gtidx'])} | {v['wrong']} |")
    if "m118_missing" in r:
        lines.append(f"\nMariaDB 11.8 left out: {r['m118_missing']}")
    lines += ["", "**CLI start** (end to end, median of the repetitions)", "",
              "| command | ms | / `python -c pass` |", "|---|---:|---:|"]
    for name, v in r["cli"].items():
        lines.append(f"| `{name}` | {_s(v['ms'])} | {_s(v['x_python'])} |")
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
        lines += ["", "**gtidx tail** beside a live 10.11 (defaults; one run of 10 s per rate)", "",
                  "| write rate | lag median s | lag p99 s | tail CPU % of a core |", "|---|---:|---:|---:|"]
        for mode, v in r["tail"]["runs"].items():
            lines.append(f"| {v['MB_per_s']:.1f} MB/s ({mode}) | {v['lag_s_median']:.3f} | {v['lag_s_p99']:.3f} | "
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
                      f"{_s(totals)} s = {s['lookups'] / totals['median']:,.0f}/s; per-file work {_s(per)} s on "
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
        lines.append(f"| {name} | {v['n']} | {_f(v['median_ms'])} | {_f(v['min_ms'])}-{_f(v['max_ms'])} | "
                     f"{_f(v['p99_ms'])} |")
    return lines


def markdown_startup(s: dict) -> list[str]:
    """tools/bench startup's figures (one run of interleaved repetitions)."""
    lines = ["", f"**CLI start-up** in a regular install ({s['runs']} interleaved runs; `gtidx seek` finds a GTID "
             f"through the index of a copy of fixtures/{s['fixture']})", "",
             "| command | median ms | p25-p75 | min-max |", "|---|---:|---:|---:|"]
    for name, v in s["ms"].items():
        lines.append(f"| `{name}` | {_f(v['median'])} | {_f(v['p25'])}-{_f(v['p75'])} | {_f(v['min'])}-{_f(v['max'])} |")
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
                  + ", ".join(f"`{k}` {_f(v['median'])} ms" for k, v in c.items())
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
    one = c["one_process"]
    lines = ["", f"**Row changes on Spark** (`format(\"gtidx.changes\")`, one run; local, {c['cores']} cores; "
             f"{c['files']} binlogs, {c['bytes'] / 2**30:.2f} GiB): one process decoding a "
             f"{one['file_bytes'] / 2**20:.0f} MiB binlog alone gives {one['rows_s']:,.0f} rows/s (one core; "
             "the row decoding is mysql-replication's).", "",
             "| query | rows | s | rows/s | load average |", "|---|---:|---:|---:|---:|"]
    for name, v in c["runs"].items():
        load = "?" if v.get("load_average") is None else f"{v['load_average']:.1f}"
        lines.append(f"| {name} | {v['rows']:,} | {v['s']:.1f} | {v['rows_s']:,.0f} | {load} |")
    return lines


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
