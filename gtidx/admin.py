"""The library's administration of binlogs: building their indexes
(``build``) and catalogs (``build_catalog``, ``load_catalog``), reading an
index (``index_info``, ``index_records``, ``verify``) and where each binlog's
index stands (``binlog_status``). ``gtidx.api`` exports these names too.
"""
from __future__ import annotations

import os
from typing import Callable, Iterator, NamedTuple, TYPE_CHECKING

from . import storage
from .errors import BadInputError, CorruptCatalogError, GtidxError, GtidxIOError, NotFoundError
from .index.files import IndexRoot, IndexState, flavor_of, index_path, open_index, read_index, verify_index
from .inputs import as_int, as_path
from .liblog import log
from .series.listing import catalog_class, list_binlogs, list_series

if TYPE_CHECKING:
    from . import catalog
    from .index.build import BuildResult


class BuildProgress(NamedTuple):
    """Where a ``build`` run stands, as its ``progress`` callback sees it."""
    file: str | None     # the binlog being indexed or just finished (None: before the first file)
    files_done: int      # files finished (built, skipped or failed)
    files: int           # files in the run
    bytes_done: int      # binlog bytes done: finished files whole, the current one as far as read
    bytes: int           # the binlogs' sizes when the run started, summed


def build(paths, *, progress: Callable[[BuildProgress], None] | None = None,
          storage_options: dict | None = None, **kw) -> Iterator[BuildResult | GtidxError]:
    """Build the index of every binlog named by ``paths`` (files, directories,
    .index files), in order. Yields each file's BuildResult, or the
    GtidxError that stopped that file or path (the others still get built);
    the error's ``binlog`` attribute names that file or path.

    ``progress``, if given, is called with a BuildProgress: once when every
    path is listed (the total is the sum of the files' sizes then), as each
    file's indexing advances (every 16 MiB) and as each file ends. Other
    keywords: ``build_index``'s. A path may be a URL (``s3://bucket/prefix/``),
    opened with ``storage_options``: each index is written with one PUT.
    ``index_root`` (a local directory or a URL): write the indexes there,
    mirroring the binlogs' places (``IndexRoot``), not beside them."""
    from .index.build import build_index    # here: a lookup never loads the build (dataclasses, the writer)
    index_root = kw.pop("index_root", None)
    if index_root is not None:
        kw["index_root"] = IndexRoot(as_path(index_root, "index_root"), storage_options)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    elif isinstance(paths, bytes) or not hasattr(paths, "__iter__"):
        raise BadInputError(f"build() takes a path or a list of paths, not {type(paths).__name__}")
    paths = [as_path(p) for p in paths]
    if progress is not None and not callable(progress):
        raise BadInputError(f"progress must be a callable or None, not {type(progress).__name__}")
    for name in ("page_size", "span_min"):
        if name in kw:
            kw[name] = as_int(kw[name], name, 1)
    ratio = kw.get("max_ratio")
    if ratio is not None and (isinstance(ratio, (bool, str)) or not isinstance(ratio, (int, float))):
        raise BadInputError(f"max_ratio must be a number or None, not {type(ratio).__name__}")
    plan = []                           # (path, its files or the error listing it)
    for p in paths:
        try:
            store, where = storage.resolve(p, storage_options)
            plan.append((p, [(f, _size(store, f), store) for f in list_binlogs(where, store=store)]))
        except GtidxError as e:
            e.binlog = p
            plan.append((p, e))
    files = sum(len(x) for _, x in plan if not isinstance(x, GtidxError))
    total = sum(size for _, x in plan if not isinstance(x, GtidxError) for _, size, _ in x)
    done_files = done_bytes = 0
    if progress is not None:
        progress(BuildProgress(None, 0, files, 0, total))
    for p, listed in plan:
        if isinstance(listed, GtidxError):
            yield listed
            continue
        for f, size, store in listed:
            tick = None if progress is None else _file_ticks(progress, f, size, done_bytes, done_files,
                                                             files, total)
            try:
                result = build_index(f, progress=tick, store=store, **kw)
            except GtidxError as e:
                e.binlog = f
                result = e
            done_files, done_bytes = done_files + 1, done_bytes + size
            if progress is not None:
                progress(BuildProgress(f, done_files, files, done_bytes, total))
            yield result
        else:
            if listed:
                failed = _keep_catalog(p, listed, storage_options, kw.get("index_root"))
                if failed is not None:
                    yield failed


