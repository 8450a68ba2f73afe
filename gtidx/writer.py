"""Write a binlog GTID index (format 1.0) the way MariaDB 11.4+ does.

``IndexWriter`` takes records ``(offset, gtids)`` (the GTIDs logged since
the previous record) and emits finished pages, in file order, to a sink: it
never seeks, so the same code writes a file, a tail that grows, or bytes in
memory for tests. The node-filling rules are the server's, so a given record
stream gives the same tree as the server's own index (same pages, same keys):

* each node keeps the union of the records added to it since it started;
  when a record does not fit, the node is written, its
  parent gets a child pointer, and that union becomes both the first key of
  the new leaf and the separator pushed into the parent (interior nodes do
  not keep the key that overflowed them: k keys for k+1 children);
* a node with one record that has less than half a page left may spill
  into continuation pages, so big states (400 domains) still give nodes of
  at least two keys;
* on close the partial nodes are written bottom-up and the top one is the
  root, the last node of the file.

``RecordPolicy`` decides where records go, as the server does: record 0 with
the GTID_LIST state at the end of the GTID_LIST event; then at the end of an
event group when at least ``span_min`` bytes lie since the previous record
(whose offset starts at 0, not at record 0's offset).
"""
from __future__ import annotations

from itertools import chain
from typing import Callable, Iterable, Sequence

from . import idxformat as fmt
from .errors import BadInputError
from .gtid import BinlogState

Gtids = Sequence[tuple[int, int, int]]


class _Union:
    """The GTIDs added to a node since it started: latest seq per (domain,
    server), in the order they were last updated, so each domain's newest GTID
    comes last (what readers need). A plain dict: a 400-domain index applies
    millions of GTIDs here, and BinlogState's sorted listing cost 10 s."""

    __slots__ = ("seqs",)

    def __init__(self):
        self.seqs: dict[tuple[int, int], int] = {}

    def add(self, gtids: Gtids) -> None:
        seqs = self.seqs
        keys = [(g[0], g[1]) for g in gtids]
        pop = seqs.pop
        for k in keys:
            pop(k, None)         # re-insert: updated entries move to the end
        seqs.update(zip(keys, [g[2] for g in gtids]))

    def gtids(self) -> list[tuple[int, int, int]]:
        return [(d, s, q) for (d, s), q in self.seqs.items()]


class _Node:
    __slots__ = ("level", "pages", "page", "pos", "state", "records", "force_spill")

    def __init__(self, level: int):
        self.level = level
        self.reset()

    def reset(self) -> None:
        self.pages: list[tuple[bytearray, int]] = []   # (page, flags position)
        self.page: bytearray | None = None
        self.pos = 0
        self.state = _Union()
        self.records = 0
        self.force_spill = False


