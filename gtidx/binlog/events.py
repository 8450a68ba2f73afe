"""What a binlog's bytes mean: event types and their names, flags, and every
byte layout (event header, GTID event, GTID_LIST, FORMAT_DESCRIPTION, QUERY),
with the small decoders and checks over one event; the FDE as a reader
keeps it (``FormatDescription``). The records a reader yields, ``Event``
and ``Group``, are ``binlog.records``'.

Shared by the MariaDB reader (``binlog.mariadb``), the MySQL one
(``binlog.mysql``), ``binlog.probe`` and ``show``; MySQL's own event types
and layouts are in ``binlog.mysql``.
"""

import re
import struct
import sys
import zlib
from typing import Sequence

from ..errors import CorruptBinlogError
from ..gtid import Gtid

MAGIC = b"\xfebin"
HEADER_LEN = 19
CRC_LEN = 4

# Event types (MariaDB's log_event.h numbering).
START_EVENT_V3 = 1
QUERY = 2
STOP = 3
ROTATE = 4
XID = 16
FORMAT_DESCRIPTION = 15
INCIDENT = 26
MYSQL_GTID = 33
MYSQL_ANONYMOUS_GTID = 34
MYSQL_PREVIOUS_GTIDS = 35
XA_PREPARE = 38
ANNOTATE_ROWS = 160
BINLOG_CHECKPOINT = 161
GTID = 162
GTID_LIST = 163
START_ENCRYPTION = 164
QUERY_COMPRESSED = 165

EVENT_NAMES = {
    START_EVENT_V3: "START_V3", QUERY: "QUERY", STOP: "STOP", ROTATE: "ROTATE", XID: "XID",
    FORMAT_DESCRIPTION: "FORMAT_DESCRIPTION", INCIDENT: "INCIDENT", 19: "TABLE_MAP",
    23: "WRITE_ROWS_V1", 24: "UPDATE_ROWS_V1", 25: "DELETE_ROWS_V1", XA_PREPARE: "XA_PREPARE",
    ANNOTATE_ROWS: "ANNOTATE_ROWS", BINLOG_CHECKPOINT: "BINLOG_CHECKPOINT", GTID: "GTID",
    GTID_LIST: "GTID_LIST", START_ENCRYPTION: "START_ENCRYPTION", QUERY_COMPRESSED: "QUERY_COMPRESSED",
    MYSQL_GTID: "MYSQL_GTID", MYSQL_ANONYMOUS_GTID: "MYSQL_ANONYMOUS_GTID",
    MYSQL_PREVIOUS_GTIDS: "MYSQL_PREVIOUS_GTIDS",
}

# Events that are never inside an event group: they end the group before them.
BOUNDARY_TYPES = frozenset({START_EVENT_V3, STOP, ROTATE, FORMAT_DESCRIPTION, INCIDENT,
                            BINLOG_CHECKPOINT, GTID_LIST, START_ENCRYPTION})
# GTID event flags2 (Group.flags2, as `gtidx dump` prints it).
FL_STANDALONE = 0x01
FL_GROUP_COMMIT_ID = 0x02
FL_TRANSACTIONAL = 0x04
FL_ALLOW_PARALLEL = 0x08
FL_WAITED = 0x10
FL_DDL = 0x20
FL_PREPARED_XA = 0x40
FL_COMPLETED_XA = 0x80

IN_USE_FLAG = 0x0001          # LOG_EVENT_BINLOG_IN_USE_F, on the FDE
CHECKSUM_NONE = 0
CHECKSUM_CRC32 = 1
CHECKSUM_UNDEF = 255

