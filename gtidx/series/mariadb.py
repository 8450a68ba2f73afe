"""The answers for MariaDB binlogs: ``BinlogSeries`` (``gtidx.open``'s),
where a GTID is (``locate``, ``locate_many``), the state at an offset
(``state_at``), the events around a byte (``probe``), where a replica
starts (``replica_start``) and where a restore to a time stops
(``at_time``). The shell, the open files, the catalog's trust and the facts
learned are its parts (``base``, ``files``, ``trust``, ``facts``)."""
from __future__ import annotations

import os
from collections import OrderedDict
from typing import TYPE_CHECKING

from ..binlog.mariadb import GTID, MAGIC, Binlog
from ..errors import BadInputError, CorruptBinlogError, GtidxError, NotFoundError, ReplicaStartRefused
from ..gtid import BinlogState, Gtid, Position
from ..inputs import as_gtid, as_position, first_second, parse_offset, parse_time
from ..liblog import log
from .base import SeriesShell
from .facts import Facts
from .files import FileCache, SeriesFile
from .planner import LocatePlan, NoFile, Planner, PlanTable
from .results import Location, StateAt
from .trust import CatalogTrust

if TYPE_CHECKING:
    from .. import catalog
    from .answers import Probe, ReplicaStart, TimePoint

# Many GTIDs in one binlog (``locate_many``, Spark's per-file tasks): one
# pass over its groups beats index lookups from this many GTIDs per byte on
# (the two costs are measured by tools/bench lookup and scan: docs/benchmarks.md).
PASS_PER_BYTE = 1 / 131072
# state_at walks on from its last answer in the same file when the offset
# is at most this far past it (less than an index descent costs), rather
# than from the index record before the offset.
_WALK_ON = 16384

# what _find_group answers when its walk sees the GTID's (domain, server) go
# down where the plan assumed it grows: locate plans again with that
_DIPPED = object()

def start_leaves_out(skip: dict, domain: int, server: int, seq: int, strict: bool = False, path=None,
                     offset: int | None = None) -> bool:
    """MariaDB's rule for a replica start, group by group from the start
    file's beginning (``BinlogSeries.replica_start``; ``serve``'s stream
    applies it to what it sends): is the group of GTID (domain, server, seq)
    left out? ``skip``: {domain: the replica's Gtid} of the domains still to
    reach. A domain not in it sends everything; one in it leaves out the
    groups until the requested GTID's server logs a seq at least the
    requested one, and is then reached (removed from ``skip``): equal, that
    group is left out too; greater, it is the first sent, unless ``strict``
    (the replica's gtid_strict_mode): the "hole" refusal (``path`` and
    ``offset``: that group's)."""
    want = skip.get(domain)
    if want is None:
        return False
    if server != want.server or seq < want.seq:
        return True                                # before the replica's position
    del skip[domain]
    if seq > want.seq and strict:
        raise ReplicaStartRefused(
            f"the binlog is missing the GTID {want} requested by the replica (a prior "
            f"and a later seq_no exist, {Gtid(domain, server, seq)} follows), and GTID "
            "strict mode is enabled", reason="hole", gtid=want, path=path, offset=offset)
    return seq == want.seq                         # equal: the replica's last GTID in this domain


