"""Read a binlog GTID index (format 1.0): validate it, search it, list it.

``IndexReader`` reads an open file (``filebuf.ReadFile``) or any buffer
(bytes in tests). A file is never mapped (a mapping faults when the file
shrinks under it): it is read whole with one ``pread`` when small, else page
by page with ``pread`` when a search first touches a page, into a bounded
cache; a page the file no longer has (it shrank) makes the index
incomplete, as any other damage, and the lookup falls back to a scan.
Nothing is allocated by a size read from the file beyond one page. Opening
checks the file header, page 1's CRC and the root (the last node, found by
reading pages backwards while they carry IS_CONT; every one of them must
carry ROOT). Every other page is CRC-checked when a search first touches it. Nothing here trusts a number read from the file: child pointers
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
from .errors import CorruptIndexError, GtidxError
from .filebuf import ReadFile
from .gtid import BinlogState, Position


class Record(tuple):
    """An index record: ``(offset, state)``: the binlog up to ``offset``
    holds exactly ``state``."""
    __slots__ = ()

    def __new__(cls, offset: int, state: BinlogState):
        return tuple.__new__(cls, (offset, state))

    offset = property(lambda self: self[0])
    state = property(lambda self: self[1])


# An index file up to this size is read whole at open (one pread); a bigger
# one page by page, keeping at most CACHE_BYTES of checked pages.
WHOLE_MAX = 1 << 20
CACHE_BYTES = 16 << 20
CHECK_BLOCK = 1 << 20           # check() streams the file in reads of this size
# A node is read whole into memory: one bigger than this (a GTID state of
# millions of entries; only a forged file has one) makes the index unusable.
NODE_MAX = 64 << 20


def _read(src: ReadFile, offset: int, n: int, path, page=None) -> bytes:
    """``n`` bytes of an index file at ``offset``; any failure (the file
    shrank, an I/O error, no memory) is a CorruptIndexError: the index
    cannot be used, a lookup scans instead."""
    try:
        return src.read_exact(offset, n)
    except GtidxError as e:
        err = CorruptIndexError(e.message, path=path, page=page)
        err.incomplete = True
    except MemoryError:
        err = CorruptIndexError(f"out of memory reading {n} bytes of the index", path=path, page=page)
        err.incomplete = False
    raise err


class IndexReader:
    def __init__(self, source, *, path=None):
        """``source``: an open ``filebuf.ReadFile`` (which this reader then
        reads from; the caller closes it) or a bytes-like buffer."""
        self.path = path
        self._src = None
        self._cache: dict[int, object] = {}     # page number -> its checked bytes
        if isinstance(source, ReadFile):
            size = source.size
            if size <= WHOLE_MAX:
                source = _read(source, 0, size, path)
            else:
                self._src = source
        self.buf = None if self._src is not None else source
        self.size = size = len(source) if self._src is None else source.size
        if size < fmt.FILE_HEADER_SIZE + fmt.PAGE_HEADER_SIZE:
            raise self._corrupt(f"{size} bytes: too short for an index", incomplete=True)
        head = self.buf if self._src is None else _read(self._src, 0, fmt.FILE_HEADER_SIZE, path, 1)
        magic, major, minor, page_size = fmt.FILE_HEADER.unpack_from(head, 0)
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

    @property
    def reads_file(self) -> bool:
        """Does the reader still read pages from the file it was given (a
        big index), or did it read it whole at open (then it may be closed)?"""
        return self._src is not None

    # -- structure -------------------------------------------------------------
    def _corrupt(self, message: str, page: int | None = None, incomplete: bool = False) -> CorruptIndexError:
        e = CorruptIndexError(message, path=self.path, page=page)
        e.incomplete = incomplete
        return e

    def _flags(self, page_no: int) -> int:
        return self._page(page_no)[fmt.flags_at(page_no)]

    def _check_page(self, page_no: int) -> None:
        self._page(page_no)

    def _page(self, page_no: int):
        """Page ``page_no``'s bytes, its CRC checked: read (from the file,
        with pread) and checked when first needed."""
        page = self._cache.get(page_no)
        if page is not None:
            return page
        if not 1 <= page_no <= self.npages:
            raise self._corrupt(f"page {page_no} is outside the file (1..{self.npages})", page_no)
        ps = self.page_size
        start = (page_no - 1) * ps
        if self._src is None:
            page = memoryview(self.buf)[start:start + ps]
        else:
            page = _read(self._src, start, ps, self.path, page_no)
            if len(self._cache) * ps >= CACHE_BYTES:
                del self._cache[next(iter(self._cache))]       # the oldest
        if not fmt.crc_ok(page, 0, ps):
            raise self._corrupt("page fails its CRC32", page_no)
        self._cache[page_no] = page
        return page

    def _check_all_pages(self) -> None:
        """Every page's CRC, streaming the file (nothing kept)."""
        if self._src is None:
            for p in range(1, self.npages + 1):
                self._check_page(p)
            return
        ps = self.page_size
        per_read = max(1, CHECK_BLOCK // ps)
        for first in range(1, self.npages + 1, per_read):
            n = min(per_read, self.npages - first + 1)
            block = _read(self._src, (first - 1) * ps, n * ps, self.path, first)
            for i in range(n):
                if not fmt.crc_ok(block, i * ps, ps):
                    raise self._corrupt("page fails its CRC32", first + i)

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
        end = self.page_size - fmt.CHECKSUM_SIZE
        while True:
            pages.append((self._page(page), fmt.payload_start(page), end))
            if flags & fmt.LAST:
                break
            page += 1
            if page > self.npages:
                raise self._corrupt("node runs past the end of the file", first)
            if (page - first + 1) * self.page_size > NODE_MAX:
                raise self._corrupt(f"node larger than {NODE_MAX >> 20} MiB", first)
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
        self._check_all_pages()
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

    def __init__(self, source, *, path=None):
        """``source``: an open ``filebuf.ReadFile`` (read page by page with
        pread, up to the first page it no longer has) or a bytes-like buffer."""
        self.path = path
        self.page_size = 0
        self.pages = 0               # pages of complete nodes
        self.nodes = 0
        self.keys: list[tuple[int, list]] = []
        if isinstance(source, ReadFile) and source.size <= WHOLE_MAX:
            try:
                source = source.pread(source.size, 0)   # small: one read (short if it shrank)
            except (OSError, GtidxError):
                source = b""
        if isinstance(source, ReadFile):
            size = source.size

            def read(offset: int, n: int):
                try:
                    return source.pread(n, offset)
                except (OSError, MemoryError, GtidxError):
                    return b""           # as a page that is not there (yet)
        else:
            size = len(source)
            view = memoryview(source)

            def read(offset: int, n: int):
                return view[offset:offset + n]
        if size < fmt.FILE_HEADER_SIZE + fmt.PAGE_HEADER_SIZE:
            return
        head = read(0, fmt.FILE_HEADER_SIZE)
        if len(head) < fmt.FILE_HEADER_SIZE:
            return                   # it shrank since open: nothing usable
        magic, major, _, page_size = fmt.FILE_HEADER.unpack_from(head, 0)
        if magic != fmt.MAGIC or major > fmt.VERSION_MAJOR or not fmt.valid_page_size(page_size):
            raise CorruptIndexError("not a binlog GTID index (bad header)", path=path)
        self.page_size = page_size
        whole = size // page_size
        end = page_size - fmt.CHECKSUM_SIZE
        page = 1
        while page <= whole:
            first = page
            first_flags = 0
            pages = []
            complete = False
            while page <= whole and (page - first + 1) * page_size <= NODE_MAX:
                buf = read((page - 1) * page_size, page_size)
                if len(buf) < page_size or not fmt.crc_ok(buf, 0, page_size):
                    break
                flags = buf[fmt.flags_at(page)]
                if bool(flags & fmt.IS_CONT) != (page != first):
                    break
                if page == first:
                    first_flags = flags
                pages.append((buf, fmt.payload_start(page), end))
                page += 1
                if flags & fmt.LAST:
                    complete = True
                    break
            if not complete:
                break
            self.pages = page - 1
            self.nodes += 1
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
