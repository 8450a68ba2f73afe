"""MariaDB GTIDs, binlog states and replication positions.

Three values, as the server has them:

* ``Gtid``: ``domain-server-seq`` (u32, u32, u64; seq 0 is invalid).
* ``BinlogState``: what a binlog holds up to some point: the latest seq_no
  logged per (domain, server) pair, and per domain which GTID was logged last
  (``@@gtid_binlog_state``, the GTID_LIST event, an ``.idx`` record).
* ``Position``: where a replica is: one GTID per domain
  (``@@gtid_slave_pos``, what ``BINLOG_GTID_POS`` prints).

And ``LatestGtids``, the GTIDs logged over a stretch of binlog as an index
record holds them: the latest seq_no per (domain, server) in the order each
pair was last logged (so each domain's newest GTID comes last). It is the one
type for "latest GTID per (domain, server)" in an index's records, their
unions in the tree writer and their merges; ``BinlogState`` keeps the same
rule per domain, for the per-domain questions a state answers.

Records in gtidx follow one rule: an immutable value (a GTID, a location, an
answer) is a ``typing.NamedTuple``; a record that changes after it is made is a
``dataclasses.dataclass``. Two records a lookup reads (``index.meta.IndexMeta``,
``index.files.IndexStatus``) are written out by hand with a dataclass's
behaviour, because a lookup does not import ``dataclasses``.
"""
from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple, Sequence

from .errors import GtidSyntaxError, quoted as _shown

U32_MAX = 0xFFFFFFFF
U64_MAX = 0xFFFFFFFFFFFFFFFF


# The widest part is a u64: 20 decimal digits. Longer numbers (leading zeros
# aside) are out of range before conversion: Python refuses to convert more
# than ~4,300 digits, and a GTID never needs it.
_MAX_DIGITS = len(str(U64_MAX))


# ``D-S-N``, as MariaDB writes a GTID: the one owner of that text (str of a Gtid,
# a BinlogState, a Position), applied to a (domain, server, seq) tuple with ``%``.
GTID_TEXT = "%d-%d-%d"


class Gtid(NamedTuple):
    domain: int
    server: int
    seq: int

    def __str__(self) -> str:
        return GTID_TEXT % self

    @classmethod
    def parse(cls, text: str) -> "Gtid":
        """Strict: exactly ``D-S-N`` in decimal, no spaces, in range, seq > 0."""
        if not isinstance(text, str):
            raise GtidSyntaxError(f"GTID must be text like 0-1-100, not {type(text).__name__}")
        parts = text.split("-")
        # three runs of ASCII digits (isdigit alone would take other scripts' digits too)
        if len(parts) != 3 or not all(x.isascii() and x.isdigit() for x in parts):
            raise GtidSyntaxError(f"bad GTID {_shown(text)}", hint="expected domain-server-seq, e.g. 0-1-100")
        parts = [x.lstrip("0") or "0" for x in parts]
        for name, part in zip(("domain id", "server id", "seq_no"), parts):
            if len(part) > _MAX_DIGITS:
                raise GtidSyntaxError(f"bad GTID {_shown(text)}: {name} has more than {_MAX_DIGITS} digits",
                                      hint=f"domain and server ids are at most {U32_MAX}, seq_no at most {U64_MAX}")
        domain, server, seq = (int(x) for x in parts)
        if domain > U32_MAX:
            raise GtidSyntaxError(f"bad GTID {_shown(text)}: domain id {domain} exceeds {U32_MAX}")
        if server > U32_MAX:
            raise GtidSyntaxError(f"bad GTID {_shown(text)}: server id {server} exceeds {U32_MAX}")
        if seq > U64_MAX:
            raise GtidSyntaxError(f"bad GTID {_shown(text)}: seq_no {seq} exceeds {U64_MAX}")
        if seq == 0:
            raise GtidSyntaxError(f"bad GTID {_shown(text)}: seq_no 0 is not a valid GTID")
        return cls(domain, server, seq)


