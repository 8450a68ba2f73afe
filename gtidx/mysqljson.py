"""MySQL's binary JSON (a JSON column's bytes in a rows event) as the server
prints it (``Json_wrapper::to_string``, what ``mysqlbinlog -v`` shows), and a
partial update's diffs (``binlog_row_value_options=PARTIAL_JSON``) as
``mysqlbinlog -v`` writes them. No I/O.

The binary layout (MySQL's json_binary.h): a type byte, then the value.
Objects and arrays, small (16-bit counts and offsets) or large (32-bit):
element count, byte size, the key entries (objects: offset, length), the
value entries (type, then the value inline for literals and 16-bit
integers (32-bit too in the large form), else its offset from the start of
the object); keys and values at those offsets. Scalars: int16, uint16,
int32, uint32, int64, uint64, double (little-endian), a string (its length
in 7-bit groups, then UTF-8), literals (null, true, false), and opaque
values (a MySQL field type, a length, bytes: DECIMAL, dates and times,
anything else). Text: ``{"k": v, "k2": v2}``, ``[1, 2]``, strings quoted
with JSON's escapes, a double always with a fraction or an exponent.
ValueError where the bytes do not read so.
"""
from __future__ import annotations

import base64
import json
import struct

from .binlog.events import length_coded

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY, LITERAL = 0, 1, 2, 3, 4
INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = 5, 6, 7, 8, 9, 10, 11, 12, 15
LITERALS = {0: "null", 1: "true", 2: "false"}
SCALARS = {INT16: struct.Struct("<h"), UINT16: struct.Struct("<H"), INT32: struct.Struct("<i"),
           UINT32: struct.Struct("<I"), INT64: struct.Struct("<q"), UINT64: struct.Struct("<Q"),
           DOUBLE: struct.Struct("<d")}
# MySQL field types an opaque value may hold, as the server prints them
FT_DECIMAL, FT_NEWDECIMAL = 0, 246
FT_DATE, FT_TIME, FT_DATETIME, FT_TIMESTAMP = 10, 11, 12, 7
FT_TIME2, FT_DATETIME2, FT_TIMESTAMP2, FT_NEWDATE = 19, 18, 17, 14
# a partial update's operations (enum_json_diff_operation) and the SQL function each is
REPLACE, INSERT, REMOVE = 0, 1, 2
DIFF_OPS = {REPLACE: "JSON_REPLACE", INSERT: "JSON_INSERT", REMOVE: "JSON_REMOVE"}
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def to_text(data) -> str:
    """A whole binary JSON document as text. Empty bytes: ``null`` (what the
    server stores for a JSON null it was given as an empty value). A
    document that is one string is that string, unquoted, as ``mysqlbinlog
    -v`` prints it (the server's ``to_string`` without JSON quoting); strings
    inside arrays and objects are quoted."""
    data = bytes(data)
    if not data:
        return "null"
    if data[0] == STRING:
        n, at = _varlen(data, 1)
        if at + n > len(data):
            raise ValueError("JSON: a string runs past its document")
        return data[at:at + n].decode("utf-8")
    return _value(data[0], data, 1, len(data), True)


def _string(s: str) -> str:
    return '"' + "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 else c) for c in s) + '"'


