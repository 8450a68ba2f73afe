"""What one event group did (``gtidx show``): its statements and its row changes.

The bytes are located by the rest of gtidx (a group's ``start`` and ``end``);
this module decodes them. Row events are decoded by mysql-replication's event
classes (package ``pymysqlreplication``), fed the event bytes read here: no
server connection. It is imported here only, when a group is decoded, so that
``gtidx seek`` and the other commands never pay for it. What a table's
columns are and how each value is shown is ``show_rows``'s; this module
walks the group's events, decodes what is not rows (statements, XA), and
renders a group as text.

Rules of the output (docs/cli.md, "gtidx show"):

* ``table_id`` is mapped through the TABLE_MAP events of the group being
  decoded (MariaDB writes them in every group before its rows events; a
  table_id is per file and may be reused): never across groups or files.
* Column names come from the TABLE_MAP's optional metadata when the server
  wrote them (``binlog_row_metadata=FULL``), else from a live server's
  information_schema when asked (``--schema-from``, ``ServerSchema``: only
  where its table has as many columns), else they are positional, ``@1``,
  ``@2``, ... as ``mariadb-binlog -v`` names them.
* A column absent from a row image (``binlog_row_image=MINIMAL`` or
  ``NOBLOB``) is not guessed: it is left out of ``before``/``after`` and
  listed in ``unknown``. ``changed`` (updates only) lists the columns present
  in both images whose values differ.
* Values: integers and floats as numbers; DECIMAL as its exact text
  (``"12.50"``); strings as text in their column's character set (known from
  the metadata; without it, UTF-8 when the bytes are valid UTF-8); binary
  data (a ``binary`` character set, or bytes that are not text) as
  ``{"hex": "..."}``; DATETIME ``"YYYY-MM-DD HH:MM:SS[.ffffff]"`` (the
  column's fractional digits), DATE ``"YYYY-MM-DD"``, TIME ``"[-]HH:MM:SS[.f]"``
  (these three decoded here from their stored bytes: zero and invalid dates
  as stored), TIMESTAMP as UTC ``"YYYY-MM-DDTHH:MM:SS[.f]Z"``; FLOAT as the
  shortest decimal of its 4-byte value; BIT ``"0101"``; ENUM its member, or
  its index when the binlog does not name the members; SET its members
  joined by commas, or its bitmask as a number; NULL as null. An integer
  whose signedness the binlog does not say (no ``binlog_row_metadata``) and
  whose top bit is set is the text ``"-1 (18446744073709551615)"``: both
  readings, as ``mariadb-binlog -v`` prints it.
"""
from __future__ import annotations

import binascii
import decimal
import json
import struct
import zlib
from typing import NamedTuple

from .binlog import events, records
from .binlog.mariadb import Binlog
from .errors import CorruptBinlogError, UnsupportedBinlogError
from .show_rows import ServerSchema, Table, row_image

FK_NOTE = ("changes made by foreign-key cascades (ON DELETE/ON UPDATE CASCADE, SET NULL) are not in a "
           "ROW binlog: only the statement's own rows are; the engine applies the cascades again on a replica")

# Event types gtidx decodes here (MariaDB's log_event.h numbering).
TABLE_MAP = 19
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1 = 23, 24, 25
WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2 = 30, 31, 32
WRITE_ROWS_COMPRESSED_V1, UPDATE_ROWS_COMPRESSED_V1, DELETE_ROWS_COMPRESSED_V1 = 166, 167, 168  # log_bin_compress
WRITE_ROWS_COMPRESSED_V2, UPDATE_ROWS_COMPRESSED_V2, DELETE_ROWS_COMPRESSED_V2 = 169, 170, 171
ROWS_OP = {WRITE_ROWS_V1: "insert", UPDATE_ROWS_V1: "update", DELETE_ROWS_V1: "delete",
           WRITE_ROWS_V2: "insert", UPDATE_ROWS_V2: "update", DELETE_ROWS_V2: "delete"}
# A compressed rows event and the plain type it stands for.
_UNCOMPRESSED = {**{t: WRITE_ROWS_V1 + t - WRITE_ROWS_COMPRESSED_V1
                    for t in range(WRITE_ROWS_COMPRESSED_V1, DELETE_ROWS_COMPRESSED_V1 + 1)},
                 **{t: WRITE_ROWS_V2 + t - WRITE_ROWS_COMPRESSED_V2
                    for t in range(WRITE_ROWS_COMPRESSED_V2, DELETE_ROWS_COMPRESSED_V2 + 1)}}
