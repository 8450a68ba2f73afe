"""The library's façade: what the CLI, the Spark job and the tail sidecar call.

    import gtidx
    with gtidx.open("/var/lib/mysql/binlogs") as logs:     # a file, a directory or master-bin.index
        logs.locate("0-1-100")            # Location(file, start, end, resume, ...)
        logs.state_at("master-bin.000042", 1234)           # StateAt: as BINLOG_GTID_POS
        logs.replica_start("0-1-100,1-2-50")               # ReplicaStart: where a replica begins

The one-shot entry points (``open_binlogs``, ``seek``, ``seek_many``,
``state_at``, ``states_at``, ``probe``, ``at_time``, ``show``, ``scan``) list
the binlogs they are given once (``series.listing.list_series``) and pick the
series by their flavor (``series_class``): ``series.mariadb.BinlogSeries`` or
``series.mysql.MysqlSeries``. Administration (``build``, catalogs, index
facts, ``binlog_status``) is ``gtidx.admin``'s, not imported here: a lookup
never loads it. This module exports the library's public names of the
lookups, of ``series`` and of ``inputs``.

Every lookup uses the file's ``.idx`` when it is usable (complete, intact,
current) and otherwise answers by a sequential scan, logging one warning
(logger ``gtidx``); each result says which path answered (``via``). Every
failure is a ``GtidxError``; an argument of the wrong type or form (checked
at each public entry point: ``inputs.as_path``, ``parse_offset``,
``as_gtid``, ``as_position``) is a ``BadInputError``.
"""
from __future__ import annotations

import itertools
import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Iterable, Iterator

from . import storage
from .binlog.mariadb import CHECKSUM_CRC32, Binlog
from .errors import BadInputError, GtidxError, MySQLBinlogError, NotFoundError
from .gtid import Gtid
from .index import format as fmt
from .index.files import index_path, open_index, verify_index
from .index.format import DEFAULT_MAX_RATIO
from .inputs import as_gtid, as_int, as_path, as_position, first_second, format_time, parse_offset, parse_time
from .series.listing import Listing, list_binlogs, list_path, list_series
from .series.mariadb import PASS_PER_BYTE, BinlogSeries
from .series.planner import UNKNOWN, LocatePlan, NoFile, Planner, PlanTable, plan_locate
from .series.results import Location, SeveralHistories, StateAt

if TYPE_CHECKING:
    # Imported where used, not here (a lookup imports only what it needs): show,
    # which imports mysql-replication (only when a group is decoded), and the
    # answers of replica_start, probe, at_time and scan (series.answers).
    from . import show as show_module
    from .binlog.records import Group
    from .series.answers import BinlogInfo, Occurrence, Probe, ReplicaStart, TimePoint

# The answer types of the questions other than where a GTID is and the state
# at an offset, and the places of a GTID logged more than once (Occurrence),
# exported here as the others are: their module is imported
# when one of them is first asked for (PEP 562), not with this one.
_ANSWERS = ("BinlogInfo", "Occurrence", "Probe", "ReplicaStart", "TimePoint")


def __getattr__(name):
    if name in _ANSWERS:
        from .series import answers
        value = getattr(answers, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ANSWERS))


# -- one file -------------------------------------------------------------------------

def binlog_info(path: str | os.PathLike) -> BinlogInfo:
    with Binlog(as_path(path)) as b:
        return _info(b)


def _info(b: Binlog) -> BinlogInfo:
    from .series.answers import BinlogInfo
    mysql = b.flavor == "mysql"
    start = (b.previous_gtids.copy() if b.previous_gtids is not None else None) if mysql else b.start_state.copy()
    return BinlogInfo(b.path, b.size, b.fde.server_version,
                      "CRC32" if b.fde.checksum == CHECKSUM_CRC32 else "NONE",
                      b.growing, start, b.body_start)


def scan(path: str | os.PathLike, storage_options: dict | None = None) -> tuple[BinlogInfo, Iterator[Group]]:
    """The file's facts, and an iterator over its event groups in file order
    (a MySQL binlog's: its transactions, ``binlog.mysql.MysqlGroup``, and its
    Previous_gtids as ``start_state``). The file stays open until the
    iterator is exhausted or closed. ``storage_options``: for a URL."""
    path = as_path(path)
    store = storage.resolve(path, storage_options)[0] if storage_options else None
    try:
        b = Binlog(path, store)
    except MySQLBinlogError as e:
        if e.offset != 4:
            raise
        from .binlog.mysql import MysqlBinlog
        b = MysqlBinlog(path, store)
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


