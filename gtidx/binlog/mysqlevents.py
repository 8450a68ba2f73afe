"""MySQL's binlog events beyond MariaDB's: types, layouts, one-event decoders.

``binlog.events`` holds what both servers share (the header, FDE, QUERY,
XID, ...); these are MySQL's own: the GTID events (GTID, ANONYMOUS_GTID,
GTID_TAGGED: ``decode_untagged_gtid``, ``decode_tagged_gtid``), the
PREVIOUS_GTIDS set (``decode_previous_gtids``), the event types a
transaction's boundary depends on, and ``MysqlGroup``, one transaction.
Bodies are bytes-like, without header and checksum; a decoder raises
ValueError on bytes that do not decode (the caller names the event).
``binlog.mysql`` walks a file with them.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from .events import EVENT_NAMES, FORMAT_DESCRIPTION, ROTATE, STOP
from ..mysqlgtid import GNO_MAX, GtidSet, MysqlGtid, uuid_text

# MySQL's event types (binlog_event.h) beyond those ``binlog.events`` names.
INTVAR = 5
RAND = 13
USER_VAR = 14
HEARTBEAT = 27
GTID_LOG = 33
ANONYMOUS_GTID = 34
PREVIOUS_GTIDS = 35
TRANSACTION_CONTEXT = 36
TRANSACTION_PAYLOAD = 40
HEARTBEAT_V2 = 41
GTID_TAGGED = 42

GTID_TYPES = frozenset({GTID_LOG, ANONYMOUS_GTID, GTID_TAGGED})
# every type a MySQL server (5.7 to 9.x) writes: 1 to GTID_TAGGED (MariaDB's 160+ are not MySQL's)
MYSQL_KNOWN_TYPES = bytes(1 <= t <= GTID_TAGGED for t in range(256))
PRE_STATEMENT = frozenset({INTVAR, RAND, USER_VAR})
# Never part of a transaction: an open one ends before them (a file's end).
BOUNDARY = frozenset({ROTATE, STOP, FORMAT_DESCRIPTION, PREVIOUS_GTIDS})
# The parser ignores these wherever they are.
IGNORED = frozenset({HEARTBEAT, HEARTBEAT_V2, TRANSACTION_CONTEXT})
IGNORABLE_FLAG = 0x0080          # LOG_EVENT_IGNORABLE_F: an unknown event with it is skipped

MYSQL_EVENT_NAMES = {**EVENT_NAMES, INTVAR: "INTVAR", RAND: "RAND", USER_VAR: "USER_VAR", GTID_LOG: "GTID",
                     ANONYMOUS_GTID: "ANONYMOUS_GTID", PREVIOUS_GTIDS: "PREVIOUS_GTIDS",
                     TRANSACTION_CONTEXT: "TRANSACTION_CONTEXT", TRANSACTION_PAYLOAD: "TRANSACTION_PAYLOAD",
                     GTID_TAGGED: "GTID_TAGGED", 29: "ROWS_QUERY", 30: "WRITE_ROWS", 31: "UPDATE_ROWS",
                     32: "DELETE_ROWS", 39: "PARTIAL_UPDATE_ROWS"}

# Every byte layout, named once.
GTID_POST = struct.Struct("<B16sqBqq")      # flags, uuid, gno, lt_type, last_committed, sequence_number
GTID_POST_56 = struct.Struct("<B16sq")      # what a 5.6 event has: flags, uuid, gno
U56 = struct.Struct("<I3s")                 # a 7-byte commit timestamp, as (low 32 bits, high 24 bits)
U64 = struct.Struct("<Q")
U16 = struct.Struct("<H")
PREV_INTERVAL = struct.Struct("<QQ")        # start, end (exclusive)
UUID_LEN = 16
LOGICAL_TS_TYPE = 2
COMMIT_TS_FLAG = 1 << 55                    # the immediate timestamp says the original one follows
PREVIOUS_FORMAT_TAGGED = 1                  # the top byte of PREVIOUS_GTIDS' first u64
_FIELD_GNO, _FIELD_TAG, _FIELD_IMMEDIATE_TS, _FIELD_ORIGINAL_TS, _FIELD_LENGTH = 2, 3, 6, 7, 8


class MysqlGroup(NamedTuple):
    """One transaction: its GTID event's offset (start) and the offset just
    after its last event (end)."""
    gtid: MysqlGtid | None     # None: an anonymous transaction (gtid_mode OFF)
    start: int
    end: int
    timestamp: int             # seconds: of original_commit_timestamp if the event has it, else its header's
    commit_us: int | None      # original_commit_timestamp in microseconds (MySQL 8.0.1+), else None
    length: int | None         # the transaction_length the GTID event states (8.0.2+), else None


class GtidFields(NamedTuple):
    """What a GTID, GTID_TAGGED or ANONYMOUS_GTID event says: its GTID
    (None: anonymous), original_commit_timestamp in microseconds and
    transaction_length (None where the event has none)."""
    gtid: MysqlGtid | None
    commit_us: int | None
    length: int | None


# -- decoders (bodies are bytes-like, without header and checksum) -------------

def _net_length(body, at: int) -> tuple[int, int]:
    """MySQL's packed integer (net_field_length_ll) at ``at``: (value, its end)."""
    first = body[at]
    if first < 251:
        return first, at + 1
    if first == 252:
        return U16.unpack_from(body, at + 1)[0], at + 3
    if first == 253:
        return int.from_bytes(body[at + 1:at + 4], "little"), at + 4
    if first == 254:
        return U64.unpack_from(body, at + 1)[0], at + 9
    raise ValueError(f"bad packed integer first byte {first}")


