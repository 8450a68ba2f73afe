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

Searches follow the server's algorithm (Gtid_index_reader): a root descent
keeping the state of the keys passed, then a search of the one leaf it
reaches (in a leaf reached through a separator the first key repeats that
separator and is checked, not applied). Every loop over a node's keys is
``search.node_keys``: the format's "next key or stop" rule and the checks on each key.
"""
from __future__ import annotations

from typing import Callable, Iterator

from . import format as fmt
from .format import accepted, child_pointer, corrupt, node_keys
from ..errors import CorruptIndexError, GtidxError
from ..filebuf import Source
from ..gtid import BinlogState, Position


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


def _read(src: Source, offset: int, n: int, path, page=None) -> bytes:
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


class _Lookups:
    """The lookups every index reader answers, in terms of its ``search``."""

    def last_offset(self) -> int:
        """The last record's offset."""
        return self.last_record().offset

    def at_offset(self, target: int) -> Record | None:
        """Return the last record at or before binlog offset ``target``
        (None: ``target`` is before the first record)."""
        return self.search(lambda off, _: off <= target, needs_state=False)

    def before_position(self, pos: Position) -> Record | None:
        """Return the last record whose state is before the replication
        position ``pos`` (``BinlogState.is_before``); None if even the
        first one is not."""
        return self.search(lambda _, state: state.is_before(pos))


