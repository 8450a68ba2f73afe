"""Open files for reading, and the buffers gtidx reads them through.

The one owner of two rules:

* **Only regular files.** Every file gtidx reads (binlog, ``.idx``) is
  opened here with ``O_NONBLOCK`` (opening a FIFO for reading blocks until a
  writer comes) and ``O_CLOEXEC``, then ``fstat``-ed: a FIFO, socket, device
  or directory is refused with a ``BadInputError`` ("not a regular file",
  exit 2) instead of hanging a read forever. Symlinks are followed: a link
  to a regular file is read as that file.

* **No mapping of a file that can shrink.** A page of a ``mmap`` past the
  end of a file that shrank faults: the process dies with SIGBUS. So a
  file that can shrink under us is never mapped; it is copied with
  ``pread`` into private memory (``PreadBuffer``: an anonymous mapping of
  the size at open, filled on demand in chunks, so only what a walk touches
  is read). A short read means the file shrank: a ``GtidxIOError`` (exit 3)
  naming the path and offset. ``ReadFile.mapping()`` is for the files that
  cannot shrink (closed binlogs: see docs/design.md, "Files that change
  under a reader"); the caller decides, this module only provides.
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import stat

from .errors import BadInputError, GtidxIOError

CHUNK_SHIFT = 16                 # PreadBuffer fills 64 KiB chunks
CHUNK = 1 << CHUNK_SHIFT
MAX_READ = 16 << 20              # at most this much per pread call

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _not_regular(mode: int, path: str) -> BadInputError:
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return BadInputError(f"not a regular file ({kind})", path=path,
                         hint="gtidx reads binlogs and .idx files from regular files only")


class ReadFile:
    """A regular file open for reading: its descriptor and its size at open.

    Raises ``OSError`` as the OS does (callers map it: a missing index is not
    an error, a missing binlog is; with ``nofollow`` a symlink is ELOOP) and
    ``BadInputError`` for anything that is not a regular file."""

    def __init__(self, path: str | os.PathLike, *, nofollow: bool = False):
        self.path = os.fspath(path)
        self.fd = None
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
                         | (os.O_NOFOLLOW if nofollow else 0))
        except OSError as e:
            if e.errno == errno.ENXIO:     # a socket (or a FIFO's other end) cannot be opened
                try:
                    mode = os.stat(self.path).st_mode
                except OSError:
                    raise e from None
                if not stat.S_ISREG(mode):
                    raise _not_regular(mode, self.path) from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _not_regular(st.st_mode, self.path)
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.size = st.st_size
        self.stat = st

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "ReadFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def pread(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` (fewer at the end of the file)."""
        if self.fd is None:
            raise GtidxIOError("read after close", path=self.path, offset=offset)
        return os.pread(self.fd, n, offset)

    def read_exact(self, offset: int, n: int) -> bytes:
        """Exactly ``n`` bytes at ``offset``, which the file had at open; a
        GtidxIOError when it no longer has them (it shrank)."""
        if self.fd is None:
            raise GtidxIOError("read after close", path=self.path, offset=offset)
        parts = []
        got = 0
        while got < n:
            try:
                part = os.pread(self.fd, min(n - got, MAX_READ), offset + got)
            except OSError as e:
                raise GtidxIOError(f"read failed: {e.strerror}", path=self.path, offset=offset + got) from None
            if not part:
                raise shrank(self.path, offset + got, self.size)
            parts.append(part)
            got += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def mapping(self) -> mmap.mmap:
        """The whole file mapped read-only: only for a file that cannot shrink."""
        return mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ)

    def private(self) -> "PreadBuffer":
        """A private copy of the file's bytes as of open, read on demand."""
        return PreadBuffer(self, self.size)


def open_file(path: str | os.PathLike) -> ReadFile:
    """``ReadFile(path)`` for a file that must be there: an OS failure is a
    GtidxIOError (exit 3), a special file a BadInputError (exit 2)."""
    try:
        return ReadFile(path)
    except OSError as e:
        raise GtidxIOError.from_os(e, os.fspath(path)) from None


def shrank(path: str, offset: int, size: int) -> GtidxIOError:
    return GtidxIOError(f"the file ends before this offset: it shrank while being read "
                        f"(it had {size} bytes when opened)", path=path, offset=offset,
                        hint="truncated under gtidx (a crashed server's recovery?); run it again")


class PreadBuffer:
    """``[0, size)`` of a file in private memory, filled on demand.

    ``mem`` is an anonymous mapping of ``size`` bytes (pages the OS gives only
    when touched); ``fill(lo, hi)`` reads the missing 64 KiB chunks of that
    range with ``preadv`` straight into it. Code that reads ``mem`` calls
    ``fill`` first for the range it reads; after that, reads are plain memory
    reads that cannot fault, whatever happens to the file."""

    def __init__(self, src: ReadFile, size: int):
        self._src = src
        self.path = src.path
        self.size = size
        self.mem = mmap.mmap(-1, max(size, 1))
        chunks = (size + CHUNK - 1) >> CHUNK_SHIFT
        self._have = bytearray(chunks)
        self._missing = chunks

    def fill(self, lo: int, hi: int) -> None:
        """Make ``[lo, hi)`` (clipped to the size at open) hold the file's bytes."""
        if not self._missing:
            return
        hi = min(hi, self.size)
        if lo >= hi:
            return
        have = self._have
        c = max(lo, 0) >> CHUNK_SHIFT
        last = (hi - 1) >> CHUNK_SHIFT
        limit = MAX_READ >> CHUNK_SHIFT
        while c <= last:
            if have[c]:
                c += 1
                continue
            e = c + 1                    # a run of missing chunks: one read
            while e <= last and not have[e] and e - c < limit:
                e += 1
            self._read(c << CHUNK_SHIFT, min(e << CHUNK_SHIFT, self.size))
            have[c:e] = b"\x01" * (e - c)
            self._missing -= e - c
            c = e

    def _read(self, lo: int, hi: int) -> None:
        fd, pos = self._src.fd, lo
        with memoryview(self.mem) as view:
            while pos < hi:
                try:
                    n = os.preadv(fd, [view[pos:hi]], pos)
                except OSError as e:
                    raise GtidxIOError(f"read failed: {e.strerror}", path=self.path, offset=pos) from None
                if n == 0:
                    raise shrank(self.path, pos, self.size)
                pos += n

    def view(self) -> "FillingView":
        return FillingView(self)

    def close(self) -> None:
        try:
            self.mem.close()
        except BufferError:      # event bodies still point into it: freed with the last of them
            pass


class FillingView:
    """Slicing and indexing of a ``PreadBuffer`` that fill before they read:
    what ``Binlog.buffer`` hands out for a file that can shrink."""

    __slots__ = ("_buf",)

    def __init__(self, buf: PreadBuffer):
        self._buf = buf

    def __len__(self) -> int:
        return self._buf.size

    def __getitem__(self, key):
        if isinstance(key, slice):
            lo, hi, _ = key.indices(self._buf.size)
            self._buf.fill(lo, hi)
        else:
            i = key + self._buf.size if key < 0 else key
            self._buf.fill(i, i + 1)
        return self._buf.mem[key]
