"""Row images for ``gtidx show``: what a TABLE_MAP says about a table's
columns, where their names come from, and each column value as the output
shows it (the rules are ``show``'s module docstring, "Values").

``show`` feeds mysql-replication (package ``pymysqlreplication``) the
event bytes and hands its TABLE_MAP and rows events here: ``Table``
describes one table_id (names from the binlog's metadata, a live server's
``ServerSchema``, or positional), ``row_image`` renders one row image. The
``lib`` every function takes is mysql-replication's pieces as ``show``
imports them on first use (FIELD_TYPE, CHARSET, NONE_SOURCE, TableMapEvent,
int_bits): nothing here imports the library itself.
"""
from __future__ import annotations

import datetime as _dt
import decimal
import getpass
import struct
from urllib.parse import unquote, urlsplit

from typing import NamedTuple

from . import mysqljson
from .errors import BadInputError, GtidxIOError

CHARSET_BINARY = 63              # the ``binary`` character set's id: bytes, not text


class _EnumIndex:
    """An ENUM column's values when the binlog does not name them: the index itself
    (as mariadb-binlog prints it)."""

    def __bool__(self) -> bool:
        return True

    def __getitem__(self, i: int) -> int:
        return i


_RAW = "gtidx-raw"      # a character set name Python does not know: mysql-replication then returns bytes


class Table:
    """What the group's TABLE_MAP said about one table_id, for rendering."""

    def __init__(self, event, lib, schema: ServerSchema | None = None):
        self.name = f"{event.schema}.{event.table}"
        meta = event.optional_metadata
        cols = event.columns
        names = meta.column_name_list if len(meta.column_name_list or ()) == len(cols) else None
        self.names_from = "metadata" if names is not None else "positional"
        if names is None and schema is not None:
            names = schema.columns(event.schema, event.table, len(cols))
            if names is not None:
                self.names_from = "server"
        signed = meta.unsigned_column_list if len(meta.unsigned_column_list or ()) == len(cols) else None
        charsets = list(meta.charset_collation_list or ())
        FT = lib.FIELD_TYPE
        self.keys, self.types, self.signed_known, self.encodings, self.fsp = [], [], [], [], []
        self.set_mask = []       # a SET column whose member names the binlog does not give: its bitmask
        pos = 0
        for i, c in enumerate(cols):
            key = names[i] if names else f"@{i + 1}"
            c.name = key
            self.keys.append(key)
            self.types.append(c.type)
            self.fsp.append(getattr(c, "fsp", 0))
            self.signed_known.append(signed is not None)
            if signed is not None:
                c.unsigned = bool(signed[i])
            enc = None
            if lib.TableMapEvent._is_character_column(c.type, dbms=lib.dbms):
                if pos < len(charsets):
                    cs = lib.CHARSET.charset_by_id(str(charsets[pos]), lib.dbms)
                    enc = "binary" if charsets[pos] == CHARSET_BINARY else (cs.encoding if cs else None)
                pos += 1
                c.character_set_name = _RAW      # bytes back: decoded here (_value)
            if c.type == FT.ENUM and not c.enum_values:
                c.enum_values = _EnumIndex()
            self.set_mask.append(c.type == FT.SET and not c.set_values)
            if self.set_mask[-1]:
                c.set_values = range(64)         # the members' bit numbers: the mask again (_value)
            # Dates and times: their stored bytes back (mysql-replication turns a zero or
            # invalid date into None, and misreads a negative TIME with a fraction), as an
            # unsigned integer of their width or, for widths no integer type has, as a BIT
            # column of as many bytes (a '0101...' string): decoded in _temporal.
            if c.type in (FT.DATETIME2, FT.TIME2):
                n = (5 if c.type == FT.DATETIME2 else 3) + (c.fsp + 1) // 2
                c.type, c.bits, c.bytes = FT.BIT, 8 * n, n
            elif c.type in (FT.DATE, FT.TIME, FT.DATETIME):
                c.type = FT.LONGLONG if c.type == FT.DATETIME else FT.INT24
                c.unsigned = c.type == FT.LONGLONG or self.types[-1] == FT.DATE
            self.encodings.append(enc)


