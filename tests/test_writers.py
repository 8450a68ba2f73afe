"""Everything gtidx writes, under hostile and failing filesystems: links
planted at the names it writes, readers holding an index open, binlogs still
being written, full and read-only filesystems, a vanishing directory,
filesystems without user xattrs, `build --force` racing `tail`, SIGINT."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from gtidx import admin
from gtidx.binlog.mariadb import Binlog
from gtidx.index.build import build_index
from gtidx.index.files import IndexMeta, index_path, open_index
from gtidx.index.meta import XATTR, sidecar_path
from gtidx.tail import IncrementalIndex, TailSettings, Tailer

M1011 = FIXTURES / "mariadb-10.11"
M118 = FIXTURES / "mariadb-11.8"
VICTIM = b"precious: must never be written by gtidx\n"


def growing_copy(data: bytes, n: int | None = None) -> bytes:
    """A binlog as its server has it while writing: the FDE's IN_USE flag set
    (the server computes the FDE's CRC with the flag clear)."""
    part = bytearray(data if n is None else data[:n])
    part[21] |= 1
    return bytes(part)


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "gtidx", *map(str, args)]


def clean(binlog: Path, tmp: Path, **kw) -> bytes:
    out = tmp / f"clean-{binlog.name}.idx"
    build_index(binlog, out=str(out), force=True, **kw)
    return out.read_bytes()


def binlog_names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name[-6:].isdigit())


