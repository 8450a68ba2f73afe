"""MySQL GTIDs and GTID sets, with the server's semantics and text.

MariaDB's model (``gtid.py``) keeps the latest seq_no per (domain, server);
MySQL's is a set: every transaction has a GTID ``uuid:gno`` or, from 8.3,
``uuid:tag:gno``, and a server's history is the set of GTIDs it executed
(``@@gtid_executed``, a file's PREVIOUS_GTIDS event), with gaps allowed.

* ``MysqlGtid``: ``(uuid, tag, gno)``; ``tag`` is ``""`` for an untagged
  GTID. UUIDs are kept as the server prints them (lowercase, dashed), tags
  lowercased, ``1 <= gno <= GNO_MAX`` (2**63 - 2: the server's range).
* ``GtidSet``: per (uuid, tag) a sorted list of disjoint, non-adjacent
  half-open intervals ``[start, end)``.

Text, as the server parses it (``GTID_SUBTRACT(set, '')`` is the oracle,
tests/test_mysqlgtid.py): ``uuid[:interval...][:tag[:interval...]...]``
items separated by commas; whitespace around every token; empty items
allowed; an interval is ``n`` or ``a-b`` (``b < a`` is empty, not an error);
a UUID may be written dashed, as 32 hex digits or dashed in braces, any case; a tag
is a letter or underscore then up to 31 letters, digits or underscores, any
case. A newline alone does not separate items (the server refuses it):
``,\\n`` does, being a comma and whitespace.

Printing, as the server prints (``str(s)`` is ``@@gtid_executed``'s form):
UUIDs in ascending order, ``,\\n`` between them (``s.one_line()``: ``,``);
per UUID its untagged intervals first, then each tag in ascending order
followed by its intervals: ``uuid:1-5:7:a:1-2:b:4``.
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from typing import Iterable, Iterator, NamedTuple

from .errors import GtidSyntaxError, quoted as _shown

GNO_MAX = (1 << 63) - 2          # MySQL's GNO_END is INT64_MAX, exclusive
TAG_MAX = 32

_HEX = "[0-9a-fA-F]"
# The server's three forms: dashed, 32 hex digits, dashed in braces.
_UUID_RE = re.compile(rf"({_HEX}{{8}})-({_HEX}{{4}})-({_HEX}{{4}})-({_HEX}{{4}})-({_HEX}{{12}})"
                      rf"|({_HEX}{{8}})({_HEX}{{4}})({_HEX}{{4}})({_HEX}{{4}})({_HEX}{{12}})")
_TAG_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_INTERVAL = re.compile(r"([0-9]+)(?:\s*-\s*([0-9]+))?")
_MAX_DIGITS = 19


def uuid_text(raw: bytes) -> str:
    """16 bytes as the server prints a UUID."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _uuid(text: str, whole: str) -> str:
    braced = text.startswith("{") and text.endswith("}") and len(text) == 38
    m = _UUID_RE.fullmatch(text[1:-1] if braced else text)
    if m is None or (braced and m.group(1) is None):
        raise GtidSyntaxError(f"bad MySQL GTID set {_shown(whole)}: {_shown(text)} is not a UUID",
                              hint="expected uuid:interval[:interval...], e.g. "
                                   "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
    return "-".join(g for g in m.groups() if g is not None).lower()


def _tag(text: str, whole: str) -> str:
    if _TAG_RE.fullmatch(text) is None:
        raise GtidSyntaxError(f"bad MySQL GTID set {_shown(whole)}: {_shown(text)} is neither an interval nor a tag",
                              hint=f"a tag is a letter or _ then up to {TAG_MAX - 1} letters, digits or _")
    return text.lower()


def _number(text: str, whole: str) -> int:
    digits = text.lstrip("0") or "0"
    n = int(digits) if len(digits) <= _MAX_DIGITS else GNO_MAX + 1
    if not 1 <= n <= GNO_MAX:
        raise GtidSyntaxError(f"bad MySQL GTID set {_shown(whole)}: GTID number {text} is out of range",
                              hint=f"GTID numbers run from 1 to {GNO_MAX}")
    return n


class MysqlGtid(NamedTuple):
    uuid: str          # lowercase, dashed
    tag: str           # "" when untagged; lowercase
    gno: int

    def __str__(self) -> str:
        return f"{self.uuid}:{self.tag}:{self.gno}" if self.tag else f"{self.uuid}:{self.gno}"

    @classmethod
    def parse(cls, text: str) -> "MysqlGtid":
        """One GTID: ``uuid:gno`` or ``uuid:tag:gno`` (whitespace around the
        parts allowed, as in a set)."""
        if not isinstance(text, str):
            raise GtidSyntaxError(f"a MySQL GTID must be text like uuid:5, not {type(text).__name__}")
        parts = [p.strip() for p in text.split(":")]
        if len(parts) not in (2, 3) or not parts[-1].isdigit() or not parts[-1].isascii():
            raise GtidSyntaxError(f"bad MySQL GTID {_shown(text)}",
                                  hint="expected uuid:number or uuid:tag:number, e.g. "
                                       "3e11fa47-71ca-11e1-9e33-c80aa9429562:5")
        tag = _tag(parts[1], text) if len(parts) == 3 else ""
        return cls(_uuid(parts[0], text), tag, _number(parts[-1], text))


def _merge(ivs: list[list[int]]) -> list[list[int]]:
    """Sorted, disjoint, non-adjacent intervals from any list of [start, end)."""
    ivs = sorted(iv for iv in ivs if iv[0] < iv[1])
    out: list[list[int]] = []
    for s, e in ivs:
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out


class GtidSet:
    """A set of MySQL GTIDs: {(uuid, tag): [[start, end), ...]} kept
    normalized (sorted, merged, no empty keys). Mutable through ``add`` and
    the in-place operators; the others return new sets."""

    __slots__ = ("_ivs",)

    # How a server starting a replica at this set reads it, in words (as
    # ``gtid.Position`` has them): its start file's Previous_gtids, and the
    # transactions it skips.
    STATE_WORDS = "Previous_gtids"
    SKIP_WORDS = "skips the transactions of"

    def __init__(self, items: Iterable = ()):
        """From GTIDs (``MysqlGtid`` or ``(uuid, tag, gno)``) or, for a
        ``GtidSet``, a copy."""
        self._ivs: dict[tuple[str, str], list[list[int]]] = {}
        if isinstance(items, GtidSet):
            self._ivs = {k: [list(iv) for iv in v] for k, v in items._ivs.items()}
            return
        for g in items:
            self.add(g[0], g[1], g[2])

    @classmethod
    def from_intervals(cls, intervals: Iterable[tuple[str, str, int, int]]) -> "GtidSet":
        """From ``(uuid, tag, start, end)`` with ``end`` exclusive (as
        ``intervals()`` gives them, or a PREVIOUS_GTIDS event stores them)."""
        raw: dict[tuple[str, str], list[list[int]]] = {}
        for uuid, tag, s, e in intervals:
            raw.setdefault((uuid, tag), []).append([s, e])
        new = cls()
        for key, ivs in raw.items():
            merged = _merge(ivs)
            if merged:
                new._ivs[key] = merged
        return new

    # -- text ------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> "GtidSet":
        if not isinstance(text, str):
            raise GtidSyntaxError(f"a MySQL GTID set must be text, not {type(text).__name__}")
        raw: dict[tuple[str, str], list[list[int]]] = {}
        for item in text.split(","):
            if not item.strip():
                continue                       # the server skips empty items
            parts = item.split(":")
            uuid = _uuid(parts[0].strip(), text)
            tag = ""
            for part in parts[1:]:
                token = part.strip()
                if not token:
                    raise GtidSyntaxError(f"bad MySQL GTID set {_shown(text)}: empty part after ':'",
                                          hint="expected an interval (n or a-b) or a tag")
                m = _INTERVAL.fullmatch(token)
                if m is not None and token.isascii():
                    start = _number(m.group(1), text)
                    end = _number(m.group(2), text) if m.group(2) is not None else start
                    raw.setdefault((uuid, tag), []).append([start, end + 1])
                elif token[0].isdigit():
                    raise GtidSyntaxError(f"bad MySQL GTID set {_shown(text)}: bad interval {_shown(token)}",
                                          hint="an interval is n or a-b")
                else:
                    tag = _tag(token, text)
        return cls.from_intervals((k[0], k[1], s, e) for k, ivs in raw.items() for s, e in ivs)

    def _uuid_texts(self) -> list[str]:
        by_uuid: dict[str, list[str]] = {}
        for (uuid, tag) in sorted(self._ivs):
            parts = by_uuid.setdefault(uuid, [uuid])
            if tag:
                parts.append(tag)
            parts.extend(f"{s}" if e == s + 1 else f"{s}-{e - 1}" for s, e in self._ivs[(uuid, tag)])
        return [":".join(p) for p in by_uuid.values()]

    def __str__(self) -> str:
        """As the server prints it (``@@gtid_executed``): ``,\\n`` between UUIDs."""
        return ",\n".join(self._uuid_texts())

    def one_line(self) -> str:
        """The same on one line: ``,`` between UUIDs."""
        return ",".join(self._uuid_texts())

    def __repr__(self) -> str:
        return f"GtidSet({self.one_line()!r})"

    # -- members -----------------------------------------------------------
    def add(self, uuid: str, tag: str, gno: int) -> None:
        """Add one GTID (``uuid`` and ``tag`` as the model keeps them:
        lowercase). Appending in increasing order is the fast path."""
        ivs = self._ivs.get((uuid, tag))
        if ivs is None:
            self._ivs[(uuid, tag)] = [[gno, gno + 1]]
            return
        last = ivs[-1]
        if last[1] == gno:
            last[1] = gno + 1
            return
        if gno > last[1]:
            ivs.append([gno, gno + 1])
            return
        i = bisect_right(ivs, [gno, float("inf")]) - 1
        if i >= 0 and ivs[i][0] <= gno < ivs[i][1]:
            return
        ivs.insert(i + 1, [gno, gno + 1])
        self._ivs[(uuid, tag)] = _merge(ivs)

    def __contains__(self, gtid) -> bool:
        ivs = self._ivs.get((gtid[0], gtid[1]))
        if not ivs:
            return False
        gno = gtid[2]
        i = bisect_right(ivs, [gno, float("inf")]) - 1
        return i >= 0 and gno < ivs[i][1]

    def key_intervals(self) -> dict:
        """The set as it is kept: {(uuid, tag): [[start, end), ...]}, keys in
        any order, each list sorted, merged, non-empty. Read-only: the set's
        own dict, for a caller that encodes it (``index.mysql.encode_set``)."""
        return self._ivs

    @classmethod
    def from_key_intervals(cls, ivs: dict) -> "GtidSet":
        """The set kept as ``ivs`` (``key_intervals``' form), taken as it is:
        the caller has checked it is normalized (``index.mysql.decode_set``)."""
        out = cls()
        out._ivs = ivs
        return out

    def intervals(self) -> Iterator[tuple[str, str, int, int]]:
        """``(uuid, tag, start, end)`` with ``end`` exclusive, in print order."""
        for key in sorted(self._ivs):
            for s, e in self._ivs[key]:
                yield key[0], key[1], s, e

    def __iter__(self) -> Iterator[MysqlGtid]:
        for uuid, tag, s, e in self.intervals():
            for gno in range(s, e):
                yield MysqlGtid(uuid, tag, gno)

    def __len__(self) -> int:
        """How many GTIDs (may be huge: do not ``list()`` a big set)."""
        return sum(e - s for ivs in self._ivs.values() for s, e in ivs)

    def __bool__(self) -> bool:
        return bool(self._ivs)

    def keys(self) -> list[tuple[str, str]]:
        """The (uuid, tag) pairs with GTIDs, sorted."""
        return sorted(self._ivs)

    def last(self, uuid: str, tag: str = "") -> int | None:
        """The highest gno of (uuid, tag), or None."""
        ivs = self._ivs.get((uuid, tag))
        return ivs[-1][1] - 1 if ivs else None

    # -- set algebra ----------------------------------------------------------
    def copy(self) -> "GtidSet":
        return GtidSet(self)

    def __or__(self, other: "GtidSet") -> "GtidSet":
        return self.copy().__ior__(other)

    def __ior__(self, other: "GtidSet") -> "GtidSet":
        for key, ivs in other._ivs.items():
            mine = self._ivs.get(key)
            self._ivs[key] = [list(iv) for iv in ivs] if mine is None else _merge(mine + [list(iv) for iv in ivs])
        return self

    def __sub__(self, other: "GtidSet") -> "GtidSet":
        out = GtidSet()
        for key, ivs in self._ivs.items():
            cut = other._ivs.get(key)
            rest = _subtract(ivs, cut) if cut else [list(iv) for iv in ivs]
            if rest:
                out._ivs[key] = rest
        return out

    def __and__(self, other: "GtidSet") -> "GtidSet":
        return self - (self - other)

    def issubset(self, other: "GtidSet") -> bool:
        """As ``GTID_SUBSET(self, other)``."""
        for key, ivs in self._ivs.items():
            theirs = other._ivs.get(key)
            if not theirs:
                return False
            for s, e in ivs:
                i = bisect_right(theirs, [s, float("inf")]) - 1
                if i < 0 or theirs[i][1] < e:
                    return False
        return True

    __le__ = issubset

    def __ge__(self, other: "GtidSet") -> bool:
        return other.issubset(self)

    def __eq__(self, other) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self._ivs == other._ivs

    __hash__ = None


def _subtract(ivs: list[list[int]], cut: list[list[int]]) -> list[list[int]]:
    """Sorted disjoint intervals minus sorted disjoint intervals."""
    out: list[list[int]] = []
    for s, e in ivs:
        i = bisect_left(cut, [s, s])
        if i > 0 and cut[i - 1][1] > s:
            i -= 1
        while s < e:
            if i >= len(cut) or cut[i][0] >= e:
                out.append([s, e])
                break
            cs, ce = cut[i]
            if cs > s:
                out.append([s, cs])
            s = max(s, ce)
            i += 1
    return out
