"""tools/bench serve: what ``gtidx serve`` sends a replica, beside a real source.

    tools/bench serve [--dir /var/tmp/gtidx-serve-bench] [--s3-mb 1024] [--runs 2] [--json F]

The archive is the >= 4 GiB workload of the other benchmarks (tools/make_workload:
MariaDB 10.11, three domains, two server ids, groups of ~500 bytes), read in
place by ``gtidx serve`` (its ``.idx`` files beside it: "with indexes"). Copied
once under ``--dir`` (not in CI): ``source/binlog``, the log directory of a
private MariaDB 10.11 (``tools/mariadb.py``) started on it, the real source
serving the same binlogs, and ``noindex``, the same files (hard links) for
``gtidx serve`` without indexes. The first ``--s3-mb`` MiB of its files go to
a moto_server (``tools/s3server.py``), indexed there by ``gtidx build``.

One raw replica (this module: PyMySQL for the handshake and the SETs a
replica sends, then COM_BINLOG_DUMP over TCP on 127.0.0.1 and the socket
read in 1 MiB reads, no per-event parsing) measures:

* bytes/s: a GTID start at the first file's start, every byte until the
  source goes quiet (the end of the binlogs: 1 s without data; heartbeats
  asked every 60 s), over the time to the last byte;
* time to first event: a GTID start at a group in the middle of the archive
  (by bytes), the time from COM_BINLOG_DUMP to the first GTID event sent
  (on moto_server also without indexes: the same objects under another prefix).

And the peak RSS of each ``gtidx serve`` process (one connection at a time).
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

from gtidx import admin, api
from gtidx.binlog.mariadb import Binlog

from tools.bench_common import big_workload, machine
from tools.mariadb import MariaDB
from tools.s3server import MotoServer

ROOT = Path(__file__).resolve().parent.parent
DUMP = struct.Struct("<IHI")
QUIET = 5.0                 # seconds without data: the source is at the end of its binlogs (moto_server
                            # stalls for a second now and then mid-stream)


def prepare(files: list[str], work: Path) -> tuple[Path, Path]:
    """The copy a real source serves (``source/binlog``, with its own
    master-bin.index) and the hard links gtidx serves without indexes."""
    src = work / "source" / "binlog"
    noindex = work / "noindex"
    for d in (src, noindex):
        d.mkdir(parents=True, exist_ok=True)
    for f in files:
        name = os.path.basename(f)
        if not (src / name).exists() or (src / name).stat().st_size != os.path.getsize(f):
            shutil.copyfile(f, src / name)
        if not (noindex / name).exists():
            os.link(src / name, noindex / name)
    if not (src / "master-bin.index").exists():
        (src / "master-bin.index").write_text("".join(f"{src / os.path.basename(f)}\n" for f in files))
    return src, noindex


def middle_position(files: list[str]) -> tuple[str, str, int]:
    """A replica position whose first group sent is the group at the middle
    of the archive's bytes: (the position, its file, the group's offset)."""
    sizes = [os.path.getsize(f) for f in files]
    half, at = sum(sizes) // 2, 0
    for f, size in zip(files, sizes):
        if at + size > half:
            with Binlog(f) as b:
                for start, end, _ in b.group_spans():
                    if start >= half - at:
                        return str(api.state_at(f, start).position), f, start
        at += size
    raise SystemExit("no group in the middle of the archive")


def replica_conn(host: str, port: int, user: str, password: str, state: str):
    import pymysql
    conn = pymysql.connect(host=host, port=port, user=user, password=password, autocommit=True)
    with conn.cursor() as cur:
        for q in ("SET @master_binlog_checksum= @@global.binlog_checksum", "SET @mariadb_slave_capability=4",
                  "SET @master_heartbeat_period=60000000000", f"SET @slave_connect_state='{state}'",
                  "SET @slave_gtid_strict_mode=0", "SET @slave_gtid_ignore_duplicates=0"):
            cur.execute(q)
    return conn


def stream_rate(addr: tuple, state: str) -> dict:
    """Every byte the source sends a GTID start at ``state`` until it goes quiet."""
    conn = replica_conn(*addr, state)
    try:
        conn._execute_command(0x12, DUMP.pack(4, 2, 3_000_000_001))
        t0 = time.perf_counter()
        sock, rfile = conn._sock, conn._rfile
        sock.settimeout(120)                # the first bytes: after the source found where to start
        n, last = 0, t0
        while True:
            try:
                data = rfile.read1(1 << 20)
            except (socket.timeout, TimeoutError):
                break
            if not data:
                break
            n += len(data)
            last = time.perf_counter()
            sock.settimeout(QUIET)
        seconds = last - t0
        return {"bytes": n, "seconds": round(seconds, 3), "MB_per_s": round(n / seconds / 1e6, 1)}
    finally:
        conn.close()


def first_event(addr: tuple, state: str) -> float:
    """Milliseconds from COM_BINLOG_DUMP to the first GTID event of a start at ``state``."""
    conn = replica_conn(*addr, state)
    try:
        conn._execute_command(0x12, DUMP.pack(4, 2, 3_000_000_002))
        t0 = time.perf_counter()
        while True:
            data = conn._read_packet().get_all_data()
            if data[0] != 0:
                raise SystemExit(f"the source refused: {data!r}")
            if data[1 + 4] == 162:
                return round((time.perf_counter() - t0) * 1000, 1)
    finally:
        conn.close()


def start_gtidx(path: str, log: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    err = open(log, "w")
    proc = subprocess.Popen([sys.executable, "-m", "gtidx", "serve", path, "--port", "0", "--no-auth",
                             "--server-id", "1", *extra], stderr=err, stdout=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r" on 127\.0\.0\.1:(\d+)$", log.read_text().split("\n")[0])
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"gtidx serve did not start: {log.read_text()[-2000:]}")


def peak_rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def measured(name: str, addr: tuple, start: str, middle: str, runs: int, proc=None, stream: bool = True) -> dict:
    """The stream's bytes/s (``stream``: else the time to first event alone) and the time to first event."""
    rates = [stream_rate(addr, start) for _ in range(runs if stream else 0)]
    firsts = [first_event(addr, middle) for _ in range(runs)]
    out = {"first_event_ms": firsts, "first_event_ms_median": statistics.median(firsts)}
    if rates:
        out.update(stream=rates, MB_per_s=statistics.median(r["MB_per_s"] for r in rates))
    if proc is not None:
        out["peak_rss_mib"] = peak_rss_mib(proc.pid)
    print(f"{name}: " + (f"{out['MB_per_s']} MB/s over {rates[0]['bytes'] / 2**20:.0f} MiB; " if rates else "")
          + f"first event of a start in the middle: {out['first_event_ms_median']} ms"
          + (f"; peak RSS {out['peak_rss_mib']} MiB" if proc is not None else ""), flush=True)
    return out