@contextlib.contextmanager
def mounted(where: Path, fstype: str, options: str = ""):
    where.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", fstype, *(["-o", options] if options else []), fstype, str(where)],
                   check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory: Path) -> Path:
    """Fill the filesystem of ``directory`` to the last byte."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


MIXED = M118 / "mixed" / "master-bin.000002"


def tail_step(binlog: Path, data: bytes, keep_open: bool = False) -> tuple[IncrementalIndex, str]:
    """``binlog`` now holds ``data``: one start (resume or fresh) and one
    advance of its incremental index, as a restarted tail does."""
    binlog.write_bytes(data)
    with Binlog(binlog) as b:
        inc = IncrementalIndex(str(binlog), page_size=512, span_min=2048)
        how = inc.start(b)
        inc.advance(b)
    if not keep_open:
        inc.close()
    return inc, how


# -- item 5: links planted at the names gtidx writes ------------------------------------------

def test_planted_links_are_never_followed(tmp_path):
    """A link planted at the temporary name, at FILE.idx (live and dangling)
    and at the sidecar name points outside: build, build --force and tail
    replace the names, the victims stay as they were, nothing is created
    outside."""
    d = tmp_path / "binlogs"
    shutil.copytree(M1011 / "multifile", d)
    names = binlog_names(d)
    closed, live = d / names[0], d / names[-1]
    live.write_bytes(growing_copy(live.read_bytes()))
    victims = {}

    def plant(name: str, dangling: bool = False) -> Path:
        victim = tmp_path / f"victim-{len(victims)}"
        if not dangling:
            victim.write_bytes(VICTIM)
        victims[victim] = dangling
        link = d / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(victim)
        return link

    pid = os.getpid()
    for binlog in (closed, live):
        plant(f".{binlog.name}.idx.{pid}.tmp")           # the old temporary name of this process
    plant(f"{closed.name}.idx")
    build_index(closed)
    plant(f"{closed.name}.idx")
    build_index(closed, force=True)
    plant(f"{live.name}.idx", dangling=True)
    build_index(live, force=True)
    plant(f"{live.name}.idx")
    plant(f".{live.name}.idx.gtidx")
    plant(f"{names[1]}.idx", dangling=True)
    os.mkfifo(d / f"{names[2]}.idx")                         # never opened: it would block
    build_index(d / names[2])
    assert Path(index_path(d / names[2])).is_file()
    os.replace(d / f"{names[2]}.idx", tmp_path / "built")
    os.mkfifo(d / f"{names[2]}.idx")
    Tailer(str(d), TailSettings(server_grace=0, page_size=256, span_min=1024)).run(once=True)
    for victim, dangling in victims.items():
        if dangling:
            assert not victim.exists() and not victim.is_symlink(), victim
        else:
            assert victim.read_bytes() == VICTIM, victim
    for binlog in (closed, d / names[1], d / names[2], live):
        idx = Path(index_path(binlog))
        assert not idx.is_symlink() and idx.is_file()
        with Binlog(binlog) as b:
            st = open_index(b)
            assert st.usable and st.owner == "gtidx", (binlog, st.reason)
            st.close()


def test_tail_refuses_a_hard_link_as_its_index(tmp_path):
    """FILE.idx hard-linked to another file (with a copied fingerprint): tail
    neither appends to it nor cuts it; it writes a new file under the name."""
    d = tmp_path / "binlogs"
    d.mkdir()
    src = MIXED.read_bytes()
    binlog = d / MIXED.name
    tail_step(binlog, growing_copy(src, 2_000_000))
    other = tmp_path / "other"
    os.link(index_path(binlog), other)                  # same inode, two names
    before = other.read_bytes()
    _, how = tail_step(binlog, growing_copy(src, 3_000_000))
    assert other.read_bytes() == before
    assert how.startswith("fresh (cannot reopen")


# -- item 6: an index never shrinks in place --------------------------------------------------

def test_resume_with_a_torn_page_does_not_shrink_the_old_file(tmp_path):
    src = MIXED.read_bytes()
    binlog = tmp_path / MIXED.name
    tail_step(binlog, growing_copy(src, 2_000_000))
    idx = Path(index_path(binlog))
    with open(idx, "ab") as f:
        f.write(b"\x01" * 100)                          # a torn page: the kill hit a write
    torn = idx.stat().st_size
    reader = os.open(idx, os.O_RDONLY)                  # a long-lived reader (it may map the file)
    try:
        assert tail_step(binlog, growing_copy(src, 2_000_000))[1] == "resumed"
        assert os.fstat(reader).st_size == torn         # the reader's file was not cut
        assert os.fstat(reader).st_ino != idx.stat().st_ino
    finally:
        os.close(reader)
    assert idx.stat().st_size % 512 == 0
    binlog.write_bytes(src)
    with Binlog(binlog) as b:
        inc = IncrementalIndex(str(binlog), page_size=512, span_min=2048)
        inc.start(b)
        inc.finish(b, max_ratio=None)
    assert idx.read_bytes() == clean(binlog, tmp_path, page_size=512, span_min=2048, max_ratio=None)


# -- item 7: build leaves a binlog still being written alone ----------------------------------

def test_build_never_indexes_a_binlog_still_being_written(tmp_path):
    """The newest binlog with IN_USE set is being written: plain build skips
    it (even with no index yet), --force indexes it. An older binlog with
    IN_USE set was left by a crashed server: it is final and gets indexed."""
    d = tmp_path / "binlogs"
    shutil.copytree(M1011 / "multifile", d)
    names = binlog_names(d)
    crashed, live = d / names[1], d / names[-1]
    crashed.write_bytes(growing_copy(crashed.read_bytes()))
    live.write_bytes(growing_copy(live.read_bytes(), live.stat().st_size - 3000))
    r = subprocess.run(cli("build", "--json", d), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not Path(index_path(live)).exists()
    assert Path(index_path(crashed)).exists()
    for name in names[:-1]:
        assert Path(index_path(d / name)).exists(), name
    r = subprocess.run(cli("build", live), capture_output=True, text=True)
    assert r.returncode == 0 and "skipped (binlog still being written" in r.stdout
    assert not Path(index_path(live)).exists()
    r = subprocess.run(cli("build", "--force", live), capture_output=True, text=True)
    assert r.returncode == 0 and Path(index_path(live)).exists()
    # tail agrees: it follows the live one, finishes the crashed one
    Tailer(str(d), TailSettings(server_grace=0, max_ratio=None, page_size=256, span_min=1024)).run(once=True)
    assert IndexMeta.read(index_path(live)).partial
    assert not IndexMeta.read(index_path(crashed)).partial


@pytest.mark.live
def test_build_skips_the_live_servers_active_binlog(live_server, tmp_path):
    """The server's own active binlog (IN_USE set by the server), copied as it
    is being written: build leaves it; after the server rotates it, it is
    closed and build indexes it."""
    live_server.sql("CREATE DATABASE IF NOT EXISTS gtidx_w")
    live_server.sql("CREATE TABLE IF NOT EXISTS gtidx_w.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200))")
    live_server.sql("FLUSH BINARY LOGS")
    for i in range(20):
        live_server.sql("INSERT INTO gtidx_w.t (v) VALUES (%s)", (f"row {i}",))
    active = live_server.sql("SHOW MASTER STATUS")[0][0]

    def copy() -> Path:
        d = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        for name in [active, "master-bin.index"]:
            shutil.copyfile(live_server.binlog_dir / name, d / name)
        (d / "master-bin.index").write_text(f"./{active}\n")
        return d

    d = copy()
    with Binlog(d / active) as b:
        assert b.growing                                     # the server's flag, not ours
    r = subprocess.run(cli("build", d), capture_output=True, text=True)
    assert r.returncode == 0 and "skipped (binlog still being written" in r.stdout, r.stdout + r.stderr
    assert not Path(index_path(d / active)).exists()
    live_server.sql("FLUSH BINARY LOGS")                     # rotated: the server closes it
    d = copy()
    r = subprocess.run(cli("build", d), capture_output=True, text=True)
    assert r.returncode == 0 and Path(index_path(d / active)).exists(), r.stdout + r.stderr


def test_tail_finishes_the_index_of_a_crashed_servers_binlog(tmp_path):
    """tail followed the newest binlog; the server crashed (IN_USE stays set)
    and started again with a new binlog: the old one is final, and tail
    finishes its partial index (a usable partial index is not a finished one)."""
    d = tmp_path / "binlogs"
    shutil.copytree(M1011 / "multifile", d)
    names = binlog_names(d)
    crashed = d / names[-2]
    data = crashed.read_bytes()
    with Binlog(crashed) as b:
        cut = [e for _, e, _ in b.group_spans()][-5]       # the crash hit between two groups
    crashed.write_bytes(growing_copy(data, cut))
    newest = d / names[-1]
    newest.unlink()
    (d / "master-bin.index").write_text("".join(f"./{n}\n" for n in names[:-1]))
    settings = TailSettings(server_grace=0, page_size=256, span_min=1024, max_ratio=None)
    Tailer(str(d), settings).run(once=True)
    assert IndexMeta.read(index_path(crashed)).partial
    shutil.copyfile(M1011 / "multifile" / names[-1], newest)     # the restarted server's binlog
    (d / "master-bin.index").write_text("".join(f"./{n}\n" for n in names))
    Tailer(str(d), settings).run(once=True)
    assert not IndexMeta.read(index_path(crashed)).partial
    assert Path(index_path(crashed)).read_bytes() == clean(crashed, tmp_path, page_size=256, span_min=1024,
                                                           max_ratio=None)


# -- item 9: a sidecar keeps running --------------------------------------------------------

class TailProcess:
    """`gtidx tail` retrying quickly (at most 0.2 s apart), its log in a file."""

    def __init__(self, d: Path, *extra, log: Path, prefix=(), cwd=None):
        self.log_path = log
        with open(log, "w") as err:
            self.proc = subprocess.Popen([*prefix, *cli("tail", d, "--interval", 0.02, "--retry-max", 0.2,
                                                        *extra)],
                                         stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)

    def log(self) -> str:
        return self.log_path.read_text()

    def errors_logged(self, n: int) -> None:
        """Wait for ``n`` error lines, then long enough for ~5 more retries
        of each (which must not log again)."""
        assert wait_for(lambda: len(error_lines(self.log())) >= n), self.log()
        time.sleep(1.0)
        assert self.proc.poll() is None, self.log()

    def stop(self) -> str:
        assert self.proc.poll() is None, "tail died"
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == 0, self.log()[-2000:]
        return self.log()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(cond, timeout=30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def indexes_clean(d: Path, tmp: Path, **kw) -> bool:
    """Every closed binlog's index equals a clean build."""
    for name in binlog_names(d):
        idx = Path(index_path(d / name))
        try:
            if idx.read_bytes() != clean(d / name, tmp, **kw):
                return False
        except OSError:
            return False
    return True


