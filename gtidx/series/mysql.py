"""The three answers for MySQL binlogs: where a GTID is, the GTID set at an
offset, where an auto-positioned replica starts.

``api``'s entry points (``seek``, ``state_at``, ``states_at``, ``seek_many``,
``open_binlogs``) list the binlogs they are given once and read their flavor
(``series.listing.list_series``: every local file's FORMAT_DESCRIPTION, in
an object store the newest object's) and hand MySQL's to this module; local
files mixing MariaDB and MySQL binlogs are refused there, an object of the
other flavor when it is read (``_series_error``). The
answers are typed as ``api``'s (``Location``, ``ReplicaStart``) with MySQL's
values in them (``MysqlGtid``, ``GtidSet``), and ``MysqlStateAt`` for a set at
an offset:

* ``MysqlSeries.locate(g)``: the transaction of ``uuid:N`` / ``uuid:tag:N``.
  The file holding it is the one whose Previous_gtids lacks it and whose
  successor's has it (the last file: the set after it); that file is walked
  (``MysqlBinlog.groups``) from its start or from an index record
  (``_start_for_gtid``). A GTID set holds a GTID once: there is one
  occurrence.
* ``MysqlSeries.state_at(file, offset)``: the file's Previous_gtids plus every
  GTID whose GTID event lies wholly before ``offset``; NotFoundError (the
  CLI's null, exit 1) inside an event or past the end. Offsets 0 to 4 answer
  as offset 4 (as ``pos`` does for MariaDB).
* ``MysqlSeries.replica_start(set)``: MySQL's auto-position
  (``Binlog_sender::check_start_file``, ``find_first_log_not_in_gtid_set``,
  ``send_events``): refused when the replica has GTIDs these binlogs lack
  (``ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE``; the server checks its own
  UUID's only: ``server_uuid``) or lacks some of the first file's
  Previous_gtids (``ER_SOURCE_HAS_PURGED_REQUIRED_GTIDS``); the start file
  is the newest whose Previous_gtids is a subset of the replica's set; from
  its start every transaction whose GTID is in the set is skipped, the first
  other is the first sent; an anonymous transaction met on the way is the
  server's ``ER_CANT_REPLICATE_ANONYMOUS_WITH_AUTO_POSITION``.
* ``MysqlSeries.probe(file, offset)``: MariaDB's checked walk (``binlog.probe``).

The index: each per-file walk starts at ``(offset, set there, via)``: the
file's index record (``index.mysql.MysqlIndexReader``: ``at_offset``, ``before_gtid``)
when usable and an event of the file (CRC checked), else the file's start.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from typing import Iterable, Iterator, NamedTuple

from ..inputs import parse_offset
from .base import SeriesShell
from .listing import Listing
from .answers import Probe, ReplicaStart
from .mysqlcat import MysqlCatalogUse
from .results import Location
from ..binlog.mariadb import HEADER_LEN, TYPE_LENGTH
from ..errors import (BadInputError, GtidSyntaxError, GtidxError, MySQLBinlogError, NotFoundError,
                     ReplicaStartRefused, UnsupportedBinlogError, quoted)
from ..index.files import open_index
from ..liblog import log
from ..binlog.mysql import GTID_LOG, GTID_TAGGED, MysqlBinlog
from ..mysqlgtid import GtidSet, MysqlGtid


_GTID_EVENTS = (GTID_LOG, GTID_TAGGED)      # events that give a transaction its GTID


class MysqlStateAt(NamedTuple):
    """The GTID set executed at ``offset`` of ``file`` (``gtidx pos``)."""
    file: str
    offset: int
    state: GtidSet
    via: str                 # "index" or "scan"

    @property
    def position(self) -> GtidSet:
        """The set (MySQL has one kind of position: a GTID set)."""
        return self.state


class MysqlProbe(Probe):
    """``Probe`` on a MySQL binlog: ``state`` the GTID set at ``before``, also its ``position``."""
    __slots__ = ()
    position = MysqlStateAt.position


def _series_error(e: UnsupportedBinlogError, path: str) -> UnsupportedBinlogError:
    """A MariaDB binlog met in a MySQL series (a file that changed since the
    flavor was read, or a URL's): the mix, in one line."""
    return UnsupportedBinlogError(f"a MariaDB binlog among MySQL binlogs: {e.message}", path=path,
                                  hint="give the files of one server (a directory or binlog.index of its own)")


def _gtid(value) -> MysqlGtid:
    if isinstance(value, MysqlGtid):
        return value
    try:
        return MysqlGtid.parse(value)
    except GtidSyntaxError as e:
        raise _mariadb_text(value, e) from None


def _gtid_set(value) -> GtidSet:
    if isinstance(value, GtidSet):
        return value
    if isinstance(value, MysqlGtid):
        return GtidSet([value])
    try:
        return GtidSet.parse(value)
    except GtidSyntaxError as e:
        raise _mariadb_text(value, e) from None


def _mariadb_text(value, err: GtidSyntaxError) -> GtidSyntaxError:
    """A MariaDB GTID or position given for MySQL binlogs: say so."""
    from ..gtid import Position
    try:
        Position.parse(value)
    except GtidSyntaxError:
        return err
    return GtidSyntaxError(f"{quoted(value)} is a MariaDB GTID or position (domain-server-seq), and these "
                           "are MySQL binlogs", hint="a MySQL GTID is uuid:N or uuid:tag:N, e.g. "
                                                     "3e11fa47-71ca-11e1-9e33-c80aa9429562:5")


# -- a series of one server's MySQL binlogs -------------------------------------------------------

class MysqlSeries(MysqlCatalogUse, SeriesShell):
    """An ordered series of one MySQL server's binlog files (one file, or the
    list of a directory or ``binlog.index``), answered as one history."""

    _NAME = "MysqlSeries"
    FLAVOR = "mysql"

    def __init__(self, files: list[str], *, use_index: bool = True, cache: int = 32,
                 storage_options: dict | None = None, store=None, index_root=None):
        super().__init__(files, use_index=use_index, cache=cache, storage_options=storage_options, store=store,
                         index_root=index_root)
        self._indexes: dict[str, tuple] = {}      # path -> ((path, size), IndexStatus)
        self._open: OrderedDict[str, MysqlBinlog] = OrderedDict()
        self._prev: dict[str, GtidSet | None] = {}
        self.init_catalog()

    def close(self) -> None:
        for _, status in self._indexes.values():
            status.close()
        self._indexes.clear()
        for b in self._open.values():
            b.close()
        self._open.clear()

    # -- files --------------------------------------------------------------------------------
    def opened(self, path: str) -> MysqlBinlog:
        """The open binlog of ``path`` (one of the series' files), opened now
        if it is not."""
        b = self._open.get(path)
        if b is not None:
            self._open.move_to_end(path)
            return b
        try:
            head = self.head(path)
            b = MysqlBinlog(path, self.store) if head is None else MysqlBinlog(path, self.store, head)
        except UnsupportedBinlogError as e:
            if isinstance(e, MySQLBinlogError) or e.offset != 4 or "MariaDB" not in e.message:
                raise
            raise _series_error(e, path) from None
        self._open[path] = b
        if len(self._open) > self._cache:
            self._open.popitem(last=False)[1].close()
        entry = self._catalog.get(path)
        if entry is not None:
            why = entry.problem(b)
            if why:
                self._distrust(path, why)
        return b

    def previous_gtids(self, path: str) -> GtidSet:
        """The file's Previous_gtids (cached; not a copy: do not change it).
        A file without one (MySQL 5.6 with GTIDs off) is a MySQLBinlogError:
        the set before it is unknown."""
        path = self.resolve(path)
        if path not in self._prev:
            self._prev[path] = self.opened(path).previous_gtids
        prev = self._prev[path]
        if prev is None:
            raise MySQLBinlogError("a MySQL binlog without a Previous_gtids event (MySQL 5.6 with gtid_mode=OFF?): "
                                   "the GTID set before it is unknown", path=path, offset=4,
                                   hint="gtidx answers GTID questions on binlogs written with GTIDs")
        return prev

    # -- the index hook -------------------------------------------------------------------------
    def index_reader(self, path: str):
        """The MySQL index reader of ``path`` (``index.mysql.MysqlIndexReader``:
        ``at_offset``, ``before_gtid``), or None when it has no usable index
        (said once per file, as for MariaDB binlogs: the walk answers).
        Judged as every index is (``index.files.open_index``: magic, flavor,
        fingerprint, tail), once per file and size."""
        b = self.opened(path)
        key = (path, b.size)
        got = self._indexes.get(path)
        if got is None or got[0] != key:
            if got is not None:
                got[1].close()
            status = open_index(b, index_root=self.index_root)
            if not status.usable:
                log.warning("%s: no usable index (%s: %s); answering by scan", path, status.state, status.reason)
            got = self._indexes[path] = (key, status)
        status = got[1]
        # a partial index of a file still written (HotIndex) answers offsets only: a GTID is then walked for
        reader = status.reader if status.usable else None
        return reader if reader is not None and hasattr(reader, "before_gtid") else None

    def _from_record(self, path: str, search) -> tuple[int, GtidSet, str]:
        """(offset, set there, via) to walk ``path`` from: the index record
        ``search(reader)`` picks when it checks out, else the file's start."""
        b = self.opened(path)
        reader = self.index_reader(path) if self.use_index else None
        if reader is not None:
            try:
                rec = search(reader)
            except GtidxError as e:
                log.warning("%s: index failed (%s); answering by scan", path, e)
            else:
                # the walks' windows run to the file's end: the check reads what they read first
                if rec is not None and rec[0] > b.body_start and b.event_ok(rec[0], b.size):
                    return rec[0], rec[1].copy(), "index"
                if rec is None or rec[0] <= b.body_start:
                    return b.body_start, self.previous_gtids(path).copy(), "index"
                log.warning("%s: index record at offset %d is not an event (stale index); answering by scan",
                            path, rec[0])
        return b.body_start, self.previous_gtids(path).copy(), "scan"

    def _start_for_offset(self, path: str, target: int) -> tuple[int, GtidSet, str]:
        """Where a walk to ``target`` starts: the last index record at or before it, else the file's start."""
        return self._from_record(path, lambda r: r.at_offset(target))

    def _start_for_gtid(self, path: str, g: MysqlGtid) -> tuple[int, GtidSet, str]:
        """Where a walk looking for ``g`` starts: the last index record whose set lacks it, else the start."""
        return self._from_record(path, lambda r: r.before_gtid(g))

    # -- the set at an offset --------------------------------------------------------------------
    def state_at(self, file, offset) -> MysqlStateAt:
        """The GTID set at ``offset`` of ``file``: its Previous_gtids plus
        every GTID whose GTID event lies wholly before ``offset``.
        NotFoundError inside an event (or the magic's bytes 1-3 are not: they
        answer as 4) or past the end of the file."""
        offset = parse_offset(offset)
        path = self.resolve(file)
        b = self.opened(path)
        if offset > b.size:
            raise NotFoundError(f"offset {offset} is past the end of the file (size {b.size})",
                                path=b.path, offset=offset)
        prev = self.previous_gtids(path)
        if offset <= b.body_start:
            # the preamble: FDE and Previous_gtids, nothing executed in between
            if offset <= 4 or offset in (4 + b.fde.length, b.body_start):
                return MysqlStateAt(b.path, offset, prev.copy(), "scan")
            raise NotFoundError("not the start of an event", path=b.path, offset=offset)
        start, cur, via = self._start_for_offset(path, offset)
        if offset == b.size and not b.growing:
            b.complete_end(start)         # a closed binlog cut short: its end is not an answer
        if not self._walk(b, start, cur, offset):
            raise NotFoundError("not the start of an event", path=b.path, offset=offset,
                                hint="inside an event, or in a last event not yet whole")
        return MysqlStateAt(b.path, offset, cur, via)

    def probe(self, file, offset) -> MysqlProbe:
        """``BinlogSeries.probe`` on a MySQL binlog (``binlog.probe.walk_to``, MySQL's event types);
        the set at ``before`` (None: no Previous_gtids, or damaged bytes before)."""
        offset = parse_offset(offset)
        path = self.resolve(file)
        b = self.opened(path)
        if offset > b.size:
            raise BadInputError(f"offset {offset} is past the end of the file (size {b.size})", path=b.path)
        start, state, via = 4, None if b.previous_gtids is None else b.previous_gtids.copy(), "scan"
        if offset > b.body_start and b.previous_gtids is not None:
            start, state, via = self._start_for_offset(path, offset)
        if offset < 4:                 # the magic: before the first event, answered as offset 4
            return MysqlProbe(b.path, offset, 0, 0 if offset == 0 else 4, state, None, via)
        from ..binlog.probe import walk_to
        r = walk_to(b, start, state, offset, gtids=(_GTID_EVENTS, b.add_gtid))
        return MysqlProbe(b.path, offset, r.before, r.after, r.state, r.damaged, via)

    def _walk(self, b: MysqlBinlog, start: int, cur: GtidSet, target: int) -> bool:
        """Add to ``cur`` every GTID whose event lies in [start, target),
        walking the event headers from the boundary ``start`` (a moving
        window, as ``Binlog.complete_end``) no further than ``target``. True
        when ``target`` is an event boundary (or the end of the complete
        events); a length below a header, or a closed file's event running
        past its end, is corruption."""
        size = b.size
        w = b.window(start, size)
        mm, base = w.view, start
        off = start
        while off < target:
            if off + HEADER_LEN > size:
                if b.growing:
                    return False
                raise b.corrupt(f"{size - off} trailing bytes after the last event of a closed binlog "
                                "(truncated?)", off)
            if off + HEADER_LEN > base + len(mm):
                mm, base = w.move(off), off
            etype, ln = TYPE_LENGTH.unpack_from(mm, off - base)
            if ln < HEADER_LEN:
                raise b.corrupt(f"event length {ln} is below the {HEADER_LEN}-byte header", off)
            if off + ln > size:
                if b.growing:
                    return False          # the event being written
                raise b.corrupt(f"event of length {ln} runs past the end of the closed binlog "
                                f"(file size {size})", off)
            if etype in _GTID_EVENTS and off + ln <= target:
                cur.add(*b.gtid_at(off, etype, ln).gtid)
            off += ln
        return off == target

    # -- a GTID ------------------------------------------------------------------------------
    def locate(self, gtid, *, every: bool = False) -> Location:
        """The transaction of ``gtid`` (``uuid:N`` or ``uuid:tag:N``).
        NotFoundError when these binlogs do not hold it: purged (the first
        file's Previous_gtids has it), never written (the set after the last
        file lacks it), or in a Previous_gtids without a transaction (added by
        ``SET GTID_PURGED``). ``every``: accepted (a GTID is logged once)."""
        g = _gtid(gtid)
        files = self.files
        i = holder(_Prevs(self), g)
        if i is None:
            raise self._not_here(g, "purged: the first binlog's Previous_gtids holds it")
        path = files[i]
        b = self.opened(path)
        offset, _, via = self._start_for_gtid(path, g)
        for grp in b.transactions(offset if offset > b.body_start else None):
            if grp.gtid == g:
                return Location(g, b.path, grp.start, grp.end, grp.end, grp.timestamp, via)
        raise self._not_here(g, f"{os.path.basename(files[i + 1])}'s Previous_gtids holds it, but no "
                             f"transaction of {os.path.basename(path)} has it (SET GTID_PURGED?)"
                             if i + 1 < len(files) else "never written: the last binlog ends without it")

    def locate_many(self, gtids, **_) -> dict:
        """``{gtid: Location or the GtidxError locate raises}`` (keyed by the
        ``MysqlGtid``; text that does not parse: by the text). The GTIDs of
        one file are found by one pass over its transactions; the others
        (purged, not where the Previous_gtids say) go through ``locate``."""
        out: dict = {}
        per_file: dict[int, set] = {}
        prevs = _Prevs(self)
        for x in gtids:
            try:
                g = _gtid(x)
                i = holder(prevs, g)
            except GtidxError as e:
                out[x] = e
                continue
            if i is not None:
                per_file.setdefault(i, set()).add(g)
        for i, want in sorted(per_file.items()):
            try:
                b = self.opened(self.files[i])
                via = "scan"
                for grp in b.transactions():
                    if grp.gtid in want:
                        out[grp.gtid] = Location(grp.gtid, b.path, grp.start, grp.end, grp.end, grp.timestamp, via)
                        want.discard(grp.gtid)
                        if not want:
                            break
            except GtidxError:
                pass                    # each GTID's own lookup says what failed
        for x in gtids:
            try:
                g = _gtid(x)
            except GtidxError:
                continue
            if g not in out:
                try:
                    out[g] = self.locate(g)
                except GtidxError as e:
                    out[g] = e
        return out

    def _not_here(self, g: MysqlGtid, why: str) -> NotFoundError:
        """"Not in these binlogs", with what the first Previous_gtids and the
        set after the last binlog hold of ``g``'s UUID (sets can be long)."""
        def of_uuid(s: GtidSet) -> str:
            return GtidSet.from_intervals(iv for iv in s.intervals() if iv[0] == g.uuid).one_line() or "nothing"
        try:
            earliest = of_uuid(self.previous_gtids(self.files[0]))
        except GtidxError:
            earliest = "(unknown)"
        try:
            latest = of_uuid(self.end_set())
        except GtidxError:
            latest = "(unknown)"
        return NotFoundError(f"GTID {g} is not in these binlogs ({why})",
                             hint=f"of {g.uuid}, the first Previous_gtids holds {earliest}; the set after the "
                                  f"last binlog {latest}")

    # -- an auto-positioned replica -------------------------------------------------------------
    def replica_start(self, gtid_set, *, strict: bool = False, server_uuid: str | None = None) -> ReplicaStart:
        """Where MySQL's auto-position starts a replica whose executed set
        (the set it sends: gtid_executed plus what it received) is
        ``gtid_set``: the start file, the Previous_gtids there (``state``),
        the GTIDs it skips from there on (``skip``: the set minus that
        Previous_gtids) and the first transaction sent (``first``, None: the
        replica is up to date). ``offset`` is 4: the server reads the start
        file from its beginning. Refused as the server refuses (NotFoundError,
        exit 1): GTIDs the binlogs lack (of ``server_uuid`` only when given:
        the server checks its own UUID's), purged ones, an anonymous
        transaction on the way. ``strict``: MariaDB's, no meaning here."""
        have = _gtid_set(gtid_set)
        files = self.files
        extra = have - self.end_set()
        if server_uuid is not None:
            # the source refuses the replica's extra GTIDs of its own UUID (any tag); other
            # UUIDs' it lets pass (tests/test_mysql_answers_live.py asks 9.7)
            uuid = _server_uuid(server_uuid)
            extra = GtidSet.from_intervals(iv for iv in extra.intervals() if iv[0] == uuid)
        if extra:
            raise ReplicaStartRefused(
                "the replica has more GTIDs than the source has (ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE): these "
                f"binlogs never logged {extra.one_line()}",
                hint="the source refuses those of its own server_uuid only: give server_uuid "
                     "(seek --server-uuid) to answer as it does" if server_uuid is None else None,
                reason="ahead", gtid=extra)
        lost = self.previous_gtids(files[0])
        if not lost.issubset(have):
            raise self._purged(have, lost)
        path = None
        for p in reversed(files):
            if self.previous_gtids(p).issubset(have):
                path = p
                break
        if path is None:            # cannot happen once the first file's passed; kept as the server has it
            raise self._purged(have, self.previous_gtids(files[0]))
        state = self.previous_gtids(path).copy()
        first = None
        for p in files[files.index(path):]:
            b = self.opened(p)
            self.previous_gtids(p)
            for grp in b.transactions():
                if grp.gtid is None:
                    raise ReplicaStartRefused(
                        "cannot replicate anonymous transaction when AUTO_POSITION = 1 "
                        "(ER_CANT_REPLICATE_ANONYMOUS_WITH_AUTO_POSITION): the source meets an anonymous "
                        "transaction (gtid_mode was not ON) before the first one the replica lacks",
                        path=b.path, offset=grp.start,
                        hint="a replica must start after the last anonymous transaction, or without "
                             "auto-position (file and offset)", reason="anonymous", start=path)
                if grp.gtid not in have:
                    first = Location(grp.gtid, b.path, grp.start, grp.end, grp.end, grp.timestamp, "scan")
                    break
            if first is not None:
                break
        return ReplicaStart(have, path, 4, state, have - state, first, "scan")

    def _purged(self, have: GtidSet, lost: GtidSet) -> NotFoundError:
        return ReplicaStartRefused(
            "cannot replicate because the source purged required binary logs "
            f"(ER_SOURCE_HAS_PURGED_REQUIRED_GTIDS): the replica lacks {(lost - have).one_line()}, which "
            f"the first binlog's Previous_gtids ({os.path.basename(self.files[0])}) holds",
            path=self.files[0], hint="replicate the missing transactions from elsewhere, or provision the "
                                     "replica from a backup", reason="purged", gtid=lost - have)


def _server_uuid(text) -> str:
    """A server_uuid as the model keeps UUIDs (lowercase, dashed)."""
    if not isinstance(text, str):
        raise BadInputError(f"a server_uuid must be text, not {type(text).__name__}")
    try:
        return MysqlGtid.parse(f"{text}:1").uuid
    except GtidSyntaxError:
        raise BadInputError(f"{quoted(text)} is not a server_uuid",
                            hint="e.g. 3e11fa47-71ca-11e1-9e33-c80aa9429562 (SELECT @@server_uuid)") from None


class _Prevs:
    """The Previous_gtids of a series' files as a sequence, each read when first asked for (``holder``)."""

    def __init__(self, logs: MysqlSeries):
        self.logs = logs

    def __len__(self) -> int:
        return len(self.logs.files)

    def __getitem__(self, i: int) -> GtidSet:
        return self.logs.previous_gtids(self.logs.files[i])


def holder(prevs, g: MysqlGtid) -> int | None:
    """The index of the file that holds ``g`` if any does: the newest whose
    Previous_gtids lacks it (``prevs``: each file's, in order; they only
    grow along one server's files, so a bisection reads a few). None: the
    first file's has it (purged)."""
    if g in prevs[0]:
        return None
    lo, hi = 0, len(prevs) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if g in prevs[mid]:
            hi = mid - 1
        else:
            lo = mid
    return lo


def parse_spec(value) -> MysqlGtid | GtidSet:
    """A seek's spec on MySQL binlogs: one GTID, else a GTID set; GtidSyntaxError for neither."""
    try:
        return value if isinstance(value, MysqlGtid) else MysqlGtid.parse(value)
    except GtidSyntaxError:
        return _gtid_set(value)


# -- entry points (api's hand over to these) -------------------------------------------------------

def seek(spec, listing: Listing, *, replica: bool = False, every: bool = False,
         storage_options: dict | None = None, index_root=None, history: int | None = None,
         server_uuid: str | None = None):
    """``api.seek`` on MySQL binlogs (``listing``: as the façade listed them):
    one GTID -> Location; a GTID set (or ``replica``) -> ReplicaStart."""
    with MysqlSeries.from_listing(listing, storage_options=storage_options, index_root=index_root,
                                  history=history) as logs:
        return _answer(logs, spec, replica, every, server_uuid)


def _answer(logs: MysqlSeries, spec, replica: bool, every: bool = False, server_uuid: str | None = None):
    if not replica:
        try:
            g = spec if isinstance(spec, MysqlGtid) else MysqlGtid.parse(spec)
        except GtidSyntaxError:
            pass
        else:
            return logs.locate(g, every=every)
        have = _gtid_set(spec)
        if len(have) == 1:
            return logs.locate(next(iter(have)), every=every)
        return logs.replica_start(have, server_uuid=server_uuid)
    return logs.replica_start(spec, server_uuid=server_uuid)


def seek_many(specs: Iterable, listing: Listing, *, replica: bool = False, storage_options: dict | None = None,
              index_root=None, history: int | None = None, **_) -> Iterator:
    """``api.seek_many`` on MySQL binlogs (``listing``: as listed): each spec's answer or error, in order."""
    with MysqlSeries.from_listing(listing, storage_options=storage_options, index_root=index_root,
                                  history=history) as logs:
        for spec in specs:
            try:
                yield _answer(logs, spec, replica)
            except GtidxError as e:
                yield e