def _varlen(data: bytes, at: int) -> tuple[int, int]:
    """A length in 7-bit groups, low first: (value, its end)."""
    value = shift = 0
    for i in range(5):
        if at + i >= len(data):
            raise ValueError("JSON: ends inside a length")
        b = data[at + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at + i + 1
        shift += 7
    raise ValueError("JSON: a length longer than 5 bytes")


def _double(v: float) -> str:
    """A double as the server prints it in JSON (``my_gcvt``): its shortest
    digits, in fixed notation when the decimal point is at most 15 places
    left of them or 14 right (``0.00000000000001``), else ``1e300``,
    ``1.5e-15``; a fraction ``.0`` when it has neither."""
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"JSON: a double {v!r}")
    sign = "-" if str(v).startswith("-") else ""
    digits, exp = repr(abs(v)).partition("e")[::2]
    whole, _, frac = digits.partition(".")
    point = len(whole) + (int(exp) if exp else 0)       # value = 0.DIGITS * 10**point
    digits = (whole + frac).lstrip("0")
    point -= len(whole + frac) - len((whole + frac).lstrip("0"))
    digits = digits.rstrip("0")
    if not digits:
        return f"{sign}0.0"
    n = len(digits)
    if point >= -14 and (point <= 15 or n > point):
        text = ("0." + "0" * -point + digits if point <= 0 else
                digits + "0" * (point - n) if point >= n else digits[:point] + "." + digits[point:])
    else:
        text = digits[0] + ("." + digits[1:] if n > 1 else "") + f"e{point - 1}"
    return sign + (text if "." in text or "e" in text else text + ".0")


def _value(t: int, data: bytes, at: int, end: int, top: bool = False) -> str:
    if t in (SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY):
        return _container(t, data, at, end)
    if t == LITERAL:
        if at >= end or data[at] not in LITERALS:
            raise ValueError("JSON: bad literal")
        return LITERALS[data[at]]
    if t in SCALARS:
        s = SCALARS[t]
        if at + s.size > end:
            raise ValueError("JSON: a number runs past its document")
        v = s.unpack_from(data, at)[0]
        return _double(v) if t == DOUBLE else str(v)
    if t == STRING:
        n, at = _varlen(data, at)
        if at + n > end:
            raise ValueError("JSON: a string runs past its document")
        return _string(data[at:at + n].decode("utf-8"))
    if t == OPAQUE:
        if at >= end:
            raise ValueError("JSON: an opaque value without its type")
        ftype = data[at]
        n, at = _varlen(data, at + 1)
        if at + n > end:
            raise ValueError("JSON: an opaque value runs past its document")
        return _opaque(ftype, data[at:at + n])
    raise ValueError(f"JSON: unknown value type {t}")


def _container(t: int, data: bytes, base: int, end: int) -> str:
    large = t in (LARGE_OBJECT, LARGE_ARRAY)
    obj = t in (SMALL_OBJECT, LARGE_OBJECT)
    width = 4 if large else 2
    unpack = struct.Struct("<I" if large else "<H").unpack_from
    if base + 2 * width > end:
        raise ValueError("JSON: a container runs past its document")
    count, size = unpack(data, base)[0], unpack(data, base + width)[0]
    if base + size > end:
        raise ValueError("JSON: a container's size runs past its document")
    stop = base + size
    key_entry, value_entry = width + 2, 1 + width
    keys_at = base + 2 * width
    values_at = keys_at + (key_entry * count if obj else 0)
    if values_at + value_entry * count > stop:
        raise ValueError("JSON: a container's entries run past it")
    parts = []
    for i in range(count):
        e = values_at + value_entry * i
        vt = data[e]
        inline = vt in (LITERAL, INT16, UINT16) or (large and vt in (INT32, UINT32))
        if inline:
            v = _value(vt, data, e + 1, e + value_entry)
        else:
            off = unpack(data, e + 1)[0]
            if base + off >= stop:
                raise ValueError("JSON: a value's offset runs past its container")
            v = _value(vt, data, base + off, stop)
        if obj:
            k = keys_at + key_entry * i
            koff, klen = unpack(data, k)[0], struct.unpack_from("<H", data, k + width)[0]
            if base + koff + klen > stop:
                raise ValueError("JSON: a key runs past its container")
            parts.append(f"{_string(data[base + koff:base + koff + klen].decode('utf-8'))}: {v}")
        else:
            parts.append(v)
    return ("{" + ", ".join(parts) + "}") if obj else ("[" + ", ".join(parts) + "]")


