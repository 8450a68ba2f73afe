"""The oracle of ``gtidx show``: ``mariadb-binlog -v --base64-output=DECODE-ROWS``
on the same file, parsed, and how its values compare with ``show``'s JSON.

How values compare (``same_value``), ours (JSON) against the server's text:

* NULL: ``null`` against ``NULL``.
* integers: a JSON number against ``N`` or ``N (U)`` (mariadb-binlog prints a
  negative value with its unsigned reading in parentheses: ours must be one
  of the two); our ``"N (U)"`` (signedness not in the binlog) as the same text.
* DOUBLE/FLOAT: a JSON number equal to the server's text read as a float
  (DOUBLE: ``%.20g``; FLOAT: its shortest decimal, as ours).
* BIT: our ``"0101"`` against ``b'0101'``; SET: our bitmask (members not
  named in the binlog) against ``b'...'``, or with names (``named``) the
  members of the bitmask; ENUM: our index against the server's, or with
  names the member at that index.
* DECIMAL: our exact text equal to the server's as decimal numbers (``12.50``).
* strings, TEXT, JSON: our text, encoded in its column's character set (given,
  else UTF-8, else cp1252/latin1), escaped as mariadb-binlog escapes (bytes
  below 0x20 as ``\\xNN``, the others as they are), equal to the quoted text.
* BLOB and other binary: our ``{"hex": ...}`` bytes, escaped the same way.
* DATETIME, TIME: the same text; DATE: ours ``YYYY-MM-DD``, theirs ``YYYY:MM:DD``;
  TIMESTAMP: ours ISO 8601 UTC ``...Z``, theirs Unix seconds (with the fraction):
  the same instant.
"""
from __future__ import annotations

import datetime as dt
import re
import subprocess
from decimal import Decimal, InvalidOperation

_GTID = re.compile(rb"\tGTID (\d+-\d+-\d+)")
_AT = re.compile(rb"^# at (\d+)$")
_ROW = re.compile(rb"^### (INSERT INTO|UPDATE|DELETE FROM) `(.*)`\.`(.*)`$")
_COL = re.compile(rb"^###   @(\d+)=(.*)$")
_OPS = {b"INSERT INTO": "insert", b"UPDATE": "update", b"DELETE FROM": "delete"}


def binlog_rows(path, check: bool = True) -> dict[int, list]:
    """{group start offset: [(table, op, before {N: text} | None, after {N: text} | None)]}
    for every group of the file, as mariadb-binlog -v prints them (``check``:
    its exit code must be 0)."""
    out = subprocess.run(["mariadb-binlog", "-v", "--base64-output=DECODE-ROWS", "--skip-gtid-strict-mode",
                          str(path)],
                         capture_output=True, check=check).stdout
    groups: dict[int, list] = {}
    at = None
    rows = None
    image = None
    for line in out.split(b"\n"):
        m = _AT.match(line)
        if m:
            at = int(m.group(1))
            continue
        if line.startswith(b"#") and not line.startswith(b"###") and _GTID.search(line):
            rows = groups.setdefault(at, [])
            continue
        m = _ROW.match(line)
        if m:
            op = _OPS[m.group(1)]
            row = [f"{m.group(2).decode()}.{m.group(3).decode()}", op, None, None]
            rows.append(row)
            continue
        if line == b"### SET":
            image = rows[-1][3] = {}
            continue
        if line == b"### WHERE":
            image = rows[-1][2] = {}
            continue
        m = _COL.match(line)
        if m:
            value = m.group(2)
            image[int(m.group(1))] = value if value.endswith(b"'") else value.rstrip(b" ")   # FLOAT is padded
    return {k: [tuple(r) for r in v] for k, v in groups.items()}


def escaped(data: bytes) -> bytes:
    """Bytes as mariadb-binlog -v writes a string (my_b_write_quoted), without the quotes."""
    return b"".join(bytes([c]) if c > 0x1F else b"\\x%02x" % c for c in data)


# MySQL 9.7's mysqlbinlog also escapes the quote and the backslash, and a few
# control characters by their C names (seen in its output)
_MYSQL_ESCAPES = {0x5C: b"\\\\", 0x27: b"\\'", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0C: b"\\f", 0x0D: b"\\r"}


def mysql_escaped(data: bytes) -> bytes:
    """Bytes as MySQL's mysqlbinlog -v writes a string, without the quotes."""
    return b"".join(_MYSQL_ESCAPES.get(c) or (bytes([c]) if c > 0x1F else b"\\x%02x" % c) for c in data)


def _epoch(iso: str) -> Decimal:
    when = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    whole = Decimal(int(when.replace(microsecond=0).timestamp()))
    return whole + Decimal(when.microsecond) / Decimal(1_000_000)


_AMBIGUOUS = re.compile(r"^-\d+ \(\d+\)$")
_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")


