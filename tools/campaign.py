"""gtidx fault campaigns: real filesystem faults and real non-monotonic histories.

    tools/campaign [--scenarios links,shrink,fifo,diskfull,denied,vanish,race,nonmono]
                   [--seed 1] [--runs N | --seconds S] [--json] [--quiet]

Where tools/fuzz damages bytes, these scenarios change the world around
gtidx while it works, for real (we are root: tmpfs mounts, FIFOs, symlinks,
hard links, truncation, renamed and removed directories, a private MariaDB),
and judge every outcome with an oracle that does not ask gtidx:

links     Planted links. A symlink (or hard link) at FILE.idx and at every
          name gtidx creates in the binlog directory (learned from a clean
          run under a Python audit hook: every open for writing, rename and
          link; a name holding the writer's pid is planted for the next 300
          pids), pointing at victims outside the directory: random bytes, a
          valid complete index, a valid partial index (with their xattrs), a
          dangling target. After `build`, `build --force` or `tail --once`
          every victim is byte-, xattr- and mode-identical, no dangling target
          was created, the command exited 0-3 with no traceback, and the
          answers (BINLOG_GTID_POS from oracle.json, every group's offsets)
          are right. Opens for writing at names the harness could not plant
          (random temp names) must be O_CREAT|O_EXCL.
shrink    Shrinking files. A reader process holds gtidx.open(dir) and looks
          up in a loop while the harness truncates, in place, the active
          (IN_USE) binlog or an .idx and later writes the bytes back. The
          reader must never die by a signal (SIGBUS), and each answer must be
          a GtidxError or the server's answer (oracle.json); "not found" only
          for offsets and groups past the file's smallest size while it looked.
fifo      A FIFO in place of a listed binlog, as an extra binlog-named file in
          a directory, as FILE.idx, or as the file named on the command line.
          Every command (seek, pos, build, build --force, status, scan, dump,
          info, verify, tail --once) finishes within the time limit with one
          clear line (exit 1-3, no traceback) or a right answer; with only
          FILE.idx a FIFO, lookups must answer right (a bad index is a
          fallback, never an error).
diskfull  Full disks. The binlogs copied onto a small tmpfs mounted for the
          run, its size leaving room for a random part of their indexes;
          `build`, `tail --once` or the `tail` daemon runs out of space. No
          0-byte, partial or temporary index is left for a closed binlog (each
          FILE.idx is absent or byte-identical to a clean build), a failing
          build exits 3 with one line per failed file, `tail --once` exits
          non-zero, the daemon stays alive and logs the failure a few times,
          not once per poll; after the tmpfs is grown, a rerun (or the running
          daemon) leaves indexes byte-identical to a clean build.
denied    Permission denied. gtidx run as root without the capabilities that
          ignore file permissions (setpriv), the binlog directory or the
          indexes owned by another user: `build` and `tail --once` fail
          clearly (exit non-zero, one line, nothing half written), the `tail`
          daemon stays up, does not flood its log, and once ownership is given
          back finishes indexes byte-identical to a clean build.
vanish    Vanishing directories. While `gtidx tail` follows a growing binlog,
          its directory is renamed away and back, removed and recreated from a
          copy, or replaced by an empty one. The daemon stays alive, does not
          flood the log, and once the directory is back and the binlog closed
          its indexes are byte-identical to a clean build; SIGTERM exits 0.
race      `gtidx build --force` of the active binlog, half of them interrupted
          by SIGINT, while a `gtidx tail` daemon follows it as it grows: no
          interrupted build leaves its temporary file, and once the binlog is
          closed every index is byte-identical to a clean build, `status`
          says complete (no stale progress stamped on it), answers are right.
nonmono   Non-monotonic histories from a live server. A private MariaDB 10.11
          (gtid_strict_mode=0) writes seeded histories: in a fresh domain,
          seq_no steps back and repeats across FLUSH BINARY LOGS, server_id
          alternates (SET gtid_domain_id / server_id / gtid_seq_no), ordinary
          domain-0 transactions between. Oracles: SHOW BINLOG EVENTS (every
          occurrence of every GTID: locate must give the first in file order,
          and list the others when gtidx exposes them), BINLOG_GTID_POS at
          sampled offsets (state_at), and real replica connections, strict and
          not (replica_start's first group) - each without an index, with
          page size 64 / span 1 and with the default layout.

Each scenario runs rounds until its share of --seconds (or --runs rounds
each). Exit code 1 when there is any wrong answer, crash, hang or unclear
failure.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

import gtidx
from gtidx import admin, api
from gtidx.errors import GtidxError, NotFoundError
from gtidx.gtid import Gtid, Position
from gtidx.index.build import build_index

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SCENARIOS = ("links", "shrink", "fifo", "diskfull", "denied", "vanish", "race", "nonmono")
PYTHON = sys.executable
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
OK_CODES = (0, 1, 2, 3)
PAGE = 4096


class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang()


class Deadline:
    """SIGALRM around in-process gtidx calls: a hang becomes an exception."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __enter__(self):
        self.old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.old)


# -- results ---------------------------------------------------------------------------------

class Stats:
    KINDS = ("wrong", "crash", "hang", "unclear")

    def __init__(self):
        self.sc: dict[str, Counter] = {}
        self.examples: list[dict] = []

    def c(self, scenario: str) -> Counter:
        return self.sc.setdefault(scenario, Counter())

    def add(self, scenario: str, key: str, n: int = 1):
        self.c(scenario)[key] += n

    def problem(self, scenario: str, what: str, detail: str, info: str = ""):
        assert what in self.KINDS, what
        self.c(scenario)[what] += 1
        mine = [e for e in self.examples if e["scenario"] == scenario and e["what"] == what]
        if len(mine) < 8:
            self.examples.append({"scenario": scenario, "what": what, "detail": detail,
                                  "info": str(info)[-1500:]})

    def note(self, scenario: str, what: str, detail: str, info: str = ""):
        """Counted and shown, but not a failure (a documented limitation)."""
        self.c(scenario)[what] += 1
        mine = [e for e in self.examples if e["scenario"] == scenario and e["what"] == what]
        if len(mine) < 4:
            self.examples.append({"scenario": scenario, "what": what, "detail": detail,
                                  "info": str(info)[-1500:]})

    def failures(self) -> int:
        return sum(c[k] for c in self.sc.values() for k in self.KINDS)

    def as_dict(self) -> dict:
        return {"scenarios": {k: dict(sorted(v.items())) for k, v in self.sc.items()},
                "failures": self.failures(), "examples": self.examples}


# -- fixture material ------------------------------------------------------------------------

class FileFacts:
    def __init__(self, path: Path, entry: dict):
        self.name = path.name
        self.src = path
        self.size = entry["size"]
        self.pos = [(o, None if a is None else Position.parse(a)) for o, a in entry["pos"]]
        self.groups = [(g[0], g[1], g[2]) for g in entry.get("groups", [])]

    @property
    def data(self) -> bytes:
        return self.src.read_bytes()


class Material:
    """A fixture set (one directory of a server's binlogs) with its oracle."""

    def __init__(self, d: Path):
        self.dir = d
        self.id = f"{d.parent.name}/{d.name}"
        oracle = json.loads((d / "oracle.json").read_text())
        self.files = [FileFacts(d / f["name"], f) for f in oracle["files"]]
        self.listed = (d / "master-bin.index").exists()
        # locate: the first occurrence of each GTID in file order
        self.first: dict[str, tuple[str, int, int]] = {}
        for f in self.files:
            for g, s, e in f.groups:
                self.first.setdefault(g, (f.name, s, e))

    def growable(self) -> "Material":
        """This set, without a last file too short to be cut (a fresh binlog
        holding only its header): the last file left is the one to grow."""
        if self.files[-1].size >= 4096 or len(self.files) < 2:
            return self
        m = object.__new__(Material)
        m.__dict__.update(self.__dict__)
        m.files = self.files[:-1]
        m.first = {g: v for g, v in self.first.items() if v[0] != self.files[-1].name}
        return m

    def place(self, dest: Path, *, growing_cut: int | None = None, server_idx: bool = False,
              index_file: bool = True) -> list[Path]:
        """Copy the binlogs to ``dest``; the last one cut at ``growing_cut``
        with IN_USE set (a server still writing it) when given."""
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for i, f in enumerate(self.files):
            data = f.data
            if growing_cut is not None and i == len(self.files) - 1:
                data = growing_copy(data, growing_cut)
            (dest / f.name).write_bytes(data)
            if server_idx and (f.src.parent / (f.name + ".idx")).exists():
                shutil.copyfile(f.src.parent / (f.name + ".idx"), dest / (f.name + ".idx"))
            out.append(dest / f.name)
        if index_file:
            (dest / "master-bin.index").write_text("".join(f"./{f.name}\n" for f in self.files))
        return out


def growing_copy(data: bytes, n: int) -> bytes:
    part = bytearray(data[:n])
    if len(part) > 21:
        part[21] |= 1            # IN_USE: still being written (the FDE's CRC ignores it)
    return bytes(part)


def materials(names=("mariadb-10.11/multifile", "mariadb-11.8/multifile", "mariadb-10.11/mixed",
                     "mariadb-11.8/xa", "mariadb-10.11/manydomains", "mariadb-11.8/bigtrx")) -> list[Material]:
    return [Material(FIXTURES / n) for n in names if (FIXTURES / n / "oracle.json").exists()]


def expected_pos(f: FileFacts, offset: int, size: int) -> Position | None:
    """BINLOG_GTID_POS at ``offset`` of the file cut to ``size`` bytes (a prefix)."""
    if offset > size:
        return None
    return dict(f.pos).get(offset)


def check_answers(files: list[Path], mat: Material, rnd: random.Random, *, sizes: dict | None = None,
                  n_pos: int = 12, n_loc: int = 8, timeout: float = 30.0, use_index: bool = True) -> tuple[int, list[str]]:
    """Lookups through the api against the oracle: (answers, problems).
    ``sizes``: name -> the size the file has (a growing copy's cut)."""
    sizes = sizes or {}
    problems = []
    n = 0
    by_name = {f.name: f for f in mat.files}
    with Deadline(timeout):
        with api.BinlogSeries([str(p) for p in files], use_index=use_index) as logs:
            for p in files:
                f = by_name[p.name]
                size = sizes.get(p.name, f.size)
                for o, _ in rnd.sample(f.pos, min(n_pos, len(f.pos))):
                    want = expected_pos(f, o, size)
                    try:
                        got = logs.state_at(p, o).position
                    except NotFoundError:
                        got = None
                    n += 1
                    if got != want:
                        problems.append(f"state_at({p.name}, {o}) = {got}, server: {want}")
            cands = [g for g, (name, s, e) in mat.first.items() if e <= sizes.get(name, 1 << 62)]
            for g in rnd.sample(cands, min(n_loc, len(cands))):
                want = mat.first[g]
                try:
                    loc = logs.locate(g)
                    got = (os.path.basename(loc.file), loc.start, loc.end)
                except NotFoundError as e:
                    got = f"not found: {e}"
                n += 1
                if got != want:
                    problems.append(f"locate({g}) = {got}, binlog: {want}")
    return n, problems


