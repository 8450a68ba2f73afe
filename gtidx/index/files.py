"""``<binlog>.idx`` files on disk: build one, open one, decide whether to trust it.

Building walks the binlog once, places records with the server's policy
(``RecordPolicy``) and packs them with the server's tree writer, so with the
server's settings the result equals the server's own index record for record.
The file is written under a new temporary name created exclusively (never
through a planted link, see ``safefile``), fsynced and renamed: a crash or
SIGINT never leaves a half index under the real name, nor a temporary file.

Size budget: the finished index must be at most ``max_ratio`` of the binlog.
When the server's layout is bigger (big GTID states: 400 domains make every
record ~6 KB), gtidx keeps fewer records (a subset of the server's, each
carrying the GTIDs of the ones it replaces) and picks the page size that
packs them best, keeping as many records as fit. When not even record 0 fits
(a big state in a tiny binlog), it writes the smallest valid index and says so.

Trust: an index is used only when it is complete (root at the end), its
pages check out, and it is current for this binlog: record 0 must equal the
binlog's GTID_LIST (offset and state), no record may lie past the end, and
the fingerprint gtidx stores with its own indexes (``IndexMeta``: binlog
size and CRC32 of its first and last 64 KiB) must match. Server-written indexes
carry no fingerprint; for those the tail after the last record must look
like what the server's policy leaves there.
"""
from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Callable

from . import format as fmt
from .. import storage
from ..binlog.mariadb import Binlog
from ..errors import BadInputError, CorruptBinlogError, CorruptIndexError, GtidxError, GtidxIOError
from ..filebuf import ReadFile, Source
from ..gtid import LatestGtids
from .meta import XATTR, IndexMeta, IndexState, Progress, local_identity, object_etag, seen_fields
from .reader import HotIndex, IndexReader, PartialIndex

if TYPE_CHECKING:
    from .writer import RecordPolicy    # imported where used: a lookup writes nothing (issue 16)

DEFAULT_MAX_RATIO = fmt.DEFAULT_MAX_RATIO
# Page sizes tried when fitting a budget (with the requested one): small
# pages waste less of a tiny index; past 4 KiB the per-page overhead (8 of
# 4096 bytes) no longer matters, and separators grow with the page.
FIT_PAGE_SIZES = (64, 256, 1024, 4096)


def index_path(binlog_path: str | os.PathLike) -> str:
    return os.fspath(binlog_path) + ".idx"


# -- flavors: what differs between a MariaDB binlog's index and a MySQL one's ---------------

class MariadbFlavor:
    """What the functions here ask of an index flavor, for MariaDB binlogs
    (MariaDB's own format 1.0). MySQL's: ``mysqlindex.FLAVOR``."""

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
    index's magic: {name: flavor}. MySQL's (``mysqlindex``, with its binlog
    and GTID set modules) is imported here, on first use: a MariaDB lookup
    never needs it (issue 16)."""
    from . import mysql as mysqlindex
    return {MARIADB.name: MARIADB, mysqlindex.FLAVOR.name: mysqlindex.FLAVOR}


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
    ``_file`` left out of the repr): defining a dataclass costs more than a
    lookup does, and every lookup imports this module (issue 16)."""

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