def same_value(ours, theirs: bytes, encoding: str | None = None, escape=escaped) -> bool:
    """Does our JSON value say what mariadb-binlog's text says? (``escape``:
    how the oracle writes a string: ``mysql_escaped`` for MySQL's mysqlbinlog)"""
    if ours is None:
        return theirs == b"NULL"
    if theirs == b"NULL":
        return False
    if isinstance(ours, bool):
        return False
    bits = re.fullmatch(rb"b'([01]+)'", theirs)       # BIT, and a SET as its bitmask
    if bits:
        return ours == bits.group(1).decode() if isinstance(ours, str) else ours == int(bits.group(1), 2)
    if isinstance(ours, int):
        m = re.fullmatch(rb"(-?\d+)(?: \((\d+)\))?", theirs)
        return bool(m) and ours in {int(g) for g in m.groups() if g is not None}
    if isinstance(ours, float):
        try:
            return float(theirs) == ours       # FLOAT: both the shortest decimal of the float32
        except ValueError:
            return False
    if isinstance(ours, dict):
        return theirs == b"'" + escape(bytes.fromhex(ours["hex"])) + b"'"
    assert isinstance(ours, str), ours
    if _AMBIGUOUS.match(ours):
        return theirs.decode() == ours
    if not (theirs.startswith(b"'") and theirs.endswith(b"'") and len(theirs) >= 2):
        try:
            if ours.endswith("Z") and "T" in ours:
                return _epoch(ours) == Decimal(theirs.decode())
            return Decimal(ours) == Decimal(theirs.decode())
        except (InvalidOperation, ValueError):
            return False
    inner = theirs[1:-1]
    if _DATE.match(ours) and inner == ours.replace("-", ":").encode():
        return True
    for enc in ([encoding] if encoding else ["utf-8", "cp1252", "latin1"]):
        try:
            if escape(ours.encode(enc)) == inner:
                return True
        except UnicodeEncodeError:
            pass
    return False


def differences(ours_rows: list, theirs_rows: list, order: list | None = None,
                encodings: dict | None = None, named: dict | None = None, escape=escaped) -> list:
    """Where ``show``'s rows (JSON dicts) and mariadb-binlog's differ: [] when
    they agree on tables, operations, which columns each image has and every
    value. ``order``: the column names in table order (named columns), else
    the keys are positional ``@N``. ``named``: for ENUM and SET columns whose
    members the binlog names (binlog_row_metadata=FULL), column -> members:
    mariadb-binlog prints the index or the bitmask."""
    encodings = encodings or {}
    named = named or {}
    wrong = []
    if len(ours_rows) != len(theirs_rows):
        return [f"{len(ours_rows)} rows, mariadb-binlog {len(theirs_rows)}"]
    for i, (o, (table, op, before, after)) in enumerate(zip(ours_rows, theirs_rows)):
        if (o["table"], o["op"]) != (table, op):
            wrong.append((i, "table/op", o["table"], o["op"], table, op))
            continue
        for side, mine, theirs in (("before", o["before"], before), ("after", o["after"], after)):
            if (mine is None) != (theirs is None):
                wrong.append((i, side, mine, theirs))
                continue
            if mine is None:
                continue
            positions = {(order.index(k) + 1 if order else int(k[1:])): k for k in mine}
            if set(positions) != set(theirs):
                wrong.append((i, side, "columns", sorted(positions), sorted(theirs)))
                continue
            for n, k in positions.items():
                if k in named and theirs[n] != b"NULL":
                    members = named[k]
                    m = re.fullmatch(rb"b'([01]+)'", theirs[n])
                    want = (",".join(x for b, x in enumerate(members) if int(m.group(1), 2) >> b & 1) if m
                            else ([""] + members)[int(theirs[n])])
                    if mine[k] != want:
                        wrong.append((i, side, k, mine[k], theirs[n]))
                    continue
                if not same_value(mine[k], theirs[n], encodings.get(k), escape):
                    wrong.append((i, side, k, mine[k], theirs[n]))
    return wrong


# -- MySQL: mysqlbinlog -v --base64-output=DECODE-ROWS ------------------------------

_MY_GTID_EVENT = re.compile(rb"^#\d{6} .*\t(GTID|Anonymous_GTID)\t")
_MY_GTID_NEXT = re.compile(rb"^SET @@SESSION.GTID_NEXT= '([^']*)'")


def mysqlbinlog_rows(path, command: list) -> dict[int, dict]:
    """{transaction start offset: {"gtid": text or "ANONYMOUS", "rows": [...],
    "compressed": bool}} for every transaction of the MySQL binlog ``path``,
    as ``command`` (a ``mysqlbinlog``, reading the file on its stdin) prints
    them with ``-v --base64-output=DECODE-ROWS``; rows as ``binlog_rows``'
    (table, op, before, after). A value that ``mysqlbinlog`` writes over
    several lines (a partial JSON update) is joined into one: a single space
    between its lines, none after an opening parenthesis."""
    with open(path, "rb") as f:
        out = subprocess.run([*command, "-v", "--base64-output=DECODE-ROWS", "-"], stdin=f,
                             capture_output=True, check=True).stdout
    groups: dict[int, dict] = {}
    at = cur = image = last = None
    for line in out.split(b"\n"):
        m = _AT.match(line)
        if m:
            at = int(m.group(1))
            continue
        if _MY_GTID_EVENT.match(line):
            cur = groups.setdefault(at, {"gtid": None, "rows": [], "compressed": False})
            continue
        if cur is None:
            continue
        m = _MY_GTID_NEXT.match(line)
        if m and cur["gtid"] is None:
            cur["gtid"] = m.group(1).decode()
            continue
        if line.startswith(b"# Start of compressed events."):
            cur["compressed"] = True
            continue
        m = _ROW.match(line)
        if m:
            cur["rows"].append([f"{m.group(2).decode()}.{m.group(3).decode()}", _OPS[m.group(1)], None, None])
            continue
        if line == b"### SET":
            image = cur["rows"][-1][3] = {}
            continue
        if line == b"### WHERE":
            image = cur["rows"][-1][2] = {}
            continue
        m = _COL.match(line)
        if m:
            value = m.group(2)
            last = int(m.group(1))
            image[last] = value if value.endswith(b"'") else value.rstrip(b" ")
            continue
        if line.startswith(b"###      ") and image is not None and last is not None:
            sep = b"" if image[last].endswith(b"(") else b" "    # a value continued on the next line
            image[last] += sep + line[3:].strip()
    for g in groups.values():
        g["rows"] = [tuple(r) for r in g["rows"]]
    return groups