# -- running gtidx ------------------------------------------------------------------------------

class Ran:
    def __init__(self, args, rc, out, err, seconds, hung, pid):
        self.args, self.rc, self.out, self.err, self.seconds, self.hung, self.pid = \
            args, rc, out, err, seconds, hung, pid

    @property
    def cmd(self) -> str:
        return "gtidx " + " ".join(str(a) for a in self.args)


# Runs gtidx's CLI with a Python audit hook that records, in a file, every
# open for writing or creating, rename, link, symlink, truncate and remove.
AUDITED = r"""
import os, sys, json
_fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
_W = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
def _hook(ev, args):
    rec = None
    if ev == "open":
        path, mode, flags = args
        if isinstance(path, (str, bytes, os.PathLike)) and (
                (flags or 0) & _W or (mode and any(c in str(mode) for c in "wax+"))):
            rec = ["open", os.fsdecode(path), flags or 0, str(mode)]
    elif ev in ("os.rename", "os.link", "os.symlink"):
        rec = [ev, os.fsdecode(args[0]), os.fsdecode(args[1])]
    elif ev in ("os.truncate", "os.remove", "os.setxattr", "os.mkdir"):
        a = args[0]
        rec = [ev, os.fsdecode(a) if isinstance(a, (str, bytes, os.PathLike)) else a]
    if rec is not None:
        rec.append(os.getcwd())
        os.write(_fd, (json.dumps(rec) + "\n").encode())
sys.argv = ["gtidx"] + sys.argv[2:]
sys.addaudithook(_hook)
from gtidx.cli import main
main()
"""


def run_gtidx(args, *, timeout: float = 20.0, audit: str | None = None, cwd=None, prefix=()) -> Ran:
    cmd = [*prefix, PYTHON, "-m", "gtidx", *map(str, args)] if audit is None else \
        [*prefix, PYTHON, "-c", AUDITED, audit, *map(str, args)]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=ENV, cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        hung = True
    return Ran(list(args), p.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
               time.monotonic() - t0, hung, p.pid)


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("gtidx: warning:")]


def judge_cli(stats: Stats, sc: str, r: Ran, detail: str, *, lines_max: int | None = 1) -> str:
    """lines_max: at most this many error lines, each "gtidx: ..." (None: any
    number; 0: a logfmt daemon, only no traceback)."""
    """'ok', 'failed' (a clear error) or the problem kind (already counted)."""
    stats.add(sc, "commands")
    if r.hung:
        stats.problem(sc, "hang", f"{r.cmd} ({detail})", f"no exit within {r.seconds:.0f} s")
        return "hang"
    if r.rc is None or r.rc < 0 or r.rc not in OK_CODES or "Traceback" in r.err \
            or "internal error" in r.err:
        stats.problem(sc, "crash", f"{r.cmd} ({detail})", f"exit {r.rc}: {r.err[-1200:]}")
        return "crash"
    if r.rc != 0:
        lines = error_lines(r.err)
        if lines_max == 0:
            stats.add(sc, "clear errors")
            return "failed"
        if not lines or (lines_max is not None and len(lines) > lines_max) or \
                any(not ln.startswith("gtidx: ") for ln in lines):
            stats.problem(sc, "unclear", f"{r.cmd} ({detail})", f"exit {r.rc}, stderr: {r.err[-1200:]}")
            return "unclear"
        stats.add(sc, "clear errors")
        return "failed"
    return "ok"


