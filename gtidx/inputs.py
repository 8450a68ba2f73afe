"""What a caller gives the library, checked and parsed: every public entry
point takes its arguments through these, so that a wrong type or form is a
``BadInputError`` here, not a ``TypeError`` from deep inside.

Paths (``as_path``), ints (``as_int``), binlog offsets (``parse_offset``),
points in time (``parse_time``, ``format_time``, ``first_second``) and
MariaDB GTIDs and positions (``as_gtid``, ``as_position``). Nothing here
reads a file: the model below the binlogs, importable by every layer.
"""
from __future__ import annotations

import datetime as _dt
import operator
import os
import re
import sys

from .errors import BadInputError, GtidSyntaxError, quoted
from .gtid import Gtid, Position

# Patterns compiled on first use (re's cache), not at import: a lookup in one
# file needs none of them.
_OFFSET = r"(-?)(?:0[xX]([0-9a-fA-F]+)|([0-9]+))"


def as_path(value, what: str = "path") -> str:
    """A file system path given by the caller: str or os.PathLike (of str)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise BadInputError(f"{what} must be a str or os.PathLike, not {type(value).__name__}",
                            hint="bytes paths: os.fsdecode() them" if isinstance(value, bytes) else None)
    if not value:
        raise BadInputError(f"{what} is empty")
    if "\0" in value:
        raise BadInputError(f"{what} {quoted(value)} contains a NUL character")
    return value


def as_int(value, what: str, minimum: int | None = None) -> int:
    """An int argument: an int (or what ``operator.index`` takes), not a bool
    or text, and at least ``minimum`` when one is given."""
    if isinstance(value, (bool, str)):            # int(True) and "4" are not what was meant
        raise BadInputError(f"{what} must be an int, not {type(value).__name__}")
    try:
        value = operator.index(value)
    except TypeError:
        raise BadInputError(f"{what} must be an int, not {type(value).__name__}") from None
    if minimum is not None and value < minimum:
        raise BadInputError(f"{what} must be at least {minimum}, not {value}")
    return value


def parse_offset(value) -> int:
    """A binlog offset as a user gives it: an int >= 0, or text of ASCII
    digits, decimal or ``0x`` hex (not ``1_000``, not other scripts' digits,
    as Python's ``int()`` would take)."""
    if isinstance(value, str):
        if value.isdigit() and value.isascii() and len(value) <= 20:
            return int(value)           # plain ASCII decimal (a batch's every line): what the pattern gives
        m = re.fullmatch(_OFFSET, value)
        if m is None:
            raise BadInputError(f"{quoted(value)} is not an offset",
                                hint="ASCII decimal digits, or hex like 0x11d")
        sign, hexa, dec = m.groups()
        digits = (hexa or dec).lstrip("0")
        if len(digits) > (16 if hexa else 20):      # past 2**64: no file is that big
            raise BadInputError(f"offset {quoted(value)} is too large", hint="offsets are below 2**64")
        value = int(digits or "0", 16 if hexa else 10)
        value = -value if sign else value
    value = as_int(value, "offset")
    if value < 0:
        raise BadInputError(f"offset {value} is negative")
    return value


_UNIX = r"@(-?)([0-9]+)(?:\.([0-9]+))?"       # compiled on first use
_ISO_FRACTION = r"[.,]([0-9]+)"               # the seconds' fraction: the one [.,] of ISO 8601 text
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_SECOND = _dt.timedelta(seconds=1)
# the times ISO 8601 text of years 1 to 9999 can say (datetime's range), in unix seconds
_TIME_MIN = (_dt.datetime.min.replace(tzinfo=_dt.timezone.utc) - _EPOCH) // _SECOND
_TIME_MAX = (_dt.datetime.max.replace(tzinfo=_dt.timezone.utc) - _EPOCH) // _SECOND
_TIME_DIGITS = 64                             # at most this many digits of a fraction of a second
_TIME_FORMS = ("e.g. 2024-05-01T10:00:00Z, 2024-05-01 12:00:00+02:00 (naive: UTC) or @1714557600; "
               "years 1 to 9999")


def parse_time(value):
    """A point in time as its exact number of unix seconds: an ISO 8601
    string with ``Z`` or a UTC offset (a naive one means UTC), ``@<unix
    seconds>``, an aware ``datetime`` (naive: UTC), or a number of unix
    seconds (int, float, ``fractions.Fraction``). Fractions of a second are
    taken digit for digit, never through a float (``...:29.0000001Z`` is
    later than ``...:29Z``, which a float or a datetime's microseconds
    would make equal): the value is an int when whole, a float when a float
    is exactly it, else a ``Fraction``. Years 1 to 9999. Anything else is a
    BadInputError."""
    if isinstance(value, bool):
        raise BadInputError("a time must be an ISO 8601 string, @<unix seconds>, a datetime or a number, not bool")
    if isinstance(value, int):
        return _exact_time(value, value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise BadInputError(f"time {value} is not a finite number of seconds")
        return _exact_time(value, value)
    if isinstance(value, _dt.datetime):
        when = value if value.tzinfo is not None else value.replace(tzinfo=_dt.timezone.utc)
        whole = (when.replace(microsecond=0) - _EPOCH) // _SECOND
        return _exact_time(whole + _fraction(when.microsecond, 10 ** 6) if when.microsecond else whole, value)
    fractions = sys.modules.get("fractions")    # none to be met before it is imported: not imported here
    if fractions is not None and isinstance(value, fractions.Fraction):
        return _exact_time(value, value)
    if not isinstance(value, str):
        raise BadInputError(f"a time must be an ISO 8601 string, @<unix seconds>, a datetime or a number, "
                            f"not {type(value).__name__}")
    text = value.strip()
    m = re.fullmatch(_UNIX, text)
    if m:
        sign, whole, digits = m.groups()
        whole = whole.lstrip("0")
        if len(whole) > len(str(max(-_TIME_MIN, _TIME_MAX))):     # int() of 5,000 digits fails
            raise BadInputError(f"time {quoted(value)} is out of range", hint=_TIME_FORMS)
        seconds = _seconds(int(whole or "0"), digits, value)
        return _exact_time(-seconds if sign else seconds, value)
    try:
        if not text.isascii():          # other scripts' digits: fromisoformat() takes some
            raise ValueError(text)
        when = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise BadInputError(f"time {quoted(value)} is not ISO 8601 or @<unix seconds>", hint=_TIME_FORMS) from None
    when = when if when.tzinfo is not None else when.replace(tzinfo=_dt.timezone.utc)
    # fromisoformat() keeps 6 digits of the fraction (7 and more are dropped): it is read here, the one
    # fraction in the text (a UTC offset with one is refused), and must agree with what fromisoformat read
    m = re.search(_ISO_FRACTION, text)
    digits = m.group(1) if m else ""
    if when.utcoffset().microseconds or int((digits + "000000")[:6]) != when.microsecond:
        raise BadInputError(f"time {quoted(value)}: a fraction of a second is taken in the seconds only, not "
                            "in the UTC offset", hint=_TIME_FORMS)
    return _exact_time(_seconds((when.replace(microsecond=0) - _EPOCH) // _SECOND, digits, value), value)


def _fraction(*args):
    from fractions import Fraction
    return Fraction(*args)


def _seconds(whole: int, digits: str | None, value):
    """``whole`` seconds and the decimal fraction ``digits`` of one, exactly."""
    digits = (digits or "").rstrip("0")
    if not digits:
        return whole
    if len(digits) > _TIME_DIGITS:
        raise BadInputError(f"time {quoted(value)} has more than {_TIME_DIGITS} digits of a second")
    return whole + _fraction(int(digits), 10 ** len(digits))


def _exact_time(t, value):
    """``t`` (int, float or Fraction: exactly the time) as ``parse_time``
    gives it, after checking that it is within years 1 to 9999."""
    if not _TIME_MIN <= t < _TIME_MAX + 1:
        raise BadInputError(f"time {quoted(str(value))} is out of range", hint=_TIME_FORMS)
    if isinstance(t, int):
        return t
    if t == int(t):
        return int(t)
    if isinstance(t, float):
        return t
    return float(t) if float(t) == t else t


def first_second(t) -> int:
    """The first whole unix second at or after the exact time ``t``. Binlog
    timestamps are whole seconds (a MariaDB GTID event's header, a MySQL
    transaction's original_commit_timestamp's second), and a group of second
    ``s`` is at or after ``t`` exactly when ``s >= first_second(t)``: every
    comparison of a binlog timestamp with a point in time is this one, in
    integers (``t`` = 10:00:00.0000001 is later than a group of 10:00:00)."""
    import math
    return math.ceil(t)


def format_time(t) -> str:
    """Unix seconds (``parse_time``'s: int, float or Fraction) as ISO 8601 in
    UTC with ``Z``: a fraction of a second as at least 6 digits, exactly (up to
    64 digits; a fraction longer than that, as 1/3 is, is cut there)."""
    if not (type(t) is int and _TIME_MIN <= t <= _TIME_MAX):     # a binlog's timestamp is: no more to check
        t = parse_time(t)
    if isinstance(t, int):
        return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    t = _fraction(t)
    whole = t.numerator // t.denominator
    part = t - whole
    width = next((n for n in range(6, _TIME_DIGITS + 1) if (part * 10 ** n).denominator == 1), _TIME_DIGITS)
    digits = str(int(part * 10 ** width)).rjust(width, "0")
    return format_time(whole).replace("Z", f".{digits}Z")


def _mysql_text(value, err: GtidSyntaxError) -> GtidSyntaxError:
    """The error for GTID text that does not parse: when it is MySQL's
    (``uuid:N``, a MySQL GTID set), one saying so, else ``err``."""
    from .mysqlgtid import GtidSet
    try:
        GtidSet.parse(value)
    except GtidSyntaxError:
        return err
    if not isinstance(value, str) or ":" not in value:
        return err
    return GtidSyntaxError(f"{quoted(value)} is a MySQL GTID or GTID set, not a MariaDB one: this answers "
                           "MariaDB binlogs", hint="a MariaDB GTID is domain-server-seq, e.g. 0-1-100; seek and "
                                                   "pos answer MySQL GTIDs in MySQL binlogs")


def as_gtid(value) -> Gtid:
    """A MariaDB GTID given as a ``Gtid`` or text (``domain-server-seq``);
    MySQL's text is refused with an error saying so."""
    try:
        return value if isinstance(value, Gtid) else Gtid.parse(value)
    except GtidSyntaxError as e:
        raise _mysql_text(value, e) from None


def as_position(value) -> Position:
    """A MariaDB replication position (one GTID per domain) given as a
    ``Position``, a ``Gtid`` or text; MySQL's text is refused with an error
    saying so."""
    if isinstance(value, Position):
        return value
    if isinstance(value, Gtid):
        return Position([value])
    try:
        return Position.parse(value)
    except GtidSyntaxError as e:
        raise _mysql_text(value, e) from None
