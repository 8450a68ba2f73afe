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
    sizes      index size / binlog size per fixture, gtidx vs the server's own .idx
    tail       `gtidx tail` lag and CPU beside a 10.11 written at full speed and 5 MB/s
    spark      Spark locate vs a library loop (tools/bench spark, fewer lookups)

MariaDB 11.8 runs inside the Debian 13 root that ../shared/tools/mariadb-11.8.sh
builds (GTIDX_M118_ROOT, default /var/tmp/gtidx-ci-m118): a second, private
instance (its own datadir, socket and port) into which the first workload file
is replayed once (`mariadb-binlog | mariadb`, same GTIDs), so 11.8 answers from
its own index over the same transactions. Without the tool, that part is left
out and the report says so.

Writes bench/results/report.{json,md,png}; --readme also puts the Markdown
table and the chart into README.md between the bench markers.
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
from gtidx.binlog import Binlog  # noqa: E402
from gtidx.gtid import Position  # noqa: E402
from gtidx.indexfile import build_index  # noqa: E402
from tools.mariadb import MariaDB  # noqa: E402


def _ms(t0: int) -> float:
    return (time.perf_counter_ns() - t0) / 1e6


def spread(values) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


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
            "mariadb_binlog": ver, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


# -- build --------------------------------------------------------------------------------------------

def _build_one(path: str, out: str) -> float:
    t0 = time.perf_counter()
    build_index(path, out=out, force=True)
    return time.perf_counter() - t0


def build_round(bench, files: list[str], tmp: str, pool) -> dict:
    """One round: MB/s of each contender on files[0]; two files on two cores."""
    import mmap
    f0, f1 = files[0], files[1]
    size0 = os.path.getsize(f0)
    mb = size0 / 1e6
    out = {}
    with open(f0, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        t0 = time.perf_counter()
        bench.bare_walk(mm)
        out["bare header walk"] = mb / (time.perf_counter() - t0)
        mm.close()
    out["gtidx build"] = mb / _build_one(f0, os.path.join(tmp, "one.idx"))
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run(["mariadb-binlog", f0], stdout=null, stderr=subprocess.DEVNULL, check=True)
    out["mariadb-binlog (decode)"] = mb / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    jobs = [pool.submit(_build_one, f, os.path.join(tmp, f"two{i}.idx")) for i, f in enumerate((f0, f1))]
    for j in jobs:
        j.result()
    out["gtidx build, 2 files on 2 cores"] = (size0 + os.path.getsize(f1)) / 1e6 / (time.perf_counter() - t0)
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
    times = {k: [] for k in jobs}
    for i in range(reps):
        for name, cmd in (list(jobs.items()) if i % 2 == 0 else list(jobs.items())[::-1]):
            t0 = time.perf_counter_ns()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            times[name].append(_ms(t0))
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


# -- the report ---------------------------------------------------------------------------------------

def run(bench, args) -> dict:
    if args.rewrite:
        report = json.loads((RESULTS / "report.json").read_text())
        summarize(report)
        write(report, args.readme)
        return report
    out = subprocess.run([str(HERE / "make_workload"), "--files", "4"], check=True,
                         capture_output=True, text=True).stdout.split()
    files = out[0::2][:4]
    wl = json.loads((Path(files[0]).parent.parent / "workload.json").read_text())
    report = {"machine": machine_facts(bench), "rounds": args.rounds, "targets": args.targets,
              "slow_targets": args.slow_targets,
              "workload": {"server": wl["server"], "files": [os.path.basename(f) for f in files],
                           "bytes": sum(os.path.getsize(f) for f in files)}}
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
    if not args.no_tail:
        report["tail"] = bench.bench_tail(Namespace(seconds=args.tail_seconds))
    if not args.no_spark:
        report["spark"] = bench.bench_spark(Namespace(lookups=args.spark_lookups, loop=args.spark_loop,
                                                      master="local[*]", seed=args.seed))
    summarize(report)
    write(report, args.readme)
    return report


def write(report: dict, readme: bool) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "report.json").write_text(json.dumps(report, indent=1))
    md = markdown(report)
    (RESULTS / "report.md").write_text(md)
    chart(report, RESULTS / "report.png")
    print(md)
    if readme:
        update_readme(md)


def summarize(report: dict) -> None:
    """Per-round ratios, then min / median / max over the rounds."""
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
    lines = [f"Machine: {m['python_cpu']}, {m['cores']} cores, {m['memory']}; {m['date']}. "
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
    if "tail" in r:
        lines += ["", "**gtidx tail** beside a live 10.11 (defaults; one run of 10 s per rate)", "",
                  "| write rate | lag median s | lag p99 s | tail CPU % of a core |", "|---|---:|---:|---:|"]
        for mode, v in r["tail"]["runs"].items():
            lines.append(f"| {v['MB_per_s']:.1f} MB/s ({mode}) | {v['lag_s_median']:.3f} | {v['lag_s_p99']:.3f} | "
                         f"{v['cpu_percent_of_a_core']:.1f} |")
    if "spark" in r:
        s = r["spark"]
        lines += ["", f"**Spark** (one run; local, {s['cores']} cores): {s['lookups']:,} lookups over {s['files']} binlogs "
                  f"({s['bytes'] / 2**30:.2f} GiB) in {s['spark_s']:.1f} s = {s['lookups'] / s['spark_s']:,.0f}/s; "
                  f"a one-process library loop: {s['lookups'] / s['loop_s']:,.0f}/s; "
                  f"Spark is {s['loop_s'] / s['spark_s']:.1f}x the loop."]
    return "\n".join(lines) + "\n"


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


def update_readme(md: str, readme: Path = ROOT / "README.md") -> None:
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = f"{BEGIN}\n![gtidx vs alternatives](bench/results/report.png)\n\n{md}{END}"
    readme.write_text(head + body + tail)


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
    s.add_argument("--readme", action="store_true", help="also update README.md's bench block")
    s.add_argument("--rewrite", action="store_true",
                   help="measure nothing: rewrite the .md, .png (and README) from bench/results/report.json")