def _catalog_of(path, storage_options: dict | None, index_root) -> tuple:
    """(store, the binlogs of ``path``, the catalog's directory, IndexRoot or
    None, the catalog class of their flavor: ``listing.catalog_class``)."""
    listing = list_series(as_path(path), storage_options, catalog=False).checked()
    store, where, files = listing.store, listing.path, listing.files
    directory = store.split(files[0])[0]
    if any(store.split(f)[0] != directory for f in files):
        raise BadInputError("the binlogs listed are in several directories: a catalog describes one",
                            path=where, hint="name the directory (or URL prefix) that holds them")
    root = None if index_root is None else IndexRoot(as_path(index_root, "index_root"), storage_options)
    return store, files, directory, root, catalog_class(listing.flavor)


def _newest_flavor(files: list[str], store) -> str | None:
    """The flavor of the newest of ``files`` that opens (None: none does)."""
    from .binlog.mysql import open_binlog
    for f in reversed(files):
        try:
            with open_binlog(f, store) as b:
                return b.flavor
        except GtidxError:
            continue
    return None


def build_catalog(path: str | os.PathLike, *, storage_options: dict | None = None,
                  index_root=None) -> tuple["catalog.Catalog", dict]:
    """Make the catalog of the binlogs of ``path`` (a directory or URL
    prefix, or its ``master-bin.index``) current and write it (beside them,
    or under ``index_root``): entries still current (size and fingerprint)
    are kept, the others made with one walk of their file (MariaDB's or
    MySQL's catalog: ``catalog_mysql``, by the binlogs' flavor). Returns the
    catalog and the counts {"kept", "walked", "failed"}."""
    store, files, directory, root, kind = _catalog_of(path, storage_options, index_root)
    cat = kind.to_rewrite(store, directory, root, warn=_rewriting) or kind(store, directory, root)
    counts = cat.refresh(files)
    cat.save()
    return cat, counts


def load_catalog(path: str | os.PathLike, *, storage_options: dict | None = None,
                 index_root=None) -> "catalog.Catalog":
    """The catalog of the binlogs of ``path`` as stored (NotFoundError when there is none)."""
    store, files, directory, root, kind = _catalog_of(path, storage_options, index_root)
    cat = kind.load(store, directory, root)
    if cat is None:
        raise NotFoundError("no catalog here", path=directory, hint="gtidx catalog build makes one")
    return cat


def _keep_catalog(p: str, listed: list, storage_options: dict | None, index_root) -> GtidxError | None:
    """After ``build`` of the binlogs of ``p``: the catalog there, when there
    is one, made current (entries of changed files walked again, index
    states updated). A catalog is made only by ``catalog build``: ``build``
    alone writes nothing else (an archive may want indexes only)."""
    from . import catalog
    try:
        store = listed[0][2]
        directory = catalog.directory_of_files(store, [f for f, _, _ in listed])
        if directory is None:
            return None
        try:
            found = catalog.stored(store, directory, index_root)      # build made index_root an IndexRoot
        except CorruptCatalogError as e:
            found = e
        if found is None:
            return None             # no catalog: no binlog opened for its flavor
        kind = catalog_class(_newest_flavor([f for f, _, _ in listed], store))
        try:
            if isinstance(found, CorruptCatalogError):
                raise found
            cat = kind.adopt(store, directory, index_root, *found)
        except CorruptCatalogError as e:
            _rewriting(e)
            cat = kind(store, directory, index_root)
        cat.refresh([f for f, _, _ in listed])
        cat.save()
    except GtidxError as e:
        e.binlog = p
        return e
    return None


def _rewriting(err: GtidxError) -> None:
    log.warning("%s: %s; writing it again", err.path, err.message)


def _file_ticks(progress, f: str, size: int, base: int, n: int, files: int, total: int):
    """build_index's progress callback for file ``f``: reports the whole run's bytes."""
    def tick(offset: int) -> None:
        progress(BuildProgress(f, n, files, base + min(offset, size), total))
    return tick


def _size(store, path: str) -> int:
    """A binlog's size for progress; one that cannot be read counts 0 (its build says why)."""
    try:
        return store.size(path)
    except (OSError, GtidxError):
        return 0


class IndexInfo(NamedTuple):
    index: str
    binlog: str
    status: str              # ok / incomplete / corrupt / stale / missing
    reason: str
    owner: str               # "gtidx" (fingerprinted) or "server/unknown"
    page_size: int
    pages: int
    records: int
    levels: int
    size: int
    binlog_size: int

    @property
    def ratio(self) -> float:
        return self.size / self.binlog_size if self.binlog_size else 0.0