class BinlogSeries(FileCache, CatalogTrust, Facts, SeriesShell):
    """An ordered series of one server's binlog files (one file, or the whole
    list of a directory or ``master-bin.index``), answered as one history:
    ``gtidx.open`` returns one. A single file is a ``binlog.Binlog``."""

    _NAME = "BinlogSeries"
    _NAME_HINT = "gtidx.open(path) takes one file, directory or master-bin.index"

    def __init__(self, files: list[str], *, use_index: bool = True, cache: int = 32,
                 storage_options: dict | None = None, store=None, index_root=None):
        super().__init__(files, use_index=use_index, cache=cache, storage_options=storage_options, store=store,
                         index_root=index_root)
        self._open: OrderedDict[str, SeriesFile] = OrderedDict()
        self._bare: OrderedDict[str, Binlog] = OrderedDict()   # opened without their index (_binlog)
        self._start: dict[str, BinlogState] = {}
        self._end = None
        self._stored = None                    # _stored_end's, for one file and size
        self._last_at = None                   # state_at's last answer: ((path, size), offset, state, via)
        self._dips: dict[tuple, set] = {}      # (domain, server) -> files a scan saw it go down in
        self._ranges: dict[tuple, dict] = {}   # (domain, server) -> {file: (lowest, highest) seq}: whole scans
        self._damaged: set = set()             # files already reported as unreadable
        self._planners: dict[tuple, Planner] = {}   # (domain, server) -> its planner (start states, end)
        self._learned: set = set()             # files learned (learn): _ranges has all their pairs
        self._damaged_learn: set = set()       # files learn_all could not walk (not tried again)
        self._catalog: dict[str, catalog.Entry] = {}   # path -> its catalog entry, while trusted
        self.history: int | None = None        # the catalog's history these files are (use_catalog)
        self._distrusted = 0                   # catalog entries found stale so far
        self._listed_same: set = set()         # files whose object a LIST showed to be the entry's (size, ETag)

    # -- lookups ------------------------------------------------------------------
    def state_at(self, file, offset: int) -> StateAt:
        """The binlog state at ``offset`` of ``file``, as BINLOG_GTID_POS gives it.
        NotFoundError when the offset is not the start of an event or the end of
        the file (the server returns NULL). ``offset``: see ``parse_offset``."""
        offset = parse_offset(offset)
        f = self.opened(self.resolve(file))
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
        f = self.opened(self.resolve(file))
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
        from .answers import Probe
        if offset < 4:                 # the magic: before the first event, answered as offset 4
            return Probe(b.path, offset, 0, 0 if offset == 0 else 4, state if known else None, None, via)
        from ..binlog.probe import walk_to
        r = walk_to(b, start, state if known else None, offset)
        return Probe(b.path, offset, r.before, r.after, r.state, r.damaged, via)

    def _apply(self, f: SeriesFile, state: BinlogState, start: int, target: int, via: str):
        """(state at ``target`` or None if it is not a boundary, via)."""
        try:
            return (state if f.binlog.apply_until(state, start, target) else None), via
        except CorruptBinlogError:
            if via != "index":
                raise
        # The scan from an index record broke: the index does not match this
        # binlog after all. Answer from the start of the file.
        f.fall_back(f"scan from the record at {start} broke (stale index)")
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
            stale = self._distrusted       # catalog entries found stale so far: another, and the plan was wrong
            plan = self._plan(g)
            found = self._search(g, plan)
            settled = self._settled(g, plan, found)
            if not settled or self._distrusted != stale:
                continue                   # what the search showed changes the plan: plan again
            if isinstance(found, Location):
                return found
            # The start states cannot show a seq_no that stepped back and
            # recovered inside one binlog: "not here" is certain only once
            # every binlog is learned (once per BinlogSeries).
            miss = miss or found
            if not self.learn_all():
                raise miss from None

    def _search(self, g: Gtid, plan: LocatePlan | NoFile) -> Location | NotFoundError | None:
        """Search the files of ``plan`` for ``g``: its Location, the
        NotFoundError saying why it is not there, or None when a walk saw
        its (domain, server) go down where the plan assumed it grows (the
        dip is noted: plan again). An unreadable binlog's error is raised."""
        if isinstance(plan, NoFile):
            return self._not_here(f"GTID {g}", plan.reason)
        try:
            if not plan.monotone:
                return self._locate_all(g, plan)
            return self._locate_once(g, plan)
        except NotFoundError as e:
            return e

    def _settled(self, g: Gtid, plan: LocatePlan | NoFile, found: Location | NotFoundError | None) -> bool:
        """Does the answer ``found`` stand, with what learning around it
        shows? None (a dip seen) does not. An earlier copy of a GTID found by
        a monotonic plan may hide where the seq stepped back and recovered
        inside a binlog: the answer stands once every binlog up to its own
        is learned and the plan, made again with what that showed, has no
        earlier file left to search. Later occurrences are listed where what
        the later binlogs' indexes stored shows them (no walk)."""
        if found is None:
            return False
        if not isinstance(found, Location) or not plan.monotone:
            return True
        k = self.files.index(found.file)
        before = self.learn(self.files[:k + 1])
        after = self.learn(self.files[k + 1:], walk=False)
        if not (before or after):
            return True
        again = self._plan(g)
        return not (isinstance(again, NoFile) or not again.monotone or
                    not {i for i in again.files if i < k} <= set(plan.files))

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
        self.learn(self.files)
        per_file: dict[int, list] = {}
        tables: dict = {}               # (domain, server) -> its PlanTable: _plan for all its GTIDs
        others = []
        for g in wanted:
            key = (g.domain, g.server)
            table = tables.get(key)
            if table is None:
                table = tables[key] = PlanTable(*self._plan_inputs(key))
            plan = table.plan(g.seq)
            if isinstance(plan, NoFile) or not plan.monotone or len(plan.files) != 1:
                others.append(g)
            else:
                per_file.setdefault(plan.files[0], []).append(g)
        for g in others:
            one(g)
        for i, gs in sorted(per_file.items()):
            path = self.files[i]
            try:
                f = self.opened(path)
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

    def _locate_once(self, g: Gtid, plan: LocatePlan) -> Location | None:
        """Monotonic (domain, server): the GTID is in at most one file, once.
        None: a walk saw the pair go down (noted in ``_dips``): plan again."""
        failed = None
        for i in plan.files:
            path = self.files[i]
            try:
                f = self.opened(path)
                start, _, via = f.record(lambda r: r.search(lambda _, st: not st.has_logged(g)))
                loc = self._find_group(f, g, start, None, via)
                if loc is None and start > f.binlog.body_start:
                    # the descent may have passed the group if the seq dipped
                    # inside this file: look in the part it skipped
                    loc = self._find_group(f, g, f.binlog.body_start, start, "scan")
            except GtidxError as e:
                failed = failed or e
                self._warn_damaged(path, e)
                continue
            if loc is _DIPPED:
                return None
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
                f = self.opened(path)
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
        if len(found) == 1:
            return found[0]
        from .answers import Occurrence
        return found[0]._replace(occurrences=tuple(Occurrence(x.file, x.start, x.end) for x in found))

    def _find_group(self, f: SeriesFile, g: Gtid, start: int, stop: int | None,
                    via: str) -> Location | object | None:
        """The first group of ``g`` in [start, stop), None when there is none;
        ``_DIPPED`` when the walk sees the GTID's (domain, server) go down
        (noted in ``_dips``: the file is not monotonic for it after all)."""
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
                    return _DIPPED
                prev = seq
        return None

    def _scan_for(self, f: SeriesFile, g: Gtid) -> list[Location]:
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

    def replica_start(self, position: Position | str, *, strict: bool = False,
                      ignore_duplicates: bool = False) -> ReplicaStart:
        """Where the server starts sending to a replica at ``position`` (one GTID
        per domain), as MariaDB's binlog dump does it:

        * each requested GTID must be in the binlog (the latest state has its
          (domain, server) at that seq or later) or its domain must be absent;
          otherwise "not in the master's binlog" ("diverged" when the domain
          went past the seq on another server), except, with
          ``ignore_duplicates`` (the replica's gtid_ignore_duplicates), a GTID
          whose seq is above the domain's last: the replica may have it from
          another source, and the domain's groups are skipped while they wait
          for it;
        * the file is the newest whose GTID_LIST state is before the position
          (none: the position is older than every file, binlogs purged);
        * the server reads that file from offset 4, its start (``ReplicaStart``);
        * per domain, groups are skipped until the requested GTID's server logs
          a seq at least the requested one: equal is skipped too, greater is
          the first sent (with ``strict``, the replica's gtid_strict_mode, a
          greater seq is the "hole" error, ``ReplicaStartRefused`` with the
          reason "hole" and that group's file and offset: the server sends
          what comes before it, then the error); domains whose requested GTID the
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
            if ignore_duplicates and latest.last(g.domain).seq < g.seq:
                continue
            diverged = latest.last(g.domain).seq >= g.seq
            raise ReplicaStartRefused(
                f"connecting replica requested to start from GTID {g}, which is not in the "
                f"master's binlog{' (the replica has probably diverged: the binlog has higher seq_no)' if diverged else ''}",
                reason="diverged" if diverged else "absent", gtid=g, hint=f"latest state {latest or '(empty)'}")
        path = next((p for p in reversed(self.files) if self._start_before(p, pos)), None)
        if path is None:
            raise ReplicaStartRefused(
                "could not find the GTID state requested by the replica in any binlog file: the "
                "replica's position is too old and the binlogs it needs have been purged", reason="purged",
                hint=f"earliest state {self.start_state(self.files[0]) or '(empty)'}")
        f = self.opened(path)
        offset, state, via = f.record(lambda r: r.before_position(pos))
        if offset > f.binlog.body_start and not self._skip_safe(f, path, pos, offset):
            # seq_no went back in this file: the record's state hides where to stop
            offset, state, via = (*f.start_record(), "scan")
        first = self._first_sent(path, offset, pos.skipped_from(state), strict, via)
        start = f.binlog.start_state.copy()
        from .answers import ReplicaStart
        return ReplicaStart(pos, path, len(MAGIC), start, Position(pos.skipped_from(start).values()), first, via)

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

    def _skip_safe(self, f: SeriesFile, path: str, pos: Position, offset: int) -> bool:
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
            f = self.opened(self.files[i])
            start = max(offset, f.binlog.body_start) if self.files[i] == path else None
            for begin, end, (ts, server, seq, domain, _) in f.binlog.group_spans(start):
                if not start_leaves_out(skip, domain, server, seq, strict, f.path, begin):
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
        from .answers import TimePoint
        t = parse_time(when)
        first = first_second(t)         # a group's whole second is at or after t from this one on
        for path in self.files:
            if path != self.files[-1] and self.older(path, first):
                continue
            f = self.opened(path)
            start, via = self._time_skip(f, first)
            if start is None:
                continue
            for begin, _, (ts, server, seq, domain, _) in f.binlog.group_spans(start):
                if ts >= first:
                    at = self.state_at(path, begin)
                    return TimePoint(t, path, begin, Gtid(domain, server, seq), at.position, ts,
                                     "index" if via == "index" and at.via == "index" else "scan")
        last = self.opened(self.files[-1])
        end = last.binlog.complete_end(last.binlog.body_start if last.reader is None else
                                       last.record(lambda r: r.last_record())[0])
        return TimePoint(t, last.path, end, None, self.end_state().position(), None,
                         "index" if last.reader is not None else "scan")

    def older(self, path: str, first: int) -> bool:
        """Does the catalog say every group of ``path`` is older than the
        second ``first`` (``first_second``; its ``max_timestamp``)? The file
        is then not opened: a closed binlog is taken as its entry describes
        it, as the planner takes its seq ranges (the newest binlog is always
        opened: it may have grown)."""
        entry = self._catalog.get(path)
        top = entry.raw.get("max_timestamp") if entry is not None else None
        return top is not None and top < first and not entry.raw.get("in_use")

    def _time_skip(self, f: SeriesFile, first: int) -> tuple[int | None, str]:
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
            f.fall_back(f"index failed: {e}")
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