def _varlen(body, at: int) -> tuple[int, int]:
    """The serialization library's variable-length unsigned integer
    (libs/mysql/serialization): its byte count is the first byte's trailing
    ones plus one. (value, its end)."""
    first = body[at]
    n = 1
    while n < 9 and first & (1 << (n - 1)):
        n += 1
    if at + n > len(body):
        raise ValueError("variable-length integer runs past the event")
    if n == 1:
        return first >> 1, at + 1
    rest = int.from_bytes(body[at + 1:at + n], "little")
    shift = 8 - n + (1 if n == 9 else 0)
    return (first >> n) | (rest << shift), at + n


def _signed(v: int) -> int:
    """A zigzag-encoded signed integer (the serialization library's)."""
    return -(v >> 1) - 1 if v & 1 else v >> 1


def decode_untagged_gtid(body, etype: int) -> GtidFields:
    """A GTID (33) or ANONYMOUS_GTID (34) event body."""
    if len(body) < GTID_POST_56.size:
        raise ValueError(f"{len(body)} bytes, below the {GTID_POST_56.size} of a GTID event")
    _, uuid, gno = GTID_POST_56.unpack_from(body, 0)
    if etype == ANONYMOUS_GTID:
        if gno != 0:
            raise ValueError(f"ANONYMOUS_GTID event with GTID number {gno}")
        gtid = None
    else:
        if not 1 <= gno <= GNO_MAX:
            raise ValueError(f"GTID number {gno} out of range")
        gtid = MysqlGtid(uuid_text(uuid), "", gno)
    commit_us = length = None
    at = GTID_POST.size
    if len(body) >= at + 7 and body[GTID_POST_56.size] == LOGICAL_TS_TYPE:
        lo, hi = U56.unpack_from(body, at)
        immediate = lo | int.from_bytes(hi, "little") << 32
        at += 7
        commit_us = immediate
        if immediate & COMMIT_TS_FLAG:
            if len(body) < at + 7:
                raise ValueError("original_commit_timestamp runs past the event")
            lo, hi = U56.unpack_from(body, at)
            commit_us = lo | int.from_bytes(hi, "little") << 32
            at += 7
        if at < len(body):
            length, at = _net_length(body, at)
    return GtidFields(gtid, commit_us, length)


