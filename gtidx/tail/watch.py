"""What wakes a tail: the kernel (``InotifyWatch``) or a clock (``PollWatch``).

``watch_for`` picks one for a binlog directory. inotify is used where it is
available and reliable: it reports what this machine's processes do to a
file, so on a network or user-space filesystem (NFS, CIFS/SMB, FUSE, 9p,
Ceph, Lustre, AFS: read from ``/proc/self/mountinfo``) a server on another
machine writes unseen, and there the tail polls. overlayfs counts as local
(a server in a container writes through the same overlay). So does a failed
``inotify_init`` or ``inotify_add_watch`` (no inotify, no instances or watches
left): polling, said once in one log line. ``GTIDX_TAIL_WATCH=poll`` (or
``gtidx tail --watch poll``) forces polling.

Under inotify the tail looks when the directory changes (a binlog created,
deleted or renamed: a rotation, a purge, the server's ``.index`` rewritten),
when the server's ``.index`` file is written in place, and when the growing
binlog is written or closed; a write to the growing binlog alone makes it
look at that file only (``Wake.growing_only``). It looks again every
``repoll`` seconds anyway: inotify drops events when its queue overflows
(that overflow wakes a full look too), and a closed binlog rewritten in place
(a crash's recovery truncating it) is looked at by a full look.

The package: ``inotify_simple`` (a ctypes wrapper of the three system calls
in one small module, maintained, no threads: its file descriptor goes into
the tail's own ``select`` beside its stop pipe). ``watchdog`` runs an observer
thread and calls back into it, which the tail's one-thread loop and its
signal handling do not want; a wrapper of our own would repeat what
inotify_simple already is. Imported only when a tail starts.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import select
from types import SimpleNamespace
from typing import NamedTuple

from ..errors import BadInputError
from .logfmt import event

# filesystems where inotify misses what other machines write (the type column of mountinfo)
REMOTE_TYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "lustre", "afs", "glusterfs",
                          "gpfs", "beegfs", "ocfs2", "gfs2"})
WATCH_ENV = "GTIDX_TAIL_WATCH"       # "poll" forces polling (tests; a filesystem inotify misjudges)
WATCH_MODES = ("auto", "poll")


class Wake(NamedTuple):
    """Why a wait returned: ``stop`` (the stop pipe), ``growing_only`` (only
    the growing binlog was written: look at it alone), else a full look."""
    stop: bool = False
    growing_only: bool = False


def filesystem_type(path: str) -> str:
    """The type of the filesystem holding ``path`` (``ext4``, ``nfs4``,
    ``fuse.sshfs``...), from ``/proc/self/mountinfo``: the mount point that
    is the longest prefix of its real path; "" when unknown."""
    real = os.path.realpath(path)
    best, kind = -1, ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) < 5 or not right:
                    continue
                mount = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # \040: a space
                if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) > best:
                    best, kind = len(mount), right.split()[0]
    except OSError:
        return ""
    return kind


def unreliable(kind: str) -> bool:
    """Does inotify miss writes made elsewhere on a filesystem of this type?"""
    return kind in REMOTE_TYPES or kind == "fuse" or kind.startswith("fuse.") or kind.startswith("nfs")


class PollWatch:
    """Polling: a wait is the interval, or the stop pipe."""
    how = "poll"

    def __init__(self, stop_fd: int):
        self.stop_fd = stop_fd

    def arm(self, directory: str, growing: str | None) -> bool:
        return False

    def wait(self, timeout: float) -> Wake:
        ready, _, _ = select.select([self.stop_fd], [], [], max(0.0, timeout))
        return Wake(stop=bool(ready))

    def close(self) -> None:
        pass


@functools.cache
def _flags():
    """inotify's flags as plain ints (an IntFlag's ``|`` and ``&`` run Python code each)."""
    import inotify_simple
    return SimpleNamespace(**{f.name: int(f) for f in inotify_simple.flags})


class InotifyWatch:
    """inotify on the directory, its ``*.index`` files and the growing binlog."""
    how = "inotify"

    def __init__(self, stop_fd: int, directory: str):
        import inotify_simple
        f = self.flags = _flags()
        self.stop_fd = stop_fd
        self.ino = inotify_simple.INotify(nonblocking=True)
        self.dir_mask = f.CREATE | f.DELETE | f.MOVED_FROM | f.MOVED_TO | f.DELETE_SELF | f.MOVE_SELF
        self.file_mask = f.MODIFY | f.CLOSE_WRITE | f.DELETE_SELF | f.MOVE_SELF
        self.paths: dict[int, str] = {}      # watch descriptor -> what it watches
        self.watched: dict[str, int] = {}
        self.growing: str | None = None
        self.rescan = True                   # the directory changed: its *.index files watched again
        try:
            self._add(directory, self.dir_mask | f.ONLYDIR)
        except BaseException:
            self.ino.close()
            raise

    def _add(self, path: str, mask: int) -> None:
        if path in self.watched:
            return
        wd = self.ino.add_watch(path, mask)
        self.paths[wd] = path
        self.watched[path] = wd

    def _remove(self, path: str) -> None:
        wd = self.watched.pop(path, None)
        if wd is not None:
            self.paths.pop(wd, None)
            try:
                self.ino.rm_watch(wd)
            except OSError:
                pass                         # already gone with its file

    def arm(self, directory: str, growing: str | None) -> bool:
        """Watch what the look just seen: the growing binlog (the previous one
        no more) and, after the directory changed, its ``*.index`` files. A
        file gone before its watch is added is seen by the next look (the
        directory's own event woke it). Whether a new growing binlog is
        watched now: what was written to it between the look and its watch
        woke nobody, so the caller looks at it again at once."""
        new = False
        if directory not in self.watched:    # the directory was removed and made again
            try:
                self._add(directory, self.dir_mask | self.flags.ONLYDIR)
            except OSError:
                pass                         # gone: the looks' failures say so; re-polled
        if growing != self.growing:
            if self.growing is not None:
                self._remove(self.growing)
            self.growing = None
            if growing is not None:
                try:
                    self._add(growing, self.file_mask)
                    self.growing = growing
                    new = True
                except FileNotFoundError:
                    pass
        if self.rescan:
            self.rescan = False
            try:
                names = os.listdir(directory)
            except OSError:
                return new
            for name in names:
                if name.endswith(".index"):
                    path = os.path.join(directory, name)
                    if path not in self.watched:
                        try:
                            self._add(path, self.file_mask)
                        except OSError:
                            pass
        return new

    def wait(self, timeout: float) -> Wake:
        ready, _, _ = select.select([self.stop_fd, self.ino.fileno()], [], [], max(0.0, timeout))
        if self.stop_fd in ready:
            return Wake(stop=True)
        if not ready:
            return Wake()                    # the safety re-poll
        return self.drain()

    def drain(self) -> Wake:
        """What the queued events ask for (read without waiting)."""
        f = self.flags
        growing_only = True
        for e in self.ino.read(timeout=0):
            if e.mask & f.Q_OVERFLOW:
                growing_only = False
                continue
            path = self.paths.get(e.wd)
            if e.mask & f.IGNORED:           # its file is gone: watched again if it comes back
                if path is not None:
                    self.paths.pop(e.wd, None)
                    if self.watched.get(path) == e.wd:
                        del self.watched[path]
                    if path == self.growing:
                        self.growing = None
                self.rescan = True
                growing_only = False
                continue
            if path is None:
                continue
            if e.name:                       # in the directory: our own files are no news
                if e.name.startswith(".") or e.name.endswith((".idx", ".tmp", ".gtidx")):
                    continue
                self.rescan = True
                growing_only = False
            elif path != self.growing or e.mask & ~f.MODIFY:
                growing_only = False         # the .index, or the growing binlog closed or gone
        return Wake(growing_only=growing_only)

    def close(self) -> None:
        self.ino.close()


def watch_for(directory: str, stop_fd: int, mode: str = "auto"):
    """The watch for ``directory``: inotify where it can be trusted (``mode``
    "auto"), else polling, the reason said in one log line. ``mode`` "poll"
    (or the environment's ``GTIDX_TAIL_WATCH=poll``) always polls."""
    mode = os.environ.get(WATCH_ENV) or mode
    if mode not in WATCH_MODES:
        raise BadInputError(f"{WATCH_ENV}={mode!r}: expected one of {', '.join(WATCH_MODES)}")
    if mode == "poll":
        event(logging.INFO, "polling", dir=directory, why="asked")
        return PollWatch(stop_fd)
    kind = filesystem_type(directory)
    why = None
    if unreliable(kind):
        why = f"{kind} filesystem: inotify does not see other machines' writes"
    else:
        try:
            return InotifyWatch(stop_fd, directory)
        except ImportError as e:
            why = f"inotify_simple not installed ({e})"
        except OSError as e:
            why = f"inotify unavailable: {e.strerror or e}"
    event(logging.WARNING, "polling", dir=directory, why=why)
    return PollWatch(stop_fd)