# Every byte layout, named once.
EVENT_HEADER = struct.Struct("<IBIIIH")   # timestamp, type, server_id, length, next_pos, flags
TYPE_LENGTH = struct.Struct("<4xB4xI")     # type, length: all the hot loop reads
TYPE_SERVER_LENGTH = struct.Struct("<4xBII")
GTID_BODY = struct.Struct("<QIB")          # seq_no, domain_id, flags2
GTID_BODY_LEN = GTID_BODY.size            # 13
# A GTID event's header and body fields in one unpack from the event start:
# timestamp, server_id (header), seq_no, domain_id, flags2 (body at +19).
GTID_HEAD = struct.Struct("<I1xI10xQIB")
GTID_ENTRY = struct.Struct("<IIQ")         # domain, server, seq (GTID_LIST, .idx keys)
FDE_FIXED = struct.Struct("<H50sIB")       # binlog_version, server_version, created, header_len
QUERY_POST_HEADER = struct.Struct("<IIBHH")  # thread_id, exec_time, db_len, error_code, status_len
U32 = struct.Struct("<I")
# A group as group_records packs it (the compiled walk writes the same):
# start, end, seq_no, timestamp, server_id, domain_id, flags2.
GROUP_RECORD = struct.Struct("<QQQIIII")
_RECORD_WORDS = GROUP_RECORD.size // 8   # a record in u64 words: its start is word 0, its end word 1


def record_starts(records) -> Sequence[int]:
    """The ``start`` of each GROUP_RECORD in the bytes ``records``, in order,
    indexable (for ``bisect``): a view of the bytes, no copy, where the host
    is little-endian as the records are; else unpacked."""
    return _record_words(records, 0)


def record_ends(records) -> Sequence[int]:
    """The ``end`` of each GROUP_RECORD in ``records`` (as ``record_starts``)."""
    return _record_words(records, 1)


def _record_words(records, word: int) -> Sequence[int]:
    if sys.byteorder == "little":
        return memoryview(records).cast("Q")[word::_RECORD_WORDS]
    return [GROUP_RECORD.unpack_from(records, at)[word] for at in range(0, len(records), GROUP_RECORD.size)]

GTID_LIST_COUNT_MASK = 0x0FFFFFFF         # the top 4 bits are wire-only flags

# Every event type a MariaDB server writes, or one of MySQL's it may pass on
# (1 .. 41), and MariaDB's own (160 ..): what a header must name to be taken
# for a real one where the length chain cannot vouch for it (``plausible_header``).
KNOWN_TYPES = bytes(1 <= t <= 41 or 160 <= t <= 175 for t in range(256))
_U32_MASK = 0xFFFFFFFF


def plausible_header(offset: int, etype: int, length: int, next_pos: int, checksum_len: int,
                     known: bytes = KNOWN_TYPES) -> bool:
    """Could the header (type, length, next-position field) read at ``offset``
    be a real event's? Its type is one a server writes, its length holds a
    header and a checksum (a GTID event: its fixed body too), and its
    next-position field is 0 (MariaDB 11.4+ writes that for events from the
    transaction cache) or the event's end (modulo 2**32: it wraps at 4 GiB).
    Every event of the fixtures (10.11 and 11.8) passes; a destroyed header
    almost never does. Whether the event fits in the file is the caller's.
    ``known``: the types the file's server writes (``Binlog.known_types``)."""
    if not known[etype] or length < HEADER_LEN + checksum_len:
        return False
    if etype == GTID and length < HEADER_LEN + GTID_BODY_LEN + checksum_len:
        return False
    return next_pos == 0 or next_pos == (offset + length) & _U32_MASK


def is_mariadb(server_version: str) -> bool:
    """Did a MariaDB server write the binlog whose FORMAT_DESCRIPTION names
    this server version? (MariaDB's says so; MySQL's, e.g. '9.7.4-2', does not.)"""
    return "mariadb" in server_version.lower()


# compiled on first use (re's cache), not at import: only a MySQL binlog needs it
_VERSION = r"([0-9]+)\.([0-9]+)\.([0-9]+)"


def has_checksum_alg(server_version: str) -> bool:
    """Does the FORMAT_DESCRIPTION end with a checksum-algorithm byte (and
    4 bytes for a CRC)? MariaDB >= 5.3 always writes it, MySQL from 5.6.1
    (its checksum_version_product): an older MySQL FDE ends with its
    post-header lengths."""
    if is_mariadb(server_version):
        return True
    m = re.match(_VERSION, server_version)
    return m is None or tuple(int(x) for x in m.groups()) >= (5, 6, 1)


def event_crc(event, etype: int) -> int:
    """The CRC32 an event (its bytes from the header to just before its
    stored checksum) should carry: a FORMAT_DESCRIPTION's is computed with
    its IN_USE flag clear."""
    if etype == FORMAT_DESCRIPTION:
        event = bytearray(event)
        event[17] &= ~IN_USE_FLAG & 0xFF
    return zlib.crc32(event)