FRAMING = (b"BEGIN", b"COMMIT")           # QUERY events that only frame a transaction

ROWS_POST_HEADER_V1 = struct.Struct("<6sH")      # table_id, flags (MariaDB's rows and TABLE_MAP events)
ROWS_VAR_HEADER_LEN = struct.Struct("<H")        # v2: the extra data's length, itself included
COMMIT_ID = struct.Struct("<Q")                # a GTID event's commit id (FL_GROUP_COMMIT_ID)
GTID_XID = struct.Struct("<iBB")                # then an XA group's formatID, gtrid and bqual lengths
XA_PREPARE_HEAD = struct.Struct("<BiII")        # one_phase, formatID, gtrid and bqual lengths
PACKET_OK = b"\x00"                             # mysql-replication's packets start with the OK byte
RELEASE_STEP = 16 << 20                         # group_rows(release=True) gives memory back this much at a time


class RowChange(NamedTuple):
    """One changed row, in binlog order."""
    table: str              # "db.tbl"
    op: str                 # "insert", "update", "delete"
    before: dict | None     # column -> value (delete, update); absent columns left out
    after: dict | None      # column -> value (insert, update)
    changed: list | None    # updates: the columns known in both images whose values differ
    unknown: list           # columns absent from the image(s): not in the binlog, not guessed
    offset: int             # the rows event's offset


class GroupChanges(NamedTuple):
    """What one event group did."""
    gtid: object            # gtid.Gtid
    file: str
    start: int
    end: int
    timestamp: int
    statements: list        # QUERY texts (BEGIN/COMMIT framing left out), in binlog order
    annotations: list       # ANNOTATE_ROWS texts: the SQL that made the rows events after it
    rows: list              # RowChange, in binlog order
    column_names: str       # "metadata" (all tables' names from the binlog), "server" (--schema-from),
                            # "positional", "mixed" or "none"
    compressed: bool | None = None  # MySQL: whether its events came in a TRANSACTION_PAYLOAD; MariaDB: None

    def as_dict(self) -> dict:
        """The ``--json`` document."""
        out = {"gtid": None if self.gtid is None else str(self.gtid), "file": self.file, "start": self.start,
               "end": self.end, "timestamp": self.timestamp, "statements": self.statements,
               "annotations": self.annotations, "column_names": self.column_names,
               "rows": [{"table": r.table, "op": r.op, "before": json_image(r.before),
                         "after": json_image(r.after), "changed": r.changed, "unknown": r.unknown}
                        for r in self.rows],
               "note": FK_NOTE}
        if self.compressed is not None:
            out["compressed"] = self.compressed
        return out