def open_binlogs(path: str | os.PathLike, **kw) -> BinlogSeries:
    """A file, a directory of binlogs or a ``master-bin.index`` (``gtidx.open``):
    a ``BinlogSeries``, or for MySQL binlogs a ``series.mysql.MysqlSeries`` (the
    same lookups: ``locate``, ``state_at``, ``replica_start``)."""
    listing = list_series(path, kw.get("storage_options"), index_root=kw.get("index_root"),
                          catalog=kw.get("use_index", True))
    return series_class(listing.flavor).from_listing(listing, **kw)


def series_class(flavor: str | None) -> type:
    """The series that answers binlogs of ``flavor`` (``listing.list_series``'s):
    the one place the flavor picks the answers. None (not known): MariaDB's,
    whose answers say what they find."""
    if flavor == "mysql":
        from .series.mysql import MysqlSeries
        return MysqlSeries
    return BinlogSeries


def flavor_pick(flavor: str | None, mariadb, mysql):
    """``mysql`` for binlogs of that flavor (``listing.list_series``'s),
    else ``mariadb``: the façade's pick for a layer above it that has one
    thing per flavor (``changes.ChangeSource.source``)."""
    return mysql if flavor == "mysql" else mariadb


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
    listing = list_series(path, storage_options, index_root=index_root)
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
                yield _locate_in_histories(next(iter(pos)), listing, e, False, kw)
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
                    logs = _one_file(path, use_index=use_index, storage_options=storage_options,
                                     index_root=index_root)
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
    with _one_file(as_path(path), **kw) as logs:
        return logs.state_at(logs.files[0], offset)


def probe(path: str | os.PathLike, offset: int, **kw) -> Probe:
    """One-shot: the event boundaries around ``offset`` of one binlog file
    (a path or a URL), as ``BinlogSeries.probe`` (MySQL binlogs: not yet,
    ``MysqlSeries.probe`` says so)."""
    with _one_file(as_path(path), **kw) as logs:
        return logs.probe(logs.files[0], offset)


def _one_file(path: str, **kw):
    """The series of the one binlog ``path`` (``state_at``, ``states_at``,
    ``probe``), of its flavor: listed once (``list_series``), the series
    made of that listing. Its one file is ``path`` itself, as given: a
    directory or ``*.index`` is no binlog, and a path that cannot be listed
    fails where the lookup reads it (after the offset is checked), as it
    always has."""
    listing = list_series(path, kw.get("storage_options"), catalog=False)
    cls = series_class(listing.flavor)
    if listing.error is not None:
        return cls([path], **kw)
    return cls.from_listing(listing.one_file(), **kw)


def at_time(path: str | os.PathLike, when, **kw) -> TimePoint:
    """One-shot ``BinlogSeries.at_time`` over a file, directory or master-bin.index
    (MySQL binlogs: ``MysqlSeries.at_time``)."""
    with open_binlogs(as_path(path), **kw) as logs:
        return logs.at_time(when)


