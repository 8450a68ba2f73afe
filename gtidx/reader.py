"""Read a binlog GTID index (format 1.0): validate it, search it, list it.

``IndexReader`` works on any buffer (an ``mmap`` of the file, or bytes in
tests). Opening checks the file header, page 1's CRC and the root (the last
node, found by reading pages backwards while they carry IS_CONT; every one
of them must carry ROOT). Every other page is CRC-checked when a search first
touches it. Nothing here trusts a number read from the file: child pointers
must point backwards (children are written before their parents, so a
descent always ends), node sizes are bounded by the file, and a GTID count
is checked against the bytes left in its node before anything is read.

Searches follow the server's algorithm (Gtid_index_reader): descend from the
root keeping the state of the keys passed; in a leaf reached through a
separator the first key repeats that separator and is skipped.
"""
from __future__ import annotations

from typing import Callable, Iterator

from . import idxformat as fmt
from .errors import CorruptIndexError
from .gtid import BinlogState, Position


class Record(tuple):
    """An index record: ``(offset, state)``: the binlog up to ``offset``
    holds exactly ``state``."""
    __slots__ = ()

    def __new__(cls, offset: int, state: BinlogState):
        return tuple.__new__(cls, (offset, state))

    offset = property(lambda self: self[0])
    state = property(lambda self: self[1])