# -- column names from a live server (--schema-from) --------------------------------

class ServerSchema:
    """Column names from a live server's ``information_schema.COLUMNS`` (in
    ORDINAL_POSITION order), for binlogs written without
    ``binlog_row_metadata=FULL`` (what mysql-replication does with its
    control connection). ``where``: a unix socket path (as the OS user, as the
    ``mariadb`` client does) or a DSN ``mysql://user:password@host:port``.
    The server's table as it is now: its names are used only where it has as
    many columns as the binlog's TABLE_MAP (else the columns stay ``@1``, ...:
    a table altered since is not guessed at). Connected on first use."""

    def __init__(self, where: str):
        self.where = where
        self.settings = self._settings(where)
        self._conn = None
        self._cache: dict = {}

    @staticmethod
    def _settings(where: str) -> dict:
        if "://" not in where:
            return {"unix_socket": where, "user": getpass.getuser()}
        u = urlsplit(where)
        if u.scheme not in ("mysql", "mariadb") or not u.hostname:
            raise BadInputError(f"--schema-from takes a socket path or mysql://user:password@host:port, "
                                f"not {where!r}")
        try:
            port = u.port or 3306
        except ValueError:
            raise BadInputError(f"--schema-from: bad port in {where!r}") from None
        return {"host": u.hostname, "port": port, "user": unquote(u.username or ""),
                "password": unquote(u.password or "")}

    def columns(self, db: str, table: str, count: int) -> list | None:
        """The column names of ``db.table`` on the server, or None (no such
        table, or not ``count`` columns)."""
        key = (db, table)
        if key not in self._cache:
            self._cache[key] = self._query(db, table)
        names = self._cache[key]
        return names if names is not None and len(names) == count else None

    def _query(self, db: str, table: str) -> list | None:
        import pymysql
        shown = self.where.split("@")[-1] if "://" in self.where else self.where    # no password in messages
        try:
            if self._conn is None:
                self._conn = pymysql.connect(connect_timeout=10, charset="utf8mb4", **self.settings)
            with self._conn.cursor() as cur:
                cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                            "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (db, table))
                names = [r[0] for r in cur.fetchall()]
        except pymysql.MySQLError as e:
            raise GtidxIOError(f"--schema-from {shown}: {e.args[-1] if e.args else e}",
                               hint="a socket path or mysql://user:password@host:port of a server "
                                    "that has the binlog's tables") from None
        return names or None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


# -- values ----------------------------------------------------------------------

class JsonBytes(NamedTuple):
    """A MySQL JSON column's bytes as the rows event holds them: a binary
    JSON document, or (``partial``) a partial update's diffs."""
    data: bytes
    partial: bool


def _value(v, t: Table, i: int, lib):
    """One column value as the output shows it (see the module docstring)."""
    if isinstance(v, JsonBytes):       # MySQL's JSON: the server's text (mysqlbinlog -v prints it so)
        try:
            return mysqljson.diff_text(f"@{i + 1}", v.data) if v.partial else mysqljson.to_text(v.data)
        except (ValueError, IndexError, struct.error, UnicodeDecodeError) as e:
            raise ValueError(f"column {t.keys[i]} of {t.name}: {e}") from None
    temporal = _temporal(v, t.types[i], t.fsp[i] or 0, lib.FIELD_TYPE)
    if temporal is not None:
        return temporal
    if isinstance(v, (bytes, bytearray)):
        enc = t.encodings[i]
        if enc == "binary":
            return bytes(v)
        try:
            return bytes(v).decode(enc or "utf-8")
        except (UnicodeDecodeError, LookupError):
            return bytes(v)
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        bits = lib.int_bits.get(t.types[i])
        if bits and v < 0 and not t.signed_known[i]:
            return f"{v} ({v + (1 << bits)})"
        return v
    if isinstance(v, decimal.Decimal):
        return v                    # exact; JSON: its text
    FT = lib.FIELD_TYPE
    if isinstance(v, _dt.datetime):
        digits = t.fsp[i] or 0
        text = v.strftime("%Y-%m-%d %H:%M:%S") + (f".{v.microsecond:06d}"[:digits + 1] if digits else "")
        if t.types[i] in (FT.TIMESTAMP2, FT.TIMESTAMP):
            return text.replace(" ", "T") + "Z"
        return text
    if isinstance(v, set):
        if t.set_mask[i]:
            return sum(1 << n for n in v)
        return ",".join(sorted(v))
    if isinstance(v, float) and t.types[i] == FT.FLOAT:
        return _float32(v)
    return v


