"""Robustness (issue 7): kill -9 of `gtidx build` and `gtidx tail` at random
points, then a rerun gives the clean build byte for byte; the binlog is
never written to; many readers in other processes while `gtidx tail`
indexes a growing binlog all get the clean answers."""
from __future__ import annotations

import builtins
import hashlib
import mmap
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import FIXTURES, growing_copy
from gtidx import api
from gtidx.errors import NotFoundError
from gtidx.index.build import build_index
from gtidx.index.files import IndexMeta
from gtidx.index.reader import IndexReader
from gtidx.tail import TailSettings, Tailer

M118 = FIXTURES / "mariadb-11.8"
M1011 = FIXTURES / "mariadb-10.11"
SEED = 20261122


def clean_index(binlog: Path, tmp: Path, **kw) -> bytes:
    out = tmp / f"clean-{binlog.name}.idx"
    build_index(binlog, out=str(out), force=True, **kw)
    return out.read_bytes()


def records(data: bytes) -> list:
    return [(r.offset, r.state) for r in IndexReader(data).records()]


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "gtidx", *map(str, args)]


def _kill_at(proc_or_pid, delay: float) -> None:
    time.sleep(delay)
    pid = proc_or_pid if isinstance(proc_or_pid, int) else proc_or_pid.pid
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if isinstance(proc_or_pid, int):
        os.waitpid(pid, 0)
    else:
        proc_or_pid.wait()


def _cpu_seconds(pid: int) -> float | None:
    """How long process ``pid`` (its main thread) has run on a CPU; None once
    it has exited."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return None
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _kill_at_cpu(proc_or_pid, cpu: float) -> None:
    """kill -9 once the process has run ``cpu`` seconds on a CPU: the same
    point of its work however loaded the machine is (on an idle one, the
    moment ``_kill_at(cpu)`` picks)."""
    pid = proc_or_pid if isinstance(proc_or_pid, int) else proc_or_pid.pid
    give_up = time.monotonic() + 120                 # a process that no longer runs: kill it anyway
    while time.monotonic() < give_up:
        ran = _cpu_seconds(pid)
        if ran is None or ran >= cpu:
            break
        time.sleep(0.0005)
    _kill_at(proc_or_pid, 0)


def _forked(fn) -> int:
    """Run ``fn`` in a forked child (a gtidx process without interpreter start-up
    cost, so kills land in the work, not in imports)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            fn()
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    return pid


# -- kill -9 --------------------------------------------------------------------------------

BUILD_RUNS = 25
TAIL_RUNS = 25