def _split_list(text: str, what: str) -> list[str]:
    """Comma-separated items; whitespace around an item is allowed (as the
    server allows it in gtid_slave_pos), an empty item is not."""
    if not isinstance(text, str):
        raise GtidSyntaxError(f"{what} must be text, not {type(text).__name__}")
    if not text.strip():
        return []
    items = [item.strip() for item in text.split(",")]
    if any(not item for item in items):
        raise GtidSyntaxError(f"bad {what} {_shown(text)}: empty item", hint="items are comma-separated GTIDs")
    return items


class Position:
    """A replication position: at most one GTID per domain.

    Compares as a set of GTIDs; prints like ``BINLOG_GTID_POS`` (domains in
    ascending order, the server prints them in hash order).
    """

    __slots__ = ("_by_domain",)

    def __init__(self, gtids: Iterable[Gtid] = ()):
        self._by_domain: dict[int, Gtid] = {}
        for g in gtids:
            if g.domain in self._by_domain:
                raise GtidSyntaxError(
                    f"position has two GTIDs for domain {g.domain}: {self._by_domain[g.domain]} and {g}",
                    hint="a replication position holds one GTID per domain")
            self._by_domain[g.domain] = g

    @classmethod
    def parse(cls, text: str) -> "Position":
        return cls(Gtid.parse(item) for item in _split_list(text, "position"))

    def get(self, domain: int) -> Gtid | None:
        return self._by_domain.get(domain)

    def __contains__(self, domain: int) -> bool:
        return domain in self._by_domain

    def __iter__(self) -> Iterator[Gtid]:
        return iter(sorted(self._by_domain.values()))

    def __len__(self) -> int:
        return len(self._by_domain)

    def domains(self):
        return self._by_domain.keys()

    def __eq__(self, other) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        return self._by_domain == other._by_domain

    __hash__ = None

    def __str__(self) -> str:
        return ",".join([GTID_TEXT % g for g in sorted(self._by_domain.values())])

    # How a server starting a replica at this position reads it, in words
    # (``mysqlgtid.GtidSet`` has its own): the state its start file holds, and
    # what it skips from there.
    STATE_WORDS = "state"
    SKIP_WORDS = "skips, per domain, groups up to and including"

    def skipped_from(self, state: "BinlogState") -> dict:
        """{domain: GTID}: what a replica at this position skips, per domain,
        when the server reads on from a place whose state is ``state``: a
        domain whose GTID ``state`` already holds (any server's entry, as
        MariaDB's gtid_find_binlog_file takes it from the replica's state)
        skips nothing."""
        skip = {g.domain: g for g in self}
        for g in state:
            if skip.get(g.domain) == g:
                del skip[g.domain]
        return skip

    def one_line(self) -> str:
        """The position's text, which is one line already: the same method
        as a MySQL ``GtidSet.one_line``, so that a caller prints either."""
        return str(self)

    def __repr__(self) -> str:
        return f"Position({str(self)!r})"


