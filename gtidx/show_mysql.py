"""What one MySQL transaction did (``gtidx show`` on a MySQL binlog): its
statements and row changes, as ``show.GroupChanges`` (the same document as
MariaDB's, ``compressed`` added).

The transaction's events (``MysqlBinlog.events_between``, each CRC32 checked)
are read in order; a TRANSACTION_PAYLOAD (``binlog_transaction_compression=ON``)
is decompressed and split into its inner events (``binlog.mysqlpayload``),
which are read as if they stood in the file, and the transaction says it was
compressed. Rows events (TABLE_MAP, WRITE/UPDATE/DELETE_ROWS v1 and v2,
PARTIAL_UPDATE_ROWS) are decoded by mysql-replication's event classes told
that MySQL wrote them (``show.library("mysql")``: MySQL's character set ids);
their values are rendered as MariaDB's are (``show_rows``), JSON columns as
the server's JSON text and a partial JSON update as ``mysqlbinlog -v``
writes it (``JSON_REPLACE(@2, '$.a', 1)``, ``mysqljson``).

Statements: QUERY texts other than BEGIN/COMMIT; INTVAR, RAND and USER_VAR
as the ``SET`` that ``mysqlbinlog`` prints before their statement; XA_PREPARE
as ``XA PREPARE xid``; an INCIDENT as a comment naming it. ROWS_QUERY
(``binlog_rows_query_log_events``) texts are the annotations. XID and the
events MySQL's own parser ignores (TRANSACTION_CONTEXT, heartbeats) say
nothing to show. Any other event type is an error naming it (exit 2: the
bytes passed their CRC32, gtidx cannot show them), never left out.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from .binlog import events, mysqlpayload
from .binlog.mysqlevents import (GTID_TYPES, IGNORED, INTVAR, MYSQL_EVENT_NAMES, RAND, TRANSACTION_PAYLOAD,
                                 USER_VAR)
from .errors import CorruptBinlogError, UnsupportedBinlogError
from .show import (FRAMING, ROWS_OP, TABLE_MAP, GroupChanges, library, row_changes, table_id_of,
                   table_map_name, undecodable, xa_prepare_text)
from .show_rows import JsonBytes, Table

ROWS_QUERY = 29
PARTIAL_UPDATE_ROWS = 39
MYSQL_ROWS_OP = {**ROWS_OP, PARTIAL_UPDATE_ROWS: "update"}
INTVAR_NAMES = {1: "LAST_INSERT_ID", 2: "INSERT_ID"}
INTVAR_BODY = struct.Struct("<BQ")
RAND_BODY = struct.Struct("<QQ")
INCIDENT_HEAD = struct.Struct("<HB")
STRING_RESULT, REAL_RESULT, INT_RESULT, DECIMAL_RESULT = 0, 1, 2, 4


class Where(NamedTuple):
    """Where an event is: its offset in the file, and for an event inside a
    TRANSACTION_PAYLOAD its place in the uncompressed payload."""
    offset: int
    inner: int | None

    def says(self) -> str:
        return "" if self.inner is None else f" (the event at byte {self.inner} of its uncompressed payload)"


def decode_transaction(b, group, tables=None, schema=None) -> GroupChanges:
    """Decode the transaction ``group`` (anything with ``gtid``, ``start``,
    ``end``, ``timestamp``: a ``MysqlGroup`` or a ``Location``) of the open
    ``MysqlBinlog`` ``b``. ``tables`` and ``schema``: as ``show.decode_group``."""
    said: dict = {}
    rows = list(transaction_rows(b, group, tables, schema, said))
    return GroupChanges(group.gtid, b.path, group.start, group.end, group.timestamp, said["statements"],
                        said["annotations"], rows, said["column_names"], said["compressed"])


def transaction_rows(b, group, tables=None, schema=None, said: dict | None = None):
    """``decode_transaction``'s rows, one rows event's at a time; ``said``
    (a dict), once they are all read: "statements", "annotations",
    "column_names", "compressed"."""
    reader = _Reader(b, tables, schema)
    compressed = False
    for ev in b.events_between(group.start, group.end):
        if ev.type in GTID_TYPES and ev.offset == group.start:
            continue
        if ev.type == TRANSACTION_PAYLOAD:
            compressed = True
            payload = mysqlpayload.decode(ev.body, path=b.path, offset=ev.offset)
            for inner in payload.events:
                where = Where(ev.offset, inner.at)
                if inner.type == TRANSACTION_PAYLOAD:
                    raise CorruptBinlogError("a TRANSACTION_PAYLOAD event inside another" + where.says(),
                                             path=b.path, offset=ev.offset)
                yield from reader.event(inner.type, inner.timestamp, inner.server_id, inner.flags, inner.body,
                                        where)
            continue
        yield from reader.event(ev.type, ev.timestamp, ev.server_id, ev.flags, ev.body, Where(ev.offset, None))
    if said is not None:
        named = {t.names_from for t in reader.tables_of.values()}
        said.update(statements=reader.statements, annotations=reader.annotations, compressed=compressed,
                    column_names="none" if not named else named.pop() if len(named) == 1 else "mixed")


class _Event(NamedTuple):
    """The fields ``show``'s helpers read of an event (``events.Event``'s)."""
    offset: int
    type: int
    body: bytes

    @property
    def name(self) -> str:
        return MYSQL_EVENT_NAMES.get(self.type, f"type {self.type}")


class _Reader:
    """The events of one transaction, read in order: statements and
    annotations collected, rows events decoded (``event`` yields their rows)."""

    def __init__(self, b, tables, schema):
        self.b, self.tables, self.schema = b, tables, schema
        self.lib = None
        self.table_map: dict = {}        # mysql-replication's, for this transaction only
        self.tables_of: dict = {}        # table_id -> Table
        self.skipped: set = set()        # table_ids of tables not asked for
        self.statements: list = []
        self.annotations: list = []

    def _error(self, cls, message: str, where: Where, **kw):
        return cls(message + where.says(), path=self.b.path, offset=where.offset, **kw)

    def event(self, etype: int, ts: int, server_id: int, flags: int, body, where: Where):
        path = self.b.path
        if etype == events.QUERY:
            text = events.decode_query_text(body, path=path, offset=where.offset)
            if text.strip().upper() not in FRAMING:
                self.statements.append(text.decode("utf-8", "replace"))
            return
        if etype == ROWS_QUERY:
            self.annotations.append(bytes(body[1:]).decode("utf-8", "replace"))
            return
        if etype in (events.XID,) or etype in IGNORED:
            return
        if etype == events.XA_PREPARE:
            self.statements.append(xa_prepare_text(_Event(where.offset, etype, body), path))
            return
        if etype in (INTVAR, RAND, USER_VAR, events.INCIDENT):
            try:
                self.statements.append(_context_text(etype, bytes(body)))
            except (ValueError, IndexError, struct.error, UnicodeDecodeError) as e:
                raise self._error(CorruptBinlogError, f"{MYSQL_EVENT_NAMES[etype]} event does not decode: {e}",
                                  where) from None
            return
        if etype != TABLE_MAP and etype not in MYSQL_ROWS_OP:
            raise self._error(UnsupportedBinlogError,
                              f"{_named(etype)} in the transaction: gtidx show does not know what it does", where,
                              hint="nothing is left out silently: gtidx show reads QUERY, rows, TABLE_MAP, "
                                   "XID, XA_PREPARE, INTVAR, RAND, USER_VAR, ROWS_QUERY and TRANSACTION_PAYLOAD")
        yield from self._rows(etype, ts, server_id, flags, body, where)

    def _rows(self, etype, ts, server_id, flags, body, where: Where):
        tables = self.tables
        if tables is not None:
            if etype == TABLE_MAP:
                name = table_map_name(body)
                if name is not None and name not in tables:
                    self.skipped.add(table_id_of(body))
                    return
                self.skipped.discard(table_id_of(body))
            elif table_id_of(body) in self.skipped:
                return
        if self.lib is None:
            self.lib = library("mysql")
        lib = self.lib
        raw = bytearray(events.EVENT_HEADER.pack(ts, etype, server_id,
                                                 events.HEADER_LEN + len(body) + events.CRC_LEN, 0, flags))
        raw += body
        raw += bytes(events.CRC_LEN)      # mysql-replication expects a checksum; the file's was checked
        ev = _Event(where.offset, etype, body)
        try:
            e = lib.event(bytes(raw), self.table_map)
        except CorruptBinlogError:
            raise
        except Exception as err:        # the library's decoding failed
            raise undecodable(self.b, ev, f"cannot decode {ev.name} event{where.says()}", err) from None
        if etype == TABLE_MAP:
            if e is None:
                raise self._error(CorruptBinlogError, "TABLE_MAP event not decoded", where)
            self.tables_of[e.table_id] = Table(e, lib, self.schema)
            return
        table_id = table_id_of(body)
        t = self.tables_of.get(table_id)
        if e is None or t is None:
            raise self._error(CorruptBinlogError, f"rows event for table_id {table_id} with no TABLE_MAP "
                              "before it in its transaction", where)
        op = MYSQL_ROWS_OP[etype]
        e.packet.read_binary_json = _raw_json(e.packet)
        try:
            decoded = e.rows
            if e.packet.read_bytes != e.event_size:
                raise ValueError(f"the rows take {e.packet.read_bytes} bytes of the event's {e.event_size}")
            out = list(row_changes(decoded, op, t, lib, where.offset))
        except Exception as err:
            raise undecodable(self.b, ev, f"cannot decode the rows of {ev.name} event on {t.name}{where.says()}",
                              err) from None
        yield from out


def _named(etype: int) -> str:
    name = MYSQL_EVENT_NAMES.get(etype)
    return f"an event of type {etype}" if name is None else f"a {name} event (type {etype})"


def _raw_json(packet):
    """mysql-replication's JSON reader replaced for one rows event: the
    column's bytes (``JsonBytes``), rendered by ``show_rows`` as the server's
    text; its own parse is lossy (opaque values, doubles) and reads one
    partial-update diff of several."""
    def read_binary_json(size, is_partial):
        length = packet.read_uint_by_size(size)
        return JsonBytes(bytes(packet.read(length)) if length else b"", bool(is_partial))
    return read_binary_json


def _context_text(etype: int, body: bytes) -> str:
    """INTVAR, RAND, USER_VAR as the ``SET`` ``mysqlbinlog`` prints for them;
    INCIDENT as a comment."""
    if etype == INTVAR:
        kind, value = INTVAR_BODY.unpack_from(body)
        return f"SET {INTVAR_NAMES.get(kind, 'INSERT_ID')}={value}"
    if etype == RAND:
        a, b = RAND_BODY.unpack_from(body)
        return f"SET @@RAND_SEED1={a}, @@RAND_SEED2={b}"
    if etype == events.INCIDENT:
        kind, n = INCIDENT_HEAD.unpack_from(body)
        msg = body[INCIDENT_HEAD.size:INCIDENT_HEAD.size + n].decode("utf-8", "replace")
        return f"/* INCIDENT {kind}: {msg} */"
    n = struct.unpack_from("<I", body)[0]
    name = body[4:4 + n].decode("utf-8")
    at = 4 + n
    if body[at]:
        return f"SET @`{name}`:=NULL"
    kind, _charset, vlen = struct.unpack_from("<BII", body, at + 1)
    at += 10
    value = body[at:at + vlen]
    if len(value) != vlen:
        raise ValueError("its value runs past the event")
    if kind == STRING_RESULT:
        text = "X'" + value.hex() + "'"
    elif kind == REAL_RESULT:
        text = repr(struct.unpack("<d", value)[0])
    elif kind == INT_RESULT:
        unsigned = at + vlen < len(body) and body[at + vlen] & 1
        text = str(int.from_bytes(value, "little", signed=not unsigned))
    elif kind == DECIMAL_RESULT:
        from pymysqlreplication.util.bytes import decode_decimal
        text = str(decode_decimal(value))
    else:
        raise ValueError(f"value type {kind}")
    return f"SET @`{name}`:={text}"
