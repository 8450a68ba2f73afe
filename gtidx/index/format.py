"""The binlog GTID index file, format 1.0 (MariaDB 11.4+'s ``<binlog>.idx``).

Pure bytes in, bytes out: page layout, sealing, node cursors, and the key
walk of a node (``node_keys``, ``accepted``: the step shared by the root
descent and the leaf search, as the server's gtid_index.cc splits its
reader). The writer and reader build on this; neither opens a file here.

Layout (all little-endian; see docs/index-format.md for the worked example):

* pages of ``page_size`` bytes, numbered from 1; each ends with the CRC32 of
  its other bytes; page 1 starts with the 12-byte file header;
* each page then has a 4-byte page header: flags (IS_LEAF, IS_CONT, LAST,
  ROOT) and 3 unused bytes;
* a node is one or more pages (continuation pages carry IS_CONT, the last
  one LAST); its payload is a stream of units that never straddle a page:
  key headers (8 bytes: GTID count + 1, binlog offset), GTIDs (16 bytes) and,
  in interior nodes, child pointers (4 bytes, page numbers);
* a key count of 0, or too few bytes left on the node's last page, ends it.

What a key holds is the one pluggable part (``KeyCodec``): MariaDB's
format (``MARIADB``: 16-byte GTIDs) and gtidx's MySQL index
(``index.mysql.MYSQL``: a delta-coded GTID set in 1-byte units) share every
other rule here, in the writer and in the reader; each has its own magic.
"""
from __future__ import annotations

import functools
import struct
import zlib
from itertools import chain
from typing import Callable, Iterator

from ..errors import CorruptIndexError
from ..gtid import BinlogState, LatestGtids

MAGIC = b"\xfe\xfe\x0c\x01"
VERSION_MAJOR = 1
VERSION_MINOR = 0

# Every byte width of the format, named once.
FILE_HEADER = struct.Struct("<4sBBxxI")   # magic, major, minor, 2 unused, page_size
PAGE_HEADER = struct.Struct("<B3x")       # flags, 3 unused
KEY_HEADER = struct.Struct("<II")         # GTID count + 1 (0 ends the node), binlog offset
GTID_ENTRY = struct.Struct("<IIQ")        # domain_id, server_id, seq_no
CHILD_PTR = struct.Struct("<I")           # page number of the child's first page
CHECKSUM = struct.Struct("<I")            # CRC32 of the page's other bytes

FILE_HEADER_SIZE = FILE_HEADER.size       # 12
PAGE_HEADER_SIZE = PAGE_HEADER.size       # 4
KEY_HEADER_SIZE = KEY_HEADER.size         # 8
GTID_SIZE = GTID_ENTRY.size               # 16
CHILD_PTR_SIZE = CHILD_PTR.size           # 4
CHECKSUM_SIZE = CHECKSUM.size             # 4

IS_LEAF = 0x01
IS_CONT = 0x02
LAST = 0x04
ROOT = 0x08

MIN_PAGE_SIZE = 64                        # the server's accepted range
MAX_PAGE_SIZE = 16 * 1024 * 1024
DEFAULT_PAGE_SIZE = 4096
DEFAULT_SPAN_MIN = 65536
DEFAULT_MAX_RATIO = 0.02                  # gtidx's size budget: an index is at most this part of its binlog
MAX_OFFSET = 0xFFFFFFFF                   # offsets are u32: nothing past 4 GiB is indexed


@functools.lru_cache(maxsize=64)
def first_record_offset(b) -> int:
    """Record 0's offset in the index of binlog ``b`` (a ``binlog.Binlog``):
    the end of the GTID_LIST event (of the preamble in a binlog without one)."""
    return b.gtid_list_end if b.gtid_list_end is not None else b.body_start


def gtid_block(count: int) -> struct.Struct:
    """``count`` consecutive GTID entries, for packing a whole key at once."""
    return struct.Struct("<" + "IIQ" * count)


def flags_at(page_no: int) -> int:
    """Byte position of the flags inside page ``page_no`` (after the file header on page 1)."""
    return FILE_HEADER_SIZE if page_no == 1 else 0


def payload_start(page_no: int) -> int:
    return flags_at(page_no) + PAGE_HEADER_SIZE


def file_header(page_size: int, magic: bytes = MAGIC) -> bytes:
    return FILE_HEADER.pack(magic, VERSION_MAJOR, VERSION_MINOR, page_size)


def seal(page: bytearray) -> bytearray:
    """Store the CRC32 of the page's first ``len - 4`` bytes in its last 4."""
    end = len(page) - CHECKSUM_SIZE
    CHECKSUM.pack_into(page, end, zlib.crc32(memoryview(page)[:end]))
    return page


def crc_ok(buf, start: int, page_size: int) -> bool:
    end = start + page_size - CHECKSUM_SIZE
    return zlib.crc32(memoryview(buf)[start:end]) == CHECKSUM.unpack_from(buf, end)[0]