DATETIME2_OFS = 0x8000000000       # the stored integer part of DATETIME2 (5 bytes) is offset by this
TIME2_INT_OFS = 0x800000           # TIME2's 3-byte integer part
TIME2_OFS = 0x800000000000         # TIME2 with 3 fraction bytes, read as one 6-byte number


def _fraction(us: int, fsp: int) -> str:
    return f".{us:06d}"[:fsp + 1] if fsp else ""


def _temporal(v, typ: int, fsp: int, FT) -> str | None:
    """DATE, DATETIME, TIME (both formats) from their stored bytes (see Table), as
    MySQL's my_datetime/my_time_packed_from_binary read them; None for other types."""
    if typ == FT.DATE:
        return f"{v >> 9:04d}-{v >> 5 & 15:02d}-{v & 31:02d}"
    if typ == FT.DATETIME:                           # the old format: YYYYMMDDhhmmss as a number
        d, t = divmod(v, 1_000_000)
        return (f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d} "
                f"{t // 10000:02d}:{t // 100 % 100:02d}:{t % 100:02d}")
    if typ == FT.TIME:                               # the old format: [-]HHMMSS as a signed number
        a = abs(v)
        return f"{'-' if v < 0 else ''}{a // 10000:02d}:{a // 100 % 100:02d}:{a % 100:02d}"
    if typ not in (FT.DATETIME2, FT.TIME2):
        return None
    raw = int(v, 2)
    fbytes = (fsp + 1) // 2
    if typ == FT.DATETIME2:
        frac = raw & ((1 << 8 * fbytes) - 1)
        intpart = (raw >> 8 * fbytes) - DATETIME2_OFS
        ymd, hms = intpart >> 17, intpart & 0x1FFFF
        year, month = divmod(ymd >> 5, 13)
        return (f"{year:04d}-{month:02d}-{ymd & 31:02d} {hms >> 12:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}"
                + _fraction(frac * 100 ** (3 - fbytes), fsp))
    if fbytes == 3:
        packed = raw - TIME2_OFS
    else:
        unit = 1 << 8 * fbytes
        intpart, frac = (raw >> 8 * fbytes) - TIME2_INT_OFS, raw & (unit - 1)
        if intpart < 0 and frac:      # a negative value's fraction is stored as its complement
            intpart, frac = intpart + 1, frac - unit
        packed = (intpart << 24) + frac * 100 ** (3 - fbytes)
    a = abs(packed)
    hms, us = a >> 24, a & 0xFFFFFF
    return (f"{'-' if packed < 0 else ''}{hms >> 12 & 0x3FF:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}"
            + _fraction(us, fsp))


_FLOAT32 = struct.Struct("<f")


def _float32(v: float) -> float:
    """A FLOAT column's value as its shortest decimal (0.1, not 0.10000000149011612)."""
    packed = _FLOAT32.pack(v)
    for digits in range(1, 10):
        short = float(f"{v:.{digits}g}")
        if _FLOAT32.pack(short) == packed:
            return short
    return v


def row_image(values: dict, nones: dict, t: Table, lib) -> tuple[dict, list]:
    """(column -> value for the columns in the image, the columns absent from it)."""
    out, absent = {}, []
    for i, key in enumerate(t.keys):
        v = values.get(key)
        if v is None:
            why = nones.get(key, lib.NONE_SOURCE.NULL)
            if why == lib.NONE_SOURCE.COLS_BITMAP:
                absent.append(key)
                continue
            if why == lib.NONE_SOURCE.EMPTY_SET:
                v = 0 if t.set_mask[i] else ""
            elif why != lib.NONE_SOURCE.NULL:     # a value mysql-replication did not return: not guessed
                absent.append(key)
                continue
        out[key] = _value(v, t, i, lib) if v is not None else None
    return out, absent