def _binlog_of(index: str) -> str:
    index = as_path(index, "index")
    if not index.endswith(".idx"):
        raise BadInputError(f"{index} is not an .idx file", hint="the index of FILE is FILE.idx")
    return index[:-4]


def _read_index(index: str, store):
    """A reader over the open file ``index`` (read page by page: memory
    stays bounded whatever its size), of the flavor its magic names
    (``index.files.read_index``), and the file to close. ``store``: where
    it is (``storage.resolve``), a URL read as lookups read it."""
    f = store.open_file(index)
    try:
        return read_index(f, path=index), f
    except BaseException:
        f.close()
        raise


def index_info(index: str | os.PathLike, storage_options: dict | None = None) -> IndexInfo:
    """Facts about an .idx file and whether it can serve its binlog.
    ``storage_options``: for a URL."""
    index = as_path(index, "index")
    binlog = _binlog_of(index)
    store, where = storage.resolve(index, storage_options)
    r, f = _read_index(where, store)
    with f:
        stats = r.check()            # every page and the whole tree
    from .binlog.mysql import open_binlog
    with open_binlog(_binlog_of(where), store) as b:
        status = open_index(b, where)
        status.close()
        return IndexInfo(index, binlog, status.state, status.reason, status.owner, r.page_size,
                         stats["pages"], stats["records"], stats["levels"], r.size, b.size)


def index_records(index: str | os.PathLike, storage_options: dict | None = None):
    """(page_size, iterator of Record(offset, state)) of an .idx file, in
    binlog order. The file stays open until the iterator is exhausted or closed.
    ``storage_options``: for a URL."""
    store, where = storage.resolve(as_path(index, "index"), storage_options)
    r, f = _read_index(where, store)

    def records():
        with f:
            yield from r.records()
    return r.page_size, records()


def verify(index: str | os.PathLike, storage_options: dict | None = None) -> dict:
    """Check every page, the tree, and every record against a scan of the
    binlog. ``storage_options``: for a URL."""
    _binlog_of(index)
    store, where = storage.resolve(as_path(index, "index"), storage_options)
    return verify_index(_binlog_of(where), where, store)


class FileStatus(NamedTuple):
    """Where one binlog's index stands (``gtidx status``)."""
    file: str
    size: int
    state: str           # complete / partial / stale / corrupt / incomplete / missing / server-owned,
                         # or "error": the binlog itself cannot be read (``error`` says why)
    indexed_to: int      # binlog offset the index (or the tail following it) has reached
    lag_bytes: int
    lag_seconds: float
    detail: str
    error: GtidxError | None = None


def binlog_status(directory: str | os.PathLike, index_root=None) -> list[FileStatus]:
    """Per binlog of ``directory``: its index state and how far behind it is.
    A binlog that cannot be read (listed but absent, empty, truncated,
    encrypted...) is a row in state "error", not a failure of the whole call.
    ``index_root``: the indexes are kept under that local directory
    (``tail --index-dir``), not beside the binlogs."""
    import time
    out = []
    now = time.time()
    root = None if index_root is None else IndexRoot(storage.local_path(index_root, "gtidx status --index-dir"))
    for path in list_binlogs(storage.local_path(directory, "gtidx status")):
        try:
            try:
                out.append(_file_status(path, now, index_path(path) if root is None else root.mirror(path, ".idx")[1]))
            except OSError as e:
                raise GtidxIOError.from_os(e, path) from None
        except GtidxError as e:
            try:
                size = os.stat(path).st_size
            except OSError:
                size = 0
            out.append(FileStatus(path, size, "error", 0, size, 0.0, str(e), e))
    return out


def _file_status(path: str, now: float, idx: str) -> FileStatus:
    from .index.meta import IndexMeta
    st = os.stat(path)
    fp = IndexMeta.read(idx)
    from .binlog.mysql import open_binlog
    with open_binlog(path) as b:
        if not os.path.lexists(idx):
            state, reached, detail = "missing", 0, ""
        elif fp is not None and fp.partial:
            ok = b.size >= fp.size
            state = "partial" if ok else "stale"
            reached = (fp.processed or 0) if ok else 0
            age = max(0.0, now - (fp.updated or 0))
            detail = f"{fp.records if fp.records is not None else '?'} records, tail updated {age:.1f} s ago"
        else:
            s_ = open_index(b, idx)
            s_.close()
            if fp is None and flavor_of(b).server_writes and (
                    s_.usable or (s_.state == IndexState.INCOMPLETE and b.growing)):
                state = "server-owned"
                reached = b.size if s_.usable and not s_.partial else 0
                detail = "being written by the server" if b.growing else ""
            else:
                state = "complete" if s_.usable else s_.state
                reached = b.size if s_.usable else 0
                detail = s_.reason
    lag = max(0, st.st_size - reached)
    lag_s = 0.0
    if lag and fp is not None and fp.updated is not None:
        lag_s = max(0.0, st.st_mtime - fp.updated)
    elif lag:
        lag_s = max(0.0, now - st.st_mtime) if state != "server-owned" else 0.0
    return FileStatus(path, st.st_size, state, reached, lag, round(lag_s, 3), detail)


