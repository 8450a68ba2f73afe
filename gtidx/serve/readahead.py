"""A binlog read front to back for one replica, in large reads.

The stream asks for every event's bytes in file order. Read one at a time,
an object in an object store would cost a ranged GET per event (a local
file a pread per event); instead the events come out of a moving window
(``Ahead``) whose reads grow as a walk's do (``Source.windows``): for an
object from 64 KiB to ``storage.REMOTE_WINDOW`` (8 MiB: at S3's ~100 MB/s
per stream a GET's ~20 ms of latency is then a few percent of its
transfer, and a stream stopped early, ``START SLAVE UNTIL`` near its start,
read little), for a local file up to ``filebuf.WINDOW``. From its second
read on, the window's next read is under way (a thread of its own, on a
handle of its own) while the stream sends the events of the current one:
an object's GET overlaps the sending instead of adding to it. An event
longer than the window is read by itself, in one read. What a connection
holds is two windows and at most one such event: its memory is bounded by
the windows and the largest event, as the server's own dump thread is by
the largest event.

The framing is checked as the walk goes, as ``Binlog.checked_headers``
checks it, so that only the bytes from the start on are read, once: a
length below the header raises where it is, and so does a closed binlog
whose events do not end at its size, or whose last event is not ROTATE or
STOP (``Binlog.truncation``), before that last event is sent.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

from ..binlog.events import GTID, HEADER_LEN, TYPE_SERVER_LENGTH
from ..binlog.mariadb import Binlog
from ..errors import GtidxIOError
from ..filebuf import first_read


class Ahead:
    """``filebuf.Window``'s walk (``view`` of the bytes from ``base``,
    ``move(pos)``, ``release``) over ``[start, end)`` of ``b``, reading the
    next window while the walk runs over the current one. The reads go
    through a handle of its own (``store.open_file``; an object's ETag must
    be the one ``b`` read: its reads are pinned to it too), in one thread."""

    def __init__(self, b: Binlog, start: int, end: int):
        self.src = b.store.open_file(b.path)
        if getattr(self.src, "etag", None) != b.etag:
            self.src.close()
            raise GtidxIOError("the object changed while it was read", path=b.path, offset=start)
        first, self.largest, self.growth = self.src.windows()
        self.end = min(end, b.size)
        self.want = first_read(first, start, self.end)
        self.pool = None
        self.moves = 0
        self.next = None                    # (file offset, future of its bytes)
        self.base, self.view = start, memoryview(b"")
        if start < self.end:
            try:
                self.move(start)
            except BaseException:
                self.src.close()
                raise

    def read(self, pos: int, n: int) -> bytes:
        return self.src.read_exact(pos, n)

    def move(self, pos: int) -> memoryview:
        """The window from the file offset ``pos`` (< ``end``, at most the
        current view's end): its bytes, the prefetched ones where they are."""
        have_end = self.base + len(self.view)
        n = min(self.want, self.end - pos)
        pending, self.next = self.next, None
        ahead = pending[1].result() if pending is not None else None    # the handle is free again
        if ahead is not None and pending[0] == have_end and pos <= have_end:
            data = bytes(self.view[pos - self.base:]) + ahead if pos < have_end else ahead
            if len(data) < min(n, self.end - pos):
                data += self.read(pos + len(data), min(n, self.end - pos) - len(data))
        else:
            data = self.read(pos, n)
        self.base, self.view = pos, memoryview(data)
        self.want = min(self.largest, self.want * self.growth)
        self.moves += 1
        after = pos + len(data)
        if after < self.end and self.moves > 1:     # a walk that moved on goes on: read its next window now
            if self.pool is None:
                self.pool = ThreadPoolExecutor(1)
            self.next = (after, self.pool.submit(self.read, after, min(self.want, self.end - after)))
        return self.view

    def release(self) -> None:
        self.view = memoryview(b"")
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        self.src.close()


def events(b: Binlog, start: int) -> Iterator[tuple[int, int, int, int, memoryview]]:
    """(offset, type, server_id, length, bytes) of every complete event of
    ``b`` from the event boundary ``start``, in file order. The bytes are a
    view valid until the next event is asked for (the window moves)."""
    size = b.size
    w = Ahead(b, start, size)
    view, base = w.view, start
    unpack = TYPE_SERVER_LENGTH.unpack_from
    off = start
    try:
        while off + HEADER_LEN <= size:
            if off + HEADER_LEN > base + len(view):
                view, base = w.move(off), off
            etype, server_id, ln = unpack(view, off - base)
            if ln < HEADER_LEN:
                raise b.corrupt(f"event length {ln} is below the {HEADER_LEN}-byte header", off)
            if off + ln > size:
                break
            if off + ln == size:
                cut = b.truncation(off, None)
                if cut is not None:
                    raise cut
            if off + ln <= base + len(view):
                yield off, etype, server_id, ln, view[off - base:off - base + ln]
            elif ln <= len(view):
                view, base = w.move(off), off
                yield off, etype, server_id, ln, view[:ln]
            else:                   # longer than the window: one read of its own
                yield off, etype, server_id, ln, memoryview(b.buffer[off:off + ln])
            off += ln
        if off != size and not b.fde.in_use:
            b.complete_end(off, closed_check=False)       # raises: the closed binlog's partial last event
    finally:
        view = None
        w.release()


def jumped(b: Binlog, start: int, spans: list, at) -> Iterator[tuple[int, int, int, int, memoryview]]:
    """``events`` from ``start`` up to the first GTID event (the events a
    file has before its first group), then for each span of ``spans``
    (``serve.jump.Jump.spans``: the groups between them are all left out),
    after calling ``at(span)``, the events from the boundary ``span.lo`` up
    to ``span.hi`` (None: the file's end)."""
    head = events(b, start)
    try:
        for ev in head:
            if ev[1] == GTID or ev[0] >= spans[0].lo:
                break
            yield ev
    finally:
        head.close()
    for span in spans:
        at(span)
        part = events(b, span.lo)
        try:
            for ev in part:
                if span.hi is not None and ev[0] >= span.hi:
                    break
                yield ev
        finally:
            part.close()
