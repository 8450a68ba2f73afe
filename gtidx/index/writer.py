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

``RecordPolicy`` decides where records go, as the server does (the one
statement of that rule; the build and the tail both ask it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from . import format as fmt
from ..binlog.walk import OpenGroup
from .meta import masked
from ..errors import BadInputError
from ..gtid import LatestGtids, SeqRanges

if TYPE_CHECKING:
    from ..binlog.mariadb import Binlog

Gtids = Sequence[tuple[int, int, int]]


class _Node:
    __slots__ = ("level", "pages", "page", "pos", "state", "records", "force_spill", "union")

    def __init__(self, level: int, union: Callable = LatestGtids):
        self.level = level
        self.union = union
        self.reset()

    def reset(self) -> None:
        self.pages: list[tuple[bytearray, int]] = []   # (page, flags position)
        self.page: bytearray | None = None
        self.pos = 0
        self.state = self.union()       # the union of the records added since it started
        self.records = 0
        self.force_spill = False


class IndexWriter:
    """The server's B+-tree writer. ``sink(page_bytes)`` receives each page.
    ``codec``: what a key holds (``index.format.KeyCodec``; MariaDB's GTIDs by
    default), and the file's magic."""

    def __init__(self, page_size: int, sink: Callable[[bytes], None], codec: fmt.KeyCodec = fmt.MARIADB):
        if not fmt.valid_page_size(page_size):
            raise BadInputError(f"page size {page_size} is outside {fmt.MIN_PAGE_SIZE}..{fmt.MAX_PAGE_SIZE}")
        self.page_size = page_size
        self.sink = sink
        self.codec = codec
        self.nodes = [_Node(0, codec.union)]
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
        encode = self.codec.encode
        key = encode(gtids)
        while True:
            n = self.nodes[level]
            n.state.update(gtids)
            if self._check_room(n, key[0]):
                self._write_key(n, offset, key)
                break
            # The node is full: write it, point its parent at it, and carry
            # its union up as the separator (and down as the new leaf's first key).
            page_no = self._flush(n, is_root=False)
            if level + 1 == len(self.nodes):
                self.nodes.append(_Node(level + 1, self.codec.union))
            self._add_child(self.nodes[level + 1], page_no)
            union = n.state.items()
            n.reset()
            key = encode(union)
            if level == 0:
                self._write_key(n, offset, key)
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
        needed = fmt.KEY_HEADER_SIZE + self.codec.unit * count
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
            page[:fmt.FILE_HEADER_SIZE] = fmt.file_header(self.page_size, self.codec.magic)
            pos = fmt.FILE_HEADER_SIZE
            self.header_written = True
        flags = (fmt.IS_LEAF if n.level == 0 else 0) | (fmt.IS_CONT if n.page is not None else 0)
        page[pos] = flags
        n.pages.append((page, pos))
        n.page = page
        n.pos = pos + fmt.PAGE_HEADER_SIZE

    def _write_key(self, n: _Node, offset: int, key: tuple[int, bytes]) -> None:
        count, blob = key
        self._reserve(n, fmt.KEY_HEADER_SIZE)
        fmt.KEY_HEADER.pack_into(n.page, n.pos, count + 1, offset)
        n.pos += fmt.KEY_HEADER_SIZE
        if not count:
            n.records += 1
            return
        # The key's units packed at once (``codec.encode``: one C call for
        # MariaDB's GTIDs), then copied a page-full at a time: a 400-domain
        # state is 6 KB per key, and one pack call per GTID made huge
        # indexes ~20x slower to write. Units never straddle a page.
        unit = self.codec.unit
        limit = self.page_size - fmt.CHECKSUM_SIZE
        done, total = 0, len(blob)
        while done < total:
            self._reserve(n, unit)
            take = min(total - done, (limit - n.pos) // unit * unit)
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


def record_due(end: int, previous: int, span_min: int, max_offset: int = fmt.MAX_OFFSET) -> bool:
    """The server's rule for a record at the end of an event group (or
    MySQL transaction) ending at ``end``: at least ``span_min`` bytes past
    the previous record (``previous``: 0 while there is only record 0), and
    not past ``max_offset`` (offsets are u32)."""
    return end - previous >= span_min and end <= max_offset


# Where domain, server_id and seq sit in the GTID_HEAD tuples
# ``Binlog.group_batches`` yields: (timestamp, server_id, seq, domain, flags2).
_HEAD_FIELDS = (3, 1, 2)


class RecordPolicy:
    """The one owner of where the server puts index records:

    * record 0 at the end of the GTID_LIST event (or of the preamble), with
      the GTID_LIST state;
    * then a record at the end of the first event group that ends at least
      ``span_min`` bytes past the previous record, counting the first span
      from offset 0 (not from record 0's offset);
    * holding the GTIDs logged since the previous record (``LatestGtids``:
      latest seq per (domain, server), each domain's newest last);
    * none past ``max_offset`` (4 GiB: offsets are u32; lookups past the
      last record scan the binlog from it).

    On the way it keeps ``seen`` (``SeqRanges``): per (domain, server) the
    seq_no range the binlog logs, and the pairs whose seq_no does not grow;
    what lets a lookup plan exactly and trust one file's answer. None when
    not known (a walk resumed without it, or stopped at the 4 GiB cap).

    ``group(end, domain, server, seq)`` is the rule itself, fed one event
    group at a time. ``advance(b)`` gives the same records from the fused
    walk (``Binlog.group_batches``, which does the span arithmetic inside
    the event loop for speed; tests prove both equal on every fixture), and
    resumes where it stopped on a growing file. Both keep their state here:
    ``previous`` (the last record's offset, 0 while there is only record 0),
    ``pending`` (the GTIDs since), ``walked`` (where the fused walk stopped:
    a group boundary) and ``capped`` (past ``max_offset``).
    """

    __slots__ = ("span_min", "max_offset", "previous", "pending", "walked", "capped", "seen", "carry")

    def __init__(self, span_min: int, max_offset: int = fmt.MAX_OFFSET):
        if span_min < 1:
            raise BadInputError(f"span_min must be at least 1, not {span_min}")
        self.span_min = span_min
        self.max_offset = max_offset
        self.resume(0, ())

    @staticmethod
    def first_offset(b: "Binlog") -> int:
        """Record 0's offset (``index.format.first_record_offset``)."""
        return fmt.first_record_offset(b)

    def first(self, b: "Binlog") -> tuple[int, list]:
        """Record 0 (the GTID_LIST state, at ``first_offset``); the policy
        starts over from there."""
        offset = self.first_offset(b)
        start = [tuple(g) for g in b.start_state]
        self.resume(offset, (offset,), SeqRanges({(d, s): q for d, s, q in start}))
        return offset, start

    def resume(self, offset: int, records: Sequence[int], seen: SeqRanges | None = None) -> None:
        """Start over at the group boundary ``offset``, after records at
        ``records`` (offsets, record 0 first): the next span counts from the
        last record, or from 0 while there is only record 0. ``seen`` goes
        on from what was seen before ``offset`` (its floor: the state there);
        without it none is kept."""
        self.previous = records[-1] if len(records) > 1 else 0
        self.pending = LatestGtids()
        self.walked = offset
        self.capped = False
        self.seen = seen
        self.carry = OpenGroup(masked)   # the group open at ``walked`` as the last walk left it

    def group(self, end: int, domain: int, server: int, seq: int):
        """One event group, ending at ``end``: returns the record
        ``(offset, gtids)`` it closes, else None."""
        if self.seen is None:
            self.pending.add(domain, server, seq)
        else:
            self.pending.add_rows_watching(((domain, server, seq),), 0, 1, 2, self.seen)
        self.walked = end
        if not record_due(end, self.previous, self.span_min, self.max_offset):
            return None
        self.previous = end
        if self.seen is not None:
            self.seen.settle(self.pending)
        return end, self.pending.take()

    def finished(self) -> SeqRanges | None:
        """What the walk so far saw (the stretch past the last record
        settled too), or None when it is not known."""
        if self.seen is not None:
            self.seen.settle(self.pending)
        return self.seen

    def advance(self, b: "Binlog", follow: bool = True) -> Iterator[tuple[int, list]]:
        """The records due from ``walked`` to the end of ``b``, through the
        fused walk; afterwards ``walked`` is where it stopped (the end of the
        last complete group), the groups past the last record are ``pending``.
        A record's state is committed when the consumer asks for the next:
        one that fails to take a record (disk full) finds it again on the
        next call. ``follow=False`` stops at the 4 GiB cap (a build needs
        nothing past it); a tail follows to the end to know how far it read."""
        pending, seen = self.pending, self.seen
        for end, batch, due in b.group_batches(self.span_min, start=self.walked, previous=self.previous,
                                               carry=self.carry):
            if seen is None:
                pending.add_rows(batch, *_HEAD_FIELDS)
            else:
                pending.add_rows_watching(batch, *_HEAD_FIELDS, seen)
            if due and not self.capped:
                if end > self.max_offset:
                    self.capped = True
                    if not follow:
                        self.seen = None        # the rest is not walked: not known
                        return
                else:
                    yield end, pending.items()
                    if seen is not None:
                        seen.settle(pending)
                    pending.clear()
                    self.previous = end
            self.walked = end

    def records(self, b: "Binlog", progress: Callable[[int], None] | None = None) -> list:
        """Every record of a whole binlog, record 0 first (``progress(offset)``
        every 16 MiB or so)."""
        records = [self.first(b)]
        add = records.append
        if progress is None:
            for record in self.advance(b, follow=False):
                add(record)
            return records
        next_tick = 1 << 24
        for record in self.advance(b, follow=False):
            add(record)
            if record[0] >= next_tick:
                progress(record[0])
                next_tick = record[0] + (1 << 24)
        return records


def write_records(records: Iterable[tuple[int, Gtids]], page_size: int,
                  codec: fmt.KeyCodec = fmt.MARIADB) -> list[bytes]:
    """Pack records into pages in memory (for sizing, tests, and small files)."""
    pages: list[bytes] = []
    w = IndexWriter(page_size, pages.append, codec)
    for offset, gtids in records:
        w.add(offset, gtids)
    w.close()
    return pages
