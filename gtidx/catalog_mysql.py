"""The catalog of an archive of MySQL binlogs: ``gtidx.catalog``'s format
(the same name ``gtidx-catalog.json``, ``"v": 1``, the SHA-256, identities,
fingerprints, histories, load and save: ``catalog.Catalog``) with MySQL's
entries. The catalog states ``"flavor": "mysql"`` (a MariaDB catalog states
none): a catalog of one flavor's binlogs read for the other's is damaged
for it (``Catalog.adopt``: lookups read the binlogs, ``catalog build``
writes it again). A field rather than a new version: MariaDB's catalogs
stay byte for byte what they were, and an older gtidx, which knows no
flavor, finds a MySQL entry's sets not MariaDB states and refuses it whole.

An entry (``MysqlDescriber``: one walk of the file's transactions)::

    {"name", "size", "etag" | "identity", "fingerprint", "server_version",
     "checksum", "in_use", "start_state", "end_state", "end", "groups",
     "anonymous", "uuids", "first_timestamp_us", "last_timestamp_us",
     "max_timestamp_us", "max_timestamp_drop_us", "index", "history"}

``start_state`` is the file's Previous_gtids, ``end_state`` the set after
it (Previous_gtids plus every complete transaction's GTID), both as the
server prints a set on one line (``GtidSet.one_line``: UUIDs ascending,
``uuid:1-5:7,uuid2:tag:1-3``); ``end`` the offset after the last complete
transaction; ``anonymous`` the transactions without a GTID; ``uuids`` the
UUIDs of the file's GTIDs, ascending; the timestamps are the transactions'
``original_commit_timestamp`` in microseconds as MySQL records them (the
GTID event's header second times 10^6 where the event has none: before
8.0.1), the first, the last, the highest and the most any falls below the
highest before it (0: they never drop), null for a file without
transactions. ``MysqlSeries.at_time`` passes over a file whose highest
second is below the time asked for, unread.

Histories (``assign_histories``): files in binlog order; a file continues a
history when that history's end set is a subset of its Previous_gtids:
equal is a contiguous continuation, a strict subset a gap (files missing
between them, reported). Previous_gtids only grow along one server's files
(a replica promoted keeps what it applied, a new UUID appears within the
history); a file whose Previous_gtids lacks some of the history's end set
(a fresh server writing ``binlog.000001`` again under the prefix after a
failover, a ``RESET BINARY LOGS AND GTIDS``) starts a new one.
"""
from __future__ import annotations

from .binlog.mysql import MysqlBinlog
from .catalog import Catalog, Entry, entry_core, readable_entry
from .errors import GtidxError, MySQLBinlogError
from .index.meta import IndexMeta
from .jsonkinds import U64, is_str, list_of, nat, optional, parsed_by
from .mysqlgtid import GtidSet

US = 1_000_000            # microseconds in a second


class MysqlEntry(Entry):
    """A MySQL catalog entry (``raw``: its JSON object) with its sets parsed:
    ``start`` the Previous_gtids, ``end`` the set after the file."""
    __slots__ = ()
    START = "Previous_gtids"

    @classmethod
    def of(cls, raw: dict) -> "MysqlEntry":
        return cls(raw, GtidSet.parse(raw["start_state"]), GtidSet.parse(raw["end_state"]))

    @staticmethod
    def start_of(b: MysqlBinlog):
        return b.previous_gtids

    def max_second(self) -> int | None:
        """The highest transaction timestamp's second (None: no transaction)."""
        top = self.raw["max_timestamp_us"]
        return None if top is None else top // US

    def min_second(self) -> int | None:
        """A second no transaction timestamp of the file is below (None: no
        transaction): its first less the largest drop (no timestamp fell
        further below the highest before it, which is at least the first)."""
        first, drop = self.raw["first_timestamp_us"], self.raw["max_timestamp_drop_us"]
        return None if first is None else (first - drop) // US


def commit_us(g) -> int:
    """A transaction's timestamp in microseconds (``MysqlGroup``): its
    original_commit_timestamp, else its GTID event header's second."""
    return g.commit_us if g.commit_us else g.timestamp * US