def file_id(p: Path) -> tuple:
    """What a victim is: kind, bytes, xattrs, mode."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return ("absent",)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(p))
    if not stat.S_ISREG(st.st_mode):
        return ("other", stat.S_IFMT(st.st_mode))
    try:
        xattrs = tuple(sorted((k, os.getxattr(p, k)) for k in os.listxattr(p)))
    except OSError:
        xattrs = ()
    return ("file", hashlib.sha256(p.read_bytes()).hexdigest(), xattrs, stat.S_IMODE(st.st_mode))


def tree_ids(d: Path) -> dict:
    return {p.name: file_id(p) for p in sorted(d.iterdir())} if d.exists() else {}


# -- links ------------------------------------------------------------------------------------

LINK_PIDS = 300


def last_pid() -> int:
    try:
        return int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    except (OSError, ValueError):
        return os.getpid()


def read_audit(path: Path) -> list[list]:
    try:
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    except FileNotFoundError:
        return []


def learned_names(records: list, directory: Path, names: list[str], pid: int) -> set[str]:
    """Name patterns gtidx wrote or created in ``directory``: the binlog name
    as {name}, the writer's pid as {pid}, a random part (hex or a tempfile
    token before .tmp) as {rand}: no link can be planted there in advance."""
    real = os.path.realpath(directory)
    out = set()
    for rec in records:
        paths = rec[1:3] if rec[0] in ("os.rename", "os.link", "os.symlink") else rec[1:2]
        for p in paths:
            if not isinstance(p, str):
                continue
            full = os.path.realpath(os.path.join(rec[-1], p)) if not os.path.isabs(p) else os.path.realpath(p)
            if os.path.dirname(full) != real:
                continue
            n = os.path.basename(full)
            for b in sorted(names, key=len, reverse=True):
                if b in n:
                    n = n.replace(b, "{name}")
                    break
            n = re.sub(rf"(?<![0-9]){pid}(?![0-9])", "{pid}", n)
            n = re.sub(r"(?<=[._-])[0-9a-zA-Z_-]{6,}(?=\.tmp$)|(?<=[._-])[0-9a-f]{6,}(?=[._-]|$)", "{rand}", n)
            out.add(n)
    return out


class LinkLearner:
    """Learns, per command, the names gtidx creates in a binlog directory."""

    def __init__(self, work: Path, mat: Material):
        self.work = work
        self.mat = mat
        self.cache: dict[tuple, set[str]] = {}

    def names(self, cmd: tuple, fs: str = "") -> set[str]:
        if (cmd, fs) not in self.cache:
            mnt = Tmpfs(self.work / f"mnt-{len(self.cache)}", None, fs) if fs else None
            try:
                self.cache[(cmd, fs)] = self._learn(cmd, mnt.path if mnt else self.work)
            finally:
                if mnt:
                    mnt.close()
        return self.cache[(cmd, fs)]

    def _learn(self, cmd: tuple, where: Path) -> set[str]:
        if True:
            found = set()
            for growing in (False, True):
                d = where / f"learn-{len(self.cache)}-{int(growing)}"
                files = self.mat.place(d / "b", growing_cut=self.mat.files[-1].size - 1000 if growing else None)
                log = d / "audit.jsonl"
                r = run_gtidx([*cmd, d / "b"], audit=str(log))
                if r.rc != 0:
                    raise RuntimeError(f"learning run failed: {r.cmd}: {r.err[-500:]}")
                found |= learned_names(read_audit(log), d / "b", [f.name for f in files], r.pid)
                shutil.rmtree(d)
            found.discard("{name}")                 # the binlog itself (only ever read)
            found.discard("master-bin.index")
            return found


LINK_CMDS = (("build", "--page-size", "64", "--span-min", "1", "--no-budget"),
             ("build", "--force", "--page-size", "64", "--span-min", "1", "--no-budget"),
             ("build",),
             ("tail", "--once", "--page-size", "64", "--span-min", "1", "--max-ratio", "1"),
             ("tail", "--once"))


def sc_links(ctx, rnd: random.Random, n: int) -> None:
    mat = rnd.choice(ctx.mats[:3]).growable()
    base = ctx.work / f"links-{n}"
    # a third of the rounds on ramfs: no user xattrs, gtidx keeps its metadata in other files
    fs = "ramfs" if rnd.random() < 0.35 else ""
    mnt = Tmpfs(base, None, fs) if fs else None
    try:
        _links(ctx, rnd, n, mat, base, fs)
    finally:
        if mnt:
            mnt.close()
        shutil.rmtree(base, ignore_errors=True)


def _links(ctx, rnd: random.Random, n: int, mat: Material, base: Path, fs: str) -> None:
    stats, sc = ctx.stats, "links"
    stats.add(sc, f"on {fs or 'the work filesystem'}")
    d, outside = base / "binlogs", base / "outside"
    outside.mkdir(parents=True)
    growing = rnd.random() < 0.5
    cut = rnd.randrange(mat.files[-1].size // 2, mat.files[-1].size) if growing else None
    files = mat.place(d, growing_cut=cut, server_idx=rnd.random() < 0.3)
    names = [p.name for p in files]
    cmd = rnd.choice(LINK_CMDS)
    learner = ctx.learners.setdefault(mat.id, LinkLearner(ctx.work / f"learn-{mat.id.replace('/', '_')}", mat))
    learnt = learner.names(cmd, fs)
    patterns = {p for p in learnt if "{rand}" not in p} | {"{name}.idx", ".{name}.idx.{pid}.tmp"}
    stats.add(sc, "random names (must be O_EXCL)", len(learnt) - len(learnt & patterns))
    # victims outside the directory
    victims = {}
    victims["random"] = outside / "victim-random"
    victims["random"].write_bytes(rnd.randbytes(rnd.randrange(100, 9000)))
    src = files[0]
    victims["index"] = outside / "victim-index"
    build_index(src, out=str(victims["index"]), page_size=64, span_min=1, max_ratio=None, force=True)
    part_dir = base / "partial"
    part_mat = ctx.mats[0].growable()
    part_files = part_mat.place(part_dir, growing_cut=part_mat.files[-1].size // 2)
    from gtidx.tail import TailSettings, Tailer
    Tailer(str(part_dir), TailSettings(page_size=64, span_min=1, max_ratio=None, server_grace=0)).run(once=True)
    victims["partial"] = outside / "victim-partial"
    shutil.copy2(str(part_files[-1]) + ".idx", victims["partial"])      # xattrs too
    shutil.rmtree(part_dir)
    for v in victims.values():
        os.chmod(v, 0o640)
    # plant
    lo = last_pid() + 1
    planted = Counter()
    how_detail = []
    for i, name in enumerate(names):
        for pat in sorted(patterns):
            mode = rnd.choice(("symlink", "symlink", "dangling", "hardlink"))
            victim = victims[rnd.choice(sorted(victims))]
            if growing and i == len(names) - 1 and pat == "{name}.idx" and mat.id == part_mat.id \
                    and rnd.random() < 0.6:
                # the active binlog's own partial index, but a link to a file
                # elsewhere: a tail that resumes it would write into the victim
                mode, victim = rnd.choice(("hardlink", "symlink")), victims["partial"]
            if mode == "dangling":
                target = outside / f"absent-{i}-{planted['dangling']}"
            else:
                target = victim
            concrete = [pat.replace("{name}", name).replace("{pid}", str(p)) for p in range(lo, lo + LINK_PIDS)] \
                if "{pid}" in pat else [pat.replace("{name}", name)]
            for c in concrete:
                at = d / c
                if at.exists() or at.is_symlink():
                    at.unlink()
                if mode == "hardlink":
                    os.link(target, at)
                else:
                    os.symlink(target, at)
                planted[mode] += 1
            how_detail.append(f"{pat.replace('{name}', name)}:{mode}->{target.name}")
    before = tree_ids(outside)
    log = base / "audit.jsonl"
    r = run_gtidx([*cmd, d], audit=str(log), timeout=ctx.timeout)
    detail = f"{mat.id}, {'growing' if growing else 'closed'}{', ramfs' if fs else ''}, {len(patterns)} patterns, " \
             f"pid {r.pid} " \
             f"{'covered' if lo <= r.pid < lo + LINK_PIDS else 'NOT covered'}"
    stats.add(sc, "inputs")
    stats.add(sc, f"cmd {cmd[0]}{' --force' if '--force' in cmd else ''}{' --once' if '--once' in cmd else ''}")
    stats.add(sc, "links planted", sum(planted.values()))
    stats.add(sc, "pid covered" if lo <= r.pid < lo + LINK_PIDS else "pid not covered")
    verdict = judge_cli(stats, sc, r, detail, lines_max=0 if cmd[0] == "tail" else None)
    after = tree_ids(outside)
    stats.add(sc, "victims checked", len(before))
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        stats.problem(sc, "wrong", f"{r.cmd}: wrote through a planted link ({detail})",
                      f"changed outside the directory: {changed}; planted {how_detail[:6]}")
    # writes at names the harness could not plant must be exclusive creations
    real = os.path.realpath(d)
    for rec in read_audit(log):
        if rec[0] != "open":
            continue
        full = os.path.realpath(os.path.join(rec[-1], rec[1]))
        if os.path.dirname(full) != real:
            continue
        here = learned_names([rec], d, names, r.pid)
        flags = rec[2]
        if "{rand}" in "".join(here):
            stats.add(sc, "writes at random names")
        if not here <= patterns and not (flags & os.O_CREAT and flags & os.O_EXCL):
            stats.problem(sc, "wrong", f"{r.cmd}: non-exclusive write at an unplanted name {rec[1]} ({detail})",
                          str(rec))
        stats.add(sc, "write opens seen")
    if verdict in ("hang", "crash"):
        return
    # answers: every lookup right, whatever gtidx made of the links
    try:
        n_ans, problems = check_answers(files, mat, rnd, sizes={names[-1]: cut} if growing else None,
                                        timeout=ctx.timeout)
        stats.add(sc, "answers", n_ans)
        for p in problems[:3]:
            stats.problem(sc, "wrong", f"after {r.cmd} ({detail})", p)
    except Hang:
        stats.problem(sc, "hang", f"lookups after {r.cmd} ({detail})")
    except GtidxError as e:
        stats.add(sc, "answers")
        stats.problem(sc, "wrong", f"lookups after {r.cmd} ({detail})", f"GtidxError on intact binlogs: {e}")
    except Exception:
        stats.problem(sc, "crash", f"lookups after {r.cmd} ({detail})", traceback.format_exc())


# -- shrink -------------------------------------------------------------------------------------

def reader_main(spec_path: str) -> int:
    """The reader process of the shrink scenario (tools/campaign --reader SPEC)."""
    spec = json.loads(Path(spec_path).read_text())
    rnd = random.Random(spec["seed"])
    logging.getLogger("gtidx").setLevel(logging.CRITICAL)
    out = open(spec["out"], "w", buffering=1)
    end = time.time() + spec["seconds"]
    logs = None
    t_open = 0.0
    k = 0
    lookups = spec["lookups"]
    while time.time() < end:
        if logs is None or (spec["reopen"] and k % spec["reopen"] == 0):
            if logs is not None:
                logs.close()
            t_open = time.time()
            try:
                logs = gtidx.open(spec["dir"])
            except GtidxError as e:
                logs = None
                out.write(json.dumps(["open", "", f"error: {e}", "", t_open, t_open, time.time()]) + "\n")
                time.sleep(0.005)
                continue
        look = rnd.choice(lookups)
        t0 = time.time()
        via = ""
        try:
            if look[0] == "pos":
                r = logs.state_at(look[1], look[2])
                ans, via = str(r.position), r.via
            else:
                loc = logs.locate(look[1])
                ans, via = [os.path.basename(loc.file), loc.start, loc.end], loc.via
        except NotFoundError:
            ans = None
        except GtidxError as e:
            ans = f"error: {e}"
        except Exception as e:                  # noqa: BLE001 - reported, judged as a crash
            ans = f"exception: {type(e).__name__}: {e}"
        out.write(json.dumps([look[0], look[1:], ans, via, t_open, t0, time.time()]) + "\n")
        k += 1
    return 0


def min_size(events: list[tuple[float, int]], t_from: float, t_to: float) -> int:
    """The smallest size the file had at any moment in [t_from, t_to]."""
    current = events[0][1]
    lowest = None
    for t, s in events:
        if t <= t_from:
            current = s
        elif t <= t_to:
            lowest = s if lowest is None else min(lowest, s)
    return current if lowest is None else min(current, lowest)


SHRINK_TARGETS = ("active binlog", "active binlog", "closed idx", "active idx", "closed binlog")


def sc_shrink(ctx, rnd: random.Random, n: int) -> None:
    stats, sc = ctx.stats, "shrink"
    mat = rnd.choice(ctx.mats[:2]).growable()
    base = ctx.work / f"shrink-{n}"
    d = base / "binlogs"
    files = mat.place(d, growing_cut=mat.files[-1].size)     # all of it, IN_USE set: the active binlog
    active = files[-1]
    layout = rnd.choice(((64, 1), (256, 2048), (4096, 65536)))
    for p in files[:-1]:
        build_index(p, page_size=layout[0], span_min=layout[1], max_ratio=None, force=True)
    from gtidx.tail import TailSettings, Tailer
    Tailer(str(d), TailSettings(page_size=layout[0], span_min=layout[1], max_ratio=None,
                                server_grace=0)).run(once=True)          # the active one's hot index
    target_kind = rnd.choice(ctx.shrink_targets or SHRINK_TARGETS)
    if target_kind == "active binlog":
        target = active
    elif target_kind == "closed binlog":
        target = rnd.choice(files[:-1])
    elif target_kind == "closed idx":
        target = Path(str(rnd.choice(files[:-1])) + ".idx")
    else:
        target = Path(str(active) + ".idx")
    if not target.exists() or target.stat().st_size < 2:
        target = active                  # (an index with no complete page yet: 0 bytes)
        target_kind = "active binlog"
    data = target.read_bytes()
    by_name = {f.name: f for f in mat.files}
    lookups = []
    for p in files:
        f = by_name[p.name]
        w = 40 if p == active or str(target).startswith(str(p)) else 8
        lookups += [["pos", str(p), o] for o, _ in rnd.sample(f.pos, min(w, len(f.pos)))]
    lookups += [["loc", g] for g in rnd.sample(sorted(mat.first), min(30, len(mat.first)))]
    seconds = rnd.uniform(1.5, 3.0)
    out = base / "answers.jsonl"
    spec = {"dir": str(d), "seed": rnd.getrandbits(32), "seconds": seconds, "out": str(out),
            "lookups": lookups, "reopen": rnd.choice((0, 0, 5, 50))}
    (base / "spec.json").write_text(json.dumps(spec))
    reader = subprocess.Popen([PYTHON, "-P", "-m", "tools.campaign", "--reader", str(base / "spec.json")],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=ENV, start_new_session=True)
    tail = None
    if rnd.random() < 0.5:
        # a tail daemon follows the same directory: it sees the truncations too
        # (a server's crash recovery), and reindexes under the reader
        tail_err = open(base / "tail.log", "wb")
        tail = subprocess.Popen([PYTHON, "-m", "gtidx", "tail", str(d), "--interval", "0.02", "--page-size",
                                 str(layout[0]), "--span-min", str(layout[1]), "--max-ratio", "1",
                                 "--log-level", "warning"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=tail_err, env=ENV, start_new_session=True)
        tail_err.close()
    events = [(0.0, len(data))]
    cuts = 0
    t_end = time.time() + seconds + 0.3
    time.sleep(0.2)
    while time.time() < t_end - 0.1 and reader.poll() is None:
        cut = rnd.randrange(0, len(data))
        events.append((time.time(), cut))
        os.truncate(target, cut)
        cuts += 1
        time.sleep(rnd.uniform(0.0, 0.15))
        if rnd.random() < 0.8:
            with open(target, "r+b") as fh:                    # the same bytes written back
                fh.seek(cut)
                fh.write(data[cut:])
            events.append((time.time(), len(data)))
        time.sleep(rnd.uniform(0.0, 0.15))
    try:
        _, err = reader.communicate(timeout=ctx.timeout + seconds)
    except subprocess.TimeoutExpired:
        os.killpg(reader.pid, signal.SIGKILL)
        _, err = reader.communicate()
        stats.problem(sc, "hang", f"reader ({mat.id}, {target_kind})", "did not finish")
    detail = f"{mat.id}, truncating {target_kind} {target.name}, layout {layout}, reopen {spec['reopen']}" \
             f"{', tail running' if tail else ''}"
    if tail is not None:
        stats.add(sc, "with a tail daemon")
        if tail.poll() is not None:
            what = f"by {signal.Signals(-tail.returncode).name}" if tail.returncode < 0 else f"{tail.returncode}"
            stats.problem(sc, "crash", f"the tail daemon exited {what} ({detail})",
                          (base / "tail.log").read_text(errors="replace")[-800:])
        else:
            tail.send_signal(signal.SIGTERM)
            try:
                tail.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(tail.pid, signal.SIGKILL)
                tail.wait()
                stats.problem(sc, "hang", f"the tail daemon did not stop on SIGTERM ({detail})")
            text = (base / "tail.log").read_text(errors="replace")
            if tail.returncode != 0 or "Traceback" in text or "internal error" in text:
                stats.problem(sc, "crash", f"the tail daemon exited {tail.returncode} ({detail})", text[-800:])
    # restore for the record, then judge
    target.write_bytes(data)
    stats.add(sc, "inputs")
    stats.add(sc, f"target {target_kind}")
    stats.add(sc, "truncations", cuts)
    if reader.returncode is not None and reader.returncode < 0:
        sig = signal.Signals(-reader.returncode).name
        stats.problem(sc, "crash", f"reader died by {sig} ({detail})", err.decode(errors="replace")[-800:])
    elif reader.returncode not in (0, None):
        stats.problem(sc, "crash", f"reader exited {reader.returncode} ({detail})",
                      err.decode(errors="replace")[-800:])
    fsize = {p.name: by_name[p.name].size for p in files}
    for line in out.read_text().splitlines() if out.exists() else []:
        try:
            kind, key, ans, via, t_open, t0, t1 = json.loads(line)
        except ValueError:
            continue                                   # the last line, cut by a crash
        stats.add(sc, "answers")
        if isinstance(ans, str) and ans.startswith("exception: "):
            stats.problem(sc, "crash", f"{kind} {key} ({detail})", ans)
            continue
        if isinstance(ans, str) and ans.startswith("error: "):
            stats.add(sc, "gtidx errors")
            continue
        if kind == "open":
            continue
        if kind == "pos":
            path, o = key
            name = os.path.basename(path)
            want = expected_pos(by_name[name], o, fsize[name])
            low = min_size(events, t_open, t1) if target == Path(path) else fsize[name]
            ok = (ans == (None if want is None else str(want))) or (ans is None and o > low)
            if not ok:
                stats.problem(sc, "wrong", f"state_at({name}, {o}) ({detail})",
                              f"got {ans}, server {want}; smallest size while it looked {low}")
        else:
            g = key[0]
            want = list(mat.first[g])
            low = min_size(events, t_open, t1) if target.name == want[0] else fsize[want[0]]
            ok = ans == want or (ans is None and want[2] > low)
            if not ok:
                stats.problem(sc, "wrong", f"locate({g}) ({detail})",
                              f"got {ans}, binlog {want}; smallest active size while it looked {low}")
    shutil.rmtree(base, ignore_errors=True)


# -- fifo ----------------------------------------------------------------------------------------

def sc_fifo(ctx, rnd: random.Random, n: int) -> None:
    stats, sc = ctx.stats, "fifo"
    mat = rnd.choice(ctx.mats[:2])
    base = ctx.work / f"fifo-{n}"
    d = base / "binlogs"
    variant = rnd.choice(("listed binlog", "extra binlog", "idx", "named"))
    files = mat.place(d, index_file=variant != "extra binlog")
    names = [p.name for p in files]
    fifo_of = None
    if variant == "listed binlog":
        k = rnd.randrange(len(files))
        fifo_of = files[k]
        fifo_of.unlink()
        os.mkfifo(fifo_of)
    elif variant == "extra binlog":
        num = int(names[-1].rsplit(".", 1)[1]) + rnd.choice((1, 5))
        fifo_of = d / f"master-bin.{num:06d}"
        os.mkfifo(fifo_of)
    elif variant == "idx":
        for p in rnd.sample(files, rnd.randint(1, len(files))):
            idx = Path(str(p) + ".idx")
            if idx.exists():
                idx.unlink()
            os.mkfifo(idx)
            fifo_of = p
    else:
        fifo_of = base / "master-bin.000042"
        os.mkfifo(fifo_of)
        os.mkfifo(str(fifo_of) + ".idx")
    intact = [p for p in files if p.exists() and stat.S_ISREG(os.stat(p).st_mode)]
    detail = f"{mat.id}, FIFO as {variant} {fifo_of.name}"
    stats.add(sc, "inputs")
    stats.add(sc, f"variant {variant}")
    by_name = {f.name: f for f in mat.files}
    lookups_must_answer = variant == "idx"
    cmds = []
    g = rnd.choice([g for g, (name, s, e) in mat.first.items() if name in {p.name for p in intact}])
    cmds.append(("seek", ["seek", "--gtid", g, d], g))
    p = rnd.choice(intact)
    o, _ = rnd.choice(by_name[p.name].pos)
    cmds.append(("pos", ["pos", p, o], (p.name, o)))
    cmds.append(("status", ["status", d], None))
    cmds.append(("status --json", ["status", "--json", d], None))
    cmds.append(("build", ["build", "--page-size", "256", "--span-min", "1", "--no-budget", d], None))
    cmds.append(("build --force", ["build", "--force", d], None))
    cmds.append(("tail --once", ["tail", "--once", d], None))
    if variant in ("named", "listed binlog", "extra binlog"):
        for c in ("scan", "pos", "build"):
            args = [c, fifo_of] + ([4] if c == "pos" else [])
            cmds.append((f"{c} FIFO", args, None))
    idx_fifo = Path(str(fifo_of) + ".idx")
    if variant in ("idx", "named"):
        for c in ("dump", "info", "verify"):
            cmds.append((f"{c} FIFO.idx", [c, idx_fifo], None))
    for what, args, key in rnd.sample(cmds, min(len(cmds), 6)):
        r = run_gtidx(args, timeout=ctx.timeout)
        stats.add(sc, f"cmd {what}")
        lines_max = 0 if what.startswith("tail") else None if what.startswith(("build", "status")) else 1
        verdict = judge_cli(stats, sc, r, detail, lines_max=lines_max)
        if "--json" in args and verdict in ("ok", "failed"):
            try:
                json.loads(r.out)
                stats.add(sc, "JSON documents checked")
            except ValueError:
                stats.problem(sc, "unclear", f"{r.cmd} ({detail})", f"not one JSON document: {r.out[-500:]!r}")
        if what not in ("seek", "pos") or verdict in ("hang", "crash", "unclear"):
            continue
        if what == "seek":
            want = mat.first[key]
        else:
            want = expected_pos(by_name[key[0]], key[1], by_name[key[0]].size)
            want = "" if want is None else str(want)
        if verdict == "failed" and not (what == "pos" and r.rc == 1 and want == ""):
            if lookups_must_answer:
                stats.problem(sc, "wrong", f"{r.cmd} ({detail})",
                              f"an error instead of a fallback to scanning: {r.err.strip()[-500:]}")
            continue
        stats.add(sc, "answers")
        if what == "seek":
            m = re.match(r"(\S+) (\S+) start (\d+) end (\d+)", r.out)
            got = (os.path.basename(m.group(2)), int(m.group(3)), int(m.group(4))) if m else r.out.strip()
        else:
            got = "" if r.rc == 1 else r.out.strip()
        if got != want:
            stats.problem(sc, "wrong", f"{r.cmd} ({detail})", f"got {got!r}, oracle {want!r}")
    shutil.rmtree(base, ignore_errors=True)


# -- diskfull -------------------------------------------------------------------------------------

class Tmpfs:
    """A filesystem mounted for a round: tmpfs of ``size`` bytes, or ramfs
    (no size limit, and no user xattrs: gtidx must keep its metadata elsewhere)."""

    def __init__(self, path: Path, size: int | None, fstype: str = "tmpfs"):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        opts = "mode=0755" if size is None else f"size={size},mode=0755"
        subprocess.run(["mount", "-t", fstype, "-o", opts, fstype, str(path)], check=True)

    def resize(self, size: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)

    def free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def close(self) -> None:
        for _ in range(20):
            if subprocess.run(["umount", str(self.path)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        try:
            self.path.rmdir()
        except OSError:
            pass


def pages(n: int) -> int:
    return (n + PAGE - 1) // PAGE


class Clean:
    """Clean builds (on an ordinary filesystem) to compare with."""

    def __init__(self, work: Path):
        self.work = work
        self.cache: dict = {}

    def index(self, f: FileFacts, **kw) -> bytes:
        key = (str(f.src), tuple(sorted(kw.items())))
        if key not in self.cache:
            d = self.work / f"clean-{len(self.cache)}"
            d.mkdir(parents=True)
            shutil.copyfile(f.src, d / f.name)
            build_index(d / f.name, force=True, **kw)
            self.cache[key] = Path(str(d / f.name) + ".idx").read_bytes()
            shutil.rmtree(d)
        return self.cache[key]


DISK_LAYOUTS = ({"args": ["--page-size", "64", "--span-min", "1", "--no-budget"],
                 "kw": dict(page_size=64, span_min=1, max_ratio=None)},
                {"args": ["--page-size", "256", "--span-min", "2048", "--no-budget"],
                 "kw": dict(page_size=256, span_min=2048, max_ratio=None)},
                {"args": ["--page-size", "64", "--span-min", "1", "--max-ratio", "0.5"],
                 "kw": dict(page_size=64, span_min=1, max_ratio=0.5)})


def leftovers(d: Path, closed: list[Path], clean: dict) -> list[str]:
    """Indexes of closed binlogs that are neither absent nor a clean build;
    temporary or empty files (but an active binlog's index: a partial one is its right)."""
    bad = []
    active = {str(p) + ".idx" for p in d.iterdir() if p.name in clean} - {str(p) + ".idx" for p in closed}
    for p in closed:
        idx = Path(str(p) + ".idx")
        if idx.is_symlink() or (idx.exists() and idx.read_bytes() != clean[p.name]):
            bad.append(f"{idx.name}: {idx.stat().st_size} bytes, not a clean build")
    for q in d.iterdir():
        if str(q) in active:
            continue
        if q.name.endswith(".tmp") or q.name.startswith(".") or (q.is_file() and q.stat().st_size == 0):
            bad.append(f"{q.name}: left behind ({q.stat().st_size} bytes)")
    return bad


def sc_diskfull(ctx, rnd: random.Random, n: int) -> None:
    stats, sc = ctx.stats, "diskfull"
    mat = rnd.choice(ctx.mats[:2]).growable()
    variant = rnd.choice(("build", "build", "tail --once", "tail"))
    lay = rnd.choice(DISK_LAYOUTS) if variant == "build" else DISK_LAYOUTS[0]
    kw = dict(lay["kw"]) if variant == "build" else dict(page_size=64, span_min=1, max_ratio=1.0)
    clean = {f.name: ctx.clean.index(f, **kw) for f in mat.files}
    used = sum(pages(f.size) for f in mat.files) + 2
    need = sum(pages(len(c)) for c in clean.values())
    room = rnd.randrange(0, need + 1)
    mnt = Tmpfs(ctx.work / f"diskfull-{n}", (used + room) * PAGE)
    detail = f"{mat.id}, {variant}, room for {room} of {need} index pages"
    stats.add(sc, "inputs")
    stats.add(sc, f"variant {variant}")
    try:
        d = mnt.path
        growing = variant == "tail"
        cut = mat.files[-1].size
        try:
            files = mat.place(d, growing_cut=cut if growing else None)
        except OSError:
            stats.add(sc, "setup: binlogs did not fit (round skipped)")
            return
        closed = files[:-1] if growing else files
        if variant == "build":
            r = run_gtidx(["build", *lay["args"], d], timeout=ctx.timeout)
            v = judge_cli(stats, sc, r, detail, lines_max=len(files))
            complete = sum(Path(str(p) + ".idx").exists() for p in files)
            stats.add(sc, "indexes written while full", complete)
            if v == "ok" and complete < len(files):
                stats.problem(sc, "wrong", f"{r.cmd} exit 0 ({detail})", f"only {complete} of {len(files)} indexes")
            if v == "failed" and r.rc != 3:
                stats.problem(sc, "unclear", f"{r.cmd} ({detail})", f"exit {r.rc}, not 3: {r.err[-500:]}")
            if v == "failed":
                stats.add(sc, "ran out of space")
        elif variant == "tail --once":
            r = run_gtidx(["tail", "--once", "--page-size", "64", "--span-min", "1", "--max-ratio", "1", d],
                          timeout=ctx.timeout)
            v = judge_cli(stats, sc, r, detail, lines_max=0)
            complete = sum(Path(str(p) + ".idx").exists() and Path(str(p) + ".idx").read_bytes() == clean[p.name]
                           for p in files)
            if complete < len(files):
                stats.add(sc, "ran out of space")
                if r.rc == 0:
                    stats.problem(sc, "wrong", f"{r.cmd} exit 0 ({detail})",
                                  f"only {complete} of {len(files)} indexes complete")
        else:
            tail_run(ctx, rnd, sc, d, files, mat.files[-1], clean, detail,
                     fault=lambda: time.sleep(rnd.uniform(1.0, 2.0)),      # polls while the disk stays full
                     recover=lambda: mnt.resize(256 << 20), check_leftovers=True)
            return
        bad = leftovers(d, closed, clean)
        for b in bad[:3]:
            stats.problem(sc, "wrong", f"after running out of space ({detail})", b)
        # free space, run again: identical to a clean build
        mnt.resize((used + need * 3 + 64) * PAGE)
        if variant == "build":
            r = run_gtidx(["build", *lay["args"], d], timeout=ctx.timeout)
        else:
            r = run_gtidx(["tail", "--once", "--page-size", "64", "--span-min", "1", "--max-ratio", "1", d],
                          timeout=ctx.timeout)
        v = judge_cli(stats, sc, r, detail + ", space freed", lines_max=0 if variant != "build" else None)
        if v != "ok":
            if v == "failed":
                stats.problem(sc, "wrong", f"{r.cmd} after freeing space ({detail})", r.err[-500:])
            return
        for p in files:
            idx = Path(str(p) + ".idx")
            stats.add(sc, "indexes compared")
            if not idx.exists() or idx.read_bytes() != clean[p.name]:
                stats.problem(sc, "wrong", f"{r.cmd} after freeing space ({detail})",
                              f"{idx.name} {'missing' if not idx.exists() else 'differs from a clean build'}")
        n_ans, problems = check_answers(files, mat, rnd, timeout=ctx.timeout)
        stats.add(sc, "answers", n_ans)
        for p in problems[:3]:
            stats.problem(sc, "wrong", f"after freeing space ({detail})", p)
    finally:
        mnt.close()


def log_lines(path: Path, since: int = 0) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[since:]
    except FileNotFoundError:
        return []


def tail_run(ctx, rnd, sc: str, d: Path, files: list[Path], full_data: FileFacts, clean: dict, detail: str, *,
             fault, recover=None, prefix=(), check_leftovers: bool = False, judge_log: bool = True) -> None:
    """The tail daemon through a fault (``fault()`` makes it and lasts while it
    runs; ``recover()`` clears what remains), then recovery: the active
    binlog closed, its indexes must equal a clean build."""
    stats = ctx.stats
    errlog = ctx.work / f"tail-{sc}-{time.monotonic_ns()}.log"
    with open(errlog, "wb") as fh:
        proc = subprocess.Popen([*prefix, PYTHON, "-m", "gtidx", "tail", str(d), "--interval", "0.05", "--page-size", "64",
                                 "--span-min", "1", "--max-ratio", "1", "--log-level", "info"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh, env=ENV,
                                start_new_session=True)
    active = files[-1]
    crashes = stats.c(sc)["crash"]
    try:
        time.sleep(rnd.uniform(0.6, 1.2))
        mark = len(log_lines(errlog))
        t_fault = time.monotonic()
        fault()
        fault_seconds = time.monotonic() - t_fault
        noisy = [ln for ln in log_lines(errlog, mark) if "level=warning" in ln or "level=error" in ln]
        stats.add(sc, "log lines while faulted", len(noisy))
        if judge_log and len(noisy) > 4 + 2 * fault_seconds:
            stats.problem(sc, "unclear", f"tail logged {len(noisy)} warnings in {fault_seconds:.1f} s ({detail})",
                          "\n".join(noisy[:3]))
        if proc.poll() is not None:
            stats.problem(sc, "crash", f"tail exited {proc.returncode} during the fault ({detail})",
                          "\n".join(log_lines(errlog)[-5:]))
            return
        if check_leftovers:
            bad = leftovers(d, files[:-1], clean)
            if bad:           # a running daemon may be writing one right now: what stays is left
                time.sleep(0.5)
                bad = [b for b in leftovers(d, files[:-1], clean) if b in bad]
            for b in bad[:3]:
                stats.problem(sc, "wrong", f"tail during the fault ({detail})", b)
        if recover is not None:
            recover()
        # the binlog is closed (IN_USE cleared: as the server rotates); recovery
        with open(active, "r+b") as fh:
            fh.seek(0, os.SEEK_END)
            fh.write(full_data.data[fh.tell():])
            fh.seek(21)
            fh.write(full_data.data[21:22])
        deadline = time.monotonic() + 20
        done = False
        while time.monotonic() < deadline and proc.poll() is None:
            if all(Path(str(p) + ".idx").exists() and Path(str(p) + ".idx").read_bytes() == clean[p.name]
                   for p in files):
                done = True
                break
            time.sleep(0.1)
        stats.add(sc, "indexes compared", len(files))
        if proc.poll() is not None:
            stats.problem(sc, "crash", f"tail exited {proc.returncode} after the fault ({detail})",
                          "\n".join(log_lines(errlog)[-5:]))
            return
        if not done:
            diff = [p.name for p in files if not (Path(str(p) + ".idx").exists() and
                                                  Path(str(p) + ".idx").read_bytes() == clean[p.name])]
            stats.problem(sc, "wrong", f"tail did not recover in 20 s ({detail})",
                          f"indexes not equal to a clean build: {diff}; log: " + " | ".join(log_lines(errlog)[-4:]))
        else:
            stats.add(sc, "recovered")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                stats.problem(sc, "hang", f"tail did not stop on SIGTERM ({detail})")
            else:
                if proc.returncode != 0:
                    stats.problem(sc, "crash", f"tail exited {proc.returncode} on SIGTERM ({detail})",
                                  "\n".join(log_lines(errlog)[-5:]))
        text = errlog.read_text(errors="replace") if errlog.exists() else ""
        if ("Traceback" in text or "internal error" in text) and stats.c(sc)["crash"] == crashes:
            stats.problem(sc, "crash", f"tail: a traceback or internal error ({detail})", text[-1500:])
        errlog.unlink(missing_ok=True)


# -- vanish ----------------------------------------------------------------------------------------

def _rmtree_racing(d: Path) -> None:
    """Remove a directory the daemon is writing into (files come and go under us)."""
    for _ in range(100):
        try:
            shutil.rmtree(d)
            return
        except OSError:
            if not d.exists():
                return
            time.sleep(0.01)
    shutil.rmtree(d)


def _copytree_racing(src: Path, dst: Path) -> None:
    for _ in range(100):
        try:
            shutil.copytree(src, dst, symlinks=True)
            return
        except (OSError, shutil.Error):
            shutil.rmtree(dst, ignore_errors=True)
            time.sleep(0.01)
    shutil.copytree(src, dst, symlinks=True)


def vanish_dir(rnd, d: Path, how: str) -> None:
    away = d.with_name(d.name + ".away")
    gone = rnd.uniform(0.3, 1.5)
    if how == "rename":
        os.rename(d, away)
        time.sleep(gone)
        os.rename(away, d)
    elif how == "remove":
        _copytree_racing(d, away)                      # copy2: xattrs too
        _rmtree_racing(d)
        time.sleep(gone)
        shutil.copytree(away, d, symlinks=True)
        shutil.rmtree(away)
    elif how == "empty":
        os.rename(d, away)
        d.mkdir()
        time.sleep(gone)
        d.rmdir()
        os.rename(away, d)
    elif how == "flap":
        # renamed away and back many times, some mid-poll
        end = time.monotonic() + gone
        while time.monotonic() < end:
            os.rename(d, away)
            time.sleep(rnd.uniform(0, 0.03))
            os.rename(away, d)
            time.sleep(rnd.uniform(0, 0.03))
    elif how == "mounted-over":
        # the directory is there but gtidx, run as root, still sees it: a
        # bind-mounted empty tmpfs over it hides the binlogs for a while
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], check=True)
        time.sleep(gone)
        for _ in range(50):
            if subprocess.run(["umount", str(d)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", str(d)], check=True)
    time.sleep(0.3)


def sc_vanish(ctx, rnd: random.Random, n: int) -> None:
    stats, sc = ctx.stats, "vanish"
    mat = rnd.choice(ctx.mats[:2]).growable()
    base = ctx.work / f"vanish-{n}"
    d = base / "binlogs"
    cut = rnd.randrange(mat.files[-1].size // 3, mat.files[-1].size - 500)
    files = mat.place(d, growing_cut=cut)
    clean = {f.name: ctx.clean.index(f, page_size=64, span_min=1, max_ratio=1.0) for f in mat.files}
    how = rnd.choice(("rename", "remove", "empty", "mounted-over", "flap"))
    detail = f"{mat.id}, directory {how}"
    stats.add(sc, "inputs")
    stats.add(sc, f"variant {how}")
    # flapping: each time the directory is back the failure is over, and its
    # next disappearance is a new one, logged again: the log rate is not judged
    tail_run(ctx, rnd, sc, d, files, mat.files[-1], clean, detail, fault=lambda: vanish_dir(rnd, d, how),
             judge_log=how != "flap")
    if d.exists():
        n_ans, problems = check_answers(files, mat, rnd, timeout=ctx.timeout)
        stats.add(sc, "answers", n_ans)
        for p in problems[:3]:
            stats.problem(sc, "wrong", f"after the directory came back ({detail})", p)
    shutil.rmtree(base, ignore_errors=True)


# -- denied: permission denied -------------------------------------------------------------------

# root without the capabilities that let it ignore file permissions: the
# directory (or an index) belongs to another user, as when the binlogs are
# the server's and gtidx runs as a user that may only read them
NO_DAC = ("setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--")
OTHER = 65534


def chown_tree(paths, uid: int) -> None:
    for p in paths:
        os.chown(p, uid, uid, follow_symlinks=False)


def sc_denied(ctx, rnd: random.Random, n: int) -> None:
    stats, sc = ctx.stats, "denied"
    mat = rnd.choice(ctx.mats[:2]).growable()
    base = ctx.work / f"denied-{n}"
    base.mkdir()
    d = base / "binlogs"
    cut = rnd.randrange(mat.files[-1].size // 3, mat.files[-1].size - 500)
    files = mat.place(d, growing_cut=cut)
    variant = rnd.choice(("directory", "index", "directory, tail --once", "directory, build"))
    clean = {f.name: ctx.clean.index(f, page_size=64, span_min=1, max_ratio=1.0) for f in mat.files}
    if variant == "index":
        # the tail's own partial index and the closed files' indexes exist, owned by another user
        from gtidx.tail import TailSettings, Tailer
        Tailer(str(d), TailSettings(page_size=64, span_min=1, max_ratio=1.0, server_grace=0)).run(once=True)
        victims = [q for q in d.iterdir() if q.name.endswith(".idx")]
        chown_tree(victims, OTHER)
        for q in victims:
            os.chmod(q, 0o644)
        restore = lambda: chown_tree(victims, 0)             # noqa: E731
    else:
        chown_tree([d], OTHER)
        os.chmod(d, 0o755)
        restore = lambda: chown_tree([d], 0)                 # noqa: E731
    detail = f"{mat.id}, {variant} owned by another user"
    stats.add(sc, "inputs")
    stats.add(sc, f"variant {variant}")
    try:
        if variant.endswith("tail --once") or variant.endswith("build"):
            args = ["tail", "--once", "--page-size", "64", "--span-min", "1", "--max-ratio", "1", d] \
                if variant.endswith("tail --once") else ["build", "--page-size", "64", "--span-min", "1",
                                                         "--max-ratio", "1", d]
            r = run_gtidx(args, timeout=ctx.timeout, prefix=NO_DAC)
            v = judge_cli(stats, sc, r, detail, lines_max=0 if args[0] == "tail" else len(files))
            if v == "ok":
                stats.problem(sc, "wrong", f"{r.cmd} exit 0 ({detail})", "no index could be written")
            elif v == "failed":
                stats.add(sc, "refused clearly")
            for b in leftovers(d, files[:-1], clean)[:3]:
                stats.problem(sc, "wrong", f"{r.cmd} ({detail})", b)
            sizes = {files[-1].name: cut}
        else:
            tail_run(ctx, rnd, sc, d, files, mat.files[-1], clean, detail,
                     fault=lambda: time.sleep(rnd.uniform(1.0, 2.0)), recover=restore, prefix=NO_DAC,
                     check_leftovers=True)
            sizes = None                   # the tail run closed the active binlog
        n_ans, problems = check_answers(files, mat, rnd, sizes=sizes, timeout=ctx.timeout)
        stats.add(sc, "answers", n_ans)
        for pr in problems[:3]:
            stats.problem(sc, "wrong", f"lookups ({detail})", pr)
    finally:
        restore()
        shutil.rmtree(base, ignore_errors=True)


# -- race: build --force and SIGINT while tail follows ------------------------------------------------

def sc_race(ctx, rnd: random.Random, n: int) -> None:
    """`gtidx build --force` of the active binlog, some interrupted by SIGINT at
    a random moment, while a `gtidx tail` daemon follows the binlog as it
    grows: no interrupted build leaves its temporary file; once the binlog is
    closed, every index equals a clean build, is marked complete, and the
    answers are right."""
    stats, sc = ctx.stats, "race"
    mat = rnd.choice(ctx.mats[:2]).growable()
    base = ctx.work / f"race-{n}"
    d = base / "binlogs"
    full = mat.files[-1]
    data = full.data
    cut = rnd.randrange(full.size // 4, full.size // 2)
    files = mat.place(d, growing_cut=cut)
    active = files[-1]
    clean = {f.name: ctx.clean.index(f, page_size=64, span_min=1, max_ratio=1.0) for f in mat.files}
    stats.add(sc, "inputs")
    detail = f"{mat.id}, growing from {cut}"
    errlog = base / "tail.log"
    with open(errlog, "wb") as fh:
        tail = subprocess.Popen([PYTHON, "-m", "gtidx", "tail", str(d), "--interval", "0.02", "--page-size", "64",
                                 "--span-min", "1", "--max-ratio", "1", "--log-level", "warning"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh, env=ENV,
                                start_new_session=True)
    try:
        steps = sorted(rnd.sample(range(cut, full.size), rnd.randint(4, 8))) + [full.size]
        for k, upto in enumerate(steps):
            with open(active, "r+b") as f:                    # the server appends
                f.seek(0, os.SEEK_END)
                f.write(data[f.tell():upto])
                if upto == full.size:
                    f.seek(21)
                    f.write(data[21:22])                      # closed: IN_USE cleared
            args = [PYTHON, "-m", "gtidx", "build", "--force", "--page-size", "64", "--span-min", "1",
                    "--max-ratio", "1", str(active)]
            p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, env=ENV, start_new_session=True)
            interrupted = rnd.random() < 0.5
            if interrupted:
                # in the build, not in the interpreter's start-up: once its
                # temporary file is there (named with its pid), a few ms later
                t_end = time.monotonic() + 2
                while time.monotonic() < t_end and p.poll() is None and \
                        not any(f".{p.pid}." in q.name for q in d.iterdir()):
                    time.sleep(0.001)
                time.sleep(rnd.uniform(0, 0.01))
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)
                else:
                    interrupted = False
            try:
                _, err = p.communicate(timeout=ctx.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                _, err = p.communicate()
                stats.problem(sc, "hang", f"build --force ({detail})")
                continue
            err = err.decode(errors="replace")
            stats.add(sc, "builds")
            stats.add(sc, "interrupted by SIGINT" if interrupted else "builds left alone")
            if p.returncode == 0 and "Exception ignored in" in err and "KeyboardInterrupt" in err:
                # the signal came after the build, while the interpreter shut down
                stats.note(sc, "SIGINT during interpreter exit", f"build --force ({detail})", err[-300:])
            elif "Traceback" in err or "internal error" in err or (p.returncode < 0 and
                                                                     p.returncode != -signal.SIGINT):
                stats.problem(sc, "crash", f"build --force{' + SIGINT' if interrupted else ''} ({detail})",
                              f"exit {p.returncode}: {err[-800:]}")
            left = [f"{q.name} ({q.stat().st_size} bytes)" for q in d.iterdir() if f".{p.pid}." in q.name]
            if left:
                stats.problem(sc, "wrong", f"build --force{' + SIGINT' if interrupted else ''} ({detail})",
                              f"left {left}")
            time.sleep(rnd.uniform(0.0, 0.2))
        deadline = time.monotonic() + 20
        done = False
        while time.monotonic() < deadline and tail.poll() is None:
            if all(Path(str(q) + ".idx").exists() and Path(str(q) + ".idx").read_bytes() == clean[q.name]
                   for q in files):
                done = True
                break
            time.sleep(0.1)
        time.sleep(0.3)                          # a late stamp would land now
        stats.add(sc, "indexes compared", len(files))
        if tail.poll() is not None:
            stats.problem(sc, "crash", f"tail exited {tail.returncode} ({detail})", errlog.read_text()[-800:])
            return
        if not done:
            stats.problem(sc, "wrong", f"indexes not equal to a clean build after 20 s ({detail})",
                          errlog.read_text()[-800:])
        rows = {os.path.basename(r.file): r for r in admin.binlog_status(d)}
        for q in files:
            stats.add(sc, "status rows")
            if rows[q.name].state != "complete":
                stats.problem(sc, "wrong", f"status of {q.name} ({detail})",
                              f"{rows[q.name].state}: {rows[q.name].detail}")
        n_ans, problems = check_answers(files, mat, rnd, timeout=ctx.timeout)
        stats.add(sc, "answers", n_ans)
        for pr in problems[:3]:
            stats.problem(sc, "wrong", f"after the race ({detail})", pr)
    finally:
        if tail.poll() is None:
            tail.send_signal(signal.SIGTERM)
            try:
                tail.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(tail.pid, signal.SIGKILL)
                tail.wait()
                stats.problem(sc, "hang", f"tail did not stop on SIGTERM ({detail})")
        text = errlog.read_text(errors="replace") if errlog.exists() else ""
        if "Traceback" in text or "internal error" in text:
            stats.problem(sc, "crash", f"tail: a traceback or internal error ({detail})", text[-1500:])
        shutil.rmtree(base, ignore_errors=True)


# -- nonmono: non-monotonic histories from a live server ----------------------------------------------

class NonStrictReader:
    """mysql-replication's BinLogStreamReader connecting as a replica with
    @slave_gtid_strict_mode=0 (the library hard-codes 1)."""

    @staticmethod
    def make(strict: bool):
        from pymysqlreplication import BinLogStreamReader

        class Reader(BinLogStreamReader):
            def _BinLogStreamReader__set_mariadb_settings(self):
                conn = self._stream_connection
                real = conn.cursor

                def cursor(*a, **k):
                    c = real(*a, **k)
                    ex = c.execute
                    c.execute = lambda q, args=None: ex(q.replace("@slave_gtid_strict_mode=1",
                                                                  f"@slave_gtid_strict_mode={int(strict)}"), args)
                    return c
                conn.cursor = cursor
                try:
                    return BinLogStreamReader._BinLogStreamReader__set_mariadb_settings(self)
                finally:
                    del conn.cursor
        return Reader


def real_replica_first(srv, position: str, server_id: int, strict: bool):
    """What a real replica connection receives first: 'GTID', None or ('refused', text)."""
    import pymysql
    from pymysqlreplication.event import MariadbGtidEvent
    stream = NonStrictReader.make(strict)(connection_settings=srv.connection_settings(), server_id=server_id,
                                          auto_position=position, is_mariadb=True, blocking=False,
                                          only_events=[MariadbGtidEvent])
    try:
        for ev in stream:
            return ev.gtid
        return None
    except pymysql.err.OperationalError as e:
        return ("refused", str(e))
    finally:
        stream.close()


REFUSALS = ("diverged", "not in the master's binlog", "missing the GTID", "purged")


def refusal_kind(text: str) -> str:
    for w in REFUSALS:
        if w in text:
            return w
    return "other: " + text[:120]


class History:
    """One seeded history written by the live server, and the server's view of it."""

    @staticmethod
    def plan(rnd: random.Random) -> list[str]:
        """A random history: "FLUSH", "0" (a domain-0 transaction) or
        "S-N" (server S logs seq_no N in the history's domain)."""
        seq = rnd.randint(20, 200)
        used: list[tuple[int, int]] = []
        steps = []
        for _ in range(rnd.randint(15, 45)):
            r = rnd.random()
            if r < 0.15:
                steps.append("FLUSH")
                continue
            if r < 0.3:
                steps.append("0")
                continue
            server = rnd.choice((1, 2, 2)) if rnd.random() < 0.5 else 1
            how = rnd.random()
            if how < 0.45 or not used:
                seq += 1
            elif how < 0.65:
                seq = max(1, seq - rnd.randint(1, 60))                       # a step back
            elif how < 0.8:
                server, seq = rnd.choice(used)                               # an exact repeat
            else:
                seq += rnd.randint(2, 80)                                    # a jump
            used.append((server, seq))
            steps.append(f"{server}-{seq}")
        if rnd.random() < 0.6:
            steps.append("FLUSH")                 # the last file of the history closed too
        return steps

    def __init__(self, srv, rnd: random.Random, domain: int, table: str, plan: list[str] | None = None):
        self.srv, self.domain = srv, domain
        plan = plan or self.plan(rnd)
        conn = srv.connect()
        cur = conn.cursor()
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        first = cur.fetchone()[0]
        cur.execute("CREATE DATABASE IF NOT EXISTS campaign")
        cur.execute("USE campaign")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {table} (id INT AUTO_INCREMENT PRIMARY KEY, d INT, s INT, "
                    "n BIGINT, pad VARCHAR(200))")
        steps = []
        for step in plan:
            if step == "FLUSH":
                cur.execute("FLUSH BINARY LOGS")
                steps.append("FLUSH")
            elif step == "0":
                cur.execute("SET SESSION gtid_domain_id = 0, SESSION server_id = 1")
                cur.execute(f"INSERT INTO {table} (d, s, n, pad) VALUES (0, 1, 0, %s)", ("x" * rnd.randrange(200),))
                steps.append("0")
            else:
                server, seq = map(int, step.split("-")[-2:])
                cur.execute(f"SET SESSION gtid_domain_id = {domain}, SESSION server_id = {server}, "
                            f"SESSION gtid_seq_no = {seq}")
                cur.execute(f"INSERT INTO {table} (d, s, n, pad) VALUES (%s, %s, %s, %s)",
                            (domain, server, seq, "y" * rnd.randrange(120)))
                steps.append(f"{server}-{seq}")
        cur.execute("SET SESSION gtid_domain_id = 0, SESSION server_id = 1")
        cur.execute("SHOW BINARY LOGS")
        logs = [row[0] for row in cur.fetchall()]
        self.names = logs[logs.index(first):]
        self.steps = steps
        # the server's view: every event of every file
        self.events = {}
        for name in self.names:
            cur.execute(f"SHOW BINLOG EVENTS IN '{name}'")
            self.events[name] = [(row[1], row[2], row[3], row[4], row[5]) for row in cur.fetchall()]
        self.occurrences: dict[str, list[tuple[str, int, int]]] = {}
        for name in self.names:
            evs = self.events[name]
            for i, (pos, etype, server_id, end, info) in enumerate(evs):
                if etype != "Gtid":
                    continue
                m = re.search(r"GTID (\d+-\d+-\d+)", info)
                last_end = end
                for pos2, et2, _, end2, _ in evs[i + 1:]:
                    if et2 in ("Gtid", "Rotate", "Stop", "Gtid_list", "Binlog_checkpoint", "Format_desc"):
                        break
                    last_end = end2
                self.occurrences.setdefault(m.group(1), []).append((name, pos, last_end))
        self.conn = conn

    def copy_to(self, d: Path) -> list[Path]:
        d.mkdir(parents=True)
        out = []
        for name in self.names:
            shutil.copyfile(self.srv.binlog_dir / name, d / name)
            out.append(d / name)
        (d / "master-bin.index").write_text("".join(f"./{n}\n" for n in self.names))
        return out

    def binlog_gtid_pos(self, name: str, offset: int) -> Position | None:
        cur = self.conn.cursor()
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (name, offset))
        v = cur.fetchone()[0]
        return None if v is None else Position.parse(v)


def _first_sent(logs, position: str, strict: bool):
    try:
        r = logs.replica_start(position, strict=strict)
    except NotFoundError as e:
        return ("refused", str(e))
    return None if r.first is None else str(r.first.gtid)


def _same(real, mine) -> bool:
    if isinstance(real, tuple) or isinstance(mine, tuple):
        return isinstance(real, tuple) and isinstance(mine, tuple) and \
            refusal_kind(real[1]) == refusal_kind(mine[1]) and not refusal_kind(real[1]).startswith("other")
    return real == mine


def listed_occurrences(loc) -> list | None:
    """Every occurrence gtidx lists with a Location (``occurrences``: all of
    them in file order, or empty for a GTID logged once), when it lists them."""
    v = getattr(loc, "occurrences", None)
    if v is None:
        return None
    return [(os.path.basename(x.file), x.start) for x in v] or [(os.path.basename(loc.file), loc.start)]


def sc_nonmono(ctx, rnd: random.Random, n: int) -> None:
    stats, sc = ctx.stats, "nonmono"
    srv = ctx.server()
    ctx.domain += 1
    h = History(srv, rnd, ctx.domain, "campaign_nonmono", ctx.history[n % len(ctx.history)] if ctx.history else None)
    base = ctx.work / f"nonmono-{n}"
    files = h.copy_to(base / "binlogs")
    detail = f"history {n} (domain {h.domain}, {len(h.names)} files): --history '{' '.join(h.steps)}'"
    stats.add(sc, "inputs")
    stats.add(sc, "files", len(h.names))
    dupes = sum(len(v) > 1 for v in h.occurrences.values())
    stats.add(sc, "GTIDs written more than once", dupes)
    # the server's answers
    offsets = []
    for name in h.names:
        evs = h.events[name]
        bounds = sorted({e[0] for e in evs} | {e[3] for e in evs})
        picks = rnd.sample(bounds, min(25, len(bounds))) + [b + 1 for b in rnd.sample(bounds, min(3, len(bounds)))]
        offsets += [(name, o) for o in picks]
    server_pos = {(name, o): h.binlog_gtid_pos(name, o) for name, o in offsets}
    gtids = sorted(h.occurrences)
    d = h.domain
    seqs = {int(g.split("-")[2]) for g in gtids if g.startswith(f"{d}-")}
    absent = []
    for _ in range(6):
        s = rnd.randint(1, max(seqs) + 20)
        g = f"{d}-{rnd.choice((1, 2))}-{s}"
        if g not in h.occurrences:
            absent.append(g)
    # replica positions: the server's states at group ends, and the same with
    # the history's domain at another occurrence of it
    positions = set()
    ends = [(name, e) for occ in h.occurrences.values() for name, _, e in occ]
    for name, e in rnd.sample(ends, min(6, len(ends))):
        p = h.binlog_gtid_pos(name, e)
        if p is None:
            continue
        positions.add(str(p))
        other = rnd.choice([g for g in gtids if g.startswith(f"{d}-")])
        positions.add(str(Position([Gtid.parse(other)] + [x for x in p if x.domain != d])))
    positions = sorted(positions)[:8]
    real = {}
    for i, p in enumerate(positions):
        for strict in (False, True):
            ctx.replica_id += 1
            real[(p, strict)] = real_replica_first(srv, p, ctx.replica_id, strict)
    stats.add(sc, "real replica connections", len(real))
    # gtidx, three ways
    from gtidx.tail import TailSettings, Tailer
    layouts = [("no index", None), ("page 64 span 1", dict(page_size=64, span_min=1, max_ratio=None)),
               ("default", dict())]
    by_layout: dict[str, dict] = {}          # layout -> {question: answer}: an index must not change one
    for lname, kw in layouts:
        mine = by_layout.setdefault(lname, {})
        for p in files:
            Path(str(p) + ".idx").unlink(missing_ok=True)
        if kw is not None:
            Tailer(str(base / "binlogs"), TailSettings(server_grace=0, **kw)).run(once=True)
        where = f"{lname}; {detail}"
        try:
            with Deadline(ctx.timeout), api.BinlogSeries([str(p) for p in files], use_index=kw is not None) as logs:
                for (name, o), want in server_pos.items():
                    try:
                        got = logs.state_at(base / "binlogs" / name, o).position
                    except NotFoundError:
                        got = None
                    stats.add(sc, "answers")
                    mine[("state_at", name, o)] = got
                    if got != want:
                        stats.add(sc, f"wrong state_at, {lname}")
                        stats.problem(sc, "wrong", f"state_at({name}, {o}) [{where}]",
                                      f"gtidx {got}, BINLOG_GTID_POS {want}")
                for g in gtids:
                    occ = h.occurrences[g]
                    try:
                        loc = logs.locate(g)
                        got = (os.path.basename(loc.file), loc.start, loc.end)
                        listed = listed_occurrences(loc)
                    except NotFoundError as e:
                        got, listed = f"not found: {e}", None
                    stats.add(sc, "answers")
                    mine[("locate", g)] = got if isinstance(got, tuple) else "not found"
                    if got != occ[0]:
                        stats.add(sc, f"wrong locate, {lname}")
                        stats.problem(sc, "wrong", f"locate({g}) [{where}]",
                                      f"gtidx {got}; the binlogs hold it at {occ}")
                    if "every" in logs.locate.__code__.co_varnames:
                        # locate(every=True) scans every binlog: its list must be complete
                        try:
                            full = listed_occurrences(logs.locate(g, every=True))
                        except NotFoundError as e:
                            full = f"not found: {e}"
                        stats.add(sc, "answers")
                        stats.add(sc, "locate(every=True) lists checked")
                        if full != [(f, s) for f, s, _ in occ]:
                            stats.add(sc, f"wrong locate(every=True), {lname}")
                            stats.problem(sc, "wrong", f"locate({g}, every=True).occurrences [{where}]",
                                          f"gtidx lists {full}; the binlogs hold it at {occ}")
                    if listed is not None:
                        stats.add(sc, "occurrence lists checked")
                        if listed != [(f, s) for f, s, _ in occ]:
                            # the answer (the first) is right; the list is
                            # extra: gtidx lists repeats only where the files'
                            # start states show the seq going back
                            stats.note(sc, "occurrence lists incomplete", f"locate({g}).occurrences [{where}]",
                                       f"gtidx lists {listed}; the binlogs hold it at {occ}")
                for g in absent:
                    stats.add(sc, "answers")
                    try:
                        loc = logs.locate(g)
                        stats.add(sc, f"wrong locate, {lname}")
                        stats.problem(sc, "wrong", f"locate({g}) [{where}]",
                                      f"gtidx {loc.file} {loc.start}; never written")
                    except NotFoundError:
                        pass
                for (p, strict), want in real.items():
                    got = _first_sent(logs, p, strict)
                    stats.add(sc, "answers")
                    mine[("replica_start", p, strict)] = got if not isinstance(got, tuple) else refusal_kind(got[1])
                    if not _same(want, got):
                        stats.add(sc, f"wrong replica_start, {lname}")
                        stats.problem(sc, "wrong", f"replica_start({p}, strict={strict}) [{where}]",
                                      f"gtidx {got}; a real replica gets {want}")
        except Hang:
            stats.problem(sc, "hang", f"lookups [{where}]")
        except GtidxError as e:
            stats.problem(sc, "wrong", f"lookups [{where}]", f"GtidxError: {e}")
        except Exception:
            stats.problem(sc, "crash", f"lookups [{where}]", traceback.format_exc())
    scan = by_layout.get("no index", {})
    for lname, mine in by_layout.items():
        if lname == "no index":
            continue
        differ = [k for k in mine if k in scan and mine[k] != scan[k]]
        stats.add(sc, f"index answers compared with the scan's, {lname}", len(mine))
        if differ:
            stats.add(sc, f"index answer differs from the scan's, {lname}", len(differ))
    # the CLI, as a user runs it, for two GTIDs that occur more than once (or any)
    multi = [g for g in gtids if len(h.occurrences[g]) > 1] or gtids
    for g in rnd.sample(multi, min(2, len(multi))):
        r = run_gtidx(["seek", "--gtid", g, base / "binlogs"], timeout=ctx.timeout)
        if judge_cli(stats, sc, r, detail) != "ok":
            if r.rc in OK_CODES and not r.hung:
                stats.problem(sc, "wrong", f"{r.cmd}", f"exit {r.rc}: {r.err.strip()[-300:]}; "
                                                       f"the binlogs hold it at {h.occurrences[g]}")
            continue
        name, s, _ = h.occurrences[g][0]
        m = re.match(r"(\S+) (\S+) start (\d+)", r.out)
        if not m or (os.path.basename(m.group(2)), int(m.group(3))) != (name, s):
            stats.problem(sc, "wrong", r.cmd, f"printed {r.out.strip()!r}; first occurrence {name} {s}")
    h.conn.close()
    shutil.rmtree(base, ignore_errors=True)


# -- the campaign --------------------------------------------------------------------------------

class Context:
    def __init__(self, work: Path, stats: Stats, timeout: float):
        self.work = work
        self.stats = stats
        self.timeout = timeout
        self.mats = materials()
        self.learners: dict = {}
        self.clean = Clean(work / "clean")
        self._server = None
        self.shrink_targets: tuple = ()
        self.history: list[str] | None = None
        self.domain = 9                  # each history gets a fresh domain: 10, 11, ...
        self.replica_id = 5000

    def server(self):
        if self._server is None:
            from tools.mariadb import MariaDB
            self._server = MariaDB(self.work / "mariadb", {"gtid_strict_mode": "0"}).start()
        return self._server

    def close(self):
        if self._server is not None:
            self._server.stop()


RUNNERS = {"links": sc_links, "shrink": sc_shrink, "fifo": sc_fifo, "diskfull": sc_diskfull,
           "denied": sc_denied, "vanish": sc_vanish, "race": sc_race, "nonmono": sc_nonmono}


def campaign(seed: int, scenarios=SCENARIOS, runs: int | None = None, seconds: float | None = None,
             timeout: float = 20.0, work: str | None = None, progress=None, shrink_targets=(),
             history: str | None = None) -> Stats:
    loggers = [(logging.getLogger(n), lv) for n, lv in (("gtidx", logging.CRITICAL),
                                                         ("pymysqlreplication", logging.ERROR))]
    saved = [lg.level for lg, _ in loggers]
    for lg, lv in loggers:
        lg.setLevel(lv)                  # restored after: tests call this in their own process
    try:
        return _campaign(seed, scenarios, runs, seconds, timeout, work, progress, shrink_targets, history)
    finally:
        for (lg, _), lv in zip(loggers, saved):
            lg.setLevel(lv)


def _campaign(seed, scenarios, runs, seconds, timeout, work, progress, shrink_targets, history) -> Stats:
    stats = Stats()
    tmp = Path(tempfile.mkdtemp(prefix="gtidx-campaign-", dir=work))
    ctx = Context(tmp, stats, timeout)
    ctx.shrink_targets = tuple(shrink_targets)
    ctx.history = [h.split() for h in history.split(";")] if history else None
    t_start = time.monotonic()
    try:
        for k, sc in enumerate(scenarios):
            rnd = random.Random(f"{seed}/{sc}")
            share = None if seconds is None else seconds / len(scenarios)
            t0 = time.monotonic()
            i = 0
            while True:
                if runs is not None and i >= runs:
                    break
                if share is not None and time.monotonic() - t0 >= share:
                    break
                try:
                    RUNNERS[sc](ctx, random.Random(rnd.getrandbits(64)), i)
                except Hang:
                    stats.problem(sc, "hang", f"round {i}", traceback.format_exc())
                except Exception:
                    stats.problem(sc, "crash", f"harness, round {i}", traceback.format_exc())
                i += 1
                if progress:
                    progress(sc, i, stats, time.monotonic() - t0)
            stats.add(sc, "seconds", round(time.monotonic() - t0))
    finally:
        ctx.close()
        for m in sorted(tmp.glob("diskfull-*")):
            subprocess.run(["umount", str(m)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    stats.seconds = time.monotonic() - t_start
    return stats


def table(stats: Stats) -> str:
    lines = []
    for sc, c in stats.sc.items():
        lines.append(f"{sc}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    lines.append(f"failures: {stats.failures()}")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--reader":
        return reader_main(sys.argv[2])
    ap = argparse.ArgumentParser(prog="campaign", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help=f"comma-separated, of: {', '.join(SCENARIOS)}")
    ap.add_argument("--seed", type=int, default=1)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--runs", type=int, help="rounds per scenario (default 3 unless --seconds)")
    g.add_argument("--seconds", type=float, help="run for this long in all (split between scenarios)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per command before it counts as a hang")
    ap.add_argument("--work", help="directory for the temporary files (default: $TMPDIR)")
    ap.add_argument("--shrink-targets", help="shrink: only these targets (comma-separated): "
                                              + ", ".join(sorted(set(SHRINK_TARGETS))))
    ap.add_argument("--history", help="nonmono: this history instead of random ones (a reproducer): "
                                      "FLUSH, 0 (a domain-0 transaction) or S-N (server S logs seq_no N), "
                                      "space-separated; several histories (one per round, each in a "
                                      "fresh domain): separated by ';'")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    targets = tuple(t.strip() for t in args.shrink_targets.split(",")) if args.shrink_targets else ()
    for t in targets:
        if t not in SHRINK_TARGETS:
            ap.error(f"unknown shrink target {t!r}")
    scenarios = tuple(s for s in args.scenarios.split(",") if s)
    for s in scenarios:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s}; one of {', '.join(SCENARIOS)}")
    if os.geteuid() != 0 and ({"links", "diskfull", "denied", "vanish"} & set(scenarios)):
        ap.error("links, diskfull, denied and vanish mount tmpfs/ramfs or change owners: run as root")
    runs = args.runs if args.runs is not None or args.seconds is not None else 3

    def progress(sc, i, st, el):
        if not args.quiet:
            c = st.c(sc)
            print(f"... {sc}: {i} rounds, {c['answers']} answers, {c['wrong']} wrong, {c['crash']} crashes, "
                  f"{c['hang']} hangs, {c['unclear']} unclear, {el:.0f} s", file=sys.stderr)
    stats = campaign(args.seed, scenarios, runs, args.seconds, args.timeout, args.work, progress, targets,
                     args.history)
    if args.json:
        d = stats.as_dict()
        d.update(seed=args.seed, seconds=round(stats.seconds, 1))
        print(json.dumps(d, indent=1))
    else:
        print(f"tools/campaign --seed {args.seed}")
        print(table(stats))
        for ex in stats.examples[:20]:
            print(f"\n{ex['what']}: [{ex['scenario']}] {ex['detail']}\n  {ex['info']}")
    return 1 if stats.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