class IndexReader:
    def __init__(self, buf, *, path=None):
        self.buf = buf
        self.path = path
        self._checked: set[int] = set()
        size = len(buf)
        if size < fmt.FILE_HEADER_SIZE + fmt.PAGE_HEADER_SIZE:
            raise self._corrupt(f"{size} bytes: too short for an index", incomplete=True)
        magic, major, minor, page_size = fmt.FILE_HEADER.unpack_from(buf, 0)
        if magic != fmt.MAGIC:
            raise self._corrupt("not a binlog GTID index (bad magic)")
        if major > fmt.VERSION_MAJOR:
            raise self._corrupt(f"index format {major}.{minor} is newer than this gtidx reads (1.x)")
        if not fmt.valid_page_size(page_size):
            raise self._corrupt(f"page size {page_size} is outside {fmt.MIN_PAGE_SIZE}..{fmt.MAX_PAGE_SIZE}")
        if size < page_size or size % page_size:
            raise self._corrupt(f"file size {size} is not a whole number of {page_size}-byte pages",
                                incomplete=True)
        self.page_size = page_size
        self.version = (major, minor)
        self.npages = size // page_size
        self._check_page(1)
        self.root_page = self._find_root()

    # -- structure -------------------------------------------------------------
    def _corrupt(self, message: str, page: int | None = None, incomplete: bool = False) -> CorruptIndexError:
        e = CorruptIndexError(message, path=self.path, page=page)
        e.incomplete = incomplete
        return e

    def _flags(self, page_no: int) -> int:
        return self.buf[(page_no - 1) * self.page_size + fmt.flags_at(page_no)]

    def _check_page(self, page_no: int) -> None:
        if page_no in self._checked:
            return
        if not 1 <= page_no <= self.npages:
            raise self._corrupt(f"page {page_no} is outside the file (1..{self.npages})", page_no)
        if not fmt.crc_ok(self.buf, (page_no - 1) * self.page_size, self.page_size):
            raise self._corrupt("page fails its CRC32", page_no)
        self._checked.add(page_no)

    def _find_root(self) -> int:
        page = self.npages
        self._check_page(page)
        if self._flags(page) & (fmt.ROOT | fmt.LAST) != fmt.ROOT | fmt.LAST:
            raise self._corrupt("no root node at the end: incomplete (a writer still running, "
                                "or one that crashed)", page, incomplete=True)
        while self._flags(page) & fmt.IS_CONT:
            page -= 1
            if page < 1:
                raise self._corrupt("root node has no first page", 1)
            self._check_page(page)
            if not self._flags(page) & fmt.ROOT:
                raise self._corrupt("page inside the root node lacks the ROOT flag", page)
        return page

    def _node(self, first: int) -> tuple[bool, fmt.NodeCursor]:
        """The node starting at page ``first``: (is_leaf, cursor over its units)."""
        self._check_page(first)
        flags = self._flags(first)
        if flags & fmt.IS_CONT:
            raise self._corrupt("a child pointer leads to a continuation page", first)
        leaf = bool(flags & fmt.IS_LEAF)
        pages = []
        page = first
        ps = self.page_size
        while True:
            base = (page - 1) * ps
            pages.append((self.buf, base + fmt.payload_start(page), base + ps - fmt.CHECKSUM_SIZE))
            if flags & fmt.LAST:
                break
            page += 1
            if page > self.npages:
                raise self._corrupt("node runs past the end of the file", first)
            self._check_page(page)
            flags = self._flags(page)
            if not flags & fmt.IS_CONT or bool(flags & fmt.IS_LEAF) != leaf:
                raise self._corrupt("node page with inconsistent flags", page)
        return leaf, fmt.NodeCursor(pages)

    def _key(self, cur: fmt.NodeCursor, page: int):
        """Next key (offset, gtids) of a node, or None at its end."""
        head = cur.key()
        if head is None:
            return None
        count, offset = head
        gtids = cur.gtids(count)
        if gtids is None:
            raise self._corrupt(f"key claims {count} GTIDs, more than its node holds", page)
        return offset, gtids

    def _child(self, cur: fmt.NodeCursor, parent: int) -> int:
        child = cur.child()
        if child is None:
            raise self._corrupt("interior node ends without its child pointer", parent)
        if not 1 <= child < parent:
            # Append-only, bottom-up: a child is always written before its parent.
            raise self._corrupt(f"child pointer {child} does not point back into the file", parent)
        return child

    # -- search ------------------------------------------------------------------
    def search(self, accept: Callable[[int, BinlogState], bool],
               needs_state: bool = True) -> Record | None:
        """The last record that ``accept(offset, state)`` holds for, in key
        order, found by the server's descent; None when even the first
        record is not accepted. With ``needs_state=False`` the predicate only
        looks at offsets and rejected keys cost no state work.

        Every key met is checked against the range the descent allows: keys
        grow strictly inside a node and lie between the separator that led
        to the node and the one after it, and a leaf reached through a
        separator starts with that separator's offset. Pages with valid CRCs
        in the wrong place (a spliced or shifted file, a child pointer to
        another node) fail these checks instead of giving a wrong record."""
        current = BinlogState()
        current_offset = None
        updated = False
        lo = None               # offset of the separator that led here (None: leftmost path)
        hi = None               # offset of the key right of this subtree (None: rightmost)
        page = self.root_page
        leaf, cur = self._node(page)
        while not leaf:
            child = self._child(cur, page)
            prev = lo
            while True:
                key = self._key(cur, page)
                if key is None:
                    break                       # follow the rightmost child
                offset, gtids = key
                self._in_range(offset, prev, hi, page)
                prev = offset
                right = self._child(cur, page)
                if needs_state:
                    trial = current.copy().update(gtids)
                    ok = accept(offset, trial)
                else:
                    ok = accept(offset, None)
                if not ok:
                    hi = offset
                    break                       # follow the child left of this key
                current.update(gtids)
                current_offset = offset
                updated = True
                lo = offset
                child = right
            page = child
            leaf, cur = self._node(page)
        key = self._key(cur, page)
        if key is None:
            raise self._corrupt("empty leaf node", page)
        offset, gtids = key
        if lo is not None and (offset != lo or any(current.get(d, s) != q for d, s, q in gtids)):
            # it repeats the separator that led here, which ``current`` holds
            raise self._corrupt(f"leaf's first key (at {offset}) is not its separator (at {lo})", page)
        if hi is not None and offset >= hi:
            raise self._corrupt(f"key offset {offset} is not below the next separator ({hi})", page)
        if not updated:
            current.update(gtids)   # the first record of the index: the full state
        current_offset = offset
        if not accept(offset, current if needs_state else None):
            return None
        prev = offset
        while True:
            key = self._key(cur, page)
            if key is None:
                break
            offset, gtids = key
            self._in_range(offset, prev, hi, page)
            prev = offset
            if needs_state:
                trial = current.copy().update(gtids)
                if not accept(offset, trial):
                    break
                current = trial
            else:
                if not accept(offset, None):
                    break
                current.update(gtids)
            current_offset = offset
        return Record(current_offset, current)

    def _in_range(self, offset: int, prev: int | None, hi: int | None, page: int) -> None:
        """A key after ``prev`` (the previous key, or the separator that led
        here) and below ``hi`` (the separator right of this subtree)."""
        if prev is not None and offset <= prev:
            raise self._corrupt(f"key offsets out of order ({offset} after {prev})", page)
        if hi is not None and offset >= hi:
            raise self._corrupt(f"key offset {offset} is not below the next separator ({hi})", page)

    def at_offset(self, target: int) -> Record | None:
        """The last record at or before binlog offset ``target``."""
        return self.search(lambda off, _: off <= target, needs_state=False)

    def before_position(self, pos: Position) -> Record | None:
        """The last record whose state is before the replication position (is_before)."""
        return self.search(lambda _, state: state.is_before(pos))

    def first_record(self) -> Record:
        """Record 0: the first key of the leftmost leaf, a full state."""
        page = self._leftmost_leaf()
        _, cur = self._node(page)
        key = self._key(cur, page)
        if key is None:
            raise self._corrupt("empty leaf node", page)
        return Record(key[0], BinlogState(key[1]))

    def last_record(self) -> Record:
        rec = self.search(lambda off, _: True, needs_state=False)
        if rec is None:
            raise self._corrupt("index has no records", self.root_page)
        return rec

    def _leftmost_leaf(self) -> int:
        page = self.root_page
        for _ in range(self.npages):
            leaf, cur = self._node(page)
            if leaf:
                return page
            page = self._child(cur, page)
        raise self._corrupt("tree deeper than the file has pages", self.root_page)

    # -- listing and checking --------------------------------------------------------
    def records(self) -> Iterator[Record]:
        """Every record in binlog order, with its full state (in-order walk)."""
        yield from self._walk(self.root_page, BinlogState(), None, None)

    def check(self) -> dict:
        """Walk the whole tree checking every page CRC, key order, child
        pointers and that each subtree's first record repeats the separator
        that leads to it. Returns counts; raises CorruptIndexError on the
        first problem."""
        for p in range(1, self.npages + 1):
            self._check_page(p)
        stats = {"records": 0, "levels": 0, "nodes": 0, "pages": self.npages}
        last = -1
        for rec in self._walk(self.root_page, BinlogState(), None, stats):
            if rec.offset <= last:
                raise self._corrupt(f"record offsets out of order ({rec.offset} after {last})")
            last = rec.offset
            stats["records"] += 1
        return stats

    def _walk(self, page: int, state: BinlogState, sep: int | None, check, depth: int = 1):
        """Records of the subtree at ``page``, entered with ``state``.
        ``sep`` is the offset of the separator that led here (None on the
        leftmost path of the tree): a leaf's first key repeats it."""
        if depth > self.npages:
            raise self._corrupt("tree deeper than the file has pages", page)
        leaf, cur = self._node(page)
        if check is not None:
            check["nodes"] += 1
            check["levels"] = max(check["levels"], depth)
        if leaf:
            first = True
            while True:
                key = self._key(cur, page)
                if key is None:
                    break
                offset, gtids = key
                if first and sep is not None:
                    # Repeats the separator that led here: already in ``state``.
                    if check is not None and (offset != sep or state.copy().update(gtids) != state):
                        raise self._corrupt("leaf's first key disagrees with its separator", page)
                else:
                    state.update(gtids)
                first = False
                yield Record(offset, state.copy())
            if first:
                raise self._corrupt("empty leaf node", page)
            return
        children = [(self._child(cur, page), state.copy(), sep)]
        while True:
            key = self._key(cur, page)
            if key is None:
                break
            offset, gtids = key
            child = self._child(cur, page)
            state.update(gtids)
            children.append((child, state.copy(), offset))
        for child, child_state, child_sep in children:
            yield from self._walk(child, child_state, child_sep, check, depth + 1)


