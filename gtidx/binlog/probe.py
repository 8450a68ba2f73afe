"""Event boundaries around any byte of a binlog, across damage (``gtidx probe``).

``walk_to(b, start, state, target)`` walks the length chain of a ``Binlog``
from ``start`` (an event boundary the caller trusts: the file start, the end
of the GTID_LIST, a checked index record) to the event holding ``target``,
checking every event on the way: a plausible header (``events.plausible_header``:
a known type, a length that holds a header and a checksum, a next-position
field that is 0 or the event's end) and, when the binlog has checksums, its
CRC32 (``events.event_crc``). The answer is a ``Boundaries``.

Only the chain vouches for a boundary: bytes inside an event that look like
events (forged events in row data, with valid CRCs) are never looked at while
the chain holds. Where it breaks (an event fails those checks: a destroyed
header, a damaged body), the bytes from there on are damaged until the next
trustworthy boundary: the first offset after the break where a plausible
event (CRC32 valid, with checksums) starts a chain of such events that runs
to the end of the file, or for ``CHAIN_EVENTS`` events one of which at least
carries its own end offset in its next-position field (``_Chain.chains``:
forged bytes cannot know where they will be logged). The GTID state after a
damaged range is unknown (a GTID event may have been in it): None.

What no check can tell, and is not claimed: in a binlog without checksums a
header whose length was changed to another plausible one that still matches
its next-position field is followed; the break is then seen where the chain
lands (the damage is reported after the event it is in). A forgery that
puts in its events the offsets where the server will log them (known only
to someone who can predict the binlog position of their own transaction),
inside the very event whose header was destroyed, would be taken as the
chain's continuation (inside that event only).

The bytes are read with ``pread`` through ``Binlog.buffer`` (one chunk at a
time, not kept): a walk from the start of a big file holds at most one
chunk and one event.
"""
from __future__ import annotations

from typing import NamedTuple

from .events import CRC_LEN, EVENT_HEADER, GTID, GTID_HEAD, HEADER_LEN, U32, event_crc, plausible_header
from .mariadb import Binlog
from ..errors import CorruptBinlogError
from ..gtid import BinlogState

CHAIN_EVENTS = 32       # a resynchronisation candidate is taken when this many events chain from it
CHUNK = 1 << 20         # bytes read at a time, at most
FIRST_CHUNK = 64 << 10  # and at first


class Boundaries(NamedTuple):
    """The event boundaries around ``target``: ``before`` <= target <= ``after``
    (equal when ``target`` is a boundary); ``state`` the GTID state at
    ``before`` (None: unknown, damaged bytes lie between the walk's start and
    ``before``); ``damaged`` the last damaged range ``(lo, hi)`` the walk
    met, or None."""
    before: int
    after: int
    state: BinlogState | None
    damaged: tuple[int, int] | None


class _Bytes:
    """The file's bytes, one chunk at a time (read with pread, not kept)."""

    def __init__(self, b: Binlog):
        self._view = b.buffer
        self.size = b.size
        self.base = 0
        self.data = memoryview(b"")
        self._want = FIRST_CHUNK

    def at(self, off: int, n: int):
        """``(data, i)``: ``data[i:i + n]`` are the file's bytes ``[off, off + n)``
        (fewer at the end of the file). A read is ``FIRST_CHUNK`` bytes at first
        (a walk from an index record is short: one small read, one ranged GET
        on an object store), twice the last up to ``CHUNK``."""
        i = off - self.base
        if i < 0 or (i + n > len(self.data) and self.base + len(self.data) < self.size):
            self.base, i = off, 0
            self.data = memoryview(self._view[off:off + max(n, self._want)])
            self._want = min(CHUNK, self._want * 2)
        return self.data, i

    def get(self, off: int, n: int):
        """``[off, off + n)``, shorter at the end of the file."""
        data, i = self.at(off, n)
        return data[i:i + n]


PARTIAL = "partial"     # event_at: the file ends inside this (plausible) event


