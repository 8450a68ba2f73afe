"""gtidx's GTID index for MySQL binlogs (``<binlog>.idx``; docs/mysql-index-format.md).

MySQL writes no index, so gtidx defines one: MariaDB's format 1.0 page by
page (``index.format``: pages, CRC32s, continuation pages, the append-only
B+-tree with its root last, node filling, the descent: ``writer`` and
``reader`` do all of it) with two differences, both in ``MysqlCodec``:

* the magic is ``fe fe 0c 4d`` (MariaDB's is ``fe fe 0c 01``): neither
  flavor's reader takes the other's file (a MariaDB server neither: it
  checks all four bytes);
* a key holds a MySQL GTID set in 1-byte units: the GTIDs logged since the
  previous record (its *delta*), a separator the union of the deltas of
  the records it stands for, the leftmost leaf's first key (record 0) the
  binlog's PREVIOUS_GTIDS set. Applying keys is set union, so a record's
  state is the executed set at its offset, Previous_gtids included.

Encoding of a set (all integers unsigned LEB128 varints):
``uuids``, then per UUID (ascending) its 16 bytes and ``tags``, then per
tag (ascending, the untagged one first as the empty tag) ``len``, the tag's
bytes, ``intervals``, then per interval ``start - previous end`` (the
previous end starting at 0: always >= 1, as the intervals are disjoint and
not adjacent) and ``end - start - 1`` (``end`` exclusive). An empty set is a
key of no units. UUIDs are inline (no dictionary): every key decodes alone.

Records (``MysqlRecordPolicy``): record 0 at the end of PREVIOUS_GTIDS (of
the FDE in a file without one) with that set; then, as for MariaDB, at the
end of the first transaction ending ``span_min`` bytes or more past the
previous record (the first span counted from 0), none past 4 GiB. Records
are at transaction boundaries only. The executed set only grows through a
file, so "the set contains g" is monotone in the offset: ``before_gtid``
is a descent like MariaDB's ``before_position``.
"""
from __future__ import annotations

from typing import Callable, Iterator

from . import format as fmt
from ..errors import BadInputError, CorruptIndexError
from ..binlog.mysql import MysqlBinlog
from ..mysqlgtid import GNO_MAX, TAG_MAX, GtidSet, MysqlGtid, uuid_text
from .reader import IndexReader, Record
from .writer import record_due

MAGIC = b"\xfe\xfe\x0c\x4d"          # "M": gtidx's MySQL index; MariaDB's ends in 01
UUID_LEN = 16
_TAG_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")


# -- the set coding ---------------------------------------------------------------------