def leftovers(d: Path) -> list[str]:
    return [p.name for p in d.iterdir() if p.name.endswith(".tmp")
            or (p.name.endswith(".idx") and p.stat().st_size == 0)]


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "level=error" in ln]


def live_copy(d: Path) -> tuple[list[str], Path, bytes]:
    """The 10.11 multifile binlogs copied to ``d``, the newest half written
    (IN_USE set): (names, newest, its whole content)."""
    shutil.copytree(M1011 / "multifile", d)
    names = binlog_names(d)
    last = d / names[-1]
    data = last.read_bytes()
    last.write_bytes(growing_copy(data, len(data) // 2))
    return names, last, data


def finish(last: Path, data: bytes) -> None:
    """The newest binlog finished as a server finishes it: the rest appended,
    then its header's IN_USE flag cleared in place (never truncated and
    written again: a tail reading meanwhile would see it shrink)."""
    have = last.read_bytes()
    with open(last, "r+b") as f:
        f.seek(len(have))
        f.write(data[len(have):])
        f.flush()
        for i in (i for i in range(len(have)) if have[i] != data[i]):
            f.seek(i)
            f.write(data[i:i + 1])


def logged_once_per_file(err: str, names: list[str], *words: str) -> None:
    """One error line per file (for one condition), naming it, and one
    recovery line per file."""
    errors = error_lines(err)
    assert len(errors) == len(names), err
    assert all(any(w in ln for w in words) for ln in errors), errors
    assert err.count("event=recovered") == len(names), err


def test_tail_survives_a_full_disk(tmp_path):
    """Closed binlogs (built whole) and the active one (pages as they fill)
    on a full tmpfs: no empty index, no temporary file, one line per file;
    once there is space, every index is what a clean build writes."""
    small = ("--page-size", 256, "--span-min", 1024)
    kw = dict(page_size=256, span_min=1024)
    with mounted(tmp_path / "mnt", "tmpfs", "size=1m") as mnt:
        d = mnt / "binlogs"
        names, last, data = live_copy(d)
        filler = fill(mnt)
        r = subprocess.run(cli("tail", "--once", d, *small), capture_output=True, text=True)
        assert r.returncode == 3, r.stderr
        assert leftovers(d) == []
        t = TailProcess(d, *small, log=tmp_path / "tail.log")
        try:
            t.errors_logged(len(names))
            assert leftovers(d) == []
            assert not Path(index_path(last)).exists()
            filler.unlink()
            assert wait_for(lambda: (IndexMeta.read(index_path(last)) or IndexMeta(0, 0, 0)).partial)
            finish(last, data)                           # rotated
            assert wait_for(lambda: indexes_clean(d, tmp_path, **kw))
            err = t.stop()
        finally:
            t.kill()
        logged_once_per_file(err, names, "No space left")


def test_tail_survives_a_read_only_filesystem(tmp_path):
    with mounted(tmp_path / "mnt", "tmpfs", "size=8m") as mnt:
        d = mnt / "binlogs"
        shutil.copytree(M1011 / "multifile", d)
        names = binlog_names(d)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        t = TailProcess(d, log=tmp_path / "tail.log")
        try:
            t.errors_logged(len(names))
            subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True)
            assert wait_for(lambda: indexes_clean(d, tmp_path))
            err = t.stop()
        finally:
            t.kill()
            subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=False)
        logged_once_per_file(err, names, "Read-only")
        assert leftovers(d) == []