def as_text(v) -> str | None:
    """A value as text: what its ``--json`` value says, as a string (the
    Spark source ``gtidx.changes`` holds row images as map<string,string>).
    Strings as they are (no quotes), numbers and DECIMAL as their JSON text
    (``"42"``, ``"1.5"``, ``"-1234.500"``), binary data as its hex digits
    (``"00ff"``, the JSON's ``{"hex": ...}``), NULL as None."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return json.dumps(v)


def text_image(image: dict | None) -> dict | None:
    """A row image with its values ``as_text``."""
    return None if image is None else {k: as_text(v) for k, v in image.items()}


def json_image(image: dict | None) -> dict | None:
    """A row image with its values as ``--json`` writes them: binary data as
    ``{"hex": ...}``, DECIMAL as its exact text, the others as they are."""
    if image is None:
        return None
    return {k: {"hex": v.hex()} if isinstance(v, bytes) else str(v) if isinstance(v, decimal.Decimal) else v
            for k, v in image.items()}


# -- mysql-replication, fed bytes -----------------------------------------------

class _NoServer:
    """The 'control connection' mysql-replication's events ask: there is none.
    It says which server wrote the binlog (``dbms``): the character set ids
    and a few column types read differently."""
    charset = "utf8mb4"

    def __init__(self, dbms: str = "mariadb"):
        self.dbms = dbms

    def _get_dbms(self) -> str:
        return self.dbms


class _Lib:
    """mysql-replication's pieces, imported on first use."""

    def __init__(self, dbms: str = "mariadb"):
        try:
            from pymysql.protocol import MysqlPacket
            from pymysqlreplication import row_event
            from pymysqlreplication.constants import CHARSET, FIELD_TYPE, NONE_SOURCE
            from pymysqlreplication.packet import BinLogPacketWrapper
        except ImportError as e:    # pragma: no cover - a broken install
            raise UnsupportedBinlogError(f"gtidx show needs mysql-replication ({e})",
                                         hint="pip install mysql-replication") from None
        self.MysqlPacket, self.Wrapper = MysqlPacket, BinLogPacketWrapper
        self.TableMapEvent = row_event.TableMapEvent
        self.classes = {row_event.TableMapEvent, row_event.WriteRowsEvent, row_event.UpdateRowsEvent,
                        row_event.DeleteRowsEvent,
                        row_event.PartialUpdateRowsEvent}      # MySQL's JSON diffs (MariaDB has none)
        self.dbms = dbms
        self.CHARSET, self.FIELD_TYPE, self.NONE_SOURCE = CHARSET, FIELD_TYPE, NONE_SOURCE
        FT = FIELD_TYPE
        self.int_bits = {FT.TINY: 8, FT.SHORT: 16, FT.INT24: 24, FT.LONG: 32, FT.LONGLONG: 64}
        self.conn = _NoServer(dbms)

    def event(self, raw: bytes, table_map: dict):
        """mysql-replication's event object for one whole event (header,
        body, 4 checksum bytes), or None for a type it is not asked about."""
        return self.Wrapper(self.MysqlPacket(PACKET_OK + raw, "utf8"), table_map, self.conn,
                            mysql_version=(0, 0, 0), use_checksum=True, allowed_events=self.classes,
                            only_tables=None, ignored_tables=None, only_schemas=None, ignored_schemas=None,
                            freeze_schema=False, ignore_decode_errors=False, verify_checksum=False,
                            optional_meta_data=True, enable_logging=False).event


_libs: dict = {}


def library(dbms: str = "mariadb") -> _Lib:
    """mysql-replication's pieces for binlogs of ``dbms`` ("mariadb" or "mysql"), imported once."""
    lib = _libs.get(dbms)
    if lib is None:
        lib = _libs[dbms] = _Lib(dbms)
    return lib


def _library() -> _Lib:
    return library("mariadb")


# -- compressed events (log_bin_compress) ---------------------------------------

def _uncompress(blob, *, path, offset) -> bytes:
    """MariaDB's compressed payload: a byte 0x80 | n, the uncompressed length in
    n big-endian bytes, then a zlib stream."""
    if not blob or blob[0] & 0xE0 != 0x80:
        raise CorruptBinlogError("compressed event without its compression header", path=path, offset=offset)
    n = blob[0] & 0x07
    want = int.from_bytes(bytes(blob[1:1 + n]), "big")
    try:
        out = zlib.decompressobj().decompress(bytes(blob[1 + n:]))
    except zlib.error as e:
        raise CorruptBinlogError(f"compressed event does not decompress: {e}", path=path, offset=offset) from None
    if len(out) != want:
        raise CorruptBinlogError(f"compressed event decompresses to {len(out)} bytes, its header says {want}",
                                 path=path, offset=offset)
    return out


def _plain_rows_event(ev: records.Event, path) -> tuple[int, bytes]:
    """A compressed rows event as the plain one it stands for: (type, body)."""
    body = ev.body
    try:
        at = ROWS_POST_HEADER_V1.size
        if ev.type >= WRITE_ROWS_COMPRESSED_V2:
            at += ROWS_VAR_HEADER_LEN.unpack_from(body, at)[0]
        width, at = events.length_coded(body, at)
        at += (width + 7) // 8 * (2 if ev.type in (UPDATE_ROWS_COMPRESSED_V1, UPDATE_ROWS_COMPRESSED_V2) else 1)
        head = bytes(body[:at])
    except (IndexError, ValueError, struct.error):
        raise CorruptBinlogError("compressed rows event too short", path=path, offset=ev.offset) from None
    return _UNCOMPRESSED[ev.type], head + _uncompress(body[at:], path=path, offset=ev.offset)


# -- the group ---------------------------------------------------------------------

def _xid_text(format_id: int, data: bytes, gtrid_len: int) -> str:
    """An XA transaction id as mariadb-binlog -v prints it: X'gtrid',X'bqual',formatID."""
    return f"X'{data[:gtrid_len].hex()}',X'{data[gtrid_len:].hex()}',{format_id}"