class IndexWriter:
    """The server's B+-tree writer. ``sink(page_bytes)`` receives each page."""

    def __init__(self, page_size: int, sink: Callable[[bytes], None]):
        if not fmt.valid_page_size(page_size):
            raise BadInputError(f"page size {page_size} is outside {fmt.MIN_PAGE_SIZE}..{fmt.MAX_PAGE_SIZE}")
        self.page_size = page_size
        self.sink = sink
        self.nodes = [_Node(0)]
        self.pages_written = 0
        self.header_written = False
        self.records = 0
        self.closed = False

    # -- public ------------------------------------------------------------
    def add(self, offset: int, gtids: Gtids) -> None:
        """One index record: the binlog up to ``offset`` is the previous
        record's state plus ``gtids`` (each domain's last GTID last)."""
        if not 0 <= offset <= fmt.MAX_OFFSET:
            raise BadInputError(f"offset {offset} does not fit an index record (u32)")
        level = 0
        while True:
            n = self.nodes[level]
            n.state.add(gtids)
            if self._check_room(n, len(gtids)):
                self._write_key(n, offset, gtids)
                break
            # The node is full: write it, point its parent at it, and carry
            # its union up as the separator (and down as the new leaf's first key).
            page_no = self._flush(n, is_root=False)
            if level + 1 == len(self.nodes):
                self.nodes.append(_Node(level + 1))
            self._add_child(self.nodes[level + 1], page_no)
            union = n.state.gtids()
            n.reset()
            if level == 0:
                self._write_key(n, offset, union)
            else:
                self._reserve(n, fmt.CHILD_PTR_SIZE)
            gtids = union
            level += 1
        self.records += 1

    def close(self) -> None:
        """Write the partial nodes bottom-up; the topmost becomes the root."""
        if self.closed:
            return
        if self.records == 0:
            raise BadInputError("an index needs at least one record")
        top = len(self.nodes) - 1
        for level, n in enumerate(self.nodes):
            page_no = self._flush(n, is_root=level == top)
            n.reset()
            if level < top:
                self._add_child(self.nodes[level + 1], page_no)
        self.closed = True

    # -- the server's node mechanics ------------------------------------------
    def _check_room(self, n: _Node, count: int) -> bool:
        if n.page is None or n.records == 0:
            return True
        avail = self.page_size - fmt.CHECKSUM_SIZE - n.pos
        if n.records == 1 and avail < self.page_size // 2:
            n.force_spill = True
            return True
        if n.force_spill:
            return True
        needed = fmt.KEY_HEADER_SIZE + fmt.GTID_SIZE * count
        if n.level > 0:
            needed += fmt.CHILD_PTR_SIZE
        return needed <= avail

    def _reserve(self, n: _Node, nbytes: int) -> None:
        """Make room for ``nbytes`` on the node's current page, else start a page."""
        if n.page is not None and n.pos + nbytes <= self.page_size - fmt.CHECKSUM_SIZE:
            return
        page = bytearray(self.page_size)
        n.force_spill = False
        pos = 0
        if not self.header_written:          # the first page ever started is page 1
            page[:fmt.FILE_HEADER_SIZE] = fmt.file_header(self.page_size)
            pos = fmt.FILE_HEADER_SIZE
            self.header_written = True
        flags = (fmt.IS_LEAF if n.level == 0 else 0) | (fmt.IS_CONT if n.page is not None else 0)
        page[pos] = flags
        n.pages.append((page, pos))
        n.page = page
        n.pos = pos + fmt.PAGE_HEADER_SIZE

    def _write_key(self, n: _Node, offset: int, gtids: Gtids) -> None:
        self._reserve(n, fmt.KEY_HEADER_SIZE)
        fmt.KEY_HEADER.pack_into(n.page, n.pos, len(gtids) + 1, offset)
        n.pos += fmt.KEY_HEADER_SIZE
        if not gtids:
            n.records += 1
            return
        # All GTIDs of the key packed by one C call, then copied a page-full
        # at a time: a 400-domain state is 6 KB per key, and one pack call
        # per GTID made huge indexes ~20x slower to write.
        blob = fmt.gtid_block(len(gtids)).pack(*chain.from_iterable(gtids))
        limit = self.page_size - fmt.CHECKSUM_SIZE
        done, total = 0, len(blob)
        while done < total:
            self._reserve(n, fmt.GTID_SIZE)
            take = min(total - done, (limit - n.pos) // fmt.GTID_SIZE * fmt.GTID_SIZE)
            n.page[n.pos:n.pos + take] = blob[done:done + take]
            n.pos += take
            done += take
        n.records += 1

    def _add_child(self, n: _Node, page_no: int) -> None:
        self._reserve(n, fmt.CHILD_PTR_SIZE)
        fmt.CHILD_PTR.pack_into(n.page, n.pos, page_no)
        n.pos += fmt.CHILD_PTR_SIZE

    def _flush(self, n: _Node, is_root: bool) -> int:
        """Seal and emit the node's pages; returns its first page number."""
        first = self.pages_written + 1
        last = len(n.pages) - 1
        for i, (page, flags_pos) in enumerate(n.pages):
            if is_root:
                page[flags_pos] |= fmt.ROOT
            if i == last:
                page[flags_pos] |= fmt.LAST
            self.sink(bytes(fmt.seal(page)))
            self.pages_written += 1
        return first


class RecordPolicy:
    """Where the server puts index records (see the module docstring).

    Feed it ``group(end, domain, server, seq)`` for every event group in
    file order; it returns ``(offset, gtids)`` when a record is due, else None.
    """

    __slots__ = ("span_min", "previous", "pending", "max_offset")

    def __init__(self, span_min: int, max_offset: int = fmt.MAX_OFFSET):
        if span_min < 1:
            raise BadInputError(f"span_min must be at least 1, not {span_min}")
        self.span_min = span_min
        self.previous = 0
        self.pending: dict[tuple[int, int], int] = {}
        self.max_offset = max_offset

    @staticmethod
    def first(offset: int, start_state: BinlogState) -> tuple[int, list]:
        """Record 0: the GTID_LIST state, at the end of the GTID_LIST event."""
        return offset, [tuple(g) for g in start_state]

    def group(self, end: int, domain: int, server: int, seq: int):
        pending = self.pending
        key = (domain, server)
        pending.pop(key, None)      # re-insert: the domain's newest GTID goes last
        pending[key] = seq
        if end - self.previous < self.span_min or end > self.max_offset:
            return None
        gtids = [(d, s, q) for (d, s), q in pending.items()]
        pending.clear()
        self.previous = end
        return end, gtids


def write_records(records: Iterable[tuple[int, Gtids]], page_size: int) -> list[bytes]:
    """Pack records into pages in memory (for sizing, tests, and small files)."""
    pages: list[bytes] = []
    w = IndexWriter(page_size, pages.append)
    for offset, gtids in records:
        w.add(offset, gtids)
    w.close()
    return pages