def valid_page_size(page_size: int) -> bool:
    return MIN_PAGE_SIZE <= page_size <= MAX_PAGE_SIZE


class NodeCursor:
    """Reads a node's units across its pages, as the server's reader does:
    a unit that does not fit before the page's CRC is on the next page; when
    there is no next page the node has ended.

    ``pages`` are ``(buffer, payload_start, payload_end)`` for each page of
    the node, in order (the caller has checked CRCs and flags).
    """

    __slots__ = ("pages", "index", "buf", "pos", "end")

    def __init__(self, pages: list[tuple[object, int, int]]):
        self.pages = pages
        self.index = 0
        self.buf, self.pos, self.end = pages[0]

    def need(self, n: int) -> bool:
        """Make ``n`` bytes available at ``pos``; False at the end of the node."""
        if self.pos + n <= self.end:
            return True
        while self.index + 1 < len(self.pages):
            self.index += 1
            self.buf, self.pos, self.end = self.pages[self.index]
            if self.pos + n <= self.end:
                return True
        return False

    def remaining_units(self, unit: int) -> int:
        """How many units of ``unit`` bytes the rest of the node can hold at most."""
        total = (self.end - self.pos) // unit
        for buf, start, end in self.pages[self.index + 1:]:
            total += (end - start) // unit
        return total

    def key(self):
        """(gtid_count, offset) of the next key, or None at the end of the node."""
        if not self.need(KEY_HEADER_SIZE):
            return None
        count1, offset = KEY_HEADER.unpack_from(self.buf, self.pos)
        if count1 == 0:
            return None
        self.pos += KEY_HEADER_SIZE
        return count1 - 1, offset

    def gtids(self, count: int) -> list[tuple[int, int, int]] | None:
        """``count`` GTIDs as (domain, server, seq); None if the node ends first."""
        n = count * GTID_SIZE
        if self.pos + n <= self.end:        # all in this page (nearly always): one C-level pass
            pos = self.pos
            self.pos = pos + n
            return list(GTID_ENTRY.iter_unpack(self.buf[pos:pos + n]))
        if count > self.remaining_units(GTID_SIZE):
            return None
        out = []
        unpack = GTID_ENTRY.unpack_from
        for _ in range(count):
            if not self.need(GTID_SIZE):
                return None
            out.append(unpack(self.buf, self.pos))
            self.pos += GTID_SIZE
        return out

    def units(self, count: int, size: int) -> bytes | None:
        """``count`` units of ``size`` bytes, joined; None if the node ends
        first. A unit never straddles a page: each page holds as many whole
        units as fit before its CRC."""
        n = count * size
        if self.pos + n <= self.end:
            pos = self.pos
            self.pos = pos + n
            return bytes(self.buf[pos:pos + n])
        if count > self.remaining_units(size):
            return None
        parts = []
        while count:
            if not self.need(size):
                return None
            take = min(count, (self.end - self.pos) // size)
            parts.append(self.buf[self.pos:self.pos + take * size])
            self.pos += take * size
            count -= take
        return b"".join(parts)

    def child(self) -> int | None:
        if not self.need(CHILD_PTR_SIZE):
            return None
        (page,) = CHILD_PTR.unpack_from(self.buf, self.pos)
        self.pos += CHILD_PTR_SIZE
        return page


class KeyCodec:
    """What a key holds: the one part of the format a flavor chooses. Keys
    are ``count`` units of ``unit`` bytes after the key header; the node
    filling, paging, tree and search rules are the same for every codec.

    A key's *value* is the change since the previous record (a delta); a
    *state* is where applying values in file order gets (a record's full
    state); a *union* accumulates values (a node's running union, which
    the writer carries up as a separator)."""

    magic = MAGIC
    unit = GTID_SIZE
    name = "MariaDB binlog GTID index"

    def encode(self, value) -> tuple[int, bytes]:
        """(count of units, their bytes) of a key's value."""
        n = len(value)
        return n, gtid_block(n).pack(*chain.from_iterable(value)) if n else b""

    def read(self, cur: NodeCursor, count: int):
        """The value of a key of ``count`` units at ``cur``; None if the
        node ends first. Raises ValueError for bytes that do not decode."""
        return cur.gtids(count)

    def union(self):
        """An empty accumulator: ``update(value)``, ``items()`` (its value)."""
        return LatestGtids()

    def state(self):
        """An empty state: ``copy()``, ``update(value)`` (returns itself)."""
        return BinlogState()

    def apply_all(self, state, values: list) -> None:
        """Apply ``values`` in order to ``state``, in place."""
        state.update(chain.from_iterable(values))

    def holds(self, state, value, exact: bool = False) -> bool:
        """Does ``state`` already hold ``value`` (a leaf's first key
        repeating the separator that leads to it)? ``exact``: applying it
        must change nothing at all."""
        get = state.get
        if any(get(d, s) != q for d, s, q in value):
            return False
        return not exact or state.copy().update(value) == state

    def same(self, a, b) -> bool:
        """Are two states equal (record 0 against the binlog's start)?"""
        return a == b


MARIADB = KeyCodec()


# -- the key walk of a node: pure functions over a NodeCursor -------------------------
# ``node_keys`` is every loop over a node's keys: the format's "next key or
# stop" rule and the checks on each key (nothing trusts a number read from
# the file). ``accepted`` applies keys to a state while a predicate holds.
# ``index.reader`` reads the pages and nodes these walk, and drives the
# descent with them.

def corrupt(message: str, path, page: int | None = None, incomplete: bool = False) -> CorruptIndexError:
    """The CorruptIndexError for damage in the index at ``path`` (on
    ``page``); ``incomplete``: the index is still being written or was cut
    short, not damaged (a lookup scans either way)."""
    e = CorruptIndexError(message, path=path, page=page)
    e.incomplete = incomplete
    return e


def child_pointer(cur: NodeCursor, page: int, path) -> int:
    """The child pointer at ``cur`` in the interior node at ``page``.

    It must point back into the file, before ``page``: a child is always
    written before its parent (append-only, bottom-up), so every descent
    ends. Raises CorruptIndexError otherwise, or when the node ends first.
    """
    child = cur.child()
    if child is None:
        raise corrupt("interior node ends without its child pointer", path, page)
    if not 1 <= child < page:
        raise corrupt(f"child pointer {child} does not point back into the file", path, page)
    return child


def node_keys(cur: NodeCursor, page: int, path, lo: int | None = None, hi: int | None = None,
              children: bool = False, ordered: bool = True,
              codec: KeyCodec = MARIADB) -> Iterator[tuple[int, list, int | None]]:
    """Iterate the keys of the node at ``page``, from ``cur`` on, left to right.

    Yields ``(offset, gtids, child)``: the key's binlog offset, its GTIDs as
    stored, and in an interior node (``children=True``) the child pointer
    right of the key, else None. Stops at the end of the node (a zero GTID
    count, or no room left for a key header): the format's "next key or
    stop" rule, in one place.

    Every key is checked before it is yielded: its GTID count against the
    bytes left in the node (nothing is allocated by a count read from the
    file), and, with ``ordered``, its offset against the range the descent
    allows: above the previous key (the node's first key: above ``lo``, the
    separator left of the node) and below ``hi`` (the separator right of
    it); None is no bound. Raises CorruptIndexError, with ``page``, on the
    first broken rule. ``codec`` reads a key's value (``KeyCodec.read``;
    bytes that do not decode are corrupt too).

    Runtime complexity: O(k) for a node of k keys, each GTID read once.
    """
    prev = lo
    next_key = cur.key
    read = codec.read
    while True:
        head = next_key()
        if head is None:
            return
        count, offset = head
        try:
            gtids = read(cur, count)
        except ValueError as e:
            raise corrupt(f"key at offset {offset} does not decode: {e}", path, page) from None
        if gtids is None:
            raise corrupt(f"key claims {count} units, more than its node holds", path, page)
        if ordered:
            if prev is not None and offset <= prev:
                raise corrupt(f"key offsets out of order ({offset} after {prev})", path, page)
            if hi is not None and offset >= hi:
                raise corrupt(f"key offset {offset} is not below the next separator ({hi})", path, page)
            prev = offset
        yield offset, gtids, child_pointer(cur, page, path) if children else None


def accepted(keys: Iterator[tuple[int, list, int | None]], state: BinlogState,
             accept: Callable[[int, BinlogState | None], bool], needs_state: bool, states: bool = True,
             codec: KeyCodec = MARIADB):
    """Apply ``keys`` to ``state`` while ``accept(offset, state with the
    key)`` holds: the step shared by the root descent and the leaf search.

    Returns ``(state, last, child, stop)``: the state after the accepted
    keys, the last accepted key's offset and the child pointer right of it
    (None: no key was accepted) and the first rejected key's offset (None:
    every key was accepted). With ``needs_state=False`` ``accept`` gets
    None for the state, a rejected key costs no state work, and ``state``
    is updated in place once, with the accepted keys' GTIDs in order
    (not at all with ``states=False``: the caller wants offsets only);
    otherwise ``accept`` gets a new state it may keep, which becomes
    ``state``.

    Runtime complexity: O(k) calls of ``accept`` for k keys, plus a state
    copy per key when ``needs_state``.
    """
    last = child = stop = None
    if needs_state:
        for offset, gtids, right in keys:
            trial = state.copy().update(gtids)
            if not accept(offset, trial):
                return state, last, child, offset
            state, last, child = trial, offset, right
        return state, last, child, None
    accepted = []               # applied at the end, in order: one update call
    for offset, gtids, right in keys:
        if not accept(offset, None):
            stop = offset
            break
        accepted.append(gtids)
        last, child = offset, right
    if states:
        codec.apply_all(state, accepted)
    return state, last, child, stop