class StatusCheck(NamedTuple):
    """``status_check``'s verdict in the monitoring convention (Nagios,
    Icinga): ``code`` 0 OK, 1 WARNING, 2 CRITICAL; one ``summary`` line; a
    ``reasons`` dict per binlog (or the catalog) that is not OK."""
    code: int
    status: str
    summary: str
    reasons: list
    files: int


CHECK_STATES = ("OK", "WARNING", "CRITICAL")
# the index states a binlog may be in and be OK (or only behind)
_SERVING = ("complete", "partial", "server-owned")


def status_check(directory: str | os.PathLike, max_lag: float, index_root=None) -> StatusCheck:
    """The binlogs of ``directory`` judged for monitoring. WARNING: an index
    is behind its binlog by more than ``max_lag`` seconds (the tail is slow
    or stopped). CRITICAL: a binlog cannot be read, an index is unusable
    (stale, corrupt, ...), a binlog has had no index for more than
    ``max_lag`` seconds, or the directory's catalog is damaged. The
    directory itself unreadable raises as ``binlog_status`` does.
    ``index_root``: the indexes are under it (``tail --index-dir``)."""
    import time
    rows = binlog_status(directory, index_root)
    now = time.time()
    reasons = []
    for r in rows:
        level = 0
        if r.state == "missing":
            try:
                quiet = now - os.stat(r.file).st_mtime
            except OSError:
                quiet = 0.0
            # a binlog just created: its index comes with the tail's next look
            level = 2 if max(r.lag_seconds, quiet if r.size else 0.0) > max_lag else 0
        elif r.state not in _SERVING:
            level = 2
        elif r.lag_bytes and r.lag_seconds > max_lag:
            level = 1
        if level:
            reasons.append({"file": r.file, "level": CHECK_STATES[level], "state": r.state,
                            "lag_bytes": r.lag_bytes, "lag_seconds": r.lag_seconds,
                            "detail": r.detail or (r.error.message if r.error is not None else "")})
    damaged = _catalog_damage(rows)
    if damaged is not None:
        reasons.append(damaged)
    code = max((CHECK_STATES.index(x["level"]) for x in reasons), default=0)
    status = CHECK_STATES[code]
    if not reasons:
        worst = max((r.lag_seconds for r in rows), default=0.0)
        summary = f"{len(rows)} binlogs indexed, lag at most {worst:.1f} s (max {max_lag:g} s)"
    else:
        shown = [x for x in reasons if x["level"] == status]
        summary = "; ".join(map(_reason_text, shown[:3])) + (f" (and {len(shown) - 3} more)" if len(shown) > 3 else "")
    return StatusCheck(code, status, f"{status}: {summary}", reasons, len(rows))


def _reason_text(x: dict) -> str:
    if x["state"] == "damaged":
        return x["detail"]
    lag = f", {x['lag_seconds']:.1f} s and {x['lag_bytes']} bytes behind" if x["lag_bytes"] else ""
    return f"{os.path.basename(x['file'])}: index {x['state']}{lag}" + (f" ({x['detail']})" if x["detail"] else "")


def _catalog_damage(rows: list) -> dict | None:
    """The directory's catalog, where there is one, as a CRITICAL reason when it does not load."""
    from . import catalog, storage
    directory = catalog.directory_of_files(storage.LOCAL, [r.file for r in rows]) if rows else None
    if directory is None:
        return None
    path = catalog.places(storage.LOCAL, directory)[0][1]
    if not os.path.lexists(path):
        return None
    try:
        catalog.Catalog.load(storage.LOCAL, directory)
    except GtidxError as e:
        return {"file": path, "level": "CRITICAL", "state": "damaged", "lag_bytes": 0, "lag_seconds": 0.0,
                "detail": f"catalog damaged: {e.message}"}
    return None
