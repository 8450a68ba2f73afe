"""Benchmarks beside a live server: ``gtidx tail`` next to a MariaDB 10.11
written at full speed and at 5 MB/s (``tail``), and MySQL 9.7 binlogs against
the server's auto-position and ``mysqlbinlog`` (``mysql``)."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gtidx import admin, api
from tools.bench_common import HERE, machine, percentile


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _processed(idx: str):
    """How far the tail's index of a growing binlog reaches (its progress in
    the index's metadata); before its first page is full the index is still
    its temporary file (.NAME.idx.PID.RAND.tmp), read there."""
    import glob
    from gtidx.index.meta import IndexMeta
    meta = IndexMeta.read(idx)
    if meta is None:
        d, name = os.path.split(idx)
        for tmp in glob.glob(os.path.join(glob.escape(d), f".{glob.escape(name)}.*.tmp")):
            try:
                meta = IndexMeta.read(tmp)
            except OSError:
                continue
            if meta is not None:
                break
    return None if meta is None else meta.processed


def _workload_procedure() -> str:
    from tools.make_workload import PROCEDURE
    return PROCEDURE


def bench_tail(args) -> dict:
    """A private 10.11 written at full speed (big transactions, >= 50 MB/s)
    and at 5 MB/s (the realistic small-transaction mix, throttled), with
    `gtidx tail` beside it at its defaults, once per ``--watch`` mode (poll:
    every 200 ms, the tail before inotify; auto: woken by inotify): the
    baseline and the change in one run, on one server. Lag: for every
    transaction written during the run (the binlog walked afterwards), from
    the moment the binlog held it whole to the moment the index covered it
    (the binlog's size and the index's progress in its metadata, both
    sampled every 5 ms). CPU: the tail process's
    user+system time over the wall time; idle: ``--idle`` seconds with no
    writes (after its start-up and catching up: no CPU for half a second)."""

    import tempfile
    import threading
    from tools.mariadb import MariaDB
    runs = {}
    watches = [w.strip() for w in getattr(args, "watch", "poll,auto").split(",") if w.strip()]
    idle_s = getattr(args, "idle", 10.0)
    with tempfile.TemporaryDirectory(prefix="gtidx-bench-tail-") as tmp:
        srv = MariaDB(Path(tmp) / "srv", {"max_binlog_size": str(1024 * 1024 * 1024)}).start()
        try:
            srv.sql("CREATE DATABASE w")
            # BLACKHOLE: rows are binlogged, not stored, so the server's binlog
            # rate is not capped by InnoDB on this 2-core machine.
            srv.sql("INSTALL SONAME 'ha_blackhole'")
            srv.sql("CREATE TABLE w.big (id BIGINT, c VARCHAR(4000)) ENGINE=BLACKHOLE")
            # the realistic small-transaction mix of tools/make_workload
            srv.sql("CREATE TABLE w.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, b INT, c VARCHAR(300))")
            srv.sql("CREATE TABLE w.m (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, c VARCHAR(100)) ENGINE=MyISAM")
            srv.sql(_workload_procedure())
            for watch in watches:
                for mode, rate in (("idle", 0.0), ("max", None), ("5 MB/s", 5.0)):
                    srv.sql("FLUSH BINARY LOGS")
                    active = srv.sql("SHOW MASTER STATUS")[0][0]
                    path = str(srv.binlog_dir / active)
                    # GTIDX_BENCH_TAIL_PROFILE=DIR: each tail run under cProfile, its stats in DIR
                    prof = os.environ.get("GTIDX_BENCH_TAIL_PROFILE")
                    under = ["-m", "cProfile", "-o", os.path.join(prof, f"tail-{watch}-{mode.split()[0]}.prof")] \
                        if prof else []
                    tail = subprocess.Popen([sys.executable, *under, "-m", "gtidx", "tail", str(srv.binlog_dir),
                                             "--log-level", os.environ.get("GTIDX_BENCH_TAIL_LOG", "warning"),
                                             "--watch", watch], cwd=HERE.parent)
                    time.sleep(1.0)
                    if mode == "idle":
                        _settled(tail.pid)
                        cpu0, t0 = _cpu_seconds(tail.pid), time.monotonic()
                        time.sleep(idle_s)
                        cpu, wall = _cpu_seconds(tail.pid) - cpu0, time.monotonic() - t0
                        tail.terminate()
                        tail.wait()
                        runs[f"{watch}, idle"] = {"watch": watch, "MB_per_s": 0.0, "seconds": wall,
                                                  "cpu_percent_of_a_core": 100 * cpu / wall}
                        continue
                    runs[f"{watch}, {mode}"] = {"watch": watch, **_tail_run(srv, tail, path, rate, args.seconds,
                                                                             threading)}
        finally:
            srv.stop()
    print(f"gtidx tail beside MariaDB 10.11, defaults (page 4096, span 64 KiB), {args.seconds:.0f} s per rate, "
          f"{idle_s:.0f} s idle; poll: every 200 ms; auto: inotify (load: {os.getloadavg()[0]:.2f})")
    for name, r in runs.items():
        if "lag_s_p99" not in r:
            print(f"  {name:>14}: tail CPU {r['cpu_percent_of_a_core']:.2f}% of a core")
            continue
        print(f"  {name:>14}: writing {r['MB_per_s']:5.1f} MB/s   lag median {r['lag_s_median']:.3f} s, "
              f"p99 {r['lag_s_p99']:.3f} s, max {r['lag_s_max']:.3f} s "
              f"(median {r['lag_bytes_median'] / 2**20:.1f} MiB behind)   tail CPU {r['cpu_percent_of_a_core']:.1f}% of a core, "
              f"{1000 * r['cpu_s_per_MB']:.2f} ms per MB")
    return {"machine": machine(), "runs": runs}


def _settled(pid: int, timeout: float = 60.0) -> None:
    """Until the process used no CPU for half a second (a tail's start-up:
    finishing the previous binlog's index), at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = _cpu_seconds(pid)
        time.sleep(0.5)
        if _cpu_seconds(pid) == before:
            return


def _tail_run(srv, tail, path: str, rate: float | None, seconds: float, threading) -> dict:
    """One rate for ``seconds`` beside the running ``tail`` (stopped at the
    end): lag (seconds, bytes) and the tail's CPU."""
    samples, sizes, stop = [], [], threading.Event()

    def sampler():
        while not stop.is_set():
            t = time.monotonic()
            try:
                sizes.append((t, os.path.getsize(path)))
            except OSError:
                return
            p = _processed(path + ".idx")
            if p is not None:
                samples.append((t, p))
            time.sleep(0.005)
    th = threading.Thread(target=sampler)
    cpu0, t0 = _cpu_seconds(tail.pid), time.monotonic()
    th.start()
    conn = srv.connect()
    cur = conn.cursor()
    start_size = os.path.getsize(path)
    i = 0
    while time.monotonic() - t0 < seconds:
        if rate is None:
            cur.execute("INSERT INTO w.big (id, c) SELECT seq, REPEAT('x', 3000) FROM w.seq_1_to_1000")
        else:
            cur.execute("CALL w.run(%s, 200)", (i,))
            i += 200
            written = (os.path.getsize(path) - start_size) / 2**20    # throttle to the rate
            ahead = written / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    wall = time.monotonic() - t0
    written = (os.path.getsize(path) - start_size) / 2**20
    time.sleep(1.0)                              # let it catch up before the CPU reading
    stop.set()
    th.join()
    cpu = _cpu_seconds(tail.pid) - cpu0
    tail.terminate()
    tail.wait()
    conn.close()
    # every transaction (group) of the run: from the moment the binlog held it whole to the
    # moment the index covered it; both moments from samples 5 ms apart
    from bisect import bisect_left
    from gtidx.binlog.mariadb import Binlog
    with Binlog(path) as b:
        ends = [e for _, e, _ in b.group_spans() if e > start_size]
    size_at, size_t = [sz for _, sz in sizes], [ts for ts, _ in sizes]
    prog_at, prog_t = [], []
    for t, p in samples:                          # the progress never goes back: keep it monotonic
        if not prog_at or p > prog_at[-1]:
            prog_at.append(p)
            prog_t.append(t)
    lags = []
    for g in ends:
        i, j = bisect_left(size_at, g), bisect_left(prog_at, g)
        if i < len(size_t) and j < len(prog_t) and size_t[i] - t0 <= wall:
            lags.append(max(0.0, prog_t[j] - size_t[i]))
    lag_bytes = []
    for t, sz in sizes:
        prog = [p for ts, p in samples if ts <= t]
        if prog and t - t0 <= wall:
            lag_bytes.append(sz - prog[-1])
    return {"MB_per_s": written / wall, "seconds": wall,
            "lag_s_median": statistics.median(lags), "lag_s_p99": percentile(lags, 99),
            "lag_s_max": max(lags), "lag_bytes_median": statistics.median(lag_bytes),
            "cpu_percent_of_a_core": 100 * cpu / (wall + 1.0),
            # robust under load: a busy machine slows the writer, not the tail's work per byte
            "cpu_s_per_MB": cpu / max(written * 2**20 / 1e6, 1e-9)}

def _first_sent(srv, executed: str, timeout: float = 600) -> tuple[str, float]:
    """A real replica connection to the MySQL server with auto-position
    (COM_BINLOG_DUMP_GTID, the server's own ``mysqlbinlog`` client: it
    speaks tagged sets, which mysql-replication 1.0.17 cannot): the GTID of
    the first transaction the server sends a replica whose executed set is
    ``executed``, and the seconds from connecting to receiving it."""
    sock = "/" + os.path.relpath(srv.socket, srv.root)
    cmd = ["chroot", str(srv.root), "mysqlbinlog", "--read-from-remote-source=BINLOG-DUMP-GTIDS",
           f"--exclude-gtids={executed}", f"--socket={sock}", "--user=root", "--connection-server-id=4242",
           "--to-last-log", ""]          # no file named: the server picks it from the files' Previous_gtids
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if "GTID_NEXT=" in line and "AUTOMATIC" not in line:
                return line.split("'")[1], time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                break
        raise SystemExit(f"the server sent no transaction for {executed[:80]}...: {proc.stderr.read()[:300]}")
    finally:
        proc.kill()
        proc.wait()


def bench_mysql(args) -> dict:
    """MySQL 9.7 binlogs (tools/make_mysql_workload: one closed ~256 MiB
    binlog, ~600,000 transactions): gtidx's index build (MB/s, index size
    ratio), ``seek --gtid`` through the index (warm, cold) and ``pos``
    against what users have without gtidx: the server finding an
    auto-position start (a real replica connection: time to the first
    transaction it sends) and ``mysqlbinlog --include-gtids`` on the file.
    Every answer is checked: gtidx's against the walk, the server's first
    transaction against the target."""
    import random as _random
    from gtidx.binlog.mysql import MysqlBinlog
    from tools.make_mysql_workload import DEFAULT_DIR, make
    from tools.mysql97 import MySQL97
    meta = make(DEFAULT_DIR, args.size_mb)
    path = str(DEFAULT_DIR / meta["file"])
    size = os.path.getsize(path)
    srv = MySQL97().ensure()
    if (srv.datadir / meta["file"]).stat().st_size != size:
        raise SystemExit(f"the server's {meta['file']} is not the workload's copy (remake it: "
                         f"rm -r {DEFAULT_DIR})")
    t0 = time.perf_counter()
    with MysqlBinlog(path) as b:
        prev = b.previous_gtids.copy()
        groups = [g for g in b.groups() if g.gtid is not None]
    walk_s = time.perf_counter() - t0
    rnd = _random.Random(args.seed)
    picks = sorted(rnd.sample(range(len(groups)), args.targets))
    executed, sets, i = prev.copy(), {}, 0
    for k in picks:                         # the executed set just before each target
        while i < k:
            executed.add(*groups[i].gtid)
            i += 1
        sets[k] = executed.one_line()
    t0 = time.perf_counter()
    built = list(admin.build(path, force=True))
    build_s = time.perf_counter() - t0
    idx = path + ".idx"
    report = {"machine": machine(), "server": meta["server"], "file_bytes": size, "transactions": len(groups),
              "targets": len(picks), "walk_MB_s": size / 1e6 / walk_s, "build_MB_s": size / 1e6 / build_s,
              "index_bytes": os.path.getsize(idx), "index_ratio": os.path.getsize(idx) / size,
              "build": [str(x) for x in built][:1]}
    wrong = 0
    warm = []
    with api.open_binlogs(path) as logs:
        for k in picks:
            t0 = time.perf_counter_ns()
            loc = logs.locate(str(groups[k].gtid))
            warm.append((time.perf_counter_ns() - t0) / 1e6)
            wrong += (loc.start, loc.end) != (groups[k].start, groups[k].end)
    cold = []
    for k in picks:
        t0 = time.perf_counter_ns()
        with api.open_binlogs(path) as logs:
            loc = logs.locate(str(groups[k].gtid))
        cold.append((time.perf_counter_ns() - t0) / 1e6)
        wrong += (loc.start, loc.end) != (groups[k].start, groups[k].end)
    pos = []
    for k in picks:
        t0 = time.perf_counter_ns()
        st = api.state_at(path, groups[k].start)
        pos.append((time.perf_counter_ns() - t0) / 1e6)
        wrong += st.position.one_line() != sets[k]
    server, server_wrong = [], 0
    slow = picks[::max(1, len(picks) // args.slow_targets)][:args.slow_targets]
    for k in slow:
        gtid, s_ = _first_sent(srv, sets[k])
        server.append(s_ * 1000)
        server_wrong += gtid != str(groups[k].gtid)
    tool = []
    for k in slow:
        t0 = time.perf_counter()
        with open(os.devnull, "wb") as null:
            subprocess.run(["chroot", str(srv.root), "mysqlbinlog", f"--include-gtids={groups[k].gtid}",
                            "/" + os.path.relpath(srv.datadir / meta["file"], srv.root)], stdout=null, check=True)
        tool.append((time.perf_counter() - t0) * 1000)

    def med(v):
        return {"n": len(v), "median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v),
                "p99_ms": percentile(v, 99)}
    report["lookups"] = {"seek --gtid: gtidx index, warm": med(warm), "seek --gtid: gtidx, cold (open + lookup)":
                         med(cold), "pos: gtidx, cold (open + lookup)": med(pos),
                         "replica start: MySQL server (auto-position, connect to first transaction)": med(server),
                         "mysqlbinlog --include-gtids=G FILE": med(tool)}
    report["wrong"] = wrong + server_wrong
    for name, v in report["lookups"].items():
        print(f"  {name}: median {v['median_ms']:.3f} ms ({v['min_ms']:.3f}-{v['max_ms']:.3f}), n={v['n']}")
    print(f"  walk {report['walk_MB_s']:.0f} MB/s, build {report['build_MB_s']:.0f} MB/s, index "
          f"{report['index_ratio']:.2%} of the binlog; wrong answers: {report['wrong']}")
    return report