class _Chain:
    def __init__(self, b: Binlog):
        self.b = b
        self.bytes = _Bytes(b)
        self.size = b.size
        self.crc = b.checksum_len
        self.known = b.known_types

    def event_at(self, off: int):
        """``(type, length, next_pos)`` of a checked event at ``off``; PARTIAL when its
        plausible header (or less than a header) runs past the end of the
        file; None when no real event can start there."""
        data, i = self.bytes.at(off, HEADER_LEN)
        if len(data) - i < HEADER_LEN:
            return PARTIAL
        _, etype, _, ln, next_pos, _ = EVENT_HEADER.unpack_from(data, i)
        if not plausible_header(off, etype, ln, next_pos, self.crc, self.known):
            return None
        if off + ln > self.size:
            return PARTIAL
        if self.crc:
            if i + ln > len(data):
                data, i = self.bytes.at(off, ln)
            end = i + ln - CRC_LEN
            if event_crc(data[i:end], etype) != U32.unpack_from(data, end)[0]:
                return None
        return etype, ln, next_pos

    def chains(self, off: int) -> bool:
        """Do checked events chain from ``off`` to the end of the file (or to
        the partial last event of a file still being written), or for
        ``CHAIN_EVENTS`` events of which one at least is anchored: its
        next-position field holds its end offset in the file, not 0?

        The anchor is what bytes in row data cannot fake blindly: a server
        writes every event's end there (MariaDB 11.4+ writes 0 for events
        from the transaction cache, but never for a GTID or XID event), while
        a forger who does not know where the server will log their bytes can
        only write 0 (or a wrong offset, which ``plausible_header`` refuses)."""
        anchored = False
        for _ in range(CHAIN_EVENTS):
            if off == self.size:
                return True
            ev = self.event_at(off)
            if ev is None:
                return False
            if ev is PARTIAL:
                return self.b.growing
            anchored = anchored or ev[2] != 0
            off += ev[1]
        return anchored or self.chains_to_end(off)

    def chains_to_end(self, off: int) -> bool:
        """Do checked events chain from ``off`` to the end of the file?"""
        while off != self.size:
            ev = self.event_at(off)
            if ev is None or ev is PARTIAL:
                return ev is PARTIAL and self.b.growing
            off += ev[1]
        return True

    def resync(self, lo: int) -> int | None:
        """The first trustworthy boundary after the chain broke at ``lo``
        (None: none up to the end of the file): a checked event (``event_at``)
        that starts a chain (``chains``). Offsets whose type byte no server
        writes (most of them) are passed over without a call."""
        known = self.known
        last = self.size - HEADER_LEN
        c = lo + 1
        while c <= last:
            block = self.bytes.get(c, CHUNK + HEADER_LEN)
            stop = min(c + len(block) - HEADER_LEN, last)
            for i in range(stop - c + 1):
                if known[block[i + 4]]:
                    ev = self.event_at(c + i)
                    if ev is not None and ev is not PARTIAL and self.chains(c + i):
                        return c + i
            c = stop + 1
        return None


def walk_to(b: Binlog, start: int, state: BinlogState | None, target: int, gtids=None) -> Boundaries:
    """The boundaries around ``target`` (``start`` <= target <= b.size),
    walking the chain from the boundary ``start`` whose state is ``state``
    (None: unknown). Raises CorruptBinlogError when ``target`` lies in
    damaged bytes that no trustworthy boundary follows. ``gtids``: how the
    state follows the events, ``(types, add)``: ``add(state, type, the
    event's bytes)`` for each event of those types (a MySQL binlog's GTID
    events, its state a ``GtidSet``); None: MariaDB's GTID events."""
    chain = _Chain(b)
    size = b.size
    off = start
    damaged = None
    while True:
        if off == target:
            return Boundaries(off, off, state, damaged)
        ev = chain.event_at(off)
        if ev is not None and ev is not PARTIAL:
            etype, ln, _ = ev
            end = off + ln
            if end > target:
                return Boundaries(off, end, state, damaged)
            if gtids is not None:
                if etype in gtids[0] and state is not None:
                    gtids[1](state, etype, chain.bytes.get(off, ln))
            elif etype == GTID and state is not None:
                _, server_id, seq, domain, _ = GTID_HEAD.unpack_from(chain.bytes.get(off, GTID_HEAD.size))
                state.apply(domain, server_id, seq)
            off = end
            continue
        lo = off
        hi = chain.resync(lo)
        if hi is None:
            if ev is PARTIAL:
                # the file ends inside this event: still being written, or cut short
                return Boundaries(lo, size, state, None if b.growing else (lo, size))
            raise CorruptBinlogError(
                f"the event chain breaks at offset {lo} and no trustworthy event boundary follows "
                f"up to the end of the file (size {size})", path=b.path, offset=lo,
                hint=f"the last trustworthy boundary before offset {target} is {lo}")
        damaged = (lo, hi)
        if target < hi:
            return Boundaries(lo, hi, state, damaged)
        state = None
        off = hi