class LatestGtids:
    """Latest seq_no per (domain, server), in the order each pair was last
    logged: adding a pair again moves it to the end, so each domain's newest
    GTID comes last. What an ``.idx`` record lists (the GTIDs since the
    previous record), and the union or merge of consecutive records.

    Bulk adds are hot paths (every event group of an index build, every key
    of the tree writer): ``add_rows`` reads raw event fields, ``update``
    leaves the bulk of its work to C.
    """

    __slots__ = ("_seqs",)

    def __init__(self, gtids: Iterable[tuple[int, int, int]] = ()):
        self._seqs: dict[tuple[int, int], int] = {}
        if gtids:
            self.update(list(gtids))

    def add(self, domain: int, server: int, seq: int) -> None:
        seqs = self._seqs
        key = (domain, server)
        seqs.pop(key, None)          # re-insert: the pair moves to the end
        seqs[key] = seq

    def update(self, gtids: Sequence[tuple[int, int, int]]) -> "LatestGtids":
        """Add ``(domain, server, seq)`` triples (Gtids or tuples) in order."""
        seqs = self._seqs
        keys = [(g[0], g[1]) for g in gtids]
        pop = seqs.pop
        for k in keys:
            pop(k, None)             # re-insert: updated pairs move to the end
        before = len(seqs)
        seqs.update(zip(keys, [g[2] for g in gtids]))
        if len(seqs) - before != len(keys):
            # A pair listed twice (not in a record): its last listing decides its place.
            for k, g in zip(keys, gtids):
                pop(k, None)
                seqs[k] = g[2]
        return self

    def add_rows(self, rows: Iterable[Sequence], domain_at: int, server_at: int, seq_at: int) -> None:
        """Add one GTID per row (raw event fields, in order), found at those
        positions of the row: no object made per row."""
        seqs = self._seqs
        pop = seqs.pop
        for row in rows:
            key = (row[domain_at], row[server_at])
            pop(key, None)           # re-insert: the pair moves to the end
            seqs[key] = row[seq_at]

    def add_rows_watching(self, rows: Iterable[Sequence], domain_at: int, server_at: int, seq_at: int,
                          seen: "SeqRanges") -> None:
        """``add_rows``, also noting in ``seen`` the seq_no range of every
        (domain, server) and the pairs whose seq_no does not grow. The hot
        path costs one comparison more per row; ``seen.floor`` holds what
        came before this stretch (see ``SeqRanges``)."""
        seqs = self._seqs
        pop = seqs.pop
        below = seen.floor.get
        low = seen._low
        for row in rows:
            key = (row[domain_at], row[server_at])
            seq = row[seq_at]
            old = pop(key, None)
            if old is None:              # first time in this stretch: what came before
                old = below(key)
                if key not in low:       # first time in the file: against the start state
                    seen.first(key, seq, old)
                    seqs[key] = seq
                    continue
                if old is None:          # (a walk resumed where the pair was not logged yet)
                    seqs[key] = seq
                    continue
            if seq <= old:
                seen.down(key, seq, old)
            seqs[key] = seq

    def merge(self, other: "LatestGtids") -> "LatestGtids":
        """Add what was logged after ``self``'s stretch (``other``'s GTIDs, in its order)."""
        seqs = self._seqs
        pop = seqs.pop
        for k in other._seqs:
            pop(k, None)
        seqs.update(other._seqs)
        return self

    def items(self) -> list[tuple[int, int, int]]:
        """``(domain, server, seq)`` in record order: each domain's newest last."""
        return [(d, s, q) for (d, s), q in self._seqs.items()]

    def take(self) -> list[tuple[int, int, int]]:
        """``items()``, and start over empty."""
        out = self.items()
        self._seqs.clear()
        return out

    def clear(self) -> None:
        self._seqs.clear()

    def into(self, seqs: dict) -> None:
        """Write these into ``seqs``, {(domain, server): seq}."""
        seqs.update(self._seqs)

    def __len__(self) -> int:
        return len(self._seqs)

    def __bool__(self) -> bool:
        return bool(self._seqs)

    def __eq__(self, other) -> bool:
        if not isinstance(other, LatestGtids):
            return NotImplemented
        return list(self._seqs.items()) == list(other._seqs.items())

    __hash__ = None

    def __repr__(self) -> str:
        return "LatestGtids([" + ", ".join(f"{d}-{s}-{q}" for d, s, q in self.items()) + "])"

    @classmethod
    def joined(cls, lists: Sequence[Sequence[tuple[int, int, int]]]) -> list[tuple[int, int, int]]:
        """The GTIDs of consecutive records as one record's."""
        if len(lists) == 1:
            return lists[0]
        out = cls()
        for gtids in lists:
            out.update(gtids)
        return out.items()