def decode_tagged_gtid(body) -> GtidFields:
    """A GTID_TAGGED (42) event body: a message of MySQL's serialization
    library (format version, size, last non-ignorable field id, then
    ``field id, value`` pairs in field order: flags, uuid (16 varlen bytes),
    gno (signed), tag (length, bytes), last_committed, sequence_number,
    immediate and original commit timestamps, transaction_length, ...)."""
    _, at = _varlen(body, 0)                  # serialization format version
    size, at = _varlen(body, at)
    if size > len(body):
        raise ValueError(f"message of {size} bytes in a {len(body)}-byte event")
    end = size
    _, at = _varlen(body, at)                 # last non-ignorable field id
    fields: dict[int, object] = {}
    while at < end:
        fid, at = _varlen(body, at)
        if fid == 1:
            raw = bytearray()
            for _ in range(UUID_LEN):
                b, at = _varlen(body, at)
                if b > 255:
                    raise ValueError("UUID byte out of range")
                raw.append(b)
            fields[1] = bytes(raw)
        elif fid == _FIELD_TAG:
            n, at = _varlen(body, at)
            if at + n > end:
                raise ValueError("tag runs past the event")
            fields[fid] = bytes(body[at:at + n]).decode("ascii")
            at += n
        elif fid <= 11:
            fields[fid], at = _varlen(body, at)
        else:
            break                              # a later version's field: what we need came before
        if fid >= _FIELD_LENGTH and 1 in fields:
            break
    if 1 not in fields or _FIELD_GNO not in fields:
        raise ValueError("GTID_TAGGED event without uuid or gno")
    gno = _signed(fields[_FIELD_GNO])
    if not 1 <= gno <= GNO_MAX:
        raise ValueError(f"GTID number {gno} out of range")
    tag = fields.get(_FIELD_TAG, "").lower()
    commit_us = fields.get(_FIELD_ORIGINAL_TS, fields.get(_FIELD_IMMEDIATE_TS))
    return GtidFields(MysqlGtid(uuid_text(fields[1]), tag, gno), commit_us, fields.get(_FIELD_LENGTH))


def decode_previous_gtids(body) -> GtidSet:
    """A PREVIOUS_GTIDS (35) body: a u64 whose top byte is the format (0:
    untagged, the low 56 bits count the UUIDs; 1: tagged, bits 8-55 count
    (uuid, tag) pairs), then per entry the UUID, (tagged) the tag as a
    varlen length and bytes, a u64 interval count and [start, end) u64 pairs."""
    head = U64.unpack_from(body, 0)[0]
    tagged = head >> 56 == PREVIOUS_FORMAT_TAGGED
    if head >> 56 not in (0, PREVIOUS_FORMAT_TAGGED):
        raise ValueError(f"unknown Previous_gtids format {head >> 56}")
    count = (head >> 8) & ((1 << 48) - 1) if tagged else head & ((1 << 56) - 1)
    at = 8
    out = []
    for _ in range(count):
        if at + UUID_LEN > len(body):
            raise ValueError("entry runs past the event")
        uuid = uuid_text(bytes(body[at:at + UUID_LEN]))
        at += UUID_LEN
        tag = ""
        if tagged:
            n, at = _varlen(body, at)
            tag = bytes(body[at:at + n]).decode("ascii").lower()
            at += n
        n = U64.unpack_from(body, at)[0]
        at += 8
        if at + n * PREV_INTERVAL.size > len(body):
            raise ValueError(f"{n} intervals run past the event")
        for _ in range(n):
            start, end = PREV_INTERVAL.unpack_from(body, at)
            at += PREV_INTERVAL.size
            if not 1 <= start < end <= GNO_MAX + 1:
                raise ValueError(f"interval [{start}, {end}) out of range")
            out.append((uuid, tag, start, end))
    if at != len(body):
        raise ValueError(f"{len(body) - at} bytes after the last interval")
    return GtidSet.from_intervals(out)