def upload(files: list[str], mib: int, work: Path) -> tuple[MotoServer, list[str], float]:
    """The first files of the archive, ``mib`` MiB or just more, in a moto_server bucket, indexed there."""
    moto = MotoServer(work)
    client = moto.bucket("archive")
    chosen, total = [], 0
    for f in files:
        if total >= mib << 20:
            break
        chosen.append(f)
        total += os.path.getsize(f)
    for f in chosen:
        for prefix in ("binlogs", "noindex"):
            with open(f, "rb") as body:
                client.upload_fileobj(body, "archive", f"{prefix}/{os.path.basename(f)}")
    t0 = time.perf_counter()
    errors = [r for r in admin.build("s3://archive/binlogs/", storage_options=moto.storage_options())
              if isinstance(r, Exception)]
    if errors:
        raise SystemExit(f"gtidx build on moto_server failed: {errors[0]}")
    return moto, chosen, time.perf_counter() - t0


def bench_serve(a) -> dict:
    directory = big_workload()[1]
    files = api.list_binlogs(directory)
    total = sum(os.path.getsize(f) for f in files)
    work = Path(a.dir)
    t0 = time.perf_counter()
    src, noindex = prepare(files, work)
    print(f"archive: {len(files)} binlogs, {total / 2**30:.2f} GiB ({directory}); copies ready in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    with Binlog(files[0]) as b:
        start = str(b.start_state.position())
    middle, mfile, moff = middle_position(files)
    report = {"machine": machine(), "archive": {"files": len(files), "bytes": total, "dir": directory},
              "start": start, "middle": {"position": middle, "file": os.path.basename(mfile), "offset": moff}}
    source = MariaDB(work / "source", {"server_id": "1", "max_binlog_size": str(1 << 30)})
    procs = []
    try:
        if "mariadb" in a.only:
            source.start(timeout=900)         # a restart reads its binlogs back (minutes on 4 GiB)
            source.sql("CREATE USER IF NOT EXISTS 'bench'@'127.0.0.1' IDENTIFIED BY 'bench'")
            source.sql("GRANT REPLICATION SLAVE ON *.* TO 'bench'@'127.0.0.1'")
            report["mariadb"] = measured("MariaDB 10.11 source", ("127.0.0.1", source.port, "bench", "bench"),
                                         start, middle, a.runs)
        for name, path in (("gtidx, indexes", directory), ("gtidx, no indexes", str(noindex))):
            if "local" not in a.only:
                continue
            proc, port = start_gtidx(path, work / f"serve-{len(procs)}.log")
            procs.append(proc)
            report[name] = measured(f"gtidx serve ({name})", ("127.0.0.1", port, "x", ""), start, middle,
                                    a.runs, proc, stream=path == directory)
        if a.s3_mb and "s3" in a.only:
            moto, chosen, build_s = upload(files, a.s3_mb, work)
            try:
                s3_bytes = sum(os.path.getsize(f) for f in chosen)
                s3_middle = middle_position(chosen)[0]
                opts = [x for k, v in moto.storage_options().items() for x in ("--storage-option", f"{k}={v}")]
                proc, port = start_gtidx("s3://archive/binlogs/", work / "serve-s3.log", *opts)
                procs.append(proc)
                report["gtidx, moto_server"] = {**measured(
                    f"gtidx serve (moto_server, {len(chosen)} files, {s3_bytes / 2**20:.0f} MiB)",
                    ("127.0.0.1", port, "x", ""), start, s3_middle, a.runs, proc),
                    "files": len(chosen), "bytes": s3_bytes, "build_s": round(build_s, 1)}
                moto.requests()
                first_event(("127.0.0.1", port, "x", ""), s3_middle)
                report["gtidx, moto_server"]["first_event_requests"] = len(moto.requests())
                proc, port = start_gtidx("s3://archive/noindex/", work / "serve-s3-noindex.log", *opts)
                procs.append(proc)
                report["gtidx, moto_server, no indexes"] = measured(
                    "gtidx serve (moto_server, no indexes)", ("127.0.0.1", port, "x", ""), start, s3_middle,
                    a.runs, proc, stream=False)
            finally:
                moto.stop()
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)
        source.stop()
    return report