class SeqRanges:
    """What one walk over a binlog (or a prefix of one) proves about its
    seq_nos: per (domain, server) logged there, the lowest and highest
    seq_no (``ranges``), and ``repeats``, the pairs whose seq_no does not
    always grow (logged at or below the seq it logged before, in this file
    or in the GTID_LIST state it starts from: ``gtid_strict_mode=OFF``,
    ``SET gtid_seq_no``). A pair outside ``repeats`` logs each seq at most
    once, in increasing order, above the start state: a lookup that finds
    its GTID in this file found its only copy here.

    Fed by ``LatestGtids.add_rows_watching`` (every group) with ``floor``,
    {(domain, server): seq} as of the stretch before (the start state, then
    each index record's), kept by the caller through ``settle``.

    >>> r = SeqRanges({(0, 1): 5})
    >>> t = LatestGtids()
    >>> t.add_rows_watching([(0, 1, 6), (0, 1, 9), (0, 2, 3)], 0, 1, 2, r)
    >>> r.settle(t); t.clear()
    >>> t.add_rows_watching([(0, 1, 7), (0, 1, 10)], 0, 1, 2, r)
    >>> r.settle(t)
    >>> sorted(r.ranges.items()), sorted(r.repeats)
    ([((0, 1), (6, 10)), ((0, 2), (3, 3))], [(0, 1)])
    """

    __slots__ = ("floor", "_low", "_high", "repeats")

    def __init__(self, floor: dict):
        self.floor = floor           # (domain, server) -> last seq before the current stretch
        self._low: dict = {}         # (domain, server) -> lowest seq logged here
        self._high: dict = {}        # (domain, server) -> a seq logged here and later stepped below
        self.repeats: set = set()

    @classmethod
    def resumed(cls, floor: dict, ranges: dict, repeats) -> "SeqRanges":
        """Go on walking at a point whose state is ``floor``, after a walk
        that saw ``ranges`` and ``repeats`` (as ``ranges`` gives them)."""
        new = cls(floor)
        new._low = {k: lo for k, (lo, _) in ranges.items()}
        new._high = {k: hi for k, (_, hi) in ranges.items()}
        new.repeats = set(repeats)
        return new

    def first(self, key: tuple, seq: int, before: int | None) -> None:
        """``key`` logs ``seq``, its first in this file; ``before`` its seq in the start state."""
        self._low[key] = seq
        if before is not None and seq <= before:
            self.repeats.add(key)            # at or below the start state

    def down(self, key: tuple, seq: int, old: int) -> None:
        """``key`` logs ``seq`` after ``old`` (``seq <= old``), both here."""
        self.repeats.add(key)
        if seq < self._low[key]:
            self._low[key] = seq
        if old > self._high.get(key, 0):
            self._high[key] = old

    def settle(self, stretch: "LatestGtids") -> None:
        """The stretch ``stretch`` holds is over: it becomes the floor."""
        stretch.into(self.floor)

    @property
    def ranges(self) -> dict:
        """{(domain, server): (lowest, highest)} of the pairs logged here
        (after ``settle`` of the last stretch)."""
        high, last = self._high, self.floor
        return {k: (lo, max(high.get(k, 0), last.get(k, 0))) for k, lo in self._low.items()}