def test_kill_9_build_then_rerun_equals_a_clean_build(tmp_path):
    """25 kills of `gtidx build` (5 as CLI subprocesses, 20 forked) at random
    points: the index under the real name is never half written (absent, or a
    complete one), and the rerun equals a clean build byte for byte."""
    rnd = random.Random(SEED)
    sources = [M1011 / "mixed" / "master-bin.000002", M1011 / "xa" / "master-bin.000006",
               M118 / "tiny" / "master-bin.000010"]
    opts = dict(page_size=64, span_min=1, max_ratio=None)
    outcomes = {"absent": 0, "complete": 0}
    orphans = 0
    took = {}
    for src in sources:                                  # how long one build takes, to aim the kills
        t0 = time.perf_counter()
        clean_index(src, tmp_path, **opts)
        took[src] = time.perf_counter() - t0
    for run in range(BUILD_RUNS):
        src = sources[run % len(sources)]
        d = tmp_path / f"b{run}"
        d.mkdir()
        binlog = d / src.name
        shutil.copyfile(src, binlog)
        clean = clean_index(binlog, tmp_path, **opts)
        idx = Path(str(binlog) + ".idx")
        if run % 5 == 0:
            proc = subprocess.Popen(cli("build", "--page-size", 64, "--span-min", 1, "--no-budget", binlog),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _kill_at(proc, rnd.uniform(0.1, 0.4 + took[src]))   # start-up, then the build
        else:
            pid = _forked(lambda: build_index(binlog, **opts))
            _kill_at(pid, rnd.uniform(0.0, 1.1 * took[src]))
        orphans += len(list(d.glob(".*.tmp")))
        if idx.exists():
            assert idx.read_bytes() == clean          # renamed into place only when whole
            outcomes["complete"] += 1
        else:
            outcomes["absent"] += 1
        res = build_index(binlog, **opts)              # the rerun
        assert res.action in ("built", "skipped")
        assert idx.read_bytes() == clean
        assert IndexMeta.read(str(idx)).size == binlog.stat().st_size
    leftovers = [p.name for p in tmp_path.glob("b*/.*.tmp")]
    print(f"build kills: {BUILD_RUNS}, index absent after the kill {outcomes['absent']}, "
          f"complete {outcomes['complete']}, temporary files left by a kill {orphans}, "
          f"after the rerun {len(leftovers)}")
    assert leftovers == []                 # the rerun removes what a killed build left
    assert outcomes["absent"] >= 5, outcomes                 # kills really landed mid-build


def test_kill_9_tail_then_restart_equals_a_clean_build(tmp_path):
    """25 kills of `gtidx tail` (3 as CLI subprocesses, 22 forked) while two
    binlogs grow and rotate, each at a random moment of its work (of the CPU
    time it has run, not of the clock: load does not move it), sometimes
    with a torn last page; the tail restarted after the last kill finishes
    both indexes equal to a clean build byte for byte."""
    rnd = random.Random(SEED + 1)
    src = M1011 / "multifile"
    names = ["master-bin.000018", "master-bin.000019"]
    datas = {n: (src / n).read_bytes() for n in names}
    d = tmp_path / "binlogs"
    d.mkdir()
    # polling: the kills land at points of the tail's CPU time, and a tail woken by inotify
    # sleeps once it has caught up (the point may never come; the faster its work, the likelier)
    settings = TailSettings(interval=0.002, watch="poll", page_size=64, span_min=1, max_ratio=None,
                            server_grace=0)
    # growth: 12 steps through the first file, then it is closed, 12 through the second
    steps = []
    for i, n in enumerate(names):
        cuts = sorted(rnd.sample(range(2000, len(datas[n])), 12))
        steps += [(i, n, c) for c in cuts]
    torn = partial = 0
    for run in range(TAIL_RUNS):
        i, name, cut = steps[min(run, len(steps) - 1)]
        (d / "master-bin.index").write_text("".join(f"./{n}\n" for n in names[:i + 1]))
        if i == 1:
            (d / names[0]).write_bytes(datas[names[0]])        # rotated: closed, complete
        (d / name).write_bytes(growing_copy(datas[name], cut))
        if run % 8 == 0:
            proc = subprocess.Popen(cli("tail", d, "--page-size", 64, "--span-min", 1, "--max-ratio", 1,
                                        "--interval", 0.01, "--watch", "poll", "--log-level", "warning"),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _kill_at_cpu(proc, rnd.uniform(0.2, 0.8))
        else:
            pid = _forked(lambda: Tailer(str(d), settings).run())
            _kill_at_cpu(pid, rnd.uniform(0.001, 0.04))
        idx = d / f"{name}.idx"
        fp = IndexMeta.read(str(idx))
        partial += fp is not None and fp.partial
        if rnd.random() < 0.25 and idx.exists() and idx.stat().st_size > 64:
            with open(idx, "r+b") as f:             # a torn last page (the kill hit a write)
                f.truncate(idx.stat().st_size - rnd.randrange(1, 64))
            torn += 1
    (d / "master-bin.index").write_text("".join(f"./{n}\n" for n in names))
    for n in names:
        (d / n).write_bytes(datas[n])
    Tailer(str(d), TailSettings(page_size=64, span_min=1, max_ratio=None, server_grace=0)).run(once=True)
    assert not list(d.glob(".*.tmp"))          # new files of killed tails are removed
    for n in names:
        got = (d / f"{n}.idx").read_bytes()
        clean = clean_index(d / n, tmp_path, page_size=64, span_min=1, max_ratio=None)
        assert records(got) == records(clean), n
        assert got == clean, n
        assert IndexMeta.read(str(d / f"{n}.idx")).state == "complete"
    print(f"tail kills: {TAIL_RUNS}, partial index on disk after the kill {partial}, torn pages {torn}")
    assert torn >= 2 and partial >= 10


def test_build_removes_temporary_files_of_killed_builds(tmp_path):
    """Found by the kill -9 runs: a build killed between creating its temporary
    file and renaming it left `.NAME.idx.PID.tmp` behind, one more per crash."""
    binlog = tmp_path / "master-bin.000008"
    shutil.copyfile(M118 / "nonmono" / "master-bin.000008", binlog)
    dead = tmp_path / ".master-bin.000008.idx.4194311.tmp"       # above any pid_max
    alive = tmp_path / f".master-bin.000008.idx.{os.getppid()}.tmp"
    other = tmp_path / ".other.idx.4194311.tmp"
    for p in (dead, alive, other):
        p.write_bytes(b"half an index")
    build_index(binlog)
    assert not dead.exists() and alive.exists() and other.exists()


# -- the binlog is never written to -----------------------------------------------------------

def test_binlogs_are_only_ever_opened_read_only(tmp_path, monkeypatch):
    """Every open of a binlog path by build, tail, lookups, verify and the scan
    asks for read-only access (os.open flags and open() modes recorded
    in-process, no mapping of a binlog), and content and mtime are unchanged.
    Root ignores a 0444 mode, so the mode alone would prove nothing."""
    d = tmp_path / "binlogs"
    shutil.copytree(M1011 / "multifile", d)
    binlogs = sorted(p for p in d.iterdir() if p.name[-6:].isdigit())
    last = binlogs[-1]
    last.write_bytes(growing_copy(last.read_bytes(), last.stat().st_size - 5000))   # one still growing
    for p in binlogs:
        p.chmod(0o444)
    before = {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in binlogs}
    watched = {os.path.realpath(p) for p in binlogs}
    seen: list = []
    real_os_open, real_open, real_mmap = os.open, builtins.open, mmap.mmap

    def os_open(path, flags, *a, **kw):
        if isinstance(path, (str, os.PathLike)) and os.path.realpath(path) in watched:
            seen.append(("os.open", path, flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC | os.O_CREAT)))
        return real_os_open(path, flags, *a, **kw)

    def b_open(file, mode="r", *a, **kw):
        if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) in watched:
            seen.append(("open", file, "" if set(mode) <= set("rbt") else mode))
        return real_open(file, mode, *a, **kw)

    class WatchedMmap(real_mmap):
        def __new__(cls, fileno, length, *a, **kw):
            if fileno >= 0:
                target = os.path.realpath(f"/proc/self/fd/{fileno}")
                if target in watched:
                    access = kw.get("access", mmap.ACCESS_DEFAULT)
                    seen.append(("mmap", target, "" if access == mmap.ACCESS_READ else access))
            return real_mmap.__new__(cls, fileno, length, *a, **kw)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", b_open)
    monkeypatch.setattr(mmap, "mmap", WatchedMmap)
    from gtidx.index import files as indexfile
    for p in binlogs[:-1]:
        build_index(p, page_size=64, span_min=1, max_ratio=None)
        indexfile.verify_index(p)
    Tailer(str(d), TailSettings(page_size=64, span_min=1, max_ratio=None, server_grace=0)).run(once=True)
    with api.BinlogSeries.from_path(d) as logs:
        for p in binlogs:
            logs.state_at(p, 4)
            logs.end_state()
        logs.locate("0-2-432")
        logs.replica_start("0-2-432,1-1-420,2-1-400,5-1-301,6-1-12")
    info, groups = api.scan(binlogs[0])
    assert sum(1 for _ in groups) > 0
    monkeypatch.undo()
    kinds = {k for k, _, _ in seen}
    assert "os.open" in kinds, seen              # the wrappers did see the binlogs (filebuf opens)
    assert "mmap" not in kinds, seen             # and no binlog is mapped: any can shrink (pread only)
    assert len(seen) >= 2 * len(binlogs)
    writes = [s for s in seen if s[2]]
    assert not writes, writes
    after = {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in binlogs}
    assert after == before
    assert all(Path(str(p) + ".idx").exists() for p in binlogs)