def _gtid_xid(body) -> str | None:
    """The XID a GTID event of an XA PREPARE group carries (FL_PREPARED_XA), or None."""
    flags2 = body[events.GTID_BODY.size - 1]
    if not flags2 & events.FL_PREPARED_XA:
        return None
    at = events.GTID_BODY.size + (COMMIT_ID.size if flags2 & events.FL_GROUP_COMMIT_ID else 0)
    try:
        format_id, gtrid_len, bqual_len = GTID_XID.unpack_from(body, at)
    except struct.error:
        return None
    at += GTID_XID.size
    return _xid_text(format_id, bytes(body[at:at + gtrid_len + bqual_len]), gtrid_len)


def xa_prepare_text(ev: records.Event, path) -> str:
    """XA_PREPARE event: ``XA PREPARE xid`` (``XA COMMIT xid ONE PHASE`` when one-phase)."""
    try:
        one_phase, format_id, gtrid_len, bqual_len = XA_PREPARE_HEAD.unpack_from(ev.body, 0)
    except struct.error:
        raise CorruptBinlogError("XA_PREPARE event too short", path=path, offset=ev.offset) from None
    data = bytes(ev.body[XA_PREPARE_HEAD.size:XA_PREPARE_HEAD.size + gtrid_len + bqual_len])
    xid = _xid_text(format_id, data, gtrid_len)
    return f"XA COMMIT {xid} ONE PHASE" if one_phase else f"XA PREPARE {xid}"


def undecodable(b: Binlog, ev: records.Event, what: str, err: Exception):
    """The error for an event mysql-replication could not decode. Its CRC32 was
    right (a binlog with checksums): the bytes are the server's, a layout the
    decoder does not know (exit 2). Without checksums it may be damage (exit 3)."""
    why = f"{what}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}".rstrip(": ")
    if b.checksum_len:
        return UnsupportedBinlogError(
            why, path=b.path, offset=ev.offset,
            hint="its CRC32 is right: a column type gtidx show cannot decode, such as the fractional "
                 "DATETIME/TIME/TIMESTAMP of tables made with mysql56_temporal_format=OFF "
                 "(mariadb-binlog -v cannot either)")
    return CorruptBinlogError(why, path=b.path, offset=ev.offset,
                              hint="the binlog has no checksums: damaged bytes, or a column type "
                                   "gtidx show cannot decode")


def table_map_name(body) -> str | None:
    """The "db.tbl" a TABLE_MAP event maps (read from its bytes, as
    mysql-replication reads them: length-prefixed, NUL-terminated, UTF-8),
    None when the bytes do not read so (the full decoder then decides)."""
    try:
        at = ROWS_POST_HEADER_V1.size
        n = body[at]
        db = bytes(body[at + 1:at + 1 + n]).decode()
        at += 2 + n
        m = body[at]
        if at + 1 + m > len(body):
            return None
        return f"{db}.{bytes(body[at + 1:at + 1 + m]).decode()}"
    except (IndexError, UnicodeDecodeError):
        return None


def _imageless(etype: int, body) -> bool:
    """Does a rows event hold row bytes while an image's columns bitmap names
    no column (each row then takes no byte: mysql-replication would read
    rows forever)? A layout too short to say is left to the decoder."""
    try:
        at = ROWS_POST_HEADER_V1.size
        if etype in (WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2):
            at += ROWS_VAR_HEADER_LEN.unpack_from(body, at)[0]
        width, at = events.length_coded(body, at)
    except (IndexError, ValueError, struct.error):
        return False
    n = (width + 7) // 8
    images = 2 if etype in (UPDATE_ROWS_V1, UPDATE_ROWS_V2) else 1
    bitmaps = bytes(body[at:at + images * n])
    if len(bitmaps) < images * n or at + images * n >= len(body):
        return False
    named = [int.from_bytes(bitmaps[k * n:(k + 1) * n], "little") & ((1 << width) - 1) for k in range(images)]
    return not all(named)


def table_id_of(body) -> int:
    return int.from_bytes(ROWS_POST_HEADER_V1.unpack_from(body)[0], "little")


def row_changes(decoded: list, op: str, t, lib, offset: int):
    """The ``RowChange``s of one rows event's rows as mysql-replication
    decoded them (``decoded``: its ``rows``), for the table ``t``
    (``show_rows.Table``): the images, the columns changed and those absent."""
    for r in decoded:
        if op == "update":
            before, gone_b = row_image(r["before_values"], r["before_none_sources"], t, lib)
            after, gone_a = row_image(r["after_values"], r["after_none_sources"], t, lib)
            changed = [k for k in t.keys if k in before and k in after and before[k] != after[k]]
            unknown = [k for k in t.keys if k in gone_b or k in gone_a]
            yield RowChange(t.name, op, before, after, changed, unknown, offset)
        else:
            image, gone = row_image(r["values"], r["none_sources"], t, lib)
            yield RowChange(t.name, op, None if op == "insert" else image,
                            image if op == "insert" else None, None, gone, offset)


