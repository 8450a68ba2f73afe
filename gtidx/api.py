"""The library API: what the CLI, the Spark job and the tail sidecar call.

    import gtidx
    with gtidx.open("/var/lib/mysql/binlogs") as logs:     # a file, a directory or master-bin.index
        logs.locate("0-1-100")            # Location(file, start, end, resume, ...)
        logs.state_at("master-bin.000042", 1234)           # StateAt: as BINLOG_GTID_POS
        logs.replica_start("0-1-100,1-2-50")               # ReplicaStart: where a replica begins

Every lookup uses the file's ``.idx`` when it is usable (complete, intact,
current) and otherwise answers by a sequential scan, logging one warning
(logger ``gtidx``); each result says which path answered (``via``). Every
failure is a ``GtidxError``; an argument of the wrong type or form (checked
at each public entry point: ``_path``, ``parse_offset``, ``_gtid``,
``_position``) is a ``BadInputError``.
"""
from __future__ import annotations

import bisect
import itertools
import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Iterable, Iterator

from .index import format as fmt
from . import storage
from .binlog.mariadb import CHECKSUM_CRC32, GTID, MAGIC, Binlog, Group
from .errors import BadInputError, CorruptBinlogError, CorruptCatalogError, GtidxError, MySQLBinlogError, NotFoundError
from .gtid import BinlogState, Gtid, Position
from .index.files import (DEFAULT_MAX_RATIO, IndexRoot, IndexState, IndexStatus, build_index, index_path, open_index,
                          stored_seen, verify_index)
from .liblog import log
from .admin import (BuildProgress, FileStatus, IndexInfo, binlog_status, build, build_catalog, index_info,
                    index_records, load_catalog, verify)
from .inputs import as_gtid, as_int, as_path, as_position, first_second, format_time, parse_offset, parse_time
from .records import record
from .series.listing import Listing, binlogs_flavor, list_binlogs, list_files, list_series
from .series.results import (BinlogInfo, Location, Occurrence, Probe, ReplicaStart, SeveralHistories, StateAt,
                             TimePoint)

if TYPE_CHECKING:
    # Imported where used, not here (a lookup imports only what it needs):
    # catalog (an archive's catalog), mysqlgtid (MySQL GTID text), binlog.mysql (MySQL
    # binlogs), binlog.probe, and show, which imports mysql-replication (only when a
    # group is decoded).
    from . import catalog
    from . import show as show_module

# Many GTIDs in one binlog (``locate_many``, Spark's per-file tasks): one
# pass over its groups beats index lookups from this many GTIDs per byte on
# (the two costs are measured by tools/bench lookup and scan: docs/benchmarks.md).
PASS_PER_BYTE = 1 / 131072
# state_at walks on from its last answer in the same file when the offset
# is at most this far past it (less than an index descent costs), rather
# than from the index record before the offset.
_WALK_ON = 16384

def _skipping(pos: Position, state: BinlogState) -> dict:
    """Per domain, the GTID of ``pos`` a replica start skips up to when the
    server reads on from a place whose state is ``state``: a domain whose
    GTID ``state`` already holds (any server's entry, as MariaDB's
    gtid_find_binlog_file takes it from the replica's state) skips nothing."""
    skip = {g.domain: g for g in pos}
    for g in state:
        if skip.get(g.domain) == g:
            del skip[g.domain]
    return skip


# -- one file -------------------------------------------------------------------------

def binlog_info(path: str | os.PathLike) -> BinlogInfo:
    with Binlog(as_path(path)) as b:
        return _info(b)


def _info(b: Binlog) -> BinlogInfo:
    mysql = b.flavor == "mysql"
    start = (b.previous_gtids.copy() if b.previous_gtids is not None else None) if mysql else b.start_state.copy()
    return BinlogInfo(b.path, b.size, b.fde.server_version,
                      "CRC32" if b.fde.checksum == CHECKSUM_CRC32 else "NONE",
                      b.growing, start, b.body_start)


def scan(path: str | os.PathLike) -> tuple[BinlogInfo, Iterator[Group]]:
    """The file's facts, and an iterator over its event groups in file order
    (a MySQL binlog's: its transactions, ``binlog.mysql.MysqlGroup``, and its
    Previous_gtids as ``start_state``). The file stays open until the
    iterator is exhausted or closed."""
    path = as_path(path)
    try:
        b = Binlog(path)
    except MySQLBinlogError as e:
        if e.offset != 4:
            raise
        from .binlog.mysql import MysqlBinlog
        b = MysqlBinlog(path)
    try:
        info = _info(b)
    except BaseException:
        b.close()
        raise
    walk = b.transactions if b.flavor == "mysql" else b.groups

    def groups():
        try:
            yield from walk()
        finally:
            b.close()
    return info, groups()


class _File:
    """An open binlog with its index status, as one lookup set keeps it."""

    def __init__(self, path: str, use_index: bool, store=None, index_root=None, binlog: Binlog | None = None):
        self.binlog = binlog if binlog is not None else Binlog(path, store)
        self.index: IndexStatus | None = None
        self._down: set | None = None      # pairs_going_down(), once computed
        if use_index:
            self.index = open_index(self.binlog, index_root=index_root)
            if not self.index.usable:
                self._fallback(f"{self.index.state}: {self.index.reason}")

    @property
    def path(self) -> str:
        return self.binlog.path

    def _fallback(self, why: str) -> None:
        log.warning("%s: no usable index (%s); answering by scan", self.path, why)
        if self.index is not None:
            self.index.close()
            self.index = IndexStatus(self.index.path, IndexState.STALE, why)

    @property
    def reader(self):
        return self.index.reader if self.index is not None and self.index.usable else None

    def start_record(self) -> tuple[int, BinlogState]:
        b = self.binlog
        return b.body_start, b.start_state.copy()

    def trusted(self, offset: int) -> bool:
        """An index record's offset must be the end of the file or hold a real
        event (its CRC checks out): a cheap guard against a stale index."""
        b = self.binlog
        return (offset == b.size and not b.growing) or b.event_ok(offset)

    def record(self, search) -> tuple[int, BinlogState, str]:
        """(offset, state, via) to scan from: the index record ``search``
        picks, or the start of the file."""
        r = self.reader
        if r is not None:
            try:
                rec = search(r)
            except GtidxError as e:
                self._fallback(f"index failed: {e}")
            else:
                if rec is None or rec.offset <= self.binlog.body_start:
                    return (*self.start_record(), "index")    # record 0: checked at open
                if self.trusted(rec.offset):
                    return rec.offset, rec.state.copy(), "index"
                self._fallback(f"record at offset {rec.offset} is not an event in this binlog (stale index)")
        return (*self.start_record(), "scan")

    def pairs_going_down(self) -> set | None:
        """The (domain, server) pairs whose seq_no goes down from one index
        record of this file to a later one, or that may have been logged
        again between two records (gtid_strict_mode=OFF); None when there is
        no usable index. Records lie at group ends, so two consecutive
        records with the same state had groups between them that changed
        nothing: GTIDs logged again, each its domain's last. One walk over
        the records, kept. A domain whose last GTID moves back to a server at
        the seq that server already had: that server logged it again.

        Where the index stored what its build saw of the whole file
        (``stored_seen``: its ``repeats``, from every group), those pairs
        are the answer, exact (also a repeat between two records) and with
        no walk of the records."""
        if self._down is None and self.reader is not None:
            meta = self.index.meta
            stored = stored_seen(self.binlog, meta, checked=True) if meta is not None else None
            if stored is not None and stored[0] >= self.binlog.size:
                self._down = set(stored[2])
                return self._down
            records = getattr(self.reader, "records", None)
            if records is None:
                return None
            down, last, prev = set(), {}, None
            try:
                for rec in records():
                    for d, s, q in rec.state:
                        if q < last.get((d, s), 0):
                            down.add((d, s))
                        last[(d, s)] = q
                    if prev is not None:
                        if rec.state == prev:
                            down.update((g.domain, g.server) for g in rec.state.position())
                        for g in rec.state.position():
                            # the domain's last moved back to a server at the seq it had
                            if prev.last(g.domain) != g and prev.get(g.domain, g.server) == g.seq:
                                down.add((g.domain, g.server))
                    prev = rec.state
            except GtidxError:
                return None
            self._down = down
        return self._down

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
        self.binlog.close()