# -- concurrency: readers while gtidx tail writes ---------------------------------------------------

def _reader(path: str, pos: list, seconds: float, seed: int, out) -> None:
    """Lookups at oracle offsets inside what is on disk now; every answer must
    be the clean one (the oracle's). Reports (answers, via index, wrong, errors)."""
    rnd = random.Random(seed)
    answers = via_index = wrong = errors = 0
    bad = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            size = os.stat(path).st_size
            with api.BinlogSeries([path]) as logs:
                for offset, answer in rnd.sample(pos, 12):
                    if offset > size:
                        continue
                    try:
                        r = logs.state_at(path, offset)
                        mine, via = r.position, r.via
                    except NotFoundError:
                        mine, via = None, ""
                    answers += 1
                    via_index += via == "index"
                    if mine != answer:
                        wrong += 1
                        bad.append((offset, str(mine), str(answer)))
        except Exception as e:        # noqa: BLE001 - any error is a failure here
            errors += 1
            bad.append(repr(e))
    out.put((answers, via_index, wrong, errors, bad[:5]))


def test_readers_while_tail_indexes_a_growing_binlog(tmp_path):
    """6 reader processes doing lookups while a `gtidx tail` subprocess indexes a
    binlog that grows in ~40 appends (IN_USE set), then closes: every answer
    equals the server's; the finished index equals a clean build."""
    from gtidx.gtid import Position
    import json
    src = M1011 / "mixed" / "master-bin.000002"
    data = src.read_bytes()
    oracle = next(f for f in json.loads((src.parent / "oracle.json").read_text())["files"])
    pos = [(o, None if a is None else Position.parse(a)) for o, a in oracle["pos"]]
    d = tmp_path / "binlogs"
    d.mkdir()
    binlog = d / src.name
    (d / "master-bin.index").write_text(f"./{src.name}\n")
    binlog.write_bytes(growing_copy(data, 5000))
    tail = subprocess.Popen(cli("tail", d, "--page-size", 256, "--span-min", 2048, "--max-ratio", 1,
                                "--interval", 0.02, "--log-level", "warning"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    seconds = 6.0
    readers = [ctx.Process(target=_reader, args=(str(binlog), pos, seconds, i, out)) for i in range(6)]
    for r in readers:
        r.start()
    try:
        rnd = random.Random(SEED)
        cuts = sorted(rnd.sample(range(6000, len(data)), 40))
        t0 = time.monotonic()
        with open(binlog, "r+b") as f:
            for k, cut in enumerate(cuts):
                # append, as a server does (the file grows, nothing before changes)
                f.seek(0, os.SEEK_END)
                f.write(data[f.tell():cut])
                f.flush()
                time.sleep(max(0.0, t0 + (k + 1) * (seconds - 1.5) / len(cuts) - time.monotonic()))
            f.seek(0, os.SEEK_END)
            f.write(data[f.tell():])
            f.seek(21)
            f.write(data[21:22])                                  # closed: IN_USE cleared
        results = [out.get(timeout=60) for _ in readers]
        for r in readers:
            r.join(30)
    finally:
        for r in readers:
            if r.is_alive():
                r.kill()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fp = IndexMeta.read(str(binlog) + ".idx")
        if fp and fp.state == "complete" and fp.size == len(data):
            break
        time.sleep(0.05)
    tail.send_signal(signal.SIGTERM)
    _, err = tail.communicate(timeout=30)
    assert tail.returncode == 0, err[-2000:]
    answers = sum(r[0] for r in results)
    via_index = sum(r[1] for r in results)
    assert [r for r in results if r[2] or r[3]] == []
    assert answers >= 600 and via_index >= 50, (answers, via_index)
    got = Path(str(binlog) + ".idx").read_bytes()
    assert got == clean_index(binlog, tmp_path, page_size=256, span_min=2048, max_ratio=1.0)
    print(f"concurrency: {len(readers)} readers, {answers} answers ({via_index} via the hot index), 0 wrong, 0 errors")