def decode_group(b: Binlog, group: records.Group, tables: "set[str] | frozenset | None" = None,
                 schema: "ServerSchema | None" = None) -> GroupChanges:
    """Decode the event group ``group`` of the open binlog ``b``. ``tables``
    ("db.tbl" names): only the rows of these tables (the TABLE_MAP events of
    the others are read for their names only, their rows events skipped
    undecoded); None: every table's. ``schema``: where column names come
    from when the binlog has none (``--schema-from``)."""
    said: dict = {}
    rows = list(group_rows(b, group, tables, schema, said))
    return GroupChanges(group.gtid, b.path, group.start, group.end, group.timestamp, said["statements"],
                        said["annotations"], rows, said["column_names"])


def group_rows(b: Binlog, group: records.Group, tables: "set[str] | frozenset | None" = None,
               schema: "ServerSchema | None" = None, said: dict | None = None, *, release: bool = False):
    """``decode_group``'s rows, one at a time, as each rows event is decoded
    (what is held: one event's rows). ``said`` (a dict), once the rows are
    all read: the group's "statements", "annotations" and "column_names".
    ``release``: the binlog's memory for the events behind is given back as
    they are decoded (``Binlog.release``: a reader that goes through a
    big group once)."""
    lib = None
    table_map: dict = {}          # mysql-replication's, for this group only
    tables_of: dict = {}          # table_id -> Table
    skipped: set = set()          # table_ids of tables not asked for
    statements, annotations = [], []
    path = b.path
    behind = group.start
    for ev in b.events_between(group.start, group.end):
        if release and ev.offset - behind >= RELEASE_STEP:
            b.release(behind, ev.offset)
            behind = ev.offset
        etype = ev.type
        if etype in (events.QUERY, events.QUERY_COMPRESSED):
            text = events.decode_query_text(ev.body, path=path, offset=ev.offset)
            if etype == events.QUERY_COMPRESSED:
                text = _uncompress(text, path=path, offset=ev.offset)
            if text.strip().upper() not in FRAMING:
                statements.append(text.decode("utf-8", "replace"))
            continue
        if etype == events.ANNOTATE_ROWS:
            annotations.append(bytes(ev.body).decode("utf-8", "replace"))
            continue
        if etype == events.GTID and ev.offset == group.start:
            xid = _gtid_xid(ev.body)
            if xid is not None:           # XA START is not logged: the GTID event of the XA PREPARE group carries it
                statements.append(f"XA START {xid}")
            continue
        if etype == events.XA_PREPARE:
            statements.append(xa_prepare_text(ev, path))
            continue
        if etype != TABLE_MAP and etype not in ROWS_OP and etype not in _UNCOMPRESSED:
            continue
        body = ev.body
        if tables is not None:
            if etype == TABLE_MAP:
                name = table_map_name(body)
                if name is not None and name not in tables:
                    skipped.add(table_id_of(body))
                    continue
                skipped.discard(table_id_of(body))
            elif table_id_of(body) in skipped:
                continue
        if lib is None:
            lib = _library()
        if etype in _UNCOMPRESSED:
            etype, body = _plain_rows_event(ev, path)
        if etype != TABLE_MAP and _imageless(etype, body):
            raise undecodable(b, ev, f"cannot decode {ev.name} event",
                               ValueError("a row image names no column, yet the event holds row bytes"))
        raw = bytearray(events.EVENT_HEADER.pack(ev.timestamp, etype, ev.server_id,
                                                 events.HEADER_LEN + len(body) + events.CRC_LEN, 0, ev.flags))
        raw += body
        raw += bytes(events.CRC_LEN)      # mysql-replication expects a checksum; ours was checked
        try:
            e = lib.event(bytes(raw), table_map)
        except CorruptBinlogError:
            raise
        except Exception as err:        # the library's decoding failed
            raise undecodable(b, ev, f"cannot decode {ev.name} event", err) from None
        if etype == TABLE_MAP:
            if e is None:
                raise CorruptBinlogError("TABLE_MAP event not decoded", path=path, offset=ev.offset)
            tables_of[e.table_id] = Table(e, lib, schema)
            continue
        table_id = table_id_of(body)
        t = tables_of.get(table_id)
        if e is None or t is None:
            raise CorruptBinlogError(f"rows event for table_id {table_id} with no TABLE_MAP before it "
                                     "in its event group", path=path, offset=ev.offset)
        op = ROWS_OP[etype]
        try:
            decoded = e.rows
            if e.packet.read_bytes != e.event_size:
                # rows must end where the event does: a decoder that read more or less
                # than the body misread some column's layout (its values are wrong)
                raise ValueError(f"the rows take {e.packet.read_bytes} bytes of the event's {e.event_size}")
        except Exception as err:
            raise undecodable(b, ev, f"cannot decode the rows of {ev.name} event on {t.name}", err) from None
        yield from row_changes(decoded, op, t, lib, ev.offset)
    named = {t.names_from for t in tables_of.values()}
    if said is not None:
        said.update(statements=statements, annotations=annotations,
                    column_names="none" if not named else named.pop() if len(named) == 1 else "mixed")