class FormatDescription:
    """A binlog's FORMAT_DESCRIPTION, as its reader keeps it (``Binlog.fde``):
    read by name, never unpacked nor compared, so a plain class (a
    NamedTuple class costs a lookup's start-up more to create)."""

    __slots__ = ("binlog_version", "server_version", "created", "header_length", "checksum", "in_use", "length")

    def __init__(self, binlog_version: int, server_version: str, created: int, header_length: int,
                 checksum: int, in_use: bool, length: int):
        self.binlog_version = binlog_version
        self.server_version = server_version
        self.created = created
        self.header_length = header_length
        self.checksum = checksum          # CHECKSUM_NONE or CHECKSUM_CRC32
        self.in_use = in_use              # still being written, or its server did not close it
        self.length = length              # of the FDE event itself


# -- decoders (bodies are bytes-like, without header and checksum) ------------

def decode_gtid_list(body, *, path=None, offset=None) -> list[Gtid]:
    if len(body) < 4:
        raise CorruptBinlogError("GTID_LIST event too short", path=path, offset=offset)
    count = U32.unpack_from(body, 0)[0] & GTID_LIST_COUNT_MASK
    if 4 + count * GTID_ENTRY.size > len(body):
        raise CorruptBinlogError(f"GTID_LIST claims {count} GTIDs but has room for "
                                 f"{(len(body) - 4) // GTID_ENTRY.size}", path=path, offset=offset)
    return [Gtid(*GTID_ENTRY.unpack_from(body, 4 + i * GTID_ENTRY.size)) for i in range(count)]


def decode_query_text(body, *, path=None, offset=None) -> bytes:
    """The SQL text of a QUERY event (not for QUERY_COMPRESSED)."""
    try:
        _, _, db_len, _, status_len = QUERY_POST_HEADER.unpack_from(body, 0)
    except struct.error:
        raise CorruptBinlogError("QUERY event too short", path=path, offset=offset)
    start = QUERY_POST_HEADER.size + status_len + db_len + 1
    if start > len(body):
        raise CorruptBinlogError("QUERY event fields run past its end", path=path, offset=offset)
    return bytes(body[start:])


_TERMINATING_QUERIES = (b"COMMIT", b"ROLLBACK")
_TERMINATING_XA = (b"XA COMMIT", b"XA ROLLBACK")


def event_crcs(event, etype: int) -> tuple[int, int]:
    """(stored, computed) CRC32 of a whole event with a checksum (the bytes
    from its header on); a FORMAT_DESCRIPTION's with its IN_USE flag cleared,
    as the server computes it."""
    return U32.unpack_from(event, len(event) - CRC_LEN)[0], event_crc(event[:len(event) - CRC_LEN], etype)


def is_group_terminator(event_type: int, body, standalone: bool) -> bool:
    """Does an event of this type (and body) end the event group it is in?

    Used only for the last group of a file that is still being written: a
    group there is complete once its terminator is on disk. XID ends
    transactional groups; XA_PREPARE ends an XA PREPARE group; a QUERY
    ``COMMIT``/``ROLLBACK``/``XA COMMIT``/``XA ROLLBACK`` ends the others;
    in a standalone group (DDL) the statement itself is the whole group.
    """
    if event_type in (XID, XA_PREPARE):
        return True
    if event_type == QUERY_COMPRESSED:
        return standalone
    if event_type != QUERY:
        return False
    if standalone:
        return True
    try:
        text = decode_query_text(body).strip().upper()
    except CorruptBinlogError:
        return False
    return text in _TERMINATING_QUERIES or text.startswith(_TERMINATING_XA)


def length_coded(buf, at: int) -> tuple[int, int]:
    """A packed integer (MySQL's net_field_length, also in MySQL's JSON diffs)
    at ``at``: (value, its end); ValueError for a first byte no packed
    integer starts with, IndexError where ``buf`` ends first."""
    first = buf[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None:
        raise ValueError("bad packed integer")
    return int.from_bytes(bytes(buf[at + 1:at + 1 + width]), "little"), at + 1 + width
