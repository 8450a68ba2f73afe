"""The report's main tables (``tools/bench report``), measured round by round
on the workload files: the index build against a bare walk and
``mariadb-binlog`` (``build_round``), lookups against the servers and
python-mysql-replication (``lookup_round``, with MariaDB 11.8 as ``M118``),
the CLI's start (``cli_round``), and index sizes (``index_sizes``)."""
from __future__ import annotations

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
from pathlib import Path

from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.gtid import Position
from gtidx.index.build import build_index
from tools.bench_common import ms_since

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED_TOOL = ROOT.parent / "shared" / "tools" / "mariadb-11.8.sh"
M118_ROOT = Path(os.environ.get("GTIDX_M118_ROOT", "/var/tmp/gtidx-ci-m118"))
M118_DIR = "/srv/gtidx-bench"          # inside the 11.8 root
M118_PORT = 3319                        # the shared tool's instance has 3318


# -- build --------------------------------------------------------------------------------------------

def build_one(path: str, out: str) -> float:
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
        jobs = [pool.submit(build_one, f, os.path.join(tmp, f"two{i}.idx")) for i, f in enumerate((f0, f1))]
        for j in jobs:
            j.result()
    out = {}
    with open(f0, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        out["bare header walk"] = mb / best(lambda: bench.bare_walk(mm))
        mm.close()
    out["gtidx build"] = mb / best(lambda: build_one(f0, os.path.join(tmp, "one.idx")))
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
            ts.append(ms_since(t0))
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
            times[name].append(ms_since(t0))
    return {k: statistics.median(v) for k, v in times.items()}

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