def _samefile(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:         # one of them is missing: not the same file
        return False


def _contains(state: BinlogState, g: Gtid) -> bool:
    """Has the binlog logged ``g`` by this state (seq per (domain, server) grows)?"""
    seq = state.get(g.domain, g.server)
    return seq is not None and seq >= g.seq


# -- which files can hold a GTID (the one planner: BinlogSeries.locate and gtidx.spark) ---------------

UNKNOWN = "unknown"      # a bound that could not be read (a damaged binlog)


@record
class LocatePlan:
    """The files (indexes into the binlog list, in file order) that can hold a
    GTID, and whether its (domain, server) looked monotonic (then at most one
    file can hold it, and it holds it at most once)."""
    files: tuple
    monotone: bool


class Planner:
    """Which files can hold a GTID of one (domain, server) (the rule of
    ``plan_locate``), prepared once from its bounds so that each GTID costs a
    bisection while the pair grows monotonically."""

    __slots__ = ("bounds", "monotone", "_below", "_above")

    def __init__(self, bounds: list):
        self.bounds = bounds
        known = [0 if b is None else b for b in bounds if b != UNKNOWN]
        self.monotone = all(a <= b for a, b in zip(known, known[1:]))
        # while monotonic, an unknown bound lies between the known ones around it
        below, last = [], 0
        for b in bounds:
            last = last if b == UNKNOWN else (b or 0)
            below.append(last)
        above, nxt = [], _INFINITE
        for b in reversed(bounds):
            nxt = nxt if b == UNKNOWN else (b or 0)
            above.append(nxt)
        above.reverse()
        self._below, self._above = below, above

    def plan(self, n: int, dipped=(), ranges=None) -> "LocatePlan | str":
        bounds, count = self.bounds, len(self.bounds) - 1
        monotone = self.monotone and not dipped
        if monotone and not ranges:
            # file i can hold n when below[i] < n <= above[i + 1]: both grow with i
            hi = bisect.bisect_left(self._below, n, 0, count)
            lo = bisect.bisect_left(self._above, n, 1, count + 1) - 1
            files = tuple(range(lo, hi))
        else:
            files = []
            for i in range(count):
                if ranges and i in ranges:
                    can = ranges[i] is not None and ranges[i][0] <= n <= ranges[i][1]
                else:
                    can = not monotone or self._below[i] < n <= self._above[i + 1]
                if can:
                    files.append(i)
            files = tuple(files)
        if files:
            return LocatePlan(files, monotone)
        if bounds[-1] != UNKNOWN and n > (bounds[-1] or 0):
            return "never written"
        if bounds[0] != UNKNOWN and n <= (bounds[0] or 0):
            return "purged: the earliest binlog starts after it"
        return "no binlog that can hold it has it"

    def table(self, dipped=(), ranges=None) -> "PlanTable":
        """``plan`` for every seq_no of the pair at once (many GTIDs, one
        ``dipped`` and ``ranges``): see PlanTable."""
        return PlanTable(self, dipped, ranges)


class PlanTable:
    """``Planner.plan(n, dipped, ranges)`` tabulated over n: its answer only
    changes where n crosses a bound or an end of a range, so ``plan`` itself
    is asked once per stretch between those cuts (``points``, ascending;
    ``plans[k]``: the answer for ``points[k - 1] <= n < points[k]``) and each
    GTID then costs a bisection, also with ranges or a pair that went down."""

    __slots__ = ("points", "plans")

    def __init__(self, planner: Planner, dipped=(), ranges=None):
        cuts = {b + 1 for b in planner._below}
        cuts.update(a + 1 for a in planner._above if a != _INFINITE)
        cuts.update(r[k] + k for r in (ranges or {}).values() if r is not None for k in (0, 1))
        cuts.update((b or 0) + 1 for b in (planner.bounds[0], planner.bounds[-1]) if b != UNKNOWN)
        self.points = sorted(cuts)
        self.plans = [planner.plan(n, dipped, ranges) for n in [self.points[0] - 1] + self.points]

    def plan(self, n: int) -> "LocatePlan | str":
        return self.plans[bisect.bisect_right(self.points, n)]


_INFINITE = float("inf")


def plan_locate(g: Gtid, bounds: list, dipped=(), ranges=None) -> LocatePlan | str:
    """Which files can hold ``g``: ``bounds[i]`` is the seq_no of ``g``'s
    (domain, server) in the start state (GTID_LIST) of file ``i`` (None:
    absent), ``bounds[-1]`` the one at the end of the last file; ``UNKNOWN``
    where a file could not be read. ``dipped``: files in which a scan saw that
    seq go down; ``ranges``: for files scanned whole, the (lowest, highest)
    seq of the pair in them (None: it logged nothing there).
    Returns a LocatePlan, or why no file can hold ``g``.

    While the (domain, server) only grows (every bound at least the one
    before, no dip seen) it is the server's rule: ``g`` is in the one file
    whose start state lacks it and whose end has it; never written when the
    end lacks it, purged when the first start has it. Once it is seen to go
    down anywhere (``gtid_strict_mode=OFF``, ``SET gtid_seq_no``), a seq can
    be anywhere, any number of times, even in a file whose bounds grow (it
    may dip and recover inside): every file can hold it, except those whose
    scanned range excludes it. An unknown bound counts as anything between
    the known ones around it while the pair is monotonic, else as anything.

    Not detected here: a dip that recovers before the file ends, in a history
    whose bounds never go down, in a file no scan has walked through.
    ``BinlogSeries.locate`` therefore walks every binlog once before it says
    "not in these binlogs" (``ranges`` then exact); a GTID found by the bounds
    is a real occurrence, but an earlier one can hide in such a dip."""
    return Planner(bounds).plan(g.seq, dipped, ranges)


class _Replan(Exception):
    """A scan found a (domain, server) going down where the plan assumed not."""


# -- a set of binlogs -----------------------------------------------------------------------

class BinlogSeries:
    """An ordered series of one server's binlog files (one file, or the whole
    list of a directory or ``master-bin.index``), answered as one history:
    ``gtidx.open`` returns one. A single file is a ``binlog.Binlog``."""

    def __init__(self, files: list[str], *, use_index: bool = True, cache: int = 32,
                 storage_options: dict | None = None, store=None, index_root=None):
        if isinstance(files, (str, bytes, os.PathLike)) or not hasattr(files, "__iter__"):
            raise BadInputError(f"BinlogSeries() takes a list of binlog paths, not {type(files).__name__}",
                                hint="gtidx.open(path) takes one file, directory or master-bin.index")
        files = [as_path(f, "binlog path") for f in files]
        if not files:
            raise BadInputError("no binlog files")
        if store is None:      # where they are: a URL names its object store
            store = storage.resolve(files[0], storage_options)[0]
            files = [storage.resolve(f, storage_options)[1] for f in files]
        self.store = store
        # indexes kept apart (a local directory or URL mirroring the binlogs' places): looked up first
        self.index_root = None if index_root is None else IndexRoot(as_path(index_root, "index_root"),
                                                                    storage_options)
        self.files = files
        self.use_index = use_index
        self._open: OrderedDict[str, _File] = OrderedDict()
        self._bare: OrderedDict[str, Binlog] = OrderedDict()   # opened without their index (_binlog)
        self._cache = as_int(cache, "cache", 1)
        self._start: dict[str, BinlogState] = {}
        self._end = None
        self._stored = None                    # _stored_end's, for one file and size
        self._last_at = None                   # state_at's last answer: ((path, size), offset, state, via)
        self._names = {os.path.basename(f): f for f in self.files}
        self._dips: dict[tuple, set] = {}      # (domain, server) -> files a scan saw it go down in
        self._ranges: dict[tuple, dict] = {}   # (domain, server) -> {file: (lowest, highest) seq}: whole scans
        self._damaged: set = set()             # files already reported as unreadable
        self._planners: dict[tuple, Planner] = {}   # (domain, server) -> its planner (start states, end)
        self._learned: set = set()             # files learned (_learn): _ranges has all their pairs
        self._damaged_learn: set = set()       # files _learn_all could not walk (not tried again)
        self._catalog: dict[str, catalog.Entry] = {}   # path -> its catalog entry, while trusted
        self.history: int | None = None        # the catalog's history these files are (use_catalog)
        self._distrusted = 0                   # catalog entries found stale so far
        self._listed_same: set = set()         # files whose object a LIST showed to be the entry's (size, ETag)

    def use_catalog(self, cat: "catalog.Catalog | None", history: int | None = None, *,
                    listings: dict | None = None) -> None:
        """Take what the catalog says of these files: their start states (no
        file opened for them), the end state of the newest (once it is seen
        to be the file the catalog describes), and each file's seq_no ranges
        (``teach``: the planner knows which file holds a GTID without a walk).
        Every entry is checked first against what is there now, cheaply
        (``_entry_problem``: a stat, or one LIST of an object-store prefix;
        ``listings``: LISTs already made, see ``_list_binlogs``); then it is
        trusted until its file, opened, differs from it (size, fingerprint,
        GTID_LIST): then it is dropped and the file is read.

        The files must be one history (``catalog.assign_histories``): with
        several, ``history`` picks one (its files only are answered from);
        without it, BadInputError (exit 2) naming them: never mixed."""
        from . import catalog
        entries = cat.entries() if cat is not None else {}
        listed = [(p, entries.get(os.path.basename(p))) for p in self.files]
        known = [e for _, e in listed if e is not None]
        groups = catalog.histories_of(known)
        if history is not None:
            history = as_int(history, "history", 1)
            names = dict(groups).get(history)
            if names is None:
                raise BadInputError(f"no history {history} in the catalog of these binlogs",
                                    hint=catalog.describe_histories(groups) if groups else
                                    "no catalog here: gtidx catalog build makes one")
            keep = set(names)
            self.files = [p for p, e in listed if e is not None and e.name in keep]
            self._names = {os.path.basename(f): f for f in self.files}
            listed = [(p, e) for p, e in listed if p in self.files]
            self.history = history
        elif len(groups) > 1:
            raise SeveralHistories(
                f"these binlogs hold {len(groups)} histories (GTID_LIST states that do not continue each "
                f"other: binlogs of several servers, or a name reused): {catalog.describe_histories(groups)}",
                groups=groups, hint="answer within one: --history N (history=N); gtidx catalog show lists them")
        elif groups:
            self.history = groups[0][0]
        self.trust({path: e for path, e in listed if e is not None}, listings=listings)

    def trust(self, entries: dict[str, "catalog.Entry"], *, listings: dict | None = None) -> None:
        """Take catalog entries ({path: entry}, of one history; ``use_catalog``
        picks them) as what these files are: their start states and seq_no
        ranges without opening them, each after a cheap check against what
        is there now (``_entry_problem``: a stat, or one LIST of an
        object-store prefix; ``listings``: LISTs already made), then until
        its file, opened, differs (``Entry.problem``: identity, size,
        fingerprint, GTID_LIST)."""
        listings = dict(listings or {})
        opened = []
        mine = set(self.files)
        for path, e in entries.items():
            if path not in mine:
                continue
            why = self._entry_problem(path, e, listings, opened)
            if why:
                log.warning("%s: catalog entry is stale (%s); reading the file", path, why)
                continue
            self._catalog[path] = e
            self._start[path] = e.start.copy()
            self.teach(path, e.seq_ranges())
        if opened:
            log.warning("%d binlog object(s) have another ETag than their catalog entry but the same content "
                        "(uploaded again?), first %s: each lookup opens them to compare; gtidx catalog build "
                        "records their ETags", len(opened), opened[0])

    def _entry_problem(self, path: str, e: "catalog.Entry", listings: dict, opened: list) -> str:
        """Why the catalog entry ``e`` does not describe the file at ``path``
        as it is now ('' when it may): a file grown, cut, written, replaced
        or gone since the catalog was made is read, not taken from its
        entry. A local file's identity (device, inode, size, times: one
        ``stat``) must be the recorded one (``Entry.local_problem``). In an
        object store one LIST of the prefix (``listings``, made once per
        directory and kept) gives every object's size and ETag: the
        recorded ones, it is the object described. An object whose ETag is
        no longer the entry's (or either is unknown) but whose size is may
        hold the same bytes uploaded again (in other parts): it is opened
        and its fingerprint decides (``Entry.matches``; ``path`` is added
        to ``opened`` when it still matches)."""
        if not self.store.remote:
            try:
                return e.local_problem(os.stat(path))
            except OSError:
                return f"the catalog has {e.raw.get('size')} bytes, the file is gone"
        directory, name = self.store.split(path)
        if directory not in listings:
            try:
                listings[directory] = self.store.listing(directory)
            except GtidxError as x:          # LIST denied (a master-bin.index read without it)
                log.warning("%s: cannot list the prefix to check the catalog's entries (%s); each is "
                            "checked when its file is opened", directory, x.message)
                listings[directory] = None
        listing = listings[directory]
        if listing is None:
            return ""
        size, etag = listing.get(name, (None, None))
        if size is None:
            return f"the catalog has {e.raw.get('size')} bytes, the file is gone"
        if size != e.raw.get("size"):
            return f"the catalog has {e.raw.get('size')} bytes, the file {size}"
        fingerprint = e.fingerprint()
        if etag is not None and fingerprint.binlog_etag is not None and fingerprint.is_object(size, etag):
            self._listed_same.add(path)         # the very object described: its entry answers unopened
            return ""
        try:
            with Binlog(path, self.store) as b:
                why = e.matches(b)
                if why:
                    self._start[path] = b.start_state.copy()    # read instead: what it holds now
                elif etag is not None and fingerprint.binlog_etag is not None:
                    opened.append(path)         # another ETag, the same bytes
                return why
        except GtidxError as x:
            return f"cannot read it: {x.message}"

    def cataloged(self, path: str, *, check: bool = False) -> "catalog.Entry | None":
        """The catalog entry ``path`` is answered from (None: it has none, or
        it was found stale). ``check``: open the file first and compare it
        with its entry, as a lookup that reads the file does."""
        path = self.resolve(path)
        entry = self._catalog.get(path)
        if check and entry is not None:
            if path in self._open:
                why = entry.problem(self._open[path].binlog)
            else:
                with Binlog(path, self.store) as b:         # the binlog only: no index needed to compare
                    why = entry.problem(b)
            if why:
                self._distrust(path, why)
                entry = None
        return entry

    def _distrust(self, path: str, why: str) -> None:
        """The file at ``path`` is not what its catalog entry describes: forget the entry."""
        log.warning("%s: catalog entry is stale (%s); reading the file", path, why)
        del self._catalog[path]
        self._listed_same.discard(path)
        if self._end is not None and self._end[0][0] == path:
            self._end = None
        self._distrusted += 1
        self._start.pop(path, None)
        self._learned.discard(path)
        for ranges in self._ranges.values():
            ranges.pop(path, None)
        for dips in self._dips.values():
            dips.discard(path)
        self._planners.clear()

    @classmethod
    def from_path(cls, path, *, storage_options: dict | None = None, history: int | None = None,
                  **kw) -> "BinlogSeries":
        """The binlogs of a file, directory or ``master-bin.index``. Their
        directory's catalog (``gtidx.catalog``), when there is one and
        indexes are used, is read once: see ``use_catalog``. ``history``: the
        catalog's history to answer within (needed when it has several)."""
        store, path = storage.resolve(as_path(path), storage_options)
        listings: dict = {}
        files = list_files(path, store, listings)
        return cls.from_listing(Listing(store, path, files, None, listings), storage_options=storage_options,
                                history=history, **kw)

    @classmethod
    def from_listing(cls, listing: Listing, *, storage_options: dict | None = None, history: int | None = None,
                     **kw) -> "BinlogSeries":
        """``from_path`` of binlogs already listed (``listing.list_series``:
        the façade lists once, and picks this class by their flavor)."""
        store, path, files, _, listings, _ = listing.checked()
        found = None
        if kw.get("use_index", True) and files != [path]:
            directory = store.split(files[0])[0]
            if all(store.split(f)[0] == directory for f in files):
                root = kw.get("index_root")
                root = None if root is None else IndexRoot(as_path(root, "index_root"), storage_options)
                from . import catalog
                try:
                    found = catalog.Catalog.load(store, directory, root)
                except CorruptCatalogError as e:
                    log.warning("%s: %s; not used, the binlogs are read instead (%s)", e.path, e.message, e.hint)
        series = cls(files, store=store, storage_options=storage_options, **kw)
        if found is not None or history is not None:
            try:
                series.use_catalog(found, history, listings=listings)
            except BaseException:
                series.close()
                raise
        return series

    def __enter__(self) -> "BinlogSeries":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()
        for b in self._bare.values():
            b.close()
        self._bare.clear()

    # -- files ------------------------------------------------------------------
    def resolve(self, file: str | os.PathLike) -> str:
        file = as_path(file, "file")
        if file in self.files:
            return file
        name = os.path.basename(file)
        if name in self._names and (os.path.dirname(file) == "" or
                                    (not self.store.remote and _samefile(file, self._names[name]))):
            return self._names[name]
        if self.store.exists(file):
            return file
        raise NotFoundError(f"{file} is not one of these binlogs", hint=f"{len(self.files)} files")

    def _file(self, path: str) -> _File:
        f = self._open.get(path)
        if f is not None:
            self._open.move_to_end(path)
            return f
        f = _File(path, self.use_index, self.store, self.index_root, self._bare.pop(path, None))
        entry = self._catalog.get(path)
        if entry is not None:
            why = entry.problem(f.binlog)
            if why:
                self._distrust(path, why)
        self._open[path] = f
        if len(self._open) > self._cache:
            _, old = self._open.popitem(last=False)
            old.close()
        return f

    def start_state(self, path: str) -> BinlogState:
        """The file's GTID_LIST state (cached: cheap to ask for many files)."""
        st = self._start.get(path)
        if st is None:
            st = self._start[path] = self._binlog(path).start_state.copy()
        return st

    def _binlog(self, path: str) -> Binlog:
        """The file, open: its ``_File``'s binlog, else one opened without
        its index and kept (up to ``cache`` of them, the least recently used
        closed first) until ``_file`` needs it or the series closes: planning
        reads every file's start state, and a lookup then opens some of the
        same files again."""
        f = self._open.get(path)
        if f is not None:
            return f.binlog
        b = self._bare.get(path)
        if b is not None:
            self._bare.move_to_end(path)
            return b
        b = self._bare[path] = Binlog(path, self.store)
        if len(self._bare) > self._cache:
            _, old = self._bare.popitem(last=False)
            old.close()
        return b

    def end_state(self) -> BinlogState:
        """The state after the last complete event of the last file."""
        return self._end_of(self.files[-1]).copy()

    def _end_of(self, path: str) -> BinlogState:
        """The end state of ``path`` (cached; not a copy: do not change it).
        An object a LIST showed to be its catalog entry's is not opened."""
        entry = self._catalog.get(path)
        if entry is not None and path in self._listed_same:
            key = (path, entry.raw["size"])
            if self._end is None or self._end[0] != key:
                self._end = (key, entry.end.copy())
            return self._end[1]
        f = self._file(path)
        b = f.binlog
        if self._end is None or self._end[0] != (b.path, b.size):
            entry = self._catalog.get(path)        # checked against the file as _file opened it
            if entry is not None:
                self._end = ((b.path, b.size), entry.end.copy())
                return self._end[1]
            offset, state, via = f.record(lambda r: r.last_record())
            end = b.complete_end(offset)
            state, _ = self._apply(f, state, offset, end, via)
            self._end = ((b.path, b.size), state)
        return self._end[1]

    def _latest_known(self) -> tuple[BinlogState, GtidxError | None]:
        """The end state, or, when the newest binlogs cannot be read, the end
        state of the newest one that can (a lower bound) and the error of the
        newest."""
        failed = None
        for path in reversed(self.files):
            try:
                return self._end_of(path).copy(), failed
            except GtidxError as e:
                self._warn_damaged(path, e)
                failed = failed or e
        raise failed

    # -- lookups ------------------------------------------------------------------
    def state_at(self, file, offset: int) -> StateAt:
        """The binlog state at ``offset`` of ``file``, as BINLOG_GTID_POS gives it.
        NotFoundError when the offset is not the start of an event or the end of
        the file (the server returns NULL). ``offset``: see ``parse_offset``."""
        offset = parse_offset(offset)
        f = self._file(self.resolve(file))
        b = f.binlog
        if offset > b.size:
            raise NotFoundError(f"offset {offset} is past the end of the file (size {b.size})",
                                path=b.path, offset=offset)
        if offset < b.body_start:
            state = b.state_at(offset)     # inside the preamble: no index needed
            via = "index" if f.reader is not None else "scan"
        else:
            last = self._last_at
            if last is not None and last[0] == (b.path, b.size) and 0 <= offset - last[1] <= _WALK_ON:
                # a little past the last answer (a batch in file order): walk on from it
                start, state, via = last[1], last[2].copy(), last[3]
            else:
                start, state, via = f.record(lambda r: r.at_offset(offset))
            if offset == b.size and not b.growing:
                b.complete_end(start)      # the end of a closed binlog cut short is not its end state
            state, via = self._apply(f, state, start, offset, via)
        if state is None:
            raise NotFoundError("not the start of an event", path=b.path, offset=offset,
                                hint="BINLOG_GTID_POS returns NULL here too")
        if offset >= b.body_start:
            self._last_at = ((b.path, b.size), offset, state.copy(), via)
        return StateAt(b.path, offset, state, via)

    def probe(self, file, offset: int) -> Probe:
        """The event boundaries around ``offset`` of ``file`` and the state at
        the one before (see ``Probe``): the walk starts at the index record
        before ``offset`` (or the file start) and checks every event to it;
        where the chain of events breaks (a destroyed header) it finds the
        next trustworthy boundary (``gtidx.binlog.probe.walk_to``). An offset past
        the end of the file is a BadInputError; damaged bytes that no
        trustworthy boundary follows, a CorruptBinlogError."""
        offset = parse_offset(offset)
        f = self._file(self.resolve(file))
        b = f.binlog
        if offset > b.size:
            raise BadInputError(f"offset {offset} is past the end of the file (size {b.size})",
                                path=b.path, offset=offset, hint="a probe takes a byte of the file")
        # without a GTID_LIST (its header damaged) no state can be known
        known = b.gtid_list_offset is not None
        if offset < b.body_start:
            start, state = 4, b.start_state.copy()
            via = "index" if f.reader is not None else "scan"
        else:
            start, state, via = f.record(lambda r: r.at_offset(offset))
        if offset < 4:                 # the magic: before the first event, answered as offset 4
            return Probe(b.path, offset, 0, 0 if offset == 0 else 4, state if known else None, None, via)
        from .binlog.probe import walk_to
        r = walk_to(b, start, state if known else None, offset)
        return Probe(b.path, offset, r.before, r.after, r.state, r.damaged, via)

    def _apply(self, f: _File, state: BinlogState, start: int, target: int, via: str):
        """(state at ``target`` or None if it is not a boundary, via)."""
        try:
            return (state if f.binlog.apply_until(state, start, target) else None), via
        except CorruptBinlogError:
            if via != "index":
                raise
        # The scan from an index record broke: the index does not match this
        # binlog after all. Answer from the start of the file.
        f._fallback(f"scan from the record at {start} broke (stale index)")
        state = f.binlog.start_state.copy()
        return (state if f.binlog.apply_until(state, f.binlog.body_start, target) else None), "scan"

    def locate(self, gtid: Gtid | str, *, every: bool = False) -> Location:
        """The event group of ``gtid``. NotFoundError, naming the earliest and
        latest states, when these binlogs do not hold it.

        The files that can hold it come from ``plan_locate`` (the start state
        of every file and the end state). While its (domain, server) grows
        monotonically that is one file, found by the index descent as the
        server finds it; otherwise (``gtid_strict_mode=OFF``, seq_no stepped
        back) every file that can hold it is scanned, and the answer is the
        first occurrence in file order, with all of them in ``occurrences``.
        A binlog that cannot be read fails only a lookup that needs it (a
        warning on the ``gtidx`` logger names it otherwise).

        "Not in these binlogs" is said only after every binlog was walked once
        (per BinlogSeries): the start states cannot show a seq_no that stepped
        back and recovered inside one binlog.

        ``every``: scan every binlog for every occurrence, certain also where
        a seq_no went back and recovered inside a file whose start and end
        states do not show it (what ``plan_locate`` cannot see: an earlier
        occurrence than the one the bounds lead to); it reads all the binlogs.
        """
        g = as_gtid(gtid)
        if every:
            return self._locate_all(g, LocatePlan(tuple(range(len(self.files))), False))
        miss = None
        while True:
            stale = self._distrusted      # a catalog entry found stale on the way: plan again without it
            plan = self._plan(g)
            try:
                if isinstance(plan, str):
                    raise self._not_here(f"GTID {g}", plan)
                if not plan.monotone:
                    loc = self._locate_all(g, plan)
                    if self._distrusted != stale:
                        continue
                    return loc
                loc = self._locate_once(g, plan)
                # An earlier copy may hide where the seq stepped back and
                # recovered inside a binlog: the answer stands once every
                # binlog up to its own is learned and the plan, made again
                # with what that showed, has no earlier file left to search.
                k = self.files.index(loc.file)
                # the first occurrence is certain once the binlogs up to its
                # own are learned; later ones are listed where what the
                # later binlogs' indexes stored shows them (no walk)
                if self._learn(self.files[:k + 1]) | self._learn(self.files[k + 1:], walk=False):
                    again = self._plan(g)
                    if isinstance(again, str) or not again.monotone or \
                            not {i for i in again.files if i < k} <= set(plan.files):
                        continue
                if self._distrusted != stale:
                    continue
                return loc
            except _Replan:
                continue            # a scan saw the seq go down: plan again with that
            except NotFoundError as e:
                # The start states cannot show a seq_no that stepped back and
                # recovered inside one binlog: "not here" is certain only once
                # every binlog is learned (once per BinlogSeries).
                if self._distrusted != stale:
                    continue
                miss = miss or e
                if not self._learn_all():
                    raise miss from None

    def locate_many(self, gtids, *, pass_per_byte: float | None = None) -> dict:
        """``{gtid: Location or the GtidxError locate raises}`` for many GTIDs
        (Gtid or text; each answered as ``locate`` answers it, the same
        answers). From a few GTIDs on, every binlog is learned first (its
        stored seq ranges, else one walk), so each GTID's plan is exact; the
        GTIDs a plan gives one file each are answered per file: by one pass
        over its groups where that file has more than ``pass_per_byte`` (default
        ``PASS_PER_BYTE``) GTIDs per byte, else by index lookups in GTID order.
        The others (a seq_no that went back, nowhere by the bounds) go
        through ``locate``."""
        per_byte = PASS_PER_BYTE if pass_per_byte is None else pass_per_byte
        out: dict = {}
        wanted = list(dict.fromkeys(as_gtid(g) for g in gtids))

        def one(g: Gtid) -> None:
            try:
                out[g] = self.locate(g)
            except GtidxError as e:
                out[g] = e
        if len(wanted) <= len(self.files):       # a few: learning every binlog would cost more
            for g in wanted:
                one(g)
            return out
        self._learn(self.files)
        per_file: dict[int, list] = {}
        tables: dict = {}               # (domain, server) -> its PlanTable: _plan for all its GTIDs
        others = []
        for g in wanted:
            key = (g.domain, g.server)
            table = tables.get(key)
            if table is None:
                table = tables[key] = PlanTable(*self._plan_inputs(key))
            plan = table.plan(g.seq)
            if isinstance(plan, str) or not plan.monotone or len(plan.files) != 1:
                others.append(g)
            else:
                per_file.setdefault(plan.files[0], []).append(g)
        for g in others:
            one(g)
        for i, gs in sorted(per_file.items()):
            path = self.files[i]
            try:
                f = self._file(path)
                if len(gs) > f.binlog.size * per_byte:
                    # many in this file: one pass over its groups
                    keys = {(g.seq, g.domain, g.server): g for g in gs}
                    for begin, end, (ts, server, seq, domain, _) in f.binlog.group_spans():
                        g = keys.pop((seq, domain, server), None)
                        if g is not None:
                            out[g] = Location(g, path, begin, end, end, ts, "scan")
                            if not keys:
                                break
            except GtidxError:
                pass                    # each GTID's own lookup says what failed
            for g in sorted(g for g in gs if g not in out):
                one(g)                  # few, or not where its bounds say: locate decides
        return out

    def plan_table(self, domain: int, server: int) -> PlanTable:
        """The plans of every seq_no of one (domain, server), as
        ``locate_many`` plans its GTIDs: every binlog learned first (its
        stored seq ranges, else one walk), so each plan is exact."""
        self._learn(self.files)
        return PlanTable(*self._plan_inputs((domain, server)))

    def binlog(self, path: str) -> Binlog:
        """The open ``Binlog`` of one file of the series (kept open with the
        series' other files, as lookups keep it)."""
        return self._file(self.resolve(path)).binlog

    def _plan(self, g: Gtid) -> LocatePlan | str:
        """``plan_locate`` for ``g`` with what this series knows: the bounds
        (its pair's planner, kept), the files seen going down, and the ranges
        of the files learned. (The end state is read, also where the GTID's
        file is an older one: a damaged newest binlog is then reported by
        every lookup, as ``status`` would.)"""
        planner, dipped, ranges = self._plan_inputs((g.domain, g.server))
        return planner.plan(g.seq, dipped, ranges)

    def _plan_inputs(self, key: tuple) -> tuple:
        """(planner, dipped, ranges) of ``_plan`` for one (domain, server)."""
        last = self._end_bound(key)
        cached = self._planners.get(key)
        if cached is None or cached.bounds[-1] != last:
            cached = Planner([self._start_bound(p, key) for p in self.files] + [last])
            self._planners[key] = cached
        dipped, ranges = self._dips.get(key, ()), self._ranges.get(key, {})
        learned = self._learned
        return (cached, dipped and {i for i, p in enumerate(self.files) if p in dipped},
                {i: ranges.get(p) for i, p in enumerate(self.files) if p in ranges or p in learned})

    def _locate_once(self, g: Gtid, plan: LocatePlan) -> Location:
        """Monotonic (domain, server): the GTID is in at most one file, once."""
        failed = None
        for i in plan.files:
            path = self.files[i]
            try:
                f = self._file(path)
                start, _, via = f.record(lambda r: r.search(lambda _, st: not _contains(st, g)))
                loc = self._find_group(f, g, start, None, via)
                if loc is None and start > f.binlog.body_start:
                    # the descent may have passed the group if the seq dipped
                    # inside this file: look in the part it skipped
                    loc = self._find_group(f, g, f.binlog.body_start, start, "scan")
            except GtidxError as e:
                failed = failed or e
                self._warn_damaged(path, e)
                continue
            if loc is not None:
                return loc
        if failed is not None:
            raise failed
        raise self._not_here(f"GTID {g}", f"no such group in {os.path.basename(self.files[plan.files[-1]])}")

    def _locate_all(self, g: Gtid, plan: LocatePlan) -> Location:
        """Non-monotonic (domain, server): scan every file that can hold the
        GTID; the first occurrence in file order is the answer."""
        found, failed = [], None
        for i in plan.files:
            path = self.files[i]
            try:
                f = self._file(path)
                found += self._scan_for(f, g)
            except GtidxError as e:
                failed = failed or e
                self._warn_damaged(path, e)
        if not found:
            if failed is not None:
                raise failed
            why = "all of them were scanned" if len(plan.files) == len(self.files) else \
                f"the {len(plan.files)} that can hold it were scanned: seq_no went backwards"
            raise self._not_here(f"GTID {g}", why)
        if failed is not None:
            log.warning("%s occurs in %s, but %s could not be searched for more occurrences",
                        g, os.path.basename(found[0].file), failed.path or "a binlog")
        occ = tuple(Occurrence(x.file, x.start, x.end) for x in found) if len(found) > 1 else ()
        return found[0]._replace(occurrences=occ)

    def _find_group(self, f: _File, g: Gtid, start: int, stop: int | None, via: str) -> Location | None:
        """The first group of ``g`` in [start, stop); a walk that sees the
        GTID's (domain, server) go down raises _Replan (the file is not
        monotonic for it after all)."""
        domain_, server_, n = g
        prev = 0
        for begin, end, (ts, server, seq, domain, _) in f.binlog.group_spans(start):
            if stop is not None and begin >= stop:
                break
            if domain == domain_ and server == server_:
                if seq == n:
                    return Location(g, f.path, begin, end, end, ts, via if f.reader else "scan")
                if seq < prev:
                    self._dips.setdefault((domain_, server_), set()).add(f.path)
                    raise _Replan()
                prev = seq
        return None

    def _scan_for(self, f: _File, g: Gtid) -> list[Location]:
        """Every group of ``g`` in the file, in file order (learning on the way
        whether its (domain, server) goes down in this file)."""
        domain_, server_, n = g
        prev, dipped, lo, hi, out = 0, False, None, 0, []
        for begin, end, (ts, server, seq, domain, _) in f.binlog.group_spans():
            if domain == domain_ and server == server_:
                if seq == n:
                    out.append(Location(g, f.path, begin, end, end, ts, "scan"))
                dipped = dipped or seq < prev
                prev = seq
                lo = seq if lo is None or seq < lo else lo
                hi = seq if seq > hi else hi
        if dipped:
            self._dips.setdefault((domain_, server_), set()).add(f.path)
        self._ranges.setdefault((domain_, server_), {})[f.path] = None if lo is None else (lo, hi)
        return out

    def _learn_all(self) -> bool:
        """Learn every binlog not learned yet (``_learn``): then the planner
        knows exactly which files can hold any GTID. False when there was
        nothing left to learn."""
        return self._learn([p for p in self.files if p not in self._learned])

    def _learn(self, paths, walk: bool = True) -> bool:
        """Note, per (domain, server), the lowest and highest seq_no each
        binlog of ``paths`` logs and whether it goes down there (below the one
        before it, or the file's start state), so that the planner knows
        exactly which of them can hold a GTID. From what ``build``/``tail``
        stored with the index (``IndexMeta.seen``) where it covers the file,
        walking the rest of the file past what it covers (all of it
        without; ``walk=False``: only files stored whole). A file that cannot
        be read is warned about once and left unknown. False when ``paths``
        had nothing left to learn."""
        todo = [p for p in paths if p not in self._learned and p not in self._damaged_learn]
        learned = False
        for path in todo:
            try:
                seen = self._walk_seen(path, walk)
            except GtidxError as e:
                self._damaged_learn.add(path)   # planned as unknown; its lookups fail with this
                self._warn_damaged(path, e)
                continue
            if seen is not None:
                self.teach(path, {k: (r[0], r[1], r[3]) for k, r in seen.items()})
                learned = True
        return learned

    def seq_ranges(self, path: str) -> dict:
        """{(domain, server): (lowest, highest, goes down)} of the seq_nos one
        binlog of the series logs: what ``build``/``tail`` stored with its
        index, the rest walked. GtidxError when it cannot be read."""
        return {k: (r[0], r[1], r[3]) for k, r in self._walk_seen(self.resolve(path)).items()}

    def teach(self, path: str, ranges: dict) -> None:
        """Take ``seq_ranges(path)`` from elsewhere (a planning job that
        asked each file once): the planner then knows the file exactly."""
        path = self.resolve(path)
        self._learned.add(path)
        for key, (lo, hi, down) in ranges.items():
            if down:
                self._dips.setdefault(key, set()).add(path)
            self._ranges.setdefault(key, {})[path] = (lo, hi)

    def _walk_seen(self, path: str, walk: bool = True) -> dict | None:
        """{(domain, server): [lowest, highest, last, went down]} of one
        binlog; None when that needs a walk and ``walk`` is False."""
        f = self._open.get(path)
        if f is not None:
            index = f.index
            stored = stored_seen(f.binlog, index.meta if index is not None else None,
                                 checked=index is not None and index.usable)
            size = f.binlog.size
        else:
            b = self._binlog(path)                      # the stored ranges need no index opened
            stored = stored_seen(b, index_root=self.index_root)
            size = b.size
        seen: dict = {}
        offset = None
        if stored is not None:
            offset, ranges, repeats = stored
            for key, (lo, hi) in ranges.items():
                seen[key] = [lo, hi, hi, key in repeats]     # last: hi while it only grew
            if offset >= size:
                return seen
        if not walk:
            return None
        b = self._file(path).binlog
        start = b.start_state
        for _, _, (_, server, seq, domain, _) in b.group_spans(offset):
            key = (domain, server)
            r = seen.get(key)
            if r is None:
                before = start.get(domain, server)
                seen[key] = [seq, seq, seq, before is not None and seq <= before]
                continue
            if seq <= r[2]:
                r[3] = True
            r[2] = seq
            if seq < r[0]:
                r[0] = seq
            elif seq > r[1]:
                r[1] = seq
        return seen

    def _start_bound(self, path: str, key: tuple) -> int | None | str:
        try:
            return self.start_state(path).get(*key)
        except GtidxError as e:
            self._warn_damaged(path, e)
            return UNKNOWN

    def _end_bound(self, key: tuple) -> int | None | str:
        try:
            stored = None if self.files[-1] in self._catalog else self._stored_end(self.files[-1])
            if stored is not None and key not in stored[1]:
                # the pair only grew in the newest binlog: its last seq_no is
                # its highest (or, not logged there, the start state's)
                r = stored[0].get(key)
                return r[1] if r is not None else stored[2].get(*key)
            return self._end_of(self.files[-1]).get(*key)
        except GtidxError as e:
            self._warn_damaged(self.files[-1], e)
            return UNKNOWN

    def _stored_end(self, path: str) -> tuple | None:
        """(ranges, repeats, start state) of a closed binlog whose usable
        index stored what its build saw of all of it (``stored_seen``): the
        end bound of a pair that only grew there needs no index descent and
        no walk to the end. None otherwise (kept per file and size)."""
        f = self._file(path)
        b = f.binlog
        if self._stored is not None and self._stored[0] == (b.path, b.size):
            return self._stored[1]
        out = None
        index = f.index
        if not b.growing and index is not None and index.usable and path not in self._catalog:
            stored = stored_seen(b, index.meta, checked=True)
            if stored is not None and stored[0] == b.size:
                out = (stored[1], stored[2], b.start_state)
        self._stored = ((b.path, b.size), out)
        return out

    def _warn_damaged(self, path: str, e: GtidxError) -> None:
        if isinstance(e, MySQLBinlogError):
            raise e         # not a damaged file: a series of MySQL binlogs, refused as a whole (exit 2)
        if path not in self._damaged:
            self._damaged.add(path)
            log.warning("%s (lookups that need %s fail; the others are answered from the other "
                        "binlogs)", e if e.path else f"{path}: {e}", os.path.basename(path))

    def replica_start(self, position: Position | str, *, strict: bool = False) -> ReplicaStart:
        """Where the server starts sending to a replica at ``position`` (one GTID
        per domain), as MariaDB's binlog dump does it:

        * each requested GTID must be in the binlog (the latest state has its
          (domain, server) at that seq or later) or its domain must be absent;
          otherwise "not in the master's binlog" ("diverged" when the domain
          went past the seq on another server);
        * the file is the newest whose GTID_LIST state is before the position
          (none: the position is older than every file, binlogs purged);
        * the server reads that file from offset 4, its start (``ReplicaStart``);
        * per domain, groups are skipped until the requested GTID's server logs
          a seq at least the requested one: equal is skipped too, greater is
          the first sent (with ``strict``, the replica's gtid_strict_mode, a
          greater seq is the "hole" error); domains whose requested GTID the
          start state already holds skip nothing.

        The index only shortens the walk to the first group sent: it starts
        at the last index record before the position, where ``_skip_safe``
        allows, with that record's state deciding which domains still skip.
        """
        pos = as_position(position)
        latest, failed = self._latest_known()
        for g in pos:
            seq = latest.get(g.domain, g.server)
            if (seq is not None and seq >= g.seq) or (latest.last(g.domain) is None and failed is None):
                continue
            if failed is not None:
                raise failed         # the unreadable newest binlog may hold it
            diverged = latest.last(g.domain).seq >= g.seq
            raise NotFoundError(
                f"connecting replica requested to start from GTID {g}, which is not in the "
                f"master's binlog{' (the replica has probably diverged: the binlog has higher seq_no)' if diverged else ''}",
                hint=f"latest state {latest or '(empty)'}")
        path = next((p for p in reversed(self.files) if self._start_before(p, pos)), None)
        if path is None:
            raise NotFoundError(
                "could not find the GTID state requested by the replica in any binlog file: the "
                "replica's position is too old and the binlogs it needs have been purged",
                hint=f"earliest state {self.start_state(self.files[0]) or '(empty)'}")
        f = self._file(path)
        offset, state, via = f.record(lambda r: r.before_position(pos))
        if offset > f.binlog.body_start and not self._skip_safe(f, path, pos, offset):
            # seq_no went back in this file: the record's state hides where to stop
            offset, state, via = (*f.start_record(), "scan")
        first = self._first_sent(path, offset, _skipping(pos, state), strict, via)
        start = f.binlog.start_state.copy()
        return ReplicaStart(pos, path, len(MAGIC), start, Position(_skipping(pos, start).values()), first, via)

    def _start_before(self, path: str, pos: Position) -> bool:
        """Is the file's start state before ``pos``? For a binlog whose start
        cannot be read, the end state of the one before it stands in (the
        server writes that state as the next file's GTID_LIST): a replica
        that would start in the unreadable file gets its error."""
        try:
            return self.start_state(path).is_before(pos)
        except GtidxError as e:
            self._warn_damaged(path, e)
            i = self.files.index(path)
            if i == 0 or self._end_of(self.files[i - 1]).is_before(pos):
                raise
            return False

    def _skip_safe(self, f: _File, path: str, pos: Position, offset: int) -> bool:
        """May a replica start at the index record at ``offset`` instead of
        at the file's start, where MariaDB 10.11 reads from? The record's state
        is before the position; a scan from the start would still stop
        skipping earlier if a (domain, server) of the position reached its
        seq_no before the record and went back (gtid_strict_mode=OFF). So the
        record is used only while the file shows every such pair growing:
        its start state to the next file's (or the end state) and
        ``pairs_going_down``: what the build's walk stored of every group,
        else every index record of the file. (Not what earlier lookups'
        scans saw: the answer must not depend on what was asked before.) Not
        seen without the stored walk: a dip, or a repeated GTID, that lies
        between two consecutive records of a file whose records and bounds
        never go down."""
        i = self.files.index(path)
        try:
            after = self.start_state(self.files[i + 1]) if i + 1 < len(self.files) else self._end_of(path)
        except GtidxError:
            return False
        start = f.binlog.start_state
        if any((after.get(g.domain, g.server) or 0) < (start.get(g.domain, g.server) or 0) for g in pos):
            return False
        down = f.pairs_going_down()
        return down is not None and not any((g.domain, g.server) in down for g in pos)

    def _first_sent(self, path: str, offset: int, skip: dict, strict: bool, via: str) -> Location | None:
        for i in range(self.files.index(path), len(self.files)):
            f = self._file(self.files[i])
            start = max(offset, f.binlog.body_start) if self.files[i] == path else None
            for begin, end, (ts, server, seq, domain, _) in f.binlog.group_spans(start):
                want = skip.get(domain)
                if want is None:
                    return Location(Gtid(domain, server, seq), f.path, begin, end, end, ts, via)
                if server != want.server or seq < want.seq:
                    continue                           # before the replica's position
                del skip[domain]
                if seq == want.seq:
                    continue                           # the replica's last GTID in this domain
                if strict:
                    raise NotFoundError(
                        f"the binlog is missing the GTID {want} requested by the replica (a prior "
                        f"and a later seq_no exist, {Gtid(domain, server, seq)} follows), and GTID "
                        "strict mode is enabled", path=f.path, offset=begin)
                return Location(Gtid(domain, server, seq), f.path, begin, end, end, ts, via)
        return None

    def at_time(self, when) -> TimePoint:
        """Where a point-in-time restore to ``when`` stops: the first event
        group, in file order, whose GTID event timestamp is at least
        ``when`` (``parse_time``), and the GTID position just before it.
        Timestamps may step backwards (group commit order, clock changes,
        SET TIMESTAMP): a group earlier in file order but later in time
        wins, so a stretch of binlog is passed over only where it is known
        that every group in it is older (see ``_time_skip``); the rest is
        walked, reading event headers only."""
        t = parse_time(when)
        first = first_second(t)         # a group's whole second is at or after t from this one on
        for path in self.files:
            if path != self.files[-1] and self._older(path, first):
                continue
            f = self._file(path)
            start, via = self._time_skip(f, first)
            if start is None:
                continue
            for begin, _, (ts, server, seq, domain, _) in f.binlog.group_spans(start):
                if ts >= first:
                    at = self.state_at(path, begin)
                    return TimePoint(t, path, begin, Gtid(domain, server, seq), at.position, ts,
                                     "index" if via == "index" and at.via == "index" else "scan")
        last = self._file(self.files[-1])
        end = last.binlog.complete_end(last.binlog.body_start if last.reader is None else
                                       last.record(lambda r: r.last_record())[0])
        return TimePoint(t, last.path, end, None, self.end_state().position(), None,
                         "index" if last.reader is not None else "scan")

    def _older(self, path: str, first: int) -> bool:
        """Does the catalog say every group of ``path`` is older than the
        second ``first`` (``first_second``; its ``max_timestamp``)? The file
        is then not opened: a closed binlog is taken as its entry describes
        it, as the planner takes its seq ranges (the newest binlog is always
        opened: it may have grown)."""
        entry = self._catalog.get(path)
        top = entry.raw.get("max_timestamp") if entry is not None else None
        return top is not None and top < first and not entry.raw.get("in_use")

    def _time_skip(self, f: _File, first: int) -> tuple[int | None, str]:
        """(where to start walking ``f`` for the first group at the second
        ``first`` (``first_second``) or later; via). From the start of the
        file, unless its catalog entry gives ``max_timestamp_drop`` D (how
        far a GTID timestamp ever falls below the highest one before it in
        the file) and the index has a record R whose next event is a GTID
        event with timestamp ``ts``, ``ts + D < first``: every group before
        R is then older (each is at most the running maximum at R, which is
        at most ``ts + D``),
        so the walk starts at R. R is found by a bisection over the records
        (any record that passes is sound; the latest found is taken)."""
        b = f.binlog
        entry = self._catalog.get(f.path)
        drop = entry.raw.get("max_timestamp_drop") if entry is not None else None
        r = f.reader
        if drop is None or r is None:
            return b.body_start, "scan"

        def passes(offset: int) -> bool:
            head = b.event_header(offset)
            return head is not None and head[1] == GTID and head[0] + drop < first and f.trusted(offset)
        best, lo, hi = b.body_start, b.body_start, b.size
        try:
            while lo < hi:
                mid = (lo + hi + 1) // 2
                rec = r.at_offset(mid)
                offset = rec.offset if rec is not None else b.body_start
                if offset <= best:
                    lo = mid                 # no record between best and mid: look further on
                elif passes(offset):
                    best, lo = offset, mid
                else:
                    hi = offset - 1
        except GtidxError as e:
            f._fallback(f"index failed: {e}")
            return b.body_start, "scan"
        return best, "index" if best > b.body_start else "scan"

    def _not_here(self, what: str, why: str) -> NotFoundError:
        try:
            earliest = self.start_state(self.files[0])
        except GtidxError:
            earliest = None
        try:
            latest = self.end_state()
        except GtidxError:
            latest = None
        return NotFoundError(f"{what} is not in these binlogs ({why})",
                             hint=f"earliest state {'(unknown)' if earliest is None else earliest or '(empty)'}; "
                                  f"latest {'(unknown)' if latest is None else latest or '(empty)'}")


def open_binlogs(path: str | os.PathLike, **kw) -> BinlogSeries:
    """A file, a directory of binlogs or a ``master-bin.index`` (``gtidx.open``):
    a ``BinlogSeries``, or for MySQL binlogs a ``series.mysql.MysqlSeries`` (the
    same lookups: ``locate``, ``state_at``, ``replica_start``)."""
    listing = list_series(path, kw.get("storage_options"))
    return series_class(listing.flavor).from_listing(listing, **kw)


def series_class(flavor: str | None) -> type:
    """The series that answers binlogs of ``flavor`` (``listing.list_series``'s):
    the one place the flavor picks the answers. None (not known): MariaDB's,
    whose answers say what they find."""
    if flavor == "mysql":
        from .series.mysql import MysqlSeries
        return MysqlSeries
    return BinlogSeries


# seek_many answers its specs this many at a time (the GTIDs of each go through
# one locate_many): its memory is bounded by it, whatever the input's length
_MANY_AT_ONCE = 1 << 16


def seek_many(specs: Iterable[str], path: str | os.PathLike = ".", *, replica: bool = False,
              strict: bool = False, storage_options: dict | None = None, index_root=None,
              history: int | None = None, pass_per_byte: float | None = None) -> Iterator:
    """``seek`` for many specs at once (one GTID, or a replication position
    with one GTID per domain, each; ``replica``: every spec is a replica's
    position): yields, in input order, each spec's answer (Location or
    ReplicaStart) or the GtidxError its single ``seek`` would raise. One
    series serves them all; the GTIDs go through ``locate_many``, up to
    65,536 specs at a time: ``specs`` is read as the answers are taken (an
    endless iterator too), and memory does not grow with its length."""
    listing = list_series(path, storage_options)
    if listing.flavor == "mysql":
        from .series import mysql
        yield from mysql.seek_many(specs, listing, replica=replica, storage_options=storage_options,
                                   index_root=index_root, history=history)
        return
    kw = {"storage_options": storage_options, "index_root": index_root}

    def single(pos) -> bool:
        return len(pos) == 1 and not replica
    try:
        logs = BinlogSeries.from_listing(listing, history=history, **kw)
    except SeveralHistories as e:
        for pos in map(_parsed, specs):
            if isinstance(pos, GtidxError):
                yield pos
                continue
            try:
                if not single(pos):
                    raise e
                yield _locate_in_histories(next(iter(pos)), path, e, False, kw)
            except GtidxError as err:
                yield err
        return
    with logs:
        it = iter(specs)
        while True:
            parsed = [_parsed(spec) for spec in itertools.islice(it, _MANY_AT_ONCE)]
            if not parsed:
                return
            found = logs.locate_many([next(iter(p)) for p in parsed if not isinstance(p, GtidxError) and single(p)],
                                     pass_per_byte=pass_per_byte)
            for pos in parsed:
                if isinstance(pos, GtidxError):
                    yield pos
                elif single(pos):
                    yield found[next(iter(pos))]
                else:
                    try:
                        yield logs.replica_start(pos, strict=strict)
                    except GtidxError as e:
                        yield e


def _parsed(spec):
    """A seek spec's position (``_position``), or the GtidxError saying why it has none."""
    try:
        return as_position(spec)
    except GtidxError as e:
        return e


def states_at(items: Iterable[tuple], *, use_index: bool = True, storage_options: dict | None = None,
              index_root=None, cache: int = 8) -> Iterator:
    """``state_at`` for many ``(file, offset)`` pairs: yields, in input
    order, each StateAt or the GtidxError its single ``state_at`` would
    raise. The files stay open between the pairs (the ``cache`` last used
    ones), so their indexes are read once."""
    open_: OrderedDict = OrderedDict()
    try:
        for file, offset in items:
            try:
                path = as_path(file)
                logs = open_.pop(path, None)
                if logs is None:
                    logs = series_class(binlogs_flavor(path, storage_options))(
                        [path], use_index=use_index, storage_options=storage_options, index_root=index_root)
                    while len(open_) >= cache:
                        open_.popitem(last=False)[1].close()
                open_[path] = logs
                yield logs.state_at(logs.files[0], offset)
            except GtidxError as e:
                yield e
    finally:
        for logs in open_.values():
            logs.close()


def state_at(path: str | os.PathLike, offset: int, **kw) -> StateAt:
    """One-shot: the state at ``offset`` of one binlog file (a path or a
    URL; ``storage_options=``: see ``storage.resolve``)."""
    path = as_path(path)
    with series_class(binlogs_flavor(path, kw.get("storage_options")))([path], **kw) as logs:
        return logs.state_at(logs.files[0], offset)


def probe(path: str | os.PathLike, offset: int, **kw) -> Probe:
    """One-shot: the event boundaries around ``offset`` of one binlog file
    (a path or a URL), as ``BinlogSeries.probe``."""
    path = as_path(path)
    with BinlogSeries([path], **kw) as logs:
        return logs.probe(logs.files[0], offset)


def at_time(path: str | os.PathLike, when, **kw) -> TimePoint:
    """One-shot ``BinlogSeries.at_time`` over a file, directory or master-bin.index
    (MySQL binlogs: ``MysqlSeries.at_time``)."""
    with open_binlogs(as_path(path), **kw) as logs:
        return logs.at_time(when)


def seek(spec: str, path: str | os.PathLike = ".", *, strict: bool = False, replica: bool = False,
         every: bool = False, storage_options: dict | None = None, index_root=None, history: int | None = None,
         server_uuid: str | None = None):
    """``spec`` is one GTID (-> Location; ``every``: see ``BinlogSeries.locate``) or
    a replication position with several domains (-> ReplicaStart). With
    ``replica``, ``spec`` is always a replica's position (-> ReplicaStart), a
    single domain too. MySQL binlogs: ``spec`` is ``uuid:N`` / ``uuid:tag:N``
    or a GTID set, see ``series.mysql``; ``server_uuid``: their server's, for
    a replica start (``MysqlSeries.replica_start``)."""
    listing = list_series(path, storage_options)
    if listing.flavor == "mysql":
        from .series import mysql
        return mysql.seek(spec, listing, replica=replica, every=every, storage_options=storage_options,
                          index_root=index_root, history=history, server_uuid=server_uuid)
    if server_uuid is not None:
        raise BadInputError("a server_uuid is for MySQL binlogs' replica starts; these are not MySQL binlogs")
    pos = as_position(spec)
    kw = {"storage_options": storage_options, "index_root": index_root}
    try:
        logs = BinlogSeries.from_listing(listing, history=history, **kw)
    except SeveralHistories as e:
        if len(pos) != 1 or replica:
            raise
        return _locate_in_histories(next(iter(pos)), path, e, every, kw)
    with logs:
        if len(pos) == 1 and not replica:
            return logs.locate(next(iter(pos)), every=every)
        return logs.replica_start(pos, strict=strict)


def show(path: str | os.PathLike = ".", *, gtid=None, offset=None, storage_options: dict | None = None,
         index_root=None, history: int | None = None, schema_from: str | None = None) -> "show_module.GroupChanges":
    """What one event group did (``gtidx show``): its statements and row
    changes (``show.GroupChanges``). Either ``gtid``: the group of that GTID
    in the binlogs of ``path`` (a file, directory, master-bin.index or URL,
    found as ``seek`` finds it), or ``offset``: the group of the binlog
    ``path`` that starts at ``offset`` or has an event starting there.
    ``schema_from``: a live server (socket path or ``mysql://`` DSN) whose
    information_schema names the columns the binlog does not name
    (``show.ServerSchema``)."""
    from . import show as show_module
    if (gtid is None) == (offset is None):
        raise BadInputError("give exactly one of a GTID and an offset")
    schema = show_module.ServerSchema(schema_from) if schema_from is not None else None
    kw = {"storage_options": storage_options, "index_root": index_root}
    try:
        if offset is not None:
            offset = parse_offset(offset) if isinstance(offset, str) else as_int(offset, "offset", 0)
            with BinlogSeries([as_path(path)], use_index=False, **kw) as logs:
                b = logs._file(logs.files[0]).binlog
                start = _walk_start(b, offset, logs.index_root)
                return show_module.decode_group(b, _group_at(b, offset, start), schema=schema)
        g = as_gtid(gtid)
        try:
            logs = BinlogSeries.from_path(path, history=history, **kw)
        except SeveralHistories as e:
            found = _locate_in_histories(g, path, e, False, kw)
            logs = BinlogSeries.from_path(path, history=found.history, **kw)
        with logs:
            loc = logs.locate(g)
            return show_module.decode_group(logs._file(loc.file).binlog, loc, schema=schema)
    finally:
        if schema is not None:
            schema.close()


def _walk_start(b: Binlog, offset: int, index_root=None) -> int | None:
    """Where a walk to the group at ``offset`` may begin: the index record
    at or before it when ``b`` has a usable index whose record holds a real
    event (records lie at group ends), else None (the file's start). The
    index only shortens the walk: without one nothing is said (the walk
    alone answers)."""
    try:
        status = open_index(b, index_root=index_root)
    except GtidxError:
        return None
    try:
        if not status.usable:
            return None
        rec = status.reader.at_offset(offset)
        if rec is None or rec.offset <= b.body_start or rec.offset >= b.size or not b.event_ok(rec.offset):
            return None
        return rec.offset
    except GtidxError:
        return None
    finally:
        status.close()


def _group_at(b: Binlog, offset: int, start: int | None = None) -> Group:
    """The event group of ``b`` that starts at ``offset`` or has an event
    starting there, walking from ``start`` (a group boundary at or before
    ``offset``; default the file's first group)."""
    for g in b.groups(start):
        if g.start > offset:
            break
        if offset < g.end:
            if offset == g.start or any(ev.offset == offset for ev in b.events_between(g.start, g.end)):
                return g
            raise NotFoundError(f"offset {offset} is not an event boundary (it is inside the event group "
                                f"{g.gtid} at {g.start}-{g.end})", path=b.path, offset=offset,
                                hint=f"the group starts at {g.start}")
    raise NotFoundError("no event group at this offset (before the first group, between groups "
                        "or past the last one)", path=b.path, offset=offset,
                        hint="gtidx scan FILE lists the groups")


def _locate_in_histories(g: Gtid, path, several: SeveralHistories, every: bool, kw: dict) -> Location:
    """A GTID in binlogs of several histories: looked up in each (with what
    their catalog says, each a BinlogSeries of its own files); the answer
    when exactly one holds it (its ``history`` set), else NotFoundError
    (none) or a BadInputError naming every history that holds it (a GTID
    logged by two servers, or by the same history archived twice: the user
    picks one)."""
    found, missing = [], []
    for h, names in several.groups:
        with BinlogSeries.from_path(path, history=h, **kw) as logs:
            try:
                found.append(logs.locate(g, every=every)._replace(history=h))
            except NotFoundError as e:
                missing.append(f"history {h}: {e.message}")
    if len(found) == 1:
        return found[0]
    if not found:
        raise NotFoundError(f"GTID {g} is not in these binlogs (in none of their {len(several.groups)} histories)",
                            hint="; ".join(missing))
    raise BadInputError(
        f"GTID {g} is in {len(found)} histories of these binlogs: " +
        "; ".join(f"history {x.history}: {os.path.basename(x.file)} offset {x.start}" for x in found),
        hint="pick one: --history N (history=N); gtidx catalog show lists them")


__all__ = ["open_binlogs", "BinlogSeries", "state_at", "scan", "binlog_info", "build", "build_index",
           "verify_index", "index_path", "list_binlogs", "StateAt", "Location", "Occurrence", "ReplicaStart",
           "TimePoint", "at_time", "parse_time", "format_time", "LocatePlan", "Planner", "plan_locate",
           "BinlogInfo", "IndexInfo", "index_info", "index_records", "verify", "seek", "binlog_status",
           "FileStatus", "BuildProgress", "parse_offset", "build_catalog", "load_catalog", "SeveralHistories",
           "DEFAULT_MAX_RATIO", "fmt", "binlogs_flavor", "first_second", "series_class", "probe", "seek_many",
           "states_at", "show", "Probe"]
