"""Open files for reading, and the buffers gtidx reads them through.

The one owner of two rules:

* **Only regular files.** Every file gtidx reads (binlog, ``.idx``) is
  opened here with ``O_NONBLOCK`` (opening a FIFO for reading blocks until a
  writer comes) and ``O_CLOEXEC``, then ``fstat``-ed: a FIFO, socket, device
  or directory is refused with a ``BadInputError`` ("not a regular file",
  exit 2) instead of hanging a read forever. Symlinks are followed: a link
  to a regular file is read as that file.

* **No mapping of a file.** A page of a ``mmap`` past the end of a file
  that shrank faults: the process dies with SIGBUS. Any binlog can shrink
  (docs/design.md, "Files that change under a reader"), so none is mapped:
  its bytes are copied with ``pread`` into private memory, either on demand
  in chunks that stay (``PreadBuffer``: lookups, the preamble) or, for a
  walk, into one reused buffer moved along the file (``Window``: bounded
  memory whatever the file's size). A short read means the file shrank: a
  ``GtidxIOError`` (exit 3) naming the path and offset.
"""
from __future__ import annotations

import errno
import mmap
import os
import stat

from .errors import BadInputError, GtidxIOError

CHUNK_SHIFT = 14                 # PreadBuffer fills 16 KiB chunks
CHUNK = 1 << CHUNK_SHIFT
MAX_READ = 16 << 20              # at most this much per pread call
WINDOW_FIRST = 16 << 10          # a walk's buffer (Window) starts at this (>= 32: a GTID head)
WINDOW = 1 << 20                 # and doubles up to this

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _not_regular(mode: int, path: str) -> BadInputError:
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return BadInputError(f"not a regular file ({kind})", path=path,
                         hint="gtidx reads binlogs and .idx files from regular files only")


class Source:
    """What ``PreadBuffer``, ``Window`` and the index reader read from: a
    file's ``path``, its ``size`` at open and reads at offsets. ``ReadFile``
    (a local file: a descriptor and ``pread``) and ``storage.RemoteFile``
    (an object: range GETs) are the two. The class attributes size the
    buffers for the medium: a remote read costs a request, so its chunks and
    its walks' windows are bigger (a walk reads WINDOW bytes per request)."""

    fd = None                    # a local file's descriptor; None for an object
    CHUNK_SHIFT = CHUNK_SHIFT    # PreadBuffer's chunks
    CHECK_AHEAD = 0              # bytes from an offset an event check reads (``Binlog.event_ok``) beyond the event

    def windows(self) -> tuple[int, int, int]:
        """(first, largest, growth factor) of a walk's ``Window`` over this file."""
        return WINDOW_FIRST, WINDOW, 2

    path: str
    size: int

    def pread(self, n: int, offset: int) -> bytes:
        raise NotImplementedError

    def read_exact(self, offset: int, n: int) -> bytes:
        raise NotImplementedError

    def read_into(self, view: memoryview, offset: int) -> None:
        """Fill ``view`` with the bytes from ``offset``; GtidxIOError when short."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def private(self) -> "PreadBuffer":
        """A private copy of the file's bytes as of open, read on demand."""
        return PreadBuffer(self, self.size)


class ReadFile(Source):
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
            os.set_blocking(fd, True)
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

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def grown(self, at_path: os.stat_result) -> bool:
        """Take the open file's size now as its size, when ``at_path`` (a
        ``stat`` of its path) is this very file and it has not shrunk: a
        growing file read again without opening it again. False (nothing
        changed) for another file at the path, or one that shrank."""
        if self.fd is None:
            return False
        st = os.fstat(self.fd)
        if (st.st_dev, st.st_ino) != (at_path.st_dev, at_path.st_ino) or st.st_size < self.size:
            return False
        self.size, self.stat = st.st_size, st
        return True

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

    def read_into(self, view: memoryview, offset: int) -> None:
        read_into(self, view, offset)


def open_file(path: str | os.PathLike) -> ReadFile:
    """``ReadFile(path)`` for a file that must be there: an OS failure is a
    GtidxIOError (exit 3), a special file a BadInputError (exit 2)."""
    try:
        return ReadFile(path)
    except OSError as e:
        raise GtidxIOError.from_os(e, os.fspath(path)) from None