def test_tail_survives_permission_denied(tmp_path):
    """tail as an unprivileged user in a directory it may read but not
    write (started in it: the test's parent directories are root's alone)."""
    d = tmp_path / "binlogs"
    shutil.copytree(M1011 / "multifile", d)
    os.chmod(d, 0o755)
    names = binlog_names(d)
    t = TailProcess(Path("."), log=tmp_path / "tail.log", cwd=d,
                    prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    try:
        t.errors_logged(len(names))
        os.chmod(d, 0o777)
        assert wait_for(lambda: indexes_clean(d, tmp_path))
        err = t.stop()
    finally:
        t.kill()
    logged_once_per_file(err, names, "Permission denied")
    assert leftovers(d) == []


def test_tail_survives_its_directory_vanishing(tmp_path):
    d = tmp_path / "binlogs"
    names, last, data = live_copy(d)
    t = TailProcess(d, log=tmp_path / "tail.log")

    def listing() -> list[str]:
        return [ln for ln in t.log().splitlines() if "cannot list binlogs" in ln]
    try:
        assert wait_for(lambda: IndexMeta.read(index_path(d / names[0])) is not None)
        away = tmp_path / "away"
        d.rename(away)                                       # gone mid-poll
        t.errors_logged(1)
        assert len(listing()) == 1
        away.rename(d)                                       # back, and the server goes on
        finish(last, data)                               # rotated: closed and complete
        assert wait_for(lambda: indexes_clean(d, tmp_path))
        while d.exists():                                    # removed altogether (tail may race rmtree)
            shutil.rmtree(d, ignore_errors=True)
        assert wait_for(lambda: len(listing()) >= 2)
        shutil.copytree(M1011 / "multifile", d)              # and recreated
        assert wait_for(lambda: indexes_clean(d, tmp_path))
        err = t.stop()
    finally:
        t.kill()
    # once per disappearance (rmtree may show a half-removed directory first)
    assert 2 <= len(listing()) <= 4, err
    assert err.count("event=recovered") >= 2, err


# -- item 13: filesystems without user xattrs ---------------------------------------------------

def test_tail_and_status_without_xattrs(tmp_path):
    """ramfs rejects user xattrs: our indexes are still ours (a sidecar file
    holds the fingerprint), and a restarted tail goes on with the active one."""
    with mounted(tmp_path / "mnt", "ramfs") as mnt:
        d = mnt / "binlogs"
        names, last, data = live_copy(d)
        victim = tmp_path / "victim"
        victim.write_bytes(VICTIM)
        Path(sidecar_path(index_path(last))).symlink_to(victim)     # planted at the sidecar's name
        settings = TailSettings(server_grace=0, page_size=256, span_min=1024, max_ratio=None)
        Tailer(str(d), settings).run(once=True)
        with pytest.raises(OSError):
            os.getxattr(index_path(last), XATTR)
        assert victim.read_bytes() == VICTIM
        assert Path(sidecar_path(index_path(last))).is_file()
        assert not Path(sidecar_path(index_path(last))).is_symlink()
        rows = {Path(r.file).name: r for r in admin.binlog_status(d)}
        assert {r.state for r in rows.values()} == {"complete", "partial"}, rows
        assert rows[names[-1]].state == "partial"
        reached = rows[names[-1]].indexed_to
        last.write_bytes(growing_copy(data, len(data) - 2000))
        Tailer(str(d), settings).run(once=True)              # a restarted tail
        row = {Path(r.file).name: r for r in admin.binlog_status(d)}[names[-1]]
        assert row.state == "partial" and row.indexed_to > reached
        finish(last, data)
        Tailer(str(d), settings).run(once=True)
        for name in names:
            assert Path(index_path(d / name)).read_bytes() == clean(
                d / name, tmp_path, page_size=256, span_min=1024, max_ratio=None), name
        assert {r.state for r in admin.binlog_status(d)} == {"complete"}
        # a sidecar left from another file at that name is not believed
        idx = Path(index_path(d / names[0]))
        shutil.copyfile(idx, d / "copy")                    # same bytes, another inode
        os.replace(d / "copy", idx)
        assert IndexMeta.read(str(idx)) is None


# -- item 14: build --force racing tail; SIGINT ------------------------------------------------

def test_tail_never_stamps_an_index_build_put_in_its_place(tmp_path):
    src = MIXED.read_bytes()
    binlog = tmp_path / MIXED.name
    inc, _ = tail_step(binlog, growing_copy(src, 2_000_000), keep_open=True)
    build_index(binlog, force=True)                         # renames its index in
    built = Path(index_path(binlog)).read_bytes()
    meta = IndexMeta.read(index_path(binlog))
    binlog.write_bytes(growing_copy(src, 3_000_000))
    with Binlog(binlog) as b:
        assert inc.advance(b) > 0                           # saves progress
    assert Path(index_path(binlog)).read_bytes() == built
    assert IndexMeta.read(index_path(binlog)) == meta and not meta.partial
    assert inc.replaced()
    inc.close()
    # the Tailer notices and starts over: the live binlog's index is tail's again
    settings = TailSettings(server_grace=0, page_size=512, span_min=2048, max_ratio=None)
    t = Tailer(str(tmp_path), settings)
    t.poll()
    build_index(binlog, force=True)
    binlog.write_bytes(growing_copy(src, 3_500_000))
    t.poll()
    assert IndexMeta.read(index_path(binlog)).partial
    binlog.write_bytes(src)
    t.poll()
    for inc in t.active.values():
        inc.close()
    assert Path(index_path(binlog)).read_bytes() == clean(binlog, tmp_path, page_size=512, span_min=2048,
                                                          max_ratio=None)


def test_sigint_during_build_leaves_no_temporary_file(tmp_path, monkeypatch):
    """KeyboardInterrupt while the index is written: no temporary file, the
    old index untouched."""
    binlog = tmp_path / "master-bin.000004"
    shutil.copyfile(M1011 / "bigtrx" / "master-bin.000004", binlog)
    build_index(binlog, page_size=1024)
    before = Path(index_path(binlog)).read_bytes()

    def interrupted(fd):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(binlog, force=True)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert Path(index_path(binlog)).read_bytes() == before


def test_sigint_just_after_the_temporary_file_is_created(tmp_path, monkeypatch):
    """KeyboardInterrupt landing after the exclusive open created the file but
    before its name reached the writer (tools/campaign race: about one SIGINT
    in 30 did): still no temporary file left."""
    binlog = tmp_path / "master-bin.000004"
    shutil.copyfile(M1011 / "bigtrx" / "master-bin.000004", binlog)
    real_open = os.open

    def open_then_interrupted(path, flags, *a, **kw):
        fd = real_open(path, flags, *a, **kw)
        if flags & os.O_EXCL:
            os.close(fd)
            raise KeyboardInterrupt
        return fd
    monkeypatch.setattr(os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(binlog, force=True)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert not Path(index_path(binlog)).exists()


def test_tail_removes_temporary_files_of_killed_writers(tmp_path):
    """A tail killed between creating a new index (or sidecar) file and
    renaming it left `.NAME.idx.PID.RANDOM.tmp`: the next tail removes it
    when that process is gone."""
    src = (M118 / "mixed" / "master-bin.000002").read_bytes()
    binlog = tmp_path / "master-bin.000002"
    binlog.write_bytes(growing_copy(src, 1_000_000))
    dead = [tmp_path / ".master-bin.000002.idx.4194311.0123abcd.tmp",        # above any pid_max
            tmp_path / ".master-bin.000002.idx.gtidx.4194311.0123abcd.tmp"]
    alive = tmp_path / f".master-bin.000002.idx.{os.getppid()}.0123abcd.tmp"
    for p in dead + [alive]:
        p.write_bytes(b"half an index")
    t = Tailer(str(tmp_path), TailSettings(server_grace=0, page_size=512, span_min=2048))
    t.run(once=True)
    assert not any(p.exists() for p in dead) and alive.exists()


def test_index_meta_round_trip_and_junk():
    """One owner reads what it writes; anything else at the xattr is no
    fingerprint (the index then counts as not gtidx's)."""
    from gtidx.index.meta import Progress
    m = IndexMeta(123, 4, 5, state=Progress.PARTIAL, page_size=512, span_min=2048, processed=99, records=3,
                  updated=1.5)
    assert IndexMeta.decode(m.encode()) == m
    assert IndexMeta.decode(IndexMeta(7, 8, 9).encode()) == IndexMeta(7, 8, 9)
    legacy = b'{"v":1,"size":7,"head_crc32":8,"tail_crc32":9}'          # gtidx build before states
    assert IndexMeta.decode(legacy) == IndexMeta.from_json(legacy) == IndexMeta(7, 8, 9)
    old = (b'{"v":1,"size":123,"head_crc32":4,"tail_crc32":5,"state":"partial","page_size":512,'
           b'"span_min":2048,"processed":99,"records":3,"updated":1.5}')      # what gtidx stored before the layout
    assert IndexMeta.decode(old) == m
    for junk in (b"", b"[]", b"null", b'{"v":2,"size":1,"head_crc32":1,"tail_crc32":1}',
                 b'{"v":1,"size":"1","head_crc32":1,"tail_crc32":1}', b'{"v":1,"size":1}',
                 b'{"v":1,"size":1,"head_crc32":1,"tail_crc32":1,"state":"half"}',
                 b'{"v":1,"size":true,"head_crc32":1,"tail_crc32":1}', b"\xff\xfe"):
        assert IndexMeta.from_json(junk) is None and IndexMeta.decode(junk) is None, junk
    raw = m.encode()
    for junk in (raw[:-1], raw + b"\0", b"GTXN" + raw[4:], raw[:4] + b"\x01" + raw[5:],
                 raw[:5] + b"\x02" + raw[6:], raw[:6] + b"\xff\xff" + raw[8:], raw[:10]):
        assert IndexMeta.decode(junk) is None, junk


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
       st.sampled_from(["partial", "complete"]),
       st.fixed_dictionaries({}, optional={
           "page_size": st.integers(0, 2**32 - 1), "span_min": st.integers(0, 2**64 - 1),
           "processed": st.integers(0, 2**64 - 1), "records": st.integers(0, 2**64 - 1),
           "updated": st.floats(allow_nan=False), "head_adler32": st.integers(0, 2**32 - 1),
           "tail_adler32": st.integers(0, 2**32 - 1), "binlog_etag": st.text(max_size=80)}),
       st.one_of(st.none(), st.tuples(
           st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1),
                              st.integers(0, 2**64 - 1)), max_size=20),
           st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)), max_size=20))),
       st.data())