class IndexReader(_Lookups):
    codec = fmt.MARIADB         # what a key holds, and the magic (gtidx's MySQL index: index.mysql)

    def __init__(self, source, *, path=None):
        """``source``: an open ``filebuf.Source`` (a local file or an object) (which this reader then
        reads from; the caller closes it) or a bytes-like buffer."""
        self.path = path
        self._src = None
        self._cache: dict[int, object] = {}     # page number -> its checked bytes
        if isinstance(source, Source):
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
        if magic != self.codec.magic:
            raise self._corrupt(f"not a {self.codec.name} (bad magic {bytes(magic).hex()})")
        if major > fmt.VERSION_MAJOR:
            raise self._corrupt(f"index format {major}.{minor} is newer than this gtidx reads (1.x)")
        if not fmt.valid_page_size(page_size):
            raise self._corrupt(f"page size {page_size} is outside {fmt.MIN_PAGE_SIZE}..{fmt.MAX_PAGE_SIZE}")
        if size < page_size or size % page_size:
            raise self._corrupt(f"file size {size} is not a whole number of {page_size}-byte pages",
                                incomplete=True)
        self.page_size = page_size
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
        return corrupt(message, self.path, page, incomplete)

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

    # -- search: a root descent, then a leaf search -------------------------------
    def search(self, accept: Callable[[int, BinlogState | None], bool],
               needs_state: bool = True, states: bool = True) -> Record | None:
        """Return the last record, in key order, that ``accept(offset,
        state)`` holds for; None when even the first record is not accepted.
        ``states=False`` (with ``needs_state=False``): the record's offset
        only, its state None (no GTID applied on the way).

        ``accept`` must hold for a prefix of the records (an offset bound, a
        position not yet reached). The search follows the server's
        (``Gtid_index_reader``): a root descent to the one leaf that can hold
        the answer (``_descend``), then a scan of that leaf (``_leaf_start``
        and the keys after it, ``search.accepted``). With ``needs_state=False`` the predicate is
        given None for the state (it looks at offsets only) and rejected
        keys cost no state work.

        Every key met is checked against the range the descent allows (see
        ``search.node_keys``), and a leaf reached through a separator must start with
        that separator's key: pages with valid CRCs in the wrong place (a
        spliced or shifted file, a child pointer to another node) raise
        CorruptIndexError instead of giving a wrong record.

        Runtime complexity: O(log(n)) nodes read for n records (one per
        level of the tree), each page read and CRC-checked at most once
        while it stays in the page cache.

        >>> from gtidx.index.writer import write_records
        >>> pages = write_records([(0x11d, []), (0x20e, [(0, 1, 1)]), (0x2ad, [(0, 1, 2)])], 64)
        >>> r = IndexReader(b"".join(pages))
        >>> r.search(lambda offset, state: offset < 0x2ad, needs_state=False)
        (526, BinlogState('0-1-1'))
        >>> r.search(lambda offset, state: state.get(0, 1) is None)
        (285, BinlogState(''))
        >>> r.search(lambda offset, state: offset < 0x11d, needs_state=False) is None
        True
        """
        page, cur, state, lo, hi = self._descend(accept, needs_state, states)
        keys = node_keys(cur, page, self.path, None, hi, codec=self.codec)  # the first key is checked against lo
        offset = self._leaf_start(page, keys, state, lo, apply=states)
        if not accept(offset, state if needs_state else None):
            return None
        state, last, _, _ = accepted(keys, state, accept, needs_state, states, self.codec)
        return Record(offset if last is None else last, state if states else None)

    def _descend(self, accept: Callable[[int, BinlogState | None], bool], needs_state: bool,
                 states: bool = True):
        """The root descent: from the root down to the leaf that holds the
        answer of ``search(accept, needs_state)``.

        In each interior node, follow the child left of the first key that
        ``accept`` rejects (the rightmost child when it accepts them all),
        applying the GTIDs of the keys it accepts. Returns ``(page, cur,
        state, lo, hi)``: the leaf's first page and a cursor at its first
        key, the state after the last accepted separator (empty when none
        was: the leftmost path), and the separators around the leaf: ``lo``
        the last accepted one, ``hi`` the first rejected one (None: none).

        Runtime complexity: O(log(n)) nodes, the keys of each scanned once.
        """
        codec = self.codec
        state = codec.state()
        lo = hi = None
        path = self.path
        page = self.root_page
        leaf, cur = self._node(page)
        while not leaf:
            child = child_pointer(cur, page, path)             # left of the node's first key
            state, last, right, stop = accepted(node_keys(cur, page, path, lo, hi, True, codec=codec),
                                                state, accept, needs_state, states, codec)
            if last is not None:
                lo, child = last, right
            if stop is not None:
                hi = stop
            page = child
            leaf, cur = self._node(page)
        return page, cur, state, lo, hi

    def _leaf_start(self, page: int, keys: Iterator, state: BinlogState, sep: int | None,
                    check: bool = True, exact: bool = False, apply: bool = True) -> int:
        """Read the first record of the leaf at ``page`` from ``keys`` (its
        ``search.node_keys``); return its offset (its state is then ``state``).

        A leaf reached through a separator (``sep``) starts with that
        separator's key, which ``state`` already holds: it is checked
        (``_check_separator``; not when ``check`` is false), not applied. On
        the leftmost path (``sep`` None) the first key is the index's first
        record, a full state, and is applied to ``state``. ``keys`` is left
        at the leaf's second key.
        """
        first = next(keys, None)
        if first is None:
            raise self._corrupt("empty leaf node", page)
        offset, gtids, _ = first
        if sep is None:
            if apply:
                self.codec.apply_all(state, [gtids])
        elif not apply:           # no state to hold the separator's GTIDs: its offset at least
            if check and offset != sep:
                raise self._corrupt(f"leaf's first key (at {offset}) is not its separator (at {sep})", page)
        elif check:
            self._check_separator(offset, gtids, sep, state, page, exact)
        return offset

    def _check_separator(self, offset: int, gtids, sep: int, state: BinlogState, page: int,
                         exact: bool = False) -> None:
        """A leaf's first key at ``offset`` repeats the separator at ``sep``
        that leads to it: the same offset, and GTIDs that ``state`` (which
        the separator has been applied to) already holds.

        That is all a lookup relies on: the key is never applied, the
        separator's state is the record's. With ``exact`` (``check()``),
        applying the key must change nothing at all: each domain's last
        server included (O(k) state lookups more for a key of k GTIDs).
        """
        if offset != sep or not self.codec.holds(state, gtids, exact):
            raise self._corrupt(f"leaf's first key (at {offset}) is not its separator (at {sep})", page)

    def first_record(self) -> Record:
        """Return record 0: the first key of the leftmost leaf, a full state.

        Runtime complexity: O(log(n)) nodes, down the first child pointers
        (no key of an interior node is read).
        """
        page = self.root_page
        leaf, cur = self._node(page)
        while not leaf:
            page = child_pointer(cur, page, self.path)
            leaf, cur = self._node(page)
        state = self.codec.state()
        return Record(self._leaf_start(page, node_keys(cur, page, self.path, codec=self.codec), state, None), state)

    def last_record(self) -> Record:
        """Return the last record of the index.

        Runtime complexity: O(log(n)) nodes, plus the last leaf's keys.
        """
        rec = self.search(lambda off, _: True, needs_state=False)
        if rec is None:
            raise self._corrupt("index has no records", self.root_page)
        return rec

    def last_offset(self) -> int:
        """The last record's offset: ``last_record`` without its state (no
        GTID applied on the way down)."""
        rec = self.search(lambda off, _: True, needs_state=False, states=False)
        if rec is None:
            raise self._corrupt("index has no records", self.root_page)
        return rec.offset

    # -- listing and checking --------------------------------------------------------
    def records(self) -> Iterator[Record]:
        """Iterate every record in binlog order, with its full state
        (an in-order walk of the tree).

        Runtime complexity: O(n) for n records (each page read once).
        """
        yield from self._walk(self.root_page, self.codec.state(), None, None)

    def check(self) -> dict:
        """Walk the whole tree checking every page CRC, key order, child
        pointers and that each subtree's first record repeats the separator
        that leads to it. Returns counts; raises CorruptIndexError on the
        first problem."""
        self._check_all_pages()
        stats = {"records": 0, "levels": 0, "nodes": 0, "pages": self.npages}
        last = -1
        for rec in self._walk(self.root_page, self.codec.state(), None, stats):
            if rec.offset <= last:
                raise self._corrupt(f"record offsets out of order ({rec.offset} after {last})")
            last = rec.offset
            stats["records"] += 1
        return stats

    def _walk(self, page: int, state: BinlogState, sep: int | None, check, depth: int = 1):
        """Records of the subtree at ``page``, entered with ``state``.
        ``sep`` is the offset of the separator that led here (None on the
        leftmost path of the tree): a leaf's first key repeats it. With
        ``check`` (a dict of counts) that is checked, and ``check()``
        checks the order of the records this yields."""
        if depth > self.npages:
            raise self._corrupt("tree deeper than the file has pages", page)
        leaf, cur = self._node(page)
        if check is not None:
            check["nodes"] += 1
            check["levels"] = max(check["levels"], depth)
        keys = node_keys(cur, page, self.path, children=not leaf, ordered=False, codec=self.codec)
        if leaf:
            offset = self._leaf_start(page, keys, state, sep, check is not None, exact=True)
            yield Record(offset, state.copy())
            for offset, gtids, _ in keys:
                state.update(gtids)
                yield Record(offset, state.copy())
            return
        children = [(child_pointer(cur, page, self.path), state.copy(), sep)]
        for offset, gtids, child in keys:
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

    def __init__(self, source, *, path=None, codec: fmt.KeyCodec = fmt.MARIADB):
        """``source``: an open ``filebuf.Source`` (a local file or an object) (read page by page with
        pread, up to the first page it no longer has) or a bytes-like buffer. ``codec``: the
        index's flavor (what a key holds, the magic)."""
        self.path = path
        self.codec = codec
        self.page_size = 0
        self.pages = 0               # pages of complete nodes
        self.nodes = 0
        self.keys: list[tuple[int, list]] = []
        if isinstance(source, Source) and source.size <= WHOLE_MAX:
            try:
                source = source.pread(source.size, 0)   # small: one read (short if it shrank)
            except (OSError, GtidxError):
                source = b""
        if isinstance(source, Source):
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
        if magic != codec.magic or major > fmt.VERSION_MAJOR or not fmt.valid_page_size(page_size):
            raise CorruptIndexError(f"not a {codec.name} (bad header)", path=path)
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
                # records() checks their order, across leaves
                self.keys.extend((offset, gtids) for offset, gtids, _ in
                                 node_keys(fmt.NodeCursor(pages), first, path, ordered=False, codec=codec))

    def records(self) -> list[Record]:
        state, out, last = self.codec.state(), [], -1
        for offset, gtids in self.keys:
            if offset <= last:
                raise CorruptIndexError(f"record offsets out of order ({offset} after {last})", path=self.path)
            last = offset
            state.update(gtids)
            out.append(Record(offset, state.copy()))
        return out


class HotIndex(_Lookups):
    """Lookups on a PartialIndex: the same searches as IndexReader over the
    records of its complete leaves (a lookup past the last of them scans the
    binlog from it, like any lookup past an index's last record)."""

    def __init__(self, partial: PartialIndex):
        self.page_size = partial.page_size
        self._records = partial.records()
        if not self._records:
            raise CorruptIndexError("no complete leaf yet", path=partial.path)

    def search(self, accept: Callable[[int, BinlogState | None], bool],
               needs_state: bool = True) -> Record | None:
        """Return the last record ``accept(offset, state)`` holds for, None
        when even the first is not accepted (as ``IndexReader.search``).

        Runtime complexity: O(k) for the k records up to the first rejected
        one (a leaf scan over every complete leaf: no tree to descend yet).
        """
        found = None
        for rec in self._records:
            if not accept(rec.offset, rec.state if needs_state else None):
                break
            found = rec
        return found

    def first_record(self) -> Record:
        return self._records[0]

    def last_record(self) -> Record:
        return self._records[-1]

    def records(self) -> Iterator[Record]:
        """Every record of the complete leaves, in binlog order."""
        return iter(self._records)
