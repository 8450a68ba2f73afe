"""Writing files in a directory that others can write to, safely.

gtidx writes beside the binlogs, often as root, in a directory that the
database server's user (or anyone who can write there) can fill with
symlinks. So every file gtidx writes is created exclusively under a fresh
temporary name (``O_CREAT|O_EXCL|O_NOFOLLOW``: a planted link or file makes
the create fail, it is never followed), written, fsynced and renamed over the
real name (a rename replaces a symlink itself, never its target). An existing
file is opened for writing only without following links, only when it is a
regular file with a single name. Nothing here ever shrinks a file in place.
"""
from __future__ import annotations

import errno
import os
import stat

_CREATE = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_SUFFIX = ".tmp"


def _directory(path: str) -> str:
    """The directory of ``path`` as given (a relative path stays relative: a
    process started inside a directory it cannot reach from / still works)."""
    return os.path.dirname(os.fspath(path)) or "."


def temp_prefix(target: str) -> str:
    """Temporary files for ``target`` are named ``.<name>.<pid>.<random>.tmp``."""
    return f".{os.path.basename(target).lstrip('.')}."


def create_temp(target: str, mode: int = 0o644) -> tuple[int, str]:
    """(fd open read-write, path) of a new empty file beside ``target``,
    created exclusively: never an existing file, never through a link."""
    directory = _directory(target)
    for _ in range(100):
        tmp = os.path.join(directory, f"{temp_prefix(target)}{os.getpid()}.{os.urandom(4).hex()}{_SUFFIX}")
        try:
            return os.open(tmp, _CREATE, mode), tmp
        except FileExistsError:
            continue                      # planted or a rare clash: another name
    raise FileExistsError(errno.EEXIST, "cannot create a temporary file", target)


def discard(tmp: str) -> None:
    """Remove a temporary file (the name, never a link's target)."""
    try:
        os.unlink(tmp)
    except OSError:
        pass


def publish(tmp: str, target: str) -> None:
    """Rename ``tmp`` over ``target`` (whatever ``target`` is, a link
    included: the name is replaced, nothing is followed) and make the rename
    durable."""
    os.replace(tmp, target)
    sync_directory(target)


def sync_directory(path: str) -> None:
    dfd = os.open(_directory(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_file(target: str, chunks, before_publish=None) -> None:
    """Write ``chunks`` (bytes) as ``target``: exclusive temporary file,
    fsync, ``before_publish(fd)`` (to stamp metadata on this inode), rename.
    Whatever stops it (an OSError, SIGINT, anything) removes the temporary
    file; the old ``target`` stays as it was."""
    tmp = None
    try:
        fd, tmp = create_temp(target)
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            if before_publish is not None:
                before_publish(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        publish(tmp, target)
    except BaseException:
        if tmp is not None:
            discard(tmp)
        else:
            # stopped (SIGINT) between the file's creation and learning its name
            discard_own(target)
        raise


def open_for_update(path: str) -> int:
    """An existing file opened read-write without following a link; refused
    (OSError ELOOP) unless it is a regular file with a single name (a hard
    link could be any other file of this filesystem)."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise OSError(errno.ELOOP, "not a regular file with a single name", path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_regular(path: str) -> bool:
    """Is ``path`` itself (not followed) a regular file? Anything else at an
    index's name (a link, a FIFO, a device) is never read or written: it is
    replaced."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def same_file(fd: int, path: str) -> bool:
    """Is ``path`` (not followed) still the file open as ``fd``?"""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def remove_orphans(*targets: str) -> None:
    """Temporary files of ``targets`` (in one directory) left by writers
    that were killed (their process is gone): they would pile up with every
    crash. The name says the pid: ``.<name>.<pid>[.<random>].tmp``."""
    directory = _directory(targets[0])
    prefixes = tuple(temp_prefix(t) for t in targets)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for n in names:
        if not n.endswith(_SUFFIX):
            continue
        for prefix in prefixes:
            if not n.startswith(prefix):
                continue
            pid = n[len(prefix):-len(_SUFFIX)].split(".")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
                discard(os.path.join(directory, n))


def discard_own(target: str) -> None:
    """Remove this process's temporary files of ``target``: the ones whose
    name carries our pid (``.<name>.<pid>.<random>.tmp``)."""
    directory = _directory(target)
    prefix = f"{temp_prefix(target)}{os.getpid()}."
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for n in names:
        if n.startswith(prefix) and n.endswith(_SUFFIX):
            discard(os.path.join(directory, n))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass                             # another user's: it runs
    return True