def _packed_time(data: bytes) -> tuple[bool, int, int]:
    """MySQL's packed temporal (an int64: the integer part << 24 | microseconds)."""
    v = struct.unpack_from("<q", data.ljust(8, b"\0"))[0]
    return v < 0, abs(v) >> 24, abs(v) & 0xFFFFFF


def _opaque(ftype: int, raw: bytes) -> str:
    if ftype in (FT_NEWDECIMAL, FT_DECIMAL) and len(raw) >= 2:
        from pymysqlreplication.util.bytes import decode_decimal      # the library show already uses
        return str(decode_decimal(raw))
    if ftype in (FT_DATE, FT_NEWDATE, FT_DATETIME, FT_DATETIME2, FT_TIMESTAMP, FT_TIMESTAMP2):
        _, whole, us = _packed_time(raw)
        ymd, hms = whole >> 17, whole & 0x1FFFF
        year, month = divmod(ymd >> 5, 13)
        date = f"{year:04d}-{month:02d}-{ymd & 31:02d}"
        if ftype in (FT_DATE, FT_NEWDATE):
            return f'"{date}"'
        return f'"{date} {hms >> 12:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}.{us:06d}"'
    if ftype in (FT_TIME, FT_TIME2):
        neg, whole, us = _packed_time(raw)
        return f'"{"-" if neg else ""}{whole >> 12 & 0x3FF:02d}:{whole >> 6 & 63:02d}:{whole & 63:02d}.{us:06d}"'
    return f'"base64:type{ftype}:{base64.b64encode(raw).decode()}"'


def diffs(data) -> list[tuple[int, str, tuple | None]]:
    """A partial update's diffs: [(operation, path, (value type, text) or None)], in order."""
    data = bytes(data)
    out, at = [], 0
    try:
        while at < len(data):
            op = data[at]
            if op not in (REPLACE, INSERT, REMOVE):
                raise ValueError(f"JSON diff: unknown operation {op}")
            n, at = length_coded(data, at + 1)
            path = data[at:at + n].decode("utf-8")
            at += n
            value = None
            if op != REMOVE:
                n, at = length_coded(data, at)
                if at + n > len(data) or n == 0:
                    raise ValueError("JSON diff: its value runs past the column")
                value = (data[at], _value(data[at], data, at + 1, at + n, True))
                at += n
            out.append((op, path, value))
    except (IndexError, struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"JSON diff does not read: {e}") from None
    return out


_SQL_ESCAPES = {"\\": "\\\\", "'": "\\'", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def sql_quoted(text: str) -> str:
    """A string quoted as ``mysqlbinlog -v`` quotes one: ``'...'`` with the
    quote, the backslash and control characters escaped."""
    return "'" + "".join(_SQL_ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x20 else c) for c in text) + "'"


def _diff_value(t: int, text: str) -> str:
    """A diff's value as ``mysqlbinlog`` writes it: a string as an SQL
    string, a number as itself, anything else ``CAST('json' AS JSON)``."""
    if t == STRING:
        return sql_quoted(json.loads(text))
    if t in SCALARS:
        return text
    return f"CAST({sql_quoted(text)} AS JSON)"


def diff_text(column: str, data) -> str:
    """A partial update as ``mysqlbinlog -v`` prints it, on one line: each run
    of diffs of one function one call, the first run innermost, e.g.
    ``JSON_INSERT(JSON_REPLACE(@2, '$.a', 1), '$.b', 'x', '$.c', 2)``; an
    insert at an array position is ``JSON_ARRAY_INSERT``."""
    text, fn, args = column, None, []
    for op, path, value in diffs(data):
        name = DIFF_OPS[op]
        if op == INSERT and path.endswith("]"):
            name = "JSON_ARRAY_INSERT"
        if name != fn and fn is not None:
            text = f"{fn}({text}, {', '.join(args)})"
            args = []
        fn = name
        args.append(sql_quoted(path) if value is None else f"{sql_quoted(path)}, {_diff_value(*value)}")
    return f"{fn}({text}, {', '.join(args)})" if fn is not None else text