def read_into(src: ReadFile, view: memoryview, offset: int) -> None:
    """Fill ``view`` with the file's bytes from ``offset`` (``preadv``, no
    copy in between); a GtidxIOError when the file no longer has them."""
    fd, pos, got, n = src.fd, offset, 0, len(view)
    if fd is None:
        raise GtidxIOError("read after close", path=src.path, offset=offset)
    while got < n:
        try:
            k = os.preadv(fd, [view[got:]], pos + got)
        except OSError as e:
            raise GtidxIOError(f"read failed: {e.strerror}", path=src.path, offset=pos + got) from None
        if k == 0:
            raise shrank(src.path, pos + got, src.size)
        got += k


def shrank(path: str, offset: int, size: int) -> GtidxIOError:
    return GtidxIOError(f"the file ends before this offset: it shrank while being read "
                        f"(it had {size} bytes when opened)", path=path, offset=offset,
                        hint="truncated under gtidx (a crashed server's recovery?); run it again")


class PreadBuffer:
    """``[0, size)`` of a file in private memory, filled on demand.

    ``mem`` is an anonymous mapping of ``size`` bytes (pages the OS gives only
    when touched), made when first asked for; ``fill(lo, hi)`` reads the
    missing 16 KiB chunks of that range with ``preadv`` straight into it.
    Code that reads ``mem`` calls ``fill`` first for the range it reads;
    after that, reads are plain memory reads that cannot fault, whatever
    happens to the file."""

    def __init__(self, src: Source, size: int):
        self._src = src
        self.path = src.path
        self._shift = src.CHUNK_SHIFT
        self._mem = None                 # made by the first use (a walk or a one-off read needs none)
        self._sized(size)

    def _sized(self, size: int) -> None:
        self.size = size
        self._missing = (size + (1 << self._shift) - 1) >> self._shift   # chunks not read yet
        self._have = None                # per chunk: read? (made with ``_mem``)

    @property
    def mem(self) -> mmap.mmap:
        return self._mem if self._mem is not None else self._map()

    def _map(self) -> mmap.mmap:
        # private, not the default shared (shmem) mapping: 4x cheaper to make and unmap
        self._mem = mmap.mmap(-1, max(self.size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self._have = bytearray(self._missing)
        return self._mem

    def regrown(self, size: int) -> "PreadBuffer":
        """The buffer for the same file at its new ``size`` (it grew): this
        one when nothing was read into it (a tail's looks read through walks
        and one-off reads), else a new one (this one closed)."""
        if self._mem is None:
            self._sized(size)
            return self
        self.close()
        return PreadBuffer(self._src, size)

    def fill(self, lo: int, hi: int) -> None:
        """Make ``[lo, hi)`` (clipped to the size at open) hold the file's bytes."""
        if not self._missing:
            return
        hi = min(hi, self.size)
        if lo >= hi:
            return
        if self._mem is None:
            self._map()                  # made here, on the first fill
        have, shift = self._have, self._shift
        c = max(lo, 0) >> shift
        last = (hi - 1) >> shift
        limit = MAX_READ >> shift
        while c <= last:
            if have[c]:
                c += 1
                continue
            e = c + 1                    # a run of missing chunks: one read
            while e <= last and not have[e] and e - c < limit:
                e += 1
            self._read(c << shift, min(e << shift, self.size))
            have[c:e] = b"\x01" * (e - c)
            self._missing -= e - c
            c = e

    def release(self, lo: int, hi: int) -> None:
        """Give back the memory of the whole chunks inside ``[lo, hi)``: they
        are read again if filled later. A reader that goes through a file
        once holds what it still needs only. Nothing may still read those
        bytes through a view (an event body taken before): it would see zeros."""
        shift = self._shift
        c, e = (max(lo, 0) + (1 << shift) - 1) >> shift, min(hi, self.size) >> shift
        if e <= c or self._mem is None:
            return
        self._mem.madvise(mmap.MADV_DONTNEED, c << shift, (e - c) << shift)
        self._missing += self._have.count(1, c, e)
        self._have[c:e] = bytes(e - c)

    def _read(self, lo: int, hi: int) -> None:
        with memoryview(self.mem) as view:
            self._src.read_into(view[lo:hi], lo)

    def read(self, lo: int, hi: int) -> bytes:
        """The bytes ``[lo, hi)`` (clipped to the size at open): from memory
        where all their chunks are there, else with one ``pread`` that is not
        kept (a one-off read such as a fingerprint's 64 KiB: one copy, no
        pages of ``mem`` touched)."""
        hi = min(hi, self.size)
        if lo >= hi:
            return b""
        shift = self._shift
        if not self._missing or self._have is not None and all(self._have[lo >> shift:((hi - 1) >> shift) + 1]):
            return self.mem[lo:hi]
        return self._src.read_exact(lo, hi - lo)

    def view(self) -> "FillingView":
        return FillingView(self)

    def close(self) -> None:
        if self._mem is None:
            return
        try:
            self._mem.close()
        except BufferError:      # event bodies still point into it: freed with the last of them
            pass


class FillingView:
    """Slicing and indexing of a ``PreadBuffer`` that read the file where
    memory does not hold the bytes yet: what ``Binlog.buffer`` hands out."""

    __slots__ = ("_buf",)

    def __init__(self, buf: PreadBuffer):
        self._buf = buf

    def __len__(self) -> int:
        return self._buf.size

    def __getitem__(self, key):
        if isinstance(key, slice):
            lo, hi, step = key.indices(self._buf.size)
            if step == 1:
                return self._buf.read(lo, hi)
            self._buf.fill(lo, hi)
        else:
            i = key + self._buf.size if key < 0 else key
            self._buf.fill(i, i + 1)
        return self._buf.mem[key]


def first_read(first: int, start: int, end: int) -> int:
    """How much a walk over ``[start, end)`` reads first (``first``: its
    source's first window): a short range (a lookup's walk to its target, or
    to the end of a file close by) in one read, a long one from ``first``
    on: a walk its caller stops early reads little. ``Binlog.event_ok``
    reads as much of an object ahead, so a lookup's check and walk are one
    GET."""
    return end - start if 0 < end - start <= 4 * first else first


class Window:
    """A walk's view of ``[start, end)`` of a file, moved forward through one
    reused buffer: ``view`` holds the file's bytes ``[base, base + len(view))``.

    The buffer starts at WINDOW_FIRST bytes (a range of up to 4 times that:
    all of it) and doubles with each move up to WINDOW, so a lookup's short
    walk reads little and a long walk holds at most WINDOW bytes, whatever the
    file's size; the copy (``preadv`` into a buffer that stays in the CPU
    cache) costs about what walking a mapping costs. A walk
    runs over ``view`` with offsets relative to ``base``; where its next read
    does not fit in ``view`` (``unpack_from`` raises struct.error there, or a
    bounds test says so), it calls ``advance`` (or ``move``) with the file
    offset it stopped at, and goes on at relative offset 0 of the new view."""

    __slots__ = ("_src", "_buf", "_want", "_max", "_growth", "end", "base", "view")
    # Buffers of walks that said they are done (``release``), for the next
    # walks: a fresh buffer costs its page faults on every first touch, which
    # a tail looking 50 times a second paid more than its reads (shared by
    # the process's walks; popped and appended whole, so no two hold one).
    _spare: list = []
    SPARE_MAX = 4

    def __init__(self, src: Source, start: int, end: int):
        self._src = src
        self._buf = None
        self.end = min(end, src.size)
        first, self._max, self._growth = src.windows()
        self._want = first_read(first, start, self.end)
        self.base = start
        self.view = memoryview(b"")
        if start < self.end:
            self.move(start)

    def move(self, pos: int) -> memoryview:
        """Read the window starting at file offset ``pos`` (< ``end``): the new view."""
        n = self._want
        if self._buf is None or len(self._buf) < n:
            try:
                buf = self._spare.pop()
            except IndexError:
                buf = None
            self._buf = memoryview(buf if buf is not None and len(buf) >= n else bytearray(n))
        view = self._buf[:min(n, self.end - pos)]
        self._src.read_into(view, pos)
        self._want = min(self._max, n * self._growth)
        self.base, self.view = pos, view
        return view

    def release(self) -> None:
        """The walk is done and holds no view of the buffer any more (it
        read numbers only): the buffer goes to the next walk."""
        buf, self._buf, self.view = self._buf, None, memoryview(b"")
        if buf is not None and len(self._spare) < self.SPARE_MAX:
            self._spare.append(buf.obj)

    def advance(self, pos: int) -> memoryview | None:
        """The view from ``pos`` on, or None when the current view already
        reaches ``end`` (or ``pos`` is past it): the walk is at its end."""
        if self.base + len(self.view) >= self.end or pos >= self.end:
            return None
        return self.move(pos)