def stored_seen(b: Binlog, meta: IndexMeta | None = None, *, checked: bool = False,
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


# -- building ------------------------------------------------------------------------

class BuildResult:
    binlog: str
    index: str
    action: str                  # "built", "skipped"
    reason: str = ""
    records: int = 0
    pages: int = 0
    page_size: int = 0
    span_min: int = 0
    size: int = 0
    binlog_size: int = 0
    seconds: float = 0.0
    server_layout: bool = True   # records and pages as the server would write them
    over_budget: bool = False    # not even the smallest valid index fits max_ratio
    warning: str = ""
    recorded: str = ""           # skipped: what was recorded with the index ("ETag", "identity"; _record_identity)

    @property
    def ratio(self) -> float:
        return self.size / self.binlog_size if self.binlog_size else 0.0


# BuildResult is made a dataclass on first use (``indexfile.BuildResult``,
# ``gtidx.BuildResult``, a build): defining one costs more than a lookup does,
# and lookups, which import this module, never build (issue 16).
_BuildResult = BuildResult
del BuildResult
if TYPE_CHECKING:
    BuildResult = _BuildResult


def _build_result() -> type:
    cls = globals().get("BuildResult")
    if cls is None:
        from dataclasses import dataclass
        cls = globals()["BuildResult"] = dataclass(_BuildResult)
    return cls


def __getattr__(name: str):
    if name == "BuildResult":
        return _build_result()
    if name == "FLAVORS":           # flavors(), as a name
        return flavors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def server_records(b: Binlog, span_min: int, progress: Callable[[int], None] | None = None) -> list:
    """The records the server would write for this binlog (``RecordPolicy``)."""
    from .writer import RecordPolicy
    return RecordPolicy(span_min).records(b, progress)


def coarsen(records: list, span: int, join: Callable = LatestGtids.joined) -> list:
    """A subset of ``records`` at least ``span`` bytes apart, record 0 always
    kept: the server's policy again, over the server's records. Each kept
    record carries the GTIDs of the ones dropped before it (``join``: the
    flavor's), so it still holds the exact state at its offset."""
    out = [records[0]]
    segment: list = []
    previous = 0
    for offset, gtids in records[1:]:
        segment.append(gtids)
        if offset - previous >= span:
            out.append((offset, join(segment)))
            segment = []
            previous = offset
    return out


def _packed_size(records: list, page_size: int, flavor=MARIADB) -> int:
    from .writer import write_records
    return len(write_records(records, page_size, flavor.codec)) * page_size


def fit_budget(records: list, page_size: int, budget: int, flavor=MARIADB):
    """Choose (records, page_size) within ``budget`` bytes, keeping as many
    records as possible. Returns (records, page_size, fits)."""
    full = _packed_size(records, page_size, flavor)
    sizes = set(FIT_PAGE_SIZES) | {page_size}
    if full > 64 * page_size:
        sizes = {page_size}     # small pages only pay off for an index of a few pages
    best = None
    for ps in sorted(sizes):
        if _packed_size(records[:1], ps, flavor) > budget:
            continue
        chosen = _fit_span(records, ps, budget, full, flavor)
        size = _packed_size(chosen, ps, flavor)
        key = (len(chosen), -size)
        if best is None or key > best[0]:
            best = (key, chosen, ps)
    if best is not None:
        return best[1], best[2], True
    # Nothing fits: record 0 alone at the page size that makes it smallest.
    ps = min(FIT_PAGE_SIZES, key=lambda p: (_packed_size(records[:1], p, flavor), p))
    return records[:1], ps, False


def _fit_span(records: list, page_size: int, budget: int, full: int, flavor=MARIADB) -> list:
    """The coarsening (span between kept records) that keeps the most records
    within ``budget``. Size is not monotone in the span: a shorter span may
    keep an early record with a small delta where a longer one keeps a late
    record that carries nearly the whole state. So up to 256 records every
    span that starts at a record is tried; beyond that (where size does grow
    with the records kept) start from the span that would shrink the full
    layout to the budget, bracket by doubling and bisect to 3%: a handful of
    packings even for 4096 records of 400-domain states."""
    last = records[-1][0]
    if len(records) == 1 or last <= 0:
        return records[:1]
    if len(records) <= 256:
        best = records[:1]
        for span in sorted({o for o, _ in records[1:] if o > 0}):
            cand = coarsen(records, span, flavor.join)
            if len(cand) > len(best) and _packed_size(cand, page_size, flavor) <= budget:
                best = cand
        return best

    def attempt(span):
        cand = coarsen(records, span, flavor.join)
        return cand if _packed_size(cand, page_size, flavor) <= budget else None

    guess = max(1, int(last / len(records) * full / budget))
    fits_at, fitting = None, None
    span = guess
    while span <= 2 * last:              # grow until it fits (one record left at the most)
        got = attempt(span)
        if got is not None:
            fits_at, fitting = span, got
            break
        span *= 2
    if fitting is None:
        return records[:1]
    lo = max(1, fits_at // 2)            # may fit too: shrink while it does
    while lo > 1 and attempt(lo) is not None:
        fits_at, fitting = lo, attempt(lo)
        lo //= 2
    hi = fits_at
    while hi - lo > max(1, hi // 32):
        mid = (lo + hi) // 2
        got = attempt(mid)
        if got is not None:
            hi, fitting = mid, got
        else:
            lo = mid
    return fitting


def build_index(binlog_path, *, page_size: int = fmt.DEFAULT_PAGE_SIZE,
                span_min: int = fmt.DEFAULT_SPAN_MIN, max_ratio: float | None = DEFAULT_MAX_RATIO,
                force: bool = False, out: str | None = None,
                progress: Callable[[int], None] | None = None, store=None,
                index_root: IndexRoot | None = None) -> BuildResult:
    """Write ``<binlog>.idx``. Skips a binlog whose index is already valid and
    current (whoever wrote it) unless ``force``; never touches the index of a
    binlog that is still being written (``still_written``) unless ``force``:
    its server or ``gtidx tail`` owns it. ``max_ratio=None`` writes the
    server's layout whatever its size. ``store``: where the binlog and its
    index are (``storage``; by default the one the path's form names).
    ``index_root``: write the index there (``IndexRoot``), not beside.
    The binlog's flavor (its FDE: ``open_binlog``) picks the index's
    (``flavor_of``): MariaDB's format for a MariaDB binlog, gtidx's MySQL
    index (``mysqlindex``) for a MySQL one; the rules here are the same."""
    from .writer import RecordPolicy, write_records
    if not fmt.valid_page_size(page_size):
        raise BadInputError(f"page size {page_size} is outside {fmt.MIN_PAGE_SIZE}..{fmt.MAX_PAGE_SIZE}")
    RecordPolicy(span_min)               # refuses a span_min below 1
    if max_ratio is not None and not 0 < max_ratio <= 1:
        raise BadInputError(f"max ratio must be in (0, 1], not {max_ratio}")
    t0 = time.perf_counter()
    from ..binlog.mysql import open_binlog
    with open_binlog(binlog_path, store) as b:
        flavor = flavor_of(b)
        if out:
            store, target = b.store, out
        else:
            store, target = index_root.place(b) if index_root is not None else (b.store, index_path(b.path))
        result = _build_result()(b.path, target, "built", page_size=page_size, span_min=span_min,
                                 binlog_size=b.size)
        if not force and still_written(b):
            result.action, result.reason = "skipped", ("binlog still being written (its server or gtidx tail "
                                                       "owns its index; --force indexes what is there now)")
            return result
        if not force and store.is_regular(target):      # a link or a FIFO is replaced unread
            status = open_index(b, target, deep=True, store=store)
            there = status.reader
            status.close()
            # an index of ours from before gtidx stored the seq ranges it saw
            # is made again: lookups would walk its binlog for them
            if status.usable and (status.meta is None or (
                    (status.meta.seen() is not None or not flavor.keeps_seen) and not status.meta.legacy)):
                # the index there, as a build would have reported it
                result.action, result.reason = "skipped", "index is valid and current"
                result.records, result.pages = status.checked["records"], status.checked["pages"]
                result.page_size, result.size = there.page_size, there.size
                if status.meta is not None and status.meta.span_min:
                    result.span_min = status.meta.span_min
                result.recorded = _record_identity(b, store, target, status)
                return result
        records, seen = flavor.records(b, span_min, progress)
        pages = write_records(records, page_size, flavor.codec)
        budget = None if max_ratio is None else int(max_ratio * b.size)
        if budget is not None and len(pages) * page_size > budget:
            records, page_size, fits = fit_budget(records, page_size, budget, flavor)
            pages = write_records(records, page_size, flavor.codec)
            result.server_layout = False
            result.page_size = page_size
            if not fits:
                result.over_budget = True
                result.warning = (f"even the smallest valid index ({len(pages) * page_size} bytes: "
                                  f"the {'GTID_LIST' if flavor is MARIADB else 'Previous_gtids'} state "
                                  f"alone) exceeds {max_ratio:.1%} of this {b.size}-byte binlog; wrote that one")
        meta = IndexMeta.of(b, page_size=page_size, span_min=span_min, **seen)
    result.records = len(records)
    result.pages = len(pages)
    result.size = len(pages) * page_size
    store.write_index(target, b"".join(pages), meta, make_dirs=index_root is not None and not out)
    result.seconds = time.perf_counter() - t0
    return result


def _record_identity(b: Binlog, store, target: str, status: IndexStatus) -> str:
    """An index of ours, valid and current, stored without what stands for
    its binlog's content (``binlog_etag``: an object's ETag, a quiet local
    file's identity, ``local_identity``), for instance finished by ``tail``
    while its binlog was still being written: its fingerprint, just checked
    by content, gains it, so that lookups need not read the binlog's first
    and last 64 KiB again. An object: one PUT of its sidecar, bound to the
    index object as it was checked (its ETag). A local file: its xattr (or
    sidecar) rewritten through a descriptor whose fingerprint is still the
    one checked; the identity is the file's at its opening, before its
    content was read (a write since changes it: never trusted then).
    Returns what was recorded ("ETag", "identity"), "" when nothing was (a
    read-only place included: lookups go on checking the content)."""
    meta = status.meta
    if meta is None or meta.binlog_etag is not None or meta.partial or meta.legacy or meta.size != b.size:
        return ""
    if store.remote:
        etag = object_etag(b)
        if etag is None or status.index_etag is None:
            return ""
        return "ETag" if meta.replace(binlog_etag=etag).write_object(store, target,
                                                                       index_etag=status.index_etag) else ""
    identity = local_identity(b, quiet=True)
    if identity is None:
        return ""
    try:
        with ReadFile(target, nofollow=True) as f:
            if IndexMeta.read_fd(f.fd, target) != meta:        # replaced since it was checked
                return ""
            meta.replace(binlog_etag=identity).write(f.fd, target)
    except (OSError, GtidxError):
        return ""
    return "identity"


def record_identity(binlog_path: str) -> str:
    """``_record_identity`` for the index beside a local binlog, judged now
    (``open_index``): what ``tail`` calls once a binlog it finished has been
    quiet for ``QUIET_S``. Returns what was recorded, "" for nothing."""
    from ..binlog.mysql import open_binlog
    with open_binlog(binlog_path) as b:
        target = index_path(b.path)
        status = open_index(b, target)
        try:
            return _record_identity(b, b.store, target, status) if status.usable else ""
        finally:
            status.close()


def build_mysql_index(binlog_path, **kw) -> BuildResult:
    """``build_index`` of a MySQL binlog (gtidx's MySQL index,
    ``mysqlindex``); refuses any other binlog. ``build_index`` itself picks
    the flavor per file: this is it with the flavor checked."""
    from . import mysql as mysqlindex
    from ..binlog.mysql import open_binlog
    with open_binlog(binlog_path, kw.get("store")) as b:
        if b.flavor != mysqlindex.FLAVOR.name:
            raise BadInputError(f"not a MySQL binlog (written by server {b.fde.server_version!r})", path=b.path,
                                hint="build_index indexes any binlog")
    return build_index(binlog_path, **kw)


def verify_index(binlog_path, index: str | None = None) -> dict:
    """Full check: every page, the tree, and every record's state equal to a
    scan of the binlog. Raises CorruptIndexError on the first problem."""
    from ..binlog.mysql import open_binlog
    with open_binlog(binlog_path) as b, b.store.open_file(index or index_path(b.path)) as f:
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


__all__ = ["index_path", "IndexRoot", "open_index", "build_index", "build_mysql_index", "verify_index",
           "read_index", "flavor_of", "flavors", "MARIADB", "still_written", "IndexStatus",
           "IndexState", "IndexMeta", "Progress", "XATTR", "BuildResult", "server_records", "coarsen",
           "fit_budget", "GtidxError"]
