"""``<binlog>.idx`` files on disk: find one, open one, decide whether to trust it.

Trust: an index is used only when it is complete (root at the end), its
pages check out, and it is current for this binlog: record 0 must equal the
binlog's GTID_LIST (offset and state), no record may lie past the end, and
the fingerprint gtidx stores with its own indexes (``IndexMeta``: binlog
size and CRC32 of its first and last 64 KiB) must match. Server-written indexes
carry no fingerprint; for those the tail after the last record must look
like what the server's policy leaves there.

Building one is ``index.build``'s; the flavors (MariaDB's format here, MySQL's
in ``index.mysql``) and ``verify_index`` are shared by both.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from . import format as fmt
from .. import storage
from ..binlog.mariadb import Binlog
from ..errors import BadInputError, CorruptBinlogError, CorruptIndexError, GtidxError, GtidxIOError
from ..filebuf import Source
from ..gtid import LatestGtids
from .meta import XATTR, IndexMeta, IndexState, Progress, seen_fields
from .reader import HotIndex, IndexReader, PartialIndex

if TYPE_CHECKING:
    from .writer import RecordPolicy    # imported where used: a lookup writes nothing


def index_path(binlog_path: str | os.PathLike) -> str:
    return os.fspath(binlog_path) + ".idx"


# -- flavors: what differs between a MariaDB binlog's index and a MySQL one's ---------------

class MariadbFlavor:
    """What the functions here ask of an index flavor, for MariaDB binlogs
    (MariaDB's own format 1.0). MySQL's: ``index.mysql.FLAVOR``."""

    name = "mariadb"
    codec = fmt.MARIADB
    reader = IndexReader
    join = staticmethod(LatestGtids.joined)
    keeps_seen = True           # the fingerprint holds the seq ranges the walk saw (``seen_fields``)
    server_writes = True        # MariaDB 11.4+ writes these indexes itself

    @staticmethod
    def first(b: Binlog) -> tuple:
        """Record 0 as the binlog says it must be: (offset, state)."""
        return fmt.first_record_offset(b), b.start_state

    @staticmethod
    def policy(span_min: int) -> RecordPolicy:
        """The record policy ``gtidx tail`` walks a growing binlog with
        (``first``, ``resume``, ``advance``, ``walked``, ``finished``)."""
        from .writer import RecordPolicy
        return RecordPolicy(span_min)

    @staticmethod
    def apply_until(b: Binlog, state, start: int, target: int) -> bool:
        """``state`` carried from ``start`` to ``target`` (a group boundary)."""
        return b.apply_until(state, start, target)

    @staticmethod
    def records(b: Binlog, span_min: int, progress=None) -> tuple[list, dict]:
        """(the server's records, the fingerprint's extra fields: the seq ranges seen)."""
        from .writer import RecordPolicy
        policy = RecordPolicy(span_min)
        records = policy.records(b, progress)
        return records, seen_fields(policy.finished())

    @staticmethod
    def tail_problem(r: IndexReader, b: Binlog, last: int) -> str:
        return _tail_problem(r, b, last)

    @staticmethod
    def verify(b: Binlog, r: IndexReader, path) -> None:
        _verify_states(b, r, path)


MARIADB = MariadbFlavor()


def flavors() -> dict:
    """The one dispatch on a binlog's flavor (``Binlog.flavor``) and on an
    index's magic: {name: flavor}. MySQL's (``index.mysql``, with its binlog
    and GTID set modules) is imported here, on first use: a MariaDB lookup
    never needs it."""
    from .mysql import FLAVOR as MYSQL
    return {MARIADB.name: MARIADB, MYSQL.name: MYSQL}


def flavor_of(b: Binlog):
    """The index flavor of binlog ``b``."""
    return MARIADB if b.flavor == MARIADB.name else flavors()[b.flavor]


def read_index(source, *, path=None) -> IndexReader:
    """An index reader of the flavor its magic names (a MySQL index's, else
    MariaDB's, which refuses any other magic)."""
    try:
        head = source.pread(len(fmt.MAGIC), 0) if isinstance(source, Source) else source[:len(fmt.MAGIC)]
    except (OSError, GtidxError):
        head = b""                   # the reader says what is wrong with the file
    if bytes(head) != MARIADB.codec.magic:
        for flavor in flavors().values():
            if bytes(head) == flavor.codec.magic:
                return flavor.reader(source, path=path)
    return IndexReader(source, path=path)


class IndexRoot:
    """Indexes kept apart from their binlogs (``--index-dir``, ``index_root=``):
    a local directory or a URL prefix that mirrors where each binlog is,
    whatever path it was reached by: the index of ``s3://bucket/a/b.000001``
    is ``ROOT/bucket/a/b.000001.idx``, that of ``/var/lib/mysql/b.000001``
    ``ROOT/var/lib/mysql/b.000001.idx``. Readers look there first, then
    beside the binlog; ``build`` writes there."""

    def __init__(self, root: str | os.PathLike, storage_options: dict | None = None):
        self.store, self.root = storage.resolve(os.fspath(root), storage_options)

    def place(self, b: Binlog) -> tuple:
        """(store, path) of ``b``'s index under this root."""
        return self.mirror(b.path, ".idx")

    def mirror(self, path: str, suffix: str = "") -> tuple:
        """(store, path) of what belongs to ``path`` (a binlog, a directory)
        under this root, its name followed by ``suffix`` (``"/name"``: a file
        in the mirrored directory)."""
        where = path.split("://", 1)[1] if storage.is_url(path) else os.path.abspath(path)
        return self.store, self.store.join(self.root, (where.strip("/") + suffix).lstrip("/"))


def _places(b: Binlog, index_root: "IndexRoot | None") -> list:
    """Where ``b``'s index may be, in the order readers look."""
    beside = (b.store, index_path(b.path))
    return [index_root.place(b), beside] if index_root is not None else [beside]


# -- which binlog is still being written ------------------------------------------------

_NUMBERED = r"(.+)\.([0-9]+)"            # compiled on first use (re's cache): lookups need it rarely


def still_written(b: Binlog, newest: bool | None = None) -> bool:
    """The one rule for "a server may still be writing this binlog" (its
    index belongs to the server or to ``gtidx tail``, never to ``build``):
    the FDE's IN_USE flag is set and it is the newest binlog of its series.
    A server writes only its newest binlog and clears IN_USE when it closes
    one; an older file that still has IN_USE was left by a server that
    crashed and will never be written again: it is final. ``newest`` is
    given by a caller that listed the series (``tail``: the last file of
    ``master-bin.index``); else no file beside ``b`` with the same name and
    a greater number may exist. A crashed server's newest binlog stays
    "still written" until the server starts again (it then opens a new
    file); ``build --force`` indexes it anyway."""
    if not b.growing:
        return False
    if newest is None:
        newest = not _newer_beside(b.store, b.path)
    return newest


def _newer_beside(store, path: str) -> bool:
    directory, name = store.split(os.fspath(path))
    m = re.fullmatch(_NUMBERED, name)
    if m is None:
        return False
    stem, number = m.group(1), int(m.group(2))
    try:
        names = store.listdir(directory)
    except (OSError, GtidxError):
        return False
    for n in names:
        o = re.fullmatch(_NUMBERED, n)
        if o is not None and o.group(1) == stem and int(o.group(2)) > number:
            return True
    return False


# -- opening -------------------------------------------------------------------------

class IndexStatus:
    """Whether an index can be used for a binlog, and why not.

    A plain class, not a dataclass (its repr and equality are a dataclass's,
    ``_file`` left out of the repr): every lookup imports this module, and a
    lookup does not import ``dataclasses``."""

    _FIELDS = ("path", "state", "reason", "reader", "owner", "partial", "meta", "index_etag", "checked", "_file")

    def __init__(self, path: str, state: IndexState, reason: str = "", reader: IndexReader | None = None,
                 owner: str = "unknown", partial: bool = False, meta: IndexMeta | None = None,
                 index_etag: str | None = None, checked: dict | None = None, _file: object = None):
        self.path = path
        self.state = state
        self.reason = reason
        self.reader = reader
        self.owner = owner               # "gtidx" (fingerprinted) or "server/unknown"
        self.partial = partial           # complete pages of an index still being written
        self.meta = meta                 # what gtidx stored with it (None: a server's index)
        self.index_etag = index_etag     # an index object's ETag as opened (None: a local file)
        self.checked = checked           # a deep check's counts (IndexReader.check: pages, records, levels)
        self._file = _file               # the open .idx the reader reads

    def __repr__(self) -> str:
        return f"IndexStatus({', '.join(f'{k}={getattr(self, k)!r}' for k in self._FIELDS[:-1])})"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self._FIELDS)

    __hash__ = None

    @property
    def usable(self) -> bool:
        return self.state == IndexState.OK

    def close(self) -> None:
        self.reader = None
        if self._file is not None:
            self._file.close()
            self._file = None


def open_index(b: Binlog, path: str | None = None, *, check_tail: bool = True,
               deep: bool = False, index_root: IndexRoot | None = None, store=None) -> IndexStatus:
    """Open ``b``'s index and judge it; never raises for a bad index.

    Lookups open lazily, as the server does: the header, the root and
    record 0 here, every other page's CRC when a search first reads it (a
    lookup that meets a damaged page falls back to a scan). ``deep`` checks
    every page and the whole tree now (what ``build`` and ``info`` do).

    The file is never mapped (it may shrink under a long-lived reader) and
    never read whole unless small (``IndexReader``); a FIFO or other special
    file ("not a regular file") and running out of memory reading it make it
    "corrupt" with that reason: a scan answers.

    Without ``path``: the index under ``index_root`` when there is one
    there, else the one beside the binlog. ``store``: where ``path`` is
    (default: the binlog's store)."""
    if path is None:
        status = None
        for store, path in _places(b, index_root):
            status = open_index(b, path, check_tail=check_tail, deep=deep, store=store)
            if status.state is not IndexState.MISSING:
                break
        return status
    try:
        f = (store or b.store).open(path)
    except FileNotFoundError:
        return IndexStatus(path, IndexState.MISSING, "no index file")
    except OSError as e:
        return IndexStatus(path, IndexState.MISSING, f"cannot open: {e.strerror}")
    except GtidxIOError as e:
        return IndexStatus(path, IndexState.MISSING, f"cannot open: {e.message}")
    except BadInputError as e:
        return IndexStatus(path, IndexState.CORRUPT, e.message)
    if f.size == 0:
        f.close()
        return IndexStatus(path, IndexState.INCOMPLETE, "empty index file (a writer has not flushed a page yet)")
    meta = IndexMeta.read_of(f)
    status = IndexStatus(path, IndexState.OK, owner="gtidx" if meta else "server/unknown", meta=meta,
                         index_etag=getattr(f, "etag", None), _file=f)
    try:
        _judge(status, b, f, path, meta, check_tail, deep)
    except MemoryError:
        status.state, status.reason = IndexState.CORRUPT, "out of memory reading the index"
    if not status.usable:
        status.close()
    elif status.partial or not status.reader.reads_file:
        f.close()                    # read whole already: the reader needs no file
        status._file = None
    return status


def _judge(status: IndexStatus, b: Binlog, f: Source, path: str, meta: IndexMeta | None,
           check_tail: bool, deep: bool) -> None:
    try:
        status.reader = flavor_of(b).reader(f, path=path)
        if deep:
            status.checked = status.reader.check()
        problem = _staleness(status.reader, b, meta, check_tail)
        if problem:
            status.state, status.reason = IndexState.STALE, problem
    except CorruptIndexError as e:
        status.state = IndexState.INCOMPLETE if getattr(e, "incomplete", False) else IndexState.CORRUPT
        status.reason = e.message + (f" (page {e.page})" if e.page else "")
        if status.state is IndexState.INCOMPLETE and b.growing:
            _hot(status, b, f, path, meta)
    except CorruptBinlogError as e:
        status.state, status.reason = IndexState.STALE, f"binlog does not match the index: {e.message}"


def _hot(status: IndexStatus, b: Binlog, f: Source, path: str, meta: IndexMeta | None) -> None:
    """The index of a binlog still being written has no root yet: use the
    complete leaves on disk (a lookup past them scans the binlog from the last
    one). Written by gtidx tail: its saved progress must match the binlog;
    written by the server: record 0 must match the GTID_LIST."""
    flavor = flavor_of(b)
    try:
        hot = HotIndex(PartialIndex(f, path=path, codec=flavor.codec))
    except CorruptIndexError as e:
        status.reason += f"; no usable complete pages: {e.message}"
        return
    first, last = hot.first_record(), hot.last_offset()
    expected, start = flavor.first(b)
    if first.offset != expected or first.state != start or last > b.size:
        status.state, status.reason = IndexState.STALE, "partial index does not match the binlog"
        return
    if meta is not None and (not meta.partial or not meta.matches(b)):
        status.state, status.reason = IndexState.STALE, "partial index made for another binlog"
        return
    status.state, status.reason, status.reader, status.partial = IndexState.OK, "", hot, True


def _staleness(r: IndexReader, b: Binlog, meta: IndexMeta | None, check_tail: bool) -> str:
    """Why the index does not belong to this binlog as it is now; '' if it does."""
    flavor = flavor_of(b)
    first = r.first_record()
    expected, start = flavor.first(b)
    start_event = "GTID_LIST" if flavor is MARIADB else "PREVIOUS_GTIDS"
    if first.offset != expected:
        return f"record 0 is at offset {first.offset}, the binlog's {start_event} ends at {expected}"
    if first.state != start:
        return f"record 0's state differs from the binlog's {start_event}"
    if meta is not None and not meta.legacy:
        # our fingerprint says which binlog the index was made of: this very
        # one, so its records lie in it (each one a lookup starts from is
        # checked all the same, ``_File.trusted``): no descent to the last
        if meta.size != b.size:
            return f"made for a binlog of {meta.size} bytes, this one has {b.size}"
        if not meta.matches(b):
            return "binlog content differs from the one the index was made for"
        return ""
    last = r.last_offset()
    if last > b.size:
        return f"last record at offset {last} lies past the end of the binlog ({b.size} bytes)"
    if check_tail and not b.growing:
        return flavor.tail_problem(r, b, last)
    return ""


def _tail_problem(r: IndexReader, b: Binlog, last: int) -> str:
    """A server index of a closed binlog: past the last record the server's
    policy places no further record. Its span is at most the gap between the
    last two records (counted here from the last record)."""
    from .writer import RecordPolicy
    prev = r.at_offset(last - 1) if last > 0 else None
    gap = last - prev.offset if prev is not None and prev.offset > 0 else fmt.DEFAULT_SPAN_MIN
    policy = RecordPolicy(gap)
    policy.resume(max(last, b.body_start), ())
    policy.previous = last
    for _ in policy.advance(b, follow=False):
        return (f"index ends at offset {last} but the binlog goes on to {b.size} "
                "(made for a shorter binlog)")
    return ""


def stored_facts(b: Binlog, meta: IndexMeta | None = None, *, checked: bool = False,
                index_root: IndexRoot | None = None):
    """What ``build``/``tail`` saw of ``b`` (``IndexMeta.seen``), stored with
    its index (``meta``, else read from the index beside it), when made of
    this binlog as it is now (its fingerprint checked, unless ``checked``:
    ``open_index`` did): ``(offset, ranges, repeats)``, seen from the start of
    the binlog to ``offset`` (a group boundary); None without."""
    if meta is None:
        for store, path in _places(b, index_root):
            meta = IndexMeta.read(path, store)
            if meta is not None:
                break
        checked = False
    if meta is None or meta.legacy or meta.covers > b.size or (not meta.partial and meta.size != b.size) \
            or not (checked or meta.matches(b)):
        return None
    seen = meta.seen()
    return None if seen is None else (meta.covers, *seen)


def __getattr__(name: str):
    if name == "FLAVORS":           # flavors(), as a name
        return flavors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def verify_index(binlog_path, index: str | None = None, store=None) -> dict:
    """Full check: every page, the tree, and every record's state equal to a
    scan of the binlog. Raises CorruptIndexError on the first problem.
    ``store``: where both are (by default the one the path's form names)."""
    from ..binlog.mysql import open_binlog     # any flavor's binlog; a lookup never verifies
    with open_binlog(binlog_path, store) as b, b.store.open_file(index or index_path(b.path)) as f:
        path = f.path
        flavor = flavor_of(b)
        r = flavor.reader(f, path=path)
        stats = r.check()
        problem = _staleness(r, b, IndexMeta.read(path, b.store), check_tail=True)
        if problem:
            raise CorruptIndexError(f"stale: {problem}", path=path)
        flavor.verify(b, r, path)
        stats["page_size"] = r.page_size
        stats["binlog_size"] = b.size
        stats["index_size"] = r.size
        return stats


def _verify_states(b: Binlog, r: IndexReader, path) -> None:
    """Every record's state equal to the MariaDB walk's at its offset."""
    state = b.start_state.copy()
    pos = b.body_start
    for rec in r.records():
        if rec.offset < pos:
            if rec.offset != b.gtid_list_end or rec.state != b.start_state:
                raise CorruptIndexError(f"record at {rec.offset} does not match the binlog", path=path)
            continue
        if not b.apply_until(state, pos, rec.offset):
            raise CorruptIndexError(f"record offset {rec.offset} is not an event boundary", path=path)
        pos = rec.offset
        if state != rec.state:
            raise CorruptIndexError(f"record at {rec.offset}: state {rec.state} differs from the "
                                    f"binlog's {state}", path=path)


__all__ = ["index_path", "IndexRoot", "open_index", "verify_index", "read_index", "flavor_of", "flavors", "MARIADB",
           "still_written", "stored_facts", "IndexStatus", "IndexState", "IndexMeta", "Progress", "XATTR", "GtidxError"]