class BinlogState:
    """Latest seq_no per (domain, server), and each domain's last GTID.

    Stored as ``{domain: {server: seq}}`` where each inner dict's last key is
    the server whose GTID that domain logged last: applying a GTID moves its
    server to the end. This is the order MariaDB lists a state in (GTID_LIST
    events, ``@@gtid_binlog_state``, ``.idx`` keys): each domain's last GTID
    last, which is how readers recover "the last GTID" per domain.

    Seq numbers are assigned, not maxed: with gtid_strict_mode off a domain
    may go backwards, and the server records what was logged last.
    """

    __slots__ = ("_domains",)

    def __init__(self, gtids: Iterable[Gtid] = ()):
        self._domains: dict[int, dict[int, int]] = {}
        for g in gtids:
            self.apply(g[0], g[1], g[2])

    @classmethod
    def parse(cls, text: str) -> "BinlogState":
        """``@@gtid_binlog_state`` text: the last GTID listed per domain is its last."""
        return cls(Gtid.parse(item) for item in _split_list(text, "binlog state"))

    def apply(self, domain: int, server: int, seq: int) -> None:
        """Log one GTID (the hot path of every scan: three ints, no Gtid object)."""
        servers = self._domains.get(domain)
        if servers is None:
            self._domains[domain] = {server: seq}
        else:
            servers.pop(server, None)   # re-insert: this server becomes the domain's last
            servers[server] = seq

    def update(self, gtids: Iterable[Gtid]) -> "BinlogState":
        apply = self.apply
        for g in gtids:
            apply(g[0], g[1], g[2])
        return self

    def copy(self) -> "BinlogState":
        new = BinlogState()
        new._domains = {d: dict(s) for d, s in self._domains.items()}
        return new

    def get(self, domain: int, server: int) -> int | None:
        servers = self._domains.get(domain)
        return None if servers is None else servers.get(server)

    def last(self, domain: int) -> Gtid | None:
        servers = self._domains.get(domain)
        if not servers:
            return None
        server = next(reversed(servers))
        return Gtid(domain, server, servers[server])

    def domains(self) -> list[int]:
        return sorted(self._domains)

    def __len__(self) -> int:
        return sum(len(s) for s in self._domains.values())

    def __bool__(self) -> bool:
        return bool(self._domains)

    def entries(self) -> list[tuple[int, int, int]]:
        """Every entry as (domain, server, seq), in MariaDB order: domains
        ascending; within a domain the other servers ascending, then the
        domain's last GTID. (The one owner of that order.)

        >>> BinlogState.parse("1-5-9,0-3-7,0-2-8").entries()
        [(0, 3, 7), (0, 2, 8), (1, 5, 9)]
        """
        out = []
        domains = self._domains
        for domain in sorted(domains):
            servers = domains[domain]
            last = next(reversed(servers))
            if len(servers) > 1:
                out += [(domain, server, servers[server]) for server in sorted(servers) if server != last]
            out.append((domain, last, servers[last]))
        return out

    def __iter__(self) -> Iterator[Gtid]:
        """Every entry as a Gtid, in MariaDB order (``entries``)."""
        for domain, server, seq in self.entries():
            yield Gtid(domain, server, seq)

    def gtids(self) -> list[Gtid]:
        return list(self)

    def position(self) -> Position:
        """What ``BINLOG_GTID_POS`` prints: each domain's last GTID."""
        pos = Position.__new__(Position)        # one GTID per domain by construction: nothing to check
        pos._by_domain = by_domain = {}
        for domain, servers in self._domains.items():
            server = next(reversed(servers))
            by_domain[domain] = Gtid(domain, server, servers[server])
        return pos

    def has_logged(self, g: Gtid) -> bool:
        """Has the binlog logged ``g`` by this state (the seq_nos of a
        (domain, server) grow)?"""
        seq = self.get(g.domain, g.server)
        return seq is not None and seq >= g.seq

    def is_before(self, pos: Position) -> bool:
        """MariaDB's "state is before position" (rpl_binlog_state is_before_pos).

        True when a replica at ``pos`` has not yet seen anything past this
        state: for every GTID D-S-N of the position, the state's (D, S) entry
        is absent, or has seq < N, or seq == N and is domain D's last GTID;
        and the state has no domain the position lacks.
        """
        for g in pos:
            servers = self._domains.get(g.domain)
            if servers is None:
                continue
            seq = servers.get(g.server)
            if seq is None:
                continue
            if seq > g.seq:
                return False
            if seq == g.seq and next(reversed(servers)) != g.server:
                return False
        return all(domain in pos for domain in self._domains)

    def __eq__(self, other) -> bool:
        if not isinstance(other, BinlogState):
            return NotImplemented
        if self._domains != other._domains:
            return False
        return all(next(reversed(s)) == next(reversed(other._domains[d]))
                   for d, s in self._domains.items())

    __hash__ = None

    def __str__(self) -> str:
        return ",".join([GTID_TEXT % e for e in self.entries()])

    def __repr__(self) -> str:
        return f"BinlogState({str(self)!r})"