def test_index_meta_layout_reads_back_what_it_writes_and_nothing_cut(size, head, tail, state, extra, seen, data):
    """Any fingerprint reads back equal from its stored bytes (the seen ranges
    as a sorted set, as the JSON of before read them); the same bytes cut
    short, or with a byte more, read as no fingerprint; any single byte
    changed reads as no fingerprint or as some fingerprint (never an error)."""
    from gtidx.index.meta import Progress
    if seen is not None:
        extra = {**extra, "ranges": tuple(sorted(set(seen[0]))), "repeats": tuple(sorted(set(seen[1])))}
    m = IndexMeta(size, head, tail, Progress(state), **extra)
    raw = m.encode()
    assert IndexMeta.decode(raw) == m
    cut = data.draw(st.integers(0, len(raw) - 1))
    assert IndexMeta.decode(raw[:cut]) is None and IndexMeta.decode(raw + b"\0") is None
    at, byte = data.draw(st.integers(0, len(raw) - 1)), data.draw(st.integers(0, 255))
    changed = IndexMeta.decode(raw[:at] + bytes([byte]) + raw[at + 1:])
    assert changed is None or isinstance(changed, IndexMeta)


def test_tail_keeps_going_when_it_cannot_replace_the_catalog(tmp_path):
    """A catalog made by root (``catalog build``) in a sticky directory where
    the tail runs unprivileged: it may create files there (its indexes, a
    temporary catalog) but not replace root's catalog (EPERM). The failure
    is one line, the indexes are built all the same, the old catalog stays
    whole and no temporary file is left; once the catalog is the tail's to
    replace, it recovers and the catalog is what ``catalog build`` makes
    from scratch (the newest binlog finished meanwhile)."""
    import json
    d = tmp_path / "binlogs"
    names, last, data = live_copy(d)
    cat = d / "gtidx-catalog.json"

    def show() -> dict:
        r = subprocess.run(cli("catalog", "show", "--json", "."), cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)
    assert subprocess.run(cli("catalog", "build", "."), cwd=d, capture_output=True).returncode == 0
    before = cat.read_bytes()
    os.chmod(d, 0o1777)       # anyone may create files here; only its owner may replace one (sticky)
    t = TailProcess(Path("."), log=tmp_path / "tail.log", cwd=d,
                    prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    try:
        # (the tail retries with backoff: a retry may hold its temporary file at any instant,
        # removed when its rename fails; one left behind would never go)
        t.errors_logged(1)
        assert cat.read_bytes() == before and wait_for(lambda: not list(d.glob(".gtidx-catalog.json.*")))
        finish(last, data)                                     # the newest binlog is finished
        assert wait_for(lambda: indexes_clean(d, tmp_path))        # indexing went on
        assert cat.read_bytes() == before and wait_for(lambda: not list(d.glob(".gtidx-catalog.json.*")))
        os.chown(cat, 65534, 65534)
        assert wait_for(lambda: [e["index"]["status"] for e in show()["files"]] == ["ok"] * len(names)), t.log()
        err = t.stop()
    finally:
        t.kill()
    errors = error_lines(err)
    assert len(errors) == 1 and "cannot update catalog" in errors[0] and "Operation not permitted" in errors[0], err
    assert err.count("event=recovered") == 1, err
    assert leftovers(d) == []
    kept = show()
    assert [e["size"] for e in kept["files"]] == [(d / n).stat().st_size for n in names]
    cat.unlink()
    assert subprocess.run(cli("catalog", "build", "."), cwd=d, capture_output=True).returncode == 0
    assert show() == kept


def test_index_meta_binlog_etag_round_trip():
    """The binlog object's ETag (``binlog_etag``, stored with indexes of
    binlogs in an object store) is read back; a fingerprint without it (a
    local binlog's, an index stored before it was) is read as before and
    matches by content; one that is not a string is no fingerprint. A local
    binlog's fingerprint records its identity instead (``local_identity``:
    the fixture file is quiet), which matches it without reading."""
    m = IndexMeta(7, 8, 9, binlog_etag='"0123abcd-2"')
    assert IndexMeta.decode(m.encode()).binlog_etag == '"0123abcd-2"'
    assert IndexMeta.decode(m.encode()) == m
    assert IndexMeta.from_json(b'{"v":1,"size":7,"head_crc32":8,"tail_crc32":9}').binlog_etag is None
    assert IndexMeta.from_json(b'{"v":1,"size":7,"head_crc32":8,"tail_crc32":9,"binlog_etag":5}') is None
    from gtidx.binlog.mariadb import Binlog
    with Binlog(str(FIXTURES / "mariadb-10.11" / "multifile" / "master-bin.000018")) as b:
        local = IndexMeta.of(b)
        assert local.binlog_etag.startswith("stat:") and local.matches(b) and local.same_object(b)
        # a recorded ETag a local file cannot have: the content decides, as without one
        assert local.replace(binlog_etag='"x"').matches(b)
        assert not local.replace(head_crc32=local.head_crc32 ^ 1, binlog_etag='"x"').matches(b)
        assert not local.replace(tail_adler32=local.tail_adler32 ^ 1, binlog_etag='"x"').matches(b)


def test_index_meta_stored_by_an_older_gtidx_is_still_read(tmp_path):
    """Indexes written before the fingerprint's byte layout carry it as JSON
    (version 1), in the xattr or in a sidecar bound by dev/ino: lookups still
    use them, and the fingerprint read is the one the layout stores."""
    import json
    from gtidx.api import seek
    binlog = tmp_path / MIXED.name
    shutil.copyfile(MIXED, binlog)
    build_index(binlog)
    idx = index_path(binlog)
    meta = IndexMeta.read(idx)
    fields = {"v": 1, "size": meta.size, "head_crc32": meta.head_crc32, "tail_crc32": meta.tail_crc32,
              "state": "complete", "page_size": meta.page_size, "span_min": meta.span_min,
              "head_adler32": meta.head_adler32, "tail_adler32": meta.tail_adler32,
              "binlog_etag": meta.binlog_etag, "ranges": [list(r) for r in meta.ranges],
              "repeats": [list(r) for r in meta.repeats]}
    fields = {k: v for k, v in fields.items() if v is not None}
    os.setxattr(idx, XATTR, json.dumps(fields).encode())
    assert IndexMeta.read(idx) == meta
    assert seek("2-2-225", str(binlog)).via == "index"
    os.removexattr(idx, XATTR)                                  # a filesystem without xattrs: the sidecar
    st = os.stat(idx)
    Path(sidecar_path(idx)).write_text(json.dumps({**fields, "dev": st.st_dev, "ino": st.st_ino}))
    assert IndexMeta.read(idx) == meta
    assert seek("2-2-225", str(binlog)).via == "index"
    Path(sidecar_path(idx)).write_text(json.dumps({**fields, "dev": st.st_dev, "ino": st.st_ino + 1}))
    assert IndexMeta.read(idx) is None                          # made for another file at this name