def _put(out: bytearray, n: int) -> None:
    """Append ``n`` as an unsigned LEB128 varint."""
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def _get(blob: bytes, at: int) -> tuple[int, int]:
    """The varint at ``at``: (value, its end). At most 10 bytes (2**64),
    and minimal (no trailing zero byte): every set has one encoding."""
    value = shift = 0
    for i in range(at, min(at + 10, len(blob))):
        b = blob[i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if not b and i > at:
                raise ValueError("varint not in its shortest form")
            return value, i + 1
        shift += 7
    raise ValueError("varint runs past the key" if at + 10 > len(blob) else "varint longer than 10 bytes")


def encode_set(s: GtidSet) -> bytes:
    """A GTID set's key bytes (see the module doc); b"" for the empty set."""
    if not s:
        return b""
    by_uuid: dict[str, list] = {}
    for uuid, tag in s.keys():
        by_uuid.setdefault(uuid, []).append(tag)
    out = bytearray()
    _put(out, len(by_uuid))
    ivs = s.key_intervals()
    for uuid, tags in by_uuid.items():          # keys() is sorted: UUIDs ascending, "" first
        out += bytes.fromhex(uuid.replace("-", ""))
        _put(out, len(tags))
        for tag in tags:
            raw = tag.encode("ascii")
            _put(out, len(raw))
            out += raw
            intervals = ivs[(uuid, tag)]
            _put(out, len(intervals))
            prev = 0
            for start, end in intervals:
                _put(out, start - prev)
                _put(out, end - start - 1)
                prev = end
    return bytes(out)


def decode_set(blob: bytes) -> GtidSet:
    """A key's bytes as a GTID set. Nothing is trusted: every count is
    bounded by the bytes left, UUIDs and tags must ascend, tags be valid,
    intervals ascend without touching and stay in 1..2**63-2; the bytes must
    end exactly with the set. Raises ValueError otherwise."""
    if not blob:
        return GtidSet()
    ivs: dict = {}
    n, at = _get(blob, 0)
    if not n or n * (UUID_LEN + 1) > len(blob) - at:
        raise ValueError(f"{n} UUIDs in a {len(blob)}-byte key")
    last_uuid = b""
    for _ in range(n):
        raw = blob[at:at + UUID_LEN]
        if len(raw) < UUID_LEN or raw <= last_uuid:
            raise ValueError("UUIDs not in ascending order" if len(raw) == UUID_LEN else "UUID runs past the key")
        last_uuid = raw
        uuid = uuid_text(raw)
        at += UUID_LEN
        tags, at = _get(blob, at)
        if not tags or tags * 2 > len(blob) - at:
            raise ValueError(f"{tags} tags for a UUID, in {len(blob) - at} bytes")
        last_tag = None
        for _ in range(tags):
            ln, at = _get(blob, at)
            if ln > TAG_MAX or at + ln > len(blob):
                raise ValueError(f"tag of {ln} bytes")
            tag_raw = blob[at:at + ln]
            at += ln
            if not _TAG_CHARS.issuperset(tag_raw) or (ln and tag_raw[0] in b"0123456789") or \
                    (last_tag is not None and tag_raw <= last_tag):
                raise ValueError("bad tag, or tags not in ascending order")
            last_tag = tag_raw
            count, at = _get(blob, at)
            if not count or count * 2 > len(blob) - at:
                raise ValueError(f"{count} intervals in {len(blob) - at} bytes")
            intervals = []
            prev = 0
            for _ in range(count):
                gap, at = _get(blob, at)
                width, at = _get(blob, at)
                start = prev + gap
                prev = start + width + 1
                if not gap or prev > GNO_MAX + 1:
                    raise ValueError("intervals out of order, touching, or out of range")
                intervals.append([start, prev])
            ivs[(uuid, tag_raw.decode("ascii"))] = intervals
    if at != len(blob):
        raise ValueError(f"{len(blob) - at} bytes after the set")
    return GtidSet.from_key_intervals(ivs)


class SetState(GtidSet):
    """A GTID set as the tree code uses a state, a node's union and a key's
    value: ``update`` is union (returning the set), ``items`` a copy."""
    __slots__ = ()

    def copy(self) -> "SetState":
        return SetState(self)

    def update(self, value: GtidSet) -> "SetState":
        self |= value
        return self

    def items(self) -> GtidSet:
        return GtidSet(self)


class MysqlCodec(fmt.KeyCodec):
    """Keys of gtidx's MySQL index: GTID sets (see the module doc)."""

    magic = MAGIC
    unit = 1
    name = "gtidx MySQL GTID index"

    def encode(self, value: GtidSet) -> tuple[int, bytes]:
        blob = encode_set(value)
        return len(blob), blob

    def read(self, cur: fmt.NodeCursor, count: int) -> GtidSet | None:
        blob = cur.units(count, 1)
        return None if blob is None else decode_set(blob)

    def union(self) -> SetState:
        return SetState()

    state = union

    def apply_all(self, state: SetState, values: list) -> None:
        for v in values:
            state |= v

    def holds(self, state: GtidSet, value: GtidSet, exact: bool = False) -> bool:
        return value.issubset(state)


MYSQL = MysqlCodec()


# -- reading ------------------------------------------------------------------------------

class MysqlIndexReader(IndexReader):
    """An index of a MySQL binlog: ``IndexReader``'s checks and searches
    over GTID-set keys. Records are ``(offset, GtidSet)``, the set being
    the executed set there (Previous_gtids included).

    * ``at_offset(target)``: the record with the largest offset <= target;
    * ``before_gtid(g)``: the last record whose set does not contain ``g``;
    * ``first_record()``, ``last_record()``, ``records()``, ``check()``.

    Each returns None where no record qualifies and raises CorruptIndexError
    (with the index's path and page) for anything that breaks the format."""

    codec = MYSQL

    def before_gtid(self, g: MysqlGtid) -> Record | None:
        """The last record whose set does not contain ``g`` (None: even
        record 0's does: ``g`` is in Previous_gtids)."""
        if not isinstance(g, MysqlGtid):
            raise BadInputError(f"before_gtid takes a MysqlGtid, not {type(g).__name__}")
        return self.search(lambda _, state: g not in state)

    def before_position(self, pos):
        raise BadInputError("a MySQL binlog's index answers before_gtid, not a MariaDB position",
                            path=self.path)


# -- records --------------------------------------------------------------------------------

class MysqlRecordPolicy:
    """Where the records of a MySQL binlog's index go (the module doc):
    MariaDB's ``RecordPolicy`` rule (``writer.record_due``) over MySQL
    transactions. ``jump``: the fused header walk (``MysqlBinlog.set_batches``,
    ``transaction_length`` cross-checked), else the event walk (``groups``),
    the definition."""

    def __init__(self, span_min: int, max_offset: int = fmt.MAX_OFFSET, jump: bool = True):
        if span_min < 1:
            raise BadInputError(f"span_min must be at least 1, not {span_min}")
        self.span_min = span_min
        self.max_offset = max_offset
        self.jump = jump
        self.resume(0, ())

    # -- the incremental walk (gtidx tail), as ``writer.RecordPolicy``'s ------------------
    def resume(self, offset: int, records, seen=None) -> None:
        """Start over at the transaction boundary ``offset`` (0: after
        PREVIOUS_GTIDS), after records at ``records`` (offsets, record 0
        first). ``seen``: MySQL keeps none (``MysqlFlavor.keeps_seen``)."""
        self.previous = records[-1] if len(records) > 1 else 0
        self.pending = GtidSet()
        self.walked = offset

    def advance(self, b: MysqlBinlog, follow: bool = True) -> Iterator[tuple[int, GtidSet]]:
        """The records due from ``walked`` to the end of ``b`` (a growing
        file: its complete transactions); afterwards ``walked`` is the end of
        the last complete transaction, its GTIDs past the last record
        ``pending``. A record is committed when the consumer asks for the
        next: one that fails to take it finds it again on the next call.
        The same records as ``records`` (``record_due`` over ``transactions``)."""
        span, cap = self.span_min, self.max_offset
        for g in b.transactions(max(self.walked, b.body_start)):
            if g.gtid is not None:
                self.pending.add(*g.gtid)
            end = g.end
            if record_due(end, self.previous, span, cap):
                yield end, self.pending
                self.pending = GtidSet()
                self.previous = end
            elif end > cap and not follow:
                return
            self.walked = end

    @staticmethod
    def finished() -> None:
        """No seq ranges are kept for MySQL binlogs."""
        return None

    @staticmethod
    def apply_until(b: MysqlBinlog, state: GtidSet, start: int, target: int) -> bool:
        """Add to ``state`` the GTIDs of the transactions from ``start`` (a
        transaction boundary) to ``target``; False unless one ends exactly
        at ``target``."""
        for g in b.transactions(max(start, b.body_start)):
            if g.end > target:
                return False
            if g.gtid is not None:
                state.add(*g.gtid)
            if g.end == target:
                return True
        return False

    @staticmethod
    def first(b: MysqlBinlog) -> tuple[int, GtidSet]:
        """Record 0: the end of PREVIOUS_GTIDS (of the FDE without one) and its set."""
        return b.body_start, (b.previous_gtids.copy() if b.previous_gtids is not None else GtidSet())

    def records(self, b: MysqlBinlog, progress: Callable[[int], None] | None = None) -> list:
        """Every record of ``b``: ``(offset, delta)``, record 0 (the full
        Previous_gtids set) first."""
        records = [self.first(b)]
        span, cap = self.span_min, self.max_offset
        if self.jump:                    # the fused walk: the same records (the tests hold them equal)
            next_tick = 1 << 24
            for record in b.set_batches(span, cap):
                records.append(record)
                if progress is not None and record[0] >= next_tick:
                    progress(record[0])
                    next_tick = record[0] + (1 << 24)
            return records
        previous = 0
        pending = GtidSet()
        add = pending.add
        next_tick = 1 << 24
        for g in b.groups():
            if g.gtid is not None:
                add(*g.gtid)
            end = g.end
            if record_due(end, previous, span, cap):
                records.append((end, pending))
                pending = GtidSet()
                add = pending.add
                previous = end
                if progress is not None and end >= next_tick:
                    progress(end)
                    next_tick = end + (1 << 24)
        return records


def join(values: list) -> GtidSet:
    """The deltas of consecutive records as one record's (``coarsen``)."""
    out = GtidSet()
    for v in values:
        out |= v
    return out


# -- the flavor, for index.files and index.build -----------------------------------------------

class MysqlFlavor:
    """What ``index.files`` and ``index.build`` ask of an index flavor, for MySQL binlogs."""

    name = "mysql"
    codec = MYSQL
    reader = MysqlIndexReader
    join = staticmethod(join)
    keeps_seen = False          # nothing beyond the fingerprint
    server_writes = False       # no MySQL server writes one: an index without a fingerprint is gtidx's

    @staticmethod
    def first(b: MysqlBinlog) -> tuple[int, GtidSet]:
        return MysqlRecordPolicy.first(b)

    @staticmethod
    def policy(span_min: int) -> MysqlRecordPolicy:
        """The record policy ``gtidx tail`` walks a growing binlog with."""
        return MysqlRecordPolicy(span_min)

    apply_until = staticmethod(MysqlRecordPolicy.apply_until)

    @staticmethod
    def records(b: MysqlBinlog, span_min: int, progress=None) -> tuple[list, dict]:
        """(records, the fingerprint's extra fields: none for MySQL)."""
        return MysqlRecordPolicy(span_min).records(b, progress), {}

    @staticmethod
    def tail_problem(r: MysqlIndexReader, b: MysqlBinlog, last: int) -> str:
        """An index without its fingerprint, of a closed binlog: past the
        last record no transaction may end a full span (the gap between the
        last two records) after it."""
        prev = r.at_offset(last - 1) if last > 0 else None
        gap = last - prev.offset if prev is not None and prev.offset > 0 else fmt.DEFAULT_SPAN_MIN
        for g in b.transactions(max(last, b.body_start)):
            if record_due(g.end, last, gap):
                return (f"index ends at offset {last} but the binlog goes on to {b.size} "
                        "(made for a shorter binlog)")
        return ""

    @staticmethod
    def verify(b: MysqlBinlog, r: MysqlIndexReader, path) -> None:
        """Every record's set equal to the event walk's (``groups``) at its
        offset, every record (but record 0) at the end of a transaction."""
        records = r.records()
        first = next(records)
        offset, state = MysqlRecordPolicy.first(b)
        if first.offset != offset or first.state != state:
            raise CorruptIndexError(f"record at {first.offset} does not match the binlog", path=path)
        rec = next(records, None)
        for g in b.groups():
            if rec is None:
                break
            if g.gtid is not None:
                state.add(*g.gtid)
            if rec.offset < g.end:
                raise CorruptIndexError(f"record offset {rec.offset} is not the end of a transaction", path=path)
            if rec.offset == g.end:
                if rec.state != state:
                    raise CorruptIndexError(f"record at {rec.offset}: set {rec.state.one_line()} differs from "
                                            f"the binlog's {state.one_line()}", path=path)
                rec = next(records, None)
        if rec is not None:
            raise CorruptIndexError(f"record offset {rec.offset} is not the end of a transaction", path=path)


FLAVOR = MysqlFlavor()


__all__ = ["MAGIC", "MYSQL", "MysqlCodec", "MysqlIndexReader", "MysqlRecordPolicy", "FLAVOR",
           "encode_set", "decode_set", "SetState"]