# -- text, in the spirit of mariadb-binlog -v -----------------------------------------

def sql_literal(v) -> str:
    """A value as the text output prints it: NULL, numbers, 'text', X'hex'."""
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        return f"X'{binascii.hexlify(v).decode()}'"
    if isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, dict):          # pragma: no cover - JSON form, not used in text
        return str(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def row_parts(r, one_line: bool = False) -> tuple[str, list, list]:
    """One changed row (``RowChange`` or a record with its fields) as the text
    output says it: (the statement, ``UPDATE `db`.`tbl```; its images,
    [("WHERE", the before image's ``col=literal`` items), ("SET", the after
    image's)]; its notes, the changed columns and those not in the image).
    ``one_line``: a line break in a value written as ``\\n`` (``\\r``)."""
    verb = {"insert": "INSERT INTO", "update": "UPDATE", "delete": "DELETE FROM"}[r.op]
    db, _, tbl = r.table.partition(".")
    images = []
    for label, image in (("WHERE", r.before), ("SET", r.after)):
        if image is not None:
            items = [f"{k}={sql_literal(v)}" for k, v in image.items()]
            images.append((label, [_one_line(x) for x in items] if one_line else items))
    notes = []
    if r.changed is not None:
        notes.append(f"changed: {', '.join(r.changed) or '(none)'}")
    if r.unknown:
        notes.append(f"not in the row image (unknown): {', '.join(r.unknown)}")
    return f"{verb} `{db}`.`{tbl}`", images, notes


def _one_line(text: str) -> str:
    # sql_literal doubled every backslash: a \n made here is not one of the value's
    return text.replace("\n", "\\n").replace("\r", "\\r")


def row_line(r) -> str:
    """``row_parts`` on one line: ``UPDATE `db`.`t` WHERE a=1, b='x' SET a=2, b='x'  # changed: a``."""
    head, images, notes = row_parts(r, one_line=True)
    return " ".join([head, *(f"{label} {', '.join(items)}".rstrip() for label, items in images)]) + \
        "".join(f"  # {x}" for x in notes)


def format_text(g: GroupChanges, when: str) -> str:
    """The text output of ``gtidx show``."""
    lines = [f"# GTID {'anonymous' if g.gtid is None else g.gtid} in {g.file} start {g.start} end {g.end} "
             f"at {when}", f"# note: {FK_NOTE}"]
    if g.compressed:
        lines.append("# compressed: its events are those of a TRANSACTION_PAYLOAD event (ZSTD), shown uncompressed")
    for s in g.statements:
        lines.append(s.rstrip() + ";")
    lines.extend(f"#Q> {a}" for a in g.annotations)       # the SQL behind the rows, as mariadb-binlog -v shows it
    if g.rows and g.column_names in ("positional", "mixed"):
        lines.append("# columns without names are @1, @2, ... (the server wrote no binlog_row_metadata=FULL names)")
    for r in g.rows:
        head, images, notes = row_parts(r)
        lines.append(f"### {head}")
        for label, items in images:
            lines.append(f"### {label}")
            lines.extend(f"###   {x}" for x in items)
        lines.extend(f"# {x}" for x in notes)
    lines.append(f"# {len(g.rows)} row{'' if len(g.rows) == 1 else 's'}")
    return "\n".join(lines) + "\n"
