"""Building ``<binlog>.idx``: one walk of the binlog, the server's layout, a size budget.

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

A lookup never builds: this module (with ``dataclasses``, the writer and the
MySQL binlog reader) is imported by those that do.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from . import format as fmt
from ..binlog.mariadb import Binlog
from ..binlog.mysql import open_binlog
from ..errors import BadInputError, GtidxError
from ..filebuf import ReadFile
from ..gtid import LatestGtids
from .files import MARIADB, IndexRoot, IndexStatus, flavor_of, index_path, open_index, still_written
from .meta import IndexMeta, local_identity, object_etag
from .mysql import FLAVOR as MYSQL_FLAVOR
from .writer import RecordPolicy, write_records

DEFAULT_MAX_RATIO = fmt.DEFAULT_MAX_RATIO
# Page sizes tried when fitting a budget (with the requested one): small
# pages waste less of a tiny index; past 4 KiB the per-page overhead (8 of
# 4096 bytes) no longer matters, and separators grow with the page.
FIT_PAGE_SIZES = (64, 256, 1024, 4096)


@dataclass
class BuildResult:
    """What ``build_index`` did with one binlog."""
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


def server_records(b: Binlog, span_min: int, progress: Callable[[int], None] | None = None) -> list:
    """The records the server would write for this binlog (``RecordPolicy``)."""
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
    index (``index.mysql``) for a MySQL one; the rules here are the same."""
    if not fmt.valid_page_size(page_size):
        raise BadInputError(f"page size {page_size} is outside {fmt.MIN_PAGE_SIZE}..{fmt.MAX_PAGE_SIZE}")
    RecordPolicy(span_min)               # refuses a span_min below 1
    if max_ratio is not None and not 0 < max_ratio <= 1:
        raise BadInputError(f"max ratio must be in (0, 1], not {max_ratio}")
    t0 = time.perf_counter()
    with open_binlog(binlog_path, store) as b:
        flavor = flavor_of(b)
        if out:
            store, target = b.store, out
        else:
            store, target = index_root.place(b) if index_root is not None else (b.store, index_path(b.path))
        result = BuildResult(b.path, target, "built", page_size=page_size, span_min=span_min,
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


def record_identity(binlog_path: str, index: str | None = None) -> str:
    """``_record_identity`` for the index beside a local binlog (or at
    ``index``), judged now (``open_index``): what ``tail`` calls once a
    binlog it finished has been quiet for ``QUIET_S``. Returns what was
    recorded, "" for nothing."""
    with open_binlog(binlog_path) as b:
        target = index or index_path(b.path)
        status = open_index(b, target)
        try:
            return _record_identity(b, b.store, target, status) if status.usable else ""
        finally:
            status.close()


def build_mysql_index(binlog_path, **kw) -> BuildResult:
    """``build_index`` of a MySQL binlog (gtidx's MySQL index,
    ``index.mysql``); refuses any other binlog. ``build_index`` itself picks
    the flavor per file: this is it with the flavor checked."""
    with open_binlog(binlog_path, kw.get("store")) as b:
        if b.flavor != MYSQL_FLAVOR.name:
            raise BadInputError(f"not a MySQL binlog (written by server {b.fde.server_version!r})", path=b.path,
                                hint="build_index indexes any binlog")
    return build_index(binlog_path, **kw)


__all__ = ["build_index", "build_mysql_index", "record_identity", "BuildResult", "DEFAULT_MAX_RATIO",
           "FIT_PAGE_SIZES", "server_records", "coarsen", "fit_budget"]