def seek(spec: str, path: str | os.PathLike = ".", *, strict: bool = False, replica: bool = False,
         every: bool = False, storage_options: dict | None = None, index_root=None, history: int | None = None,
         server_uuid: str | None = None, ignore_duplicates: bool = False):
    """``spec`` is one GTID (-> Location; ``every``: see ``BinlogSeries.locate``) or
    a replication position with several domains (-> ReplicaStart). With
    ``replica``, ``spec`` is always a replica's position (-> ReplicaStart), a
    single domain too. MySQL binlogs: ``spec`` is ``uuid:N`` / ``uuid:tag:N``
    or a GTID set, see ``series.mysql``; ``server_uuid``: their server's, for
    a replica start (``MysqlSeries.replica_start``). ``strict`` and
    ``ignore_duplicates``: the MariaDB replica's gtid_strict_mode and
    gtid_ignore_duplicates (``BinlogSeries.replica_start``)."""
    listing = list_series(path, storage_options, index_root=index_root)
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
        return _locate_in_histories(next(iter(pos)), listing, e, every, kw)
    with logs:
        if len(pos) == 1 and not replica:
            return logs.locate(next(iter(pos)), every=every)
        return logs.replica_start(pos, strict=strict, ignore_duplicates=ignore_duplicates)


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
            try:
                with BinlogSeries([as_path(path)], use_index=False, **kw) as logs:
                    b = logs.opened(logs.files[0]).binlog
                    start = _walk_start(b, offset, logs.index_root)
                    return show_module.decode_group(b, _group_at(b, offset, start), schema=schema)
            except MySQLBinlogError as e:
                if e.offset != 4:
                    raise               # a MySQL binlog (its FDE says so): shown by show_mysql
            return _show_mysql(path, offset=offset, schema=schema, **kw)
        if ":" in str(gtid):            # MySQL's uuid:N (a MariaDB GTID has no colon)
            listing = list_series(path, storage_options, index_root=index_root)
            if listing.flavor == "mysql":
                return _show_mysql(listing, gtid=gtid, schema=schema, history=history, **kw)
        g = as_gtid(gtid)
        try:
            listing = list_path(path, storage_options)
            logs = BinlogSeries.from_listing(listing, history=history, **kw)
        except SeveralHistories as e:
            found = _locate_in_histories(g, listing, e, False, kw)
            logs = BinlogSeries.from_listing(listing, history=found.history, **kw)
        with logs:
            loc = logs.locate(g)
            return show_module.decode_group(logs.opened(loc.file).binlog, loc, schema=schema)
    finally:
        if schema is not None:
            schema.close()


def _show_mysql(where, *, gtid=None, offset=None, schema=None, history=None, **kw):
    """``show`` on MySQL binlogs: the transaction of ``gtid`` in the listing
    ``where``, or the one at ``offset`` of the binlog ``where`` (a path)."""
    from . import show_mysql
    from .series.mysql import MysqlSeries
    if offset is not None:
        with MysqlSeries([as_path(where)], use_index=False, **kw) as logs:
            b = logs.opened(logs.files[0])
            start = _walk_start(b, offset, logs.index_root)      # gtidx's MySQL index: records at ends
            return show_mysql.decode_transaction(b, _group_at(b, offset, start), schema=schema)
    with MysqlSeries.from_listing(where, history=history, **kw) as logs:
        loc = logs.locate(gtid)
        return show_mysql.decode_transaction(logs.opened(loc.file), loc, schema=schema)


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
            named = "(anonymous)" if g.gtid is None else g.gtid       # a MySQL anonymous transaction
            raise NotFoundError(f"offset {offset} is not an event boundary (it is inside the event group "
                                f"{named} at {g.start}-{g.end})", path=b.path, offset=offset,
                                hint=f"the group starts at {g.start}")
    raise NotFoundError("no event group at this offset (before the first group, between groups "
                        "or past the last one)", path=b.path, offset=offset,
                        hint="gtidx scan FILE lists the groups")


def _locate_in_histories(g: Gtid, listing: Listing, several: SeveralHistories, every: bool, kw: dict) -> Location:
    """A GTID in binlogs of several histories: looked up in each (with what
    their catalog says, each a BinlogSeries of its own files); the answer
    when exactly one holds it (its ``history`` set), else NotFoundError
    (none) or a BadInputError naming every history that holds it (a GTID
    logged by two servers, or by the same history archived twice: the user
    picks one)."""
    found, missing = [], []
    for h, names in several.groups:
        with BinlogSeries.from_listing(listing, history=h, **kw) as logs:
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


__all__ = ["open_binlogs", "BinlogSeries", "state_at", "scan", "binlog_info",
           "verify_index", "index_path", "list_binlogs", "StateAt", "Location", "Occurrence", "ReplicaStart",
           "TimePoint", "at_time", "parse_time", "format_time", "LocatePlan", "Planner", "plan_locate",
           "BinlogInfo", "seek", "parse_offset", "SeveralHistories",
           "DEFAULT_MAX_RATIO", "fmt", "first_second", "series_class", "flavor_pick", "probe", "seek_many",
           "states_at", "show", "Probe", "PASS_PER_BYTE", "UNKNOWN", "PlanTable", "Listing", "NoFile", "list_series",
           "list_path"]