# -- an index still being written (no root yet) --------------------------------------------

class PartialIndex:
    """The complete nodes at the front of an index that has no root yet: a
    writer (gtidx tail, or the server for its active binlog) appends a node
    once it is full, so the file is whole nodes followed, perhaps, by a page
    being written. Reading stops at the first page that is missing, torn, or
    fails its CRC, or at a node whose last page is not there yet.

    ``keys`` are the leaf keys in file order, as stored: ``(offset, gtids)``.
    Applying them in order rebuilds every record's state (a leaf's first key
    is the union of the GTIDs since the previous leaf's first key, which the
    running state already holds, plus its own record)."""

    def __init__(self, buf, *, path=None):
        self.path = path
        self.page_size = 0
        self.pages = 0               # pages of complete nodes
        self.nodes = 0
        self.keys: list[tuple[int, list]] = []
        size = len(buf)
        if size < fmt.FILE_HEADER_SIZE + fmt.PAGE_HEADER_SIZE:
            return
        magic, major, _, page_size = fmt.FILE_HEADER.unpack_from(buf, 0)
        if magic != fmt.MAGIC or major > fmt.VERSION_MAJOR or not fmt.valid_page_size(page_size):
            raise CorruptIndexError("not a binlog GTID index (bad header)", path=path)
        self.page_size = page_size
        whole = size // page_size
        page = 1
        while page <= whole:
            first = page
            pages = []
            complete = False
            while page <= whole:
                base = (page - 1) * page_size
                if not fmt.crc_ok(buf, base, page_size):
                    break
                flags = buf[base + fmt.flags_at(page)]
                if bool(flags & fmt.IS_CONT) != (page != first):
                    break
                pages.append((buf, base + fmt.payload_start(page), base + page_size - fmt.CHECKSUM_SIZE))
                page += 1
                if flags & fmt.LAST:
                    complete = True
                    break
            if not complete:
                break
            self.pages = page - 1
            self.nodes += 1
            first_flags = buf[(first - 1) * page_size + fmt.flags_at(first)]
            if first_flags & fmt.IS_LEAF:
                cur = fmt.NodeCursor(pages)
                while True:
                    head = cur.key()
                    if head is None:
                        break
                    gtids = cur.gtids(head[0])
                    if gtids is None:
                        raise CorruptIndexError("key runs past its node", path=path, page=first)
                    self.keys.append((head[1], gtids))

    def records(self) -> list[Record]:
        state, out, last = BinlogState(), [], -1
        for offset, gtids in self.keys:
            if offset <= last:
                raise CorruptIndexError(f"record offsets out of order ({offset} after {last})", path=self.path)
            last = offset
            state.update(gtids)
            out.append(Record(offset, state.copy()))
        return out


class HotIndex:
    """Lookups on a PartialIndex: the same searches as IndexReader over the
    records of its complete leaves (a lookup past the last of them scans the
    binlog from it, like any lookup past an index's last record)."""

    def __init__(self, partial: PartialIndex):
        self.page_size = partial.page_size
        self._records = partial.records()
        if not self._records:
            raise CorruptIndexError("no complete leaf yet", path=partial.path)

    def search(self, accept: Callable[[int, BinlogState], bool], needs_state: bool = True) -> Record | None:
        found = None
        for rec in self._records:      # like a leaf scan: up to the first rejected record
            if not accept(rec.offset, rec.state if needs_state else None):
                break
            found = rec
        return found

    def at_offset(self, target: int) -> Record | None:
        return self.search(lambda off, _: off <= target, needs_state=False)

    def before_position(self, pos: Position) -> Record | None:
        return self.search(lambda _, state: state.is_before(pos))

    def first_record(self) -> Record:
        return self._records[0]

    def last_record(self) -> Record:
        return self._records[-1]

    def records(self) -> Iterator[Record]:
        """Every record of the complete leaves, in binlog order."""
        return iter(self._records)