class MysqlDescriber:
    """``catalog.Describer`` for a MySQL binlog: each ``entry`` walks only
    the transactions written since the last one (a growing file), from the
    end of the last complete one; a file cut or rewritten under it (its
    Previous_gtids or the fingerprint of the prefix walked differ) is walked
    again from its start."""

    def __init__(self):
        self.stop = None

    def _reset(self, b: MysqlBinlog) -> None:
        if b.previous_gtids is None:
            raise MySQLBinlogError("a MySQL binlog without a Previous_gtids event: the GTID set before it "
                                   "is unknown", path=b.path, offset=4)
        self.start = b.previous_gtids.copy()
        self.end = self.start.copy()
        self.first = self.last = self.top = None
        self.drop = self.groups = self.anonymous = 0
        self.uuids: set = set()
        self.stop = b.body_start
        self.mark = None

    def _unchanged(self, b: MysqlBinlog) -> bool:
        return (self.stop is not None and b.size >= self.stop and b.previous_gtids == self.start and
                (self.mark is None or self.mark.matches(b)))

    def advance(self, b: MysqlBinlog) -> None:
        """Walk ``b`` from where the last walk stopped."""
        if not self._unchanged(b):
            self._reset(b)
        first, last, top, drop = self.first, self.last, self.top, self.drop
        try:
            for g in b.transactions(self.stop if self.stop > b.body_start else None):
                if g.gtid is None:
                    self.anonymous += 1
                else:
                    self.end.add(*g.gtid)
                    self.uuids.add(g.gtid.uuid)
                us = commit_us(g)
                if first is None:
                    first = top = us
                elif top - us > drop:
                    drop = top - us
                top = max(top, us)
                last = us
                self.groups += 1
                self.stop = g.end
            self.mark = IndexMeta.of(b, self.stop)
        except BaseException:
            self.stop = None
            raise
        self.first, self.last, self.top, self.drop = first, last, top, drop

    def entry(self, b: MysqlBinlog) -> dict:
        """The catalog entry of ``b`` as it is now (walked first, as far as needed)."""
        self.advance(b)
        return {
            **entry_core(b), "start_state": self.start.one_line(), "end_state": self.end.one_line(),
            "end": self.stop, "groups": self.groups, "anonymous": self.anonymous, "uuids": sorted(self.uuids),
            "first_timestamp_us": self.first, "last_timestamp_us": self.last, "max_timestamp_us": self.top,
            "max_timestamp_drop_us": self.drop if self.first is not None else None,
        }


_TIME = optional(nat(U64))
_SET = parsed_by(GtidSet.parse, GtidxError)
_READABLE = readable_entry({
    "start_state": _SET, "end_state": _SET, "end": nat(), "groups": nat(), "anonymous": nat(),
    "uuids": list_of(is_str), "first_timestamp_us": _TIME, "last_timestamp_us": _TIME,
    "max_timestamp_us": _TIME, "max_timestamp_drop_us": _TIME})


def assign_histories(files: list[dict]) -> list[dict]:
    """``catalog.assign_histories`` with MySQL's rule (see the module's doc)."""
    open_: list[dict] = []
    for e in files:
        if "error" in e:
            e["history"] = None
            continue
        start, end = GtidSet.parse(e["start_state"]), GtidSet.parse(e["end_state"])
        exact = next((h for h in open_ if h["_end"] == start), None)
        h = exact or next((h for h in open_ if h["_end"].issubset(start)), None)
        if h is None:
            h = {"id": len(open_) + 1, "first": e["name"], "last": e["name"], "files": 0,
                 "start_state": e["start_state"], "gaps": []}
            open_.append(h)
        elif exact is None:
            h["gaps"].append(e["name"])
        h["files"] += 1
        h["last"] = e["name"]
        h["end_state"] = e["end_state"]
        h["_end"] = end
        e["history"] = h["id"]
    for h in open_:
        del h["_end"]
    return open_


class MysqlCatalog(Catalog):
    """The catalog of a directory (or prefix) of MySQL binlogs."""

    FLAVOR = MysqlBinlog.flavor
    KIND = "MySQL"

    @staticmethod
    def open_binlog(path: str, store):
        return MysqlBinlog(path, store)

    @staticmethod
    def entry_of(raw: dict) -> MysqlEntry:
        return MysqlEntry.of(raw)

    @staticmethod
    def describer() -> MysqlDescriber:
        return MysqlDescriber()

    @staticmethod
    def assign_histories(files: list[dict]) -> list[dict]:
        return assign_histories(files)

    @staticmethod
    def readable(e) -> bool:
        return _READABLE(e)

    @staticmethod
    def seconds(e: dict) -> tuple:
        return tuple(None if t is None else t // US for t in (e["first_timestamp_us"], e["last_timestamp_us"]))


__all__ = ["MysqlCatalog", "MysqlEntry", "MysqlDescriber", "assign_histories", "commit_us", "US"]
