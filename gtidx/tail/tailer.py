"""Following a binlog directory (``Tailer``): the loop, its signals and its
stop, its settings (``TailSettings``), and what it does with each file.

``Tailer`` follows a binlog directory (its ``master-bin.index`` and the
active file) and indexes event groups as soon as they are complete
(``IncrementalIndex``), writing full index pages as they fill; when a file
is rotated it finishes that file's index (root, fsync) and moves on. Where
the directory has a catalog it is kept current too (``CatalogKeeper``).

It is woken by the kernel (inotify: ``watch``) when the directory or the
growing binlog changes, with a look every ``repoll`` seconds anyway; where
inotify cannot be trusted it polls every ``interval`` seconds. What it has
done (per file: how far it is indexed and when; counters of bytes, records,
failures) is in ``TailState`` for ``gtidx tail --metrics``.

A sidecar must keep running: a failure (disk full, read-only filesystem,
permission denied, the directory gone) is logged once per condition, the
file is retried with a growing delay (up to ``retry_max`` seconds), what a
failed write left (an index without a single complete page, a temporary
file) is removed, and one line says when the file recovers.

A binlog that shrank or changed under an index (a server crash that
truncated or rewrote the tail), or that is gone (purged), leaves no wrong
index behind: it is rebuilt or removed, and logged. Indexes written by the
server itself (MariaDB 11.4+ with ``binlog_gtid_index=ON``) carry no
fingerprint and are left alone.
"""
from __future__ import annotations

import errno
import logging
import os
import select
import signal
import threading
import time
from dataclasses import dataclass, field

from .. import catalog, safefile, storage
from ..api import list_binlogs
from ..binlog.mariadb import Binlog
from ..binlog.mysql import open_binlog
from ..errors import GtidxError
from ..index import format as fmt
from ..index.build import DEFAULT_MAX_RATIO, build_index, record_identity
from ..index.files import MARIADB, IndexRoot, flavor_of, index_path, open_index, still_written
from ..index.meta import QUIET_S, IndexMeta
from .incremental import IncrementalIndex
from .keeper import CatalogKeeper
from .logfmt import event, log
from .watch import watch_for


@dataclass
class TailSettings:
    """How a tail works: what wakes it (``watch``: "auto", inotify where it
    can be trusted, else polling; "poll"), how often it polls (``interval``
    seconds) or, woken by inotify, looks anyway (``repoll``), the index's
    layout (``page_size``, ``span_min``, ``max_ratio`` as for ``build``), and
    how patient it is with a server, failures and the catalog."""
    interval: float = 0.2
    watch: str = "auto"
    # inotify: a safety look this often, for what inotify does not report (a lost event on
    # queue overflow; a closed binlog rewritten in place) and the growing binlog's catalog entry
    repoll: float = 10.0
    # inotify: the least time between two looks, so that a burst of writes is one look (a look's
    # fixed work, cold after a sleep, costs what copying ~2 MB does: 30 ms, 33 looks a second)
    wake_gap: float = 0.03
    page_size: int = fmt.DEFAULT_PAGE_SIZE
    span_min: int = fmt.DEFAULT_SPAN_MIN
    max_ratio: float | None = DEFAULT_MAX_RATIO
    server_grace: float = 2.0      # seconds to let a server create its own index for a new binlog
    retry_max: float = 30.0        # longest wait before retrying a file (or the directory) that failed
    catalog_interval: float = 10.0  # the growing binlog's catalog entry is made again at most this often


@dataclass
class _Failure:
    """A file (or the directory) whose last attempt failed."""
    condition: str                 # logged once; a new condition logs again
    delay: float
    retry_at: float = field(default=0.0)


def _condition(e: BaseException) -> str:
    """What failed, without what changes from one attempt to the next."""
    code = getattr(e, "errno", None)
    if code is None and isinstance(e.__cause__ or e.__context__, OSError):
        code = (e.__cause__ or e.__context__).errno
    if code:
        return errno.errorcode.get(code, str(code))
    return f"{type(e).__name__}: {getattr(e, 'message', e)}"


def _internal(e: Exception) -> GtidxError:
    """An exception that is not a GtidxError (a bug): what the sidecar logs
    and backs off on like any failure, its traceback at debug level."""
    log.debug("internal error", exc_info=e)
    err = GtidxError(f"internal error: {type(e).__name__}: {e} (please report it)")
    err.__cause__ = e
    return err


@dataclass
class TailState:
    """What a tail has done, for its metrics and health (``tail.metrics``):
    per binlog how far its index reaches and when it last advanced (wall
    clock), and running counts. The loop writes it; the metrics thread reads
    it (each value replaced whole, never changed in place)."""
    files: tuple = ()                   # the binlogs as the last full look listed them
    reached: dict = field(default_factory=dict)   # binlog -> (offset indexed to, time.time() of that)
    indexed_bytes: int = 0
    records: int = 0
    errors: dict = field(default_factory=dict)    # condition (ENOSPC, EACCES, ...) -> count
    retries: int = 0
    looks: int = 0
    last_look: float = 0.0              # time.time() at the end of the last look
    last_success: float = 0.0           # ... of the last look in which nothing failed
    failing: dict = field(default_factory=dict)   # what fails now -> its condition
    watch: str = ""                     # "inotify" or "poll"
    started: float = field(default_factory=time.time)
    catalog: str | None = None          # the catalog's path, where the binlogs have one


class Tailer:
    """Follows one binlog directory: ``run`` looks at it (``poll``) when
    woken (inotify) or every ``interval`` seconds until ``stop`` (SIGTERM,
    SIGINT, or another thread), indexing each binlog as it grows and
    finishing its index when it closes."""

    def __init__(self, directory: str, settings: TailSettings | None = None, index_root=None):
        self.directory = os.fspath(directory)
        self.settings = settings or TailSettings()
        # indexes kept apart (--index-dir: a local directory mirroring the binlogs' path); the
        # server's own indexes are beside its binlogs, never there
        self.index_root = None if index_root is None else \
            IndexRoot(storage.local_path(index_root, "gtidx tail --index-dir"))
        self.active: dict[str, IncrementalIndex] = {}
        self._kept: dict[str, Binlog] = {}              # followed files held open between looks
        self.settled: dict[str, tuple[int, int]] = {}   # closed files done: (size, mtime_ns)
        self.server_indexes = False                     # the server writes its own indexes
        self.failures: dict[str, _Failure] = {}         # by binlog path (or the directory)
        self._stopping = False                          # set by stop(), which takes no lock
        self._wake = -1                                 # run()'s wake-up pipe (write end)
        self._touched: set[str] = set()                 # files looked at in this poll (not settled)
        self._growing: str | None = None                # the binlog still written, as this poll saw it
        self._catalog = CatalogKeeper()
        self._catalog_key: str | None = None            # the catalog's path: its failures' key
        self._foreign: str | None = None                # a binlog not MariaDB's seen: its flavor (the catalog's)
        self._unquiet: set[str] = set()                 # finished while written: identity not recorded yet
        self._files: list[str] = []                     # the last full look's listing
        self.state = TailState()
        # called after each full look with every closed binlog whose index is finished (archive mode)
        self.on_closed = None

    @property
    def failed(self) -> list[str]:
        """The files (or the directory) whose last attempt failed."""
        return list(self.failures)

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was asked (also after ``run`` returned: the
        SIGTERM/SIGINT handler it installed stays, so work done after it,
        such as ``--once``'s uploads, can stop on it)."""
        return self._stopping

    def stop(self, *_signal) -> None:
        """Ask ``run`` to stop: the SIGTERM/SIGINT handler, or another thread.
        It takes no lock: a handler runs in the main thread between two of its
        bytecodes, maybe while that thread holds the very lock (a
        ``threading.Event.set`` here hung the process for good when SIGTERM
        came while the wait held the Event's lock); a byte down a pipe wakes
        the wait."""
        self._stopping = True
        wake = self._wake
        if wake >= 0:
            try:
                os.write(wake, b"\0")
            except OSError:
                pass                                   # full: the wait is woken already

    def run(self, once: bool = False) -> None:
        wake_r, self._wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, self.stop)
                signal.signal(signal.SIGINT, self.stop)
            event(logging.INFO, "start", dir=self.directory, once=once, interval=self.settings.interval)
            self.state.started = time.time()
            watch = None
            try:
                if not once:
                    watch = watch_for(self.directory, wake_r, self.settings.watch)
                    self.state.watch = watch.how
                growing_only = False
                while not self._stopping:
                    started = time.monotonic()
                    self.poll(retry_all=once, growing_only=growing_only)
                    if once:
                        break
                    growing_only = self._wait(watch, wake_r, started)
            finally:
                for inc in self.active.values():
                    inc.close()
                for b in self._kept.values():
                    b.close()
                if watch is not None:
                    watch.close()
                event(logging.INFO, "stop", dir=self.directory)
        finally:
            wake_w, self._wake = self._wake, -1
            os.close(wake_w)
            os.close(wake_r)

    def _wait(self, watch, wake_r: int, started: float) -> bool:
        """Until the next look: polling, ``interval`` after the last one began;
        under inotify, until an event (at least ``wake_gap`` after the last
        look began, so a burst is one look), a failed file's retry, or
        ``repoll``. Whether the next look is of the growing binlog alone."""
        if watch.how == "poll":
            delay = self.settings.interval - (time.monotonic() - started)
            if delay > 0 and not self._stopping:
                watch.wait(delay)
            return False
        armed = watch.arm(self.directory, self._growing)
        if self._stopping:
            return False
        if armed:
            return False                         # written before its watch was added: look again now
        # the gap first, then what the kernel queued meanwhile, read once: a look costs one wait
        rest = started + self.settings.wake_gap - time.monotonic()
        if rest > 0 and select.select([wake_r], [], [], rest)[0]:
            return False                         # stop asked
        now = time.monotonic()
        delay = self.settings.repoll - (now - started)
        if self.failures:
            delay = min(delay, min(f.retry_at for f in self.failures.values()) - now)
        wake = watch.wait(delay)
        return not wake.stop and wake.growing_only and self.failures.keys() <= {self._catalog_key}

    def poll(self, retry_all: bool = False, growing_only: bool = False) -> None:
        """One look at the directory. Files that failed are tried again once
        their delay is over (every one with ``retry_all``). ``growing_only``:
        only the growing binlog was written since the last look (inotify
        says so): that file alone is looked at."""
        growing = self._growing
        if growing_only and growing is not None and self._files and self._files[-1] == growing:
            self._growing = None                   # set again by the look while it is still written
            self._look(growing, last=True)
            # a catalog made since the last full look woke one (its name is no file of ours)
            if not self._stopping and self.state.catalog is not None:
                self._keep_catalog(self._files, retry_all)
            self._looked()
            return
        if not self._due(self.directory, retry_all):
            self._looked()
            return
        try:
            files = list_binlogs(self.directory)
            self._forget_purged(files)
        except (GtidxError, OSError) as e:
            self._failed(self.directory, e, "cannot list binlogs")
            self._looked()
            return
        except Exception as e:       # noqa: BLE001 - a bug of ours: the sidecar logs it and goes on
            self._failed(self.directory, _internal(e), "cannot list binlogs")
            self._looked()
            return
        self._ok(self.directory)
        self._files = files
        self.state.files = tuple(files)
        self._growing = None
        for i, f in enumerate(files):
            if self._stopping:
                return
            if self._due(f, retry_all):
                self._look(f, last=(i == len(files) - 1))
        if not self._stopping:
            self._record_identities()
            self._keep_catalog(files, retry_all)
            if self.on_closed is not None:
                for f in files[:-1]:                    # a later binlog is listed: this one is closed
                    if f in self.settled:
                        self.on_closed(f)
        self._looked()

    def _look(self, f: str, last: bool) -> None:
        try:
            self._handle(f, last=last)
        except (GtidxError, OSError) as e:
            if isinstance(e, FileNotFoundError) and not os.path.lexists(f):
                self._drop(f)                  # purged (or the directory went) while we looked
                return
            self._failed(f, e, "cannot index")
        except Exception as e:   # noqa: BLE001 - a bug of ours: this file backs off, the others go on
            self._failed(f, _internal(e), "cannot index")
        else:
            self._ok(f)

    def _looked(self) -> None:
        st, now = self.state, time.time()
        st.looks += 1
        st.last_look = now
        st.failing = {k: f.condition for k, f in self.failures.items()}
        if not self.failures:
            st.last_success = now

    def _reached(self, path: str, offset: int, records: int = 0, grew: int = 0) -> None:
        """The index of ``path`` now reaches ``offset``: for the metrics."""
        st = self.state
        st.reached = {**st.reached, path: (offset, time.time())}
        st.indexed_bytes += max(0, grew)
        st.records += records

    def _record_identities(self) -> None:
        """A binlog finished while it was still being written has its index's
        fingerprint without the file's identity (``local_identity``: taken
        of quiet files only); once it has been quiet for QUIET_S, record it
        (``index.build.record_identity``), so that lookups need not read the
        binlog's first and last 64 KiB to trust the index."""
        for path in sorted(self._unquiet):
            try:
                if time.time() - os.stat(path).st_mtime < QUIET_S:
                    continue
                how = record_identity(path, self.index_of(path))
            except (GtidxError, OSError) as e:      # purged, or unreadable: its lookups check the content
                event(logging.DEBUG, "identity not recorded", file=path, error=str(e))
            else:
                if how:
                    event(logging.DEBUG, "identity recorded", file=path)
            self._unquiet.discard(path)

    def _keep_catalog(self, files: list[str], retry_all: bool) -> None:
        """The catalog of the binlogs (``gtidx.catalog``), when there is one,
        kept current as ``build`` keeps it (tail never makes one): the entries
        of the files looked at in this poll that are closed (a rotation:
        the file's last entry, and the new file's first) at once, the growing
        file's at most every ``catalog_interval`` seconds. A failure is
        logged and retried like the others; the catalog is then read and
        made current whole."""
        touched, self._touched = self._touched, set()
        directory = catalog.directory_of_files(storage.LOCAL, files)
        if directory is None:
            return                                 # a catalog describes one directory
        key = self._catalog_key = catalog.places(storage.LOCAL, directory)[0][1]
        self.state.catalog = key if os.path.lexists(key) else None
        if not self._due(key, retry_all):
            return
        try:
            done = self._catalog.keep(directory, files, touched, self._growing, self.settings.catalog_interval,
                                      self._foreign)
        except (GtidxError, OSError) as e:
            self._catalog.reset()
            self._failed(key, e, "cannot update catalog")
            return
        except Exception as e:       # noqa: BLE001 - a bug of ours: the catalog backs off, indexing goes on
            self._catalog.reset()
            self._failed(key, _internal(e), "cannot update catalog")
            return
        self._ok(key)
        if done is not None:
            event(logging.INFO if done.closed else logging.DEBUG, "catalog updated", catalog=key,
                  files=done.files, walked=done.walked, kept=done.kept, failed=done.failed)

    # -- failures: log once, back off, clean up, recover ---------------------------------
    def _due(self, key: str, retry_all: bool) -> bool:
        failure = self.failures.get(key)
        return failure is None or retry_all or time.monotonic() >= failure.retry_at

    def _failed(self, key: str, e: BaseException, what: str) -> None:
        for path in list(self.active) + list(self.settled) if key == self.directory else [key]:
            self._drop(path)                       # the next attempt starts from what is on disk
        condition = _condition(e)
        failure = self.failures.get(key)
        errs = self.state.errors
        self.state.errors = {**errs, condition: errs.get(condition, 0) + 1}
        if failure is not None:
            self.state.retries += 1
        if failure is None or failure.condition != condition:
            where = {"dir": key} if key == self.directory else {"file": key}
            event(logging.ERROR, what, **where, error=e, retrying="with backoff")
            failure = self.failures[key] = _Failure(condition, self.settings.interval)
        else:
            failure.delay = min(failure.delay * 2, max(self.settings.retry_max, self.settings.interval))
        failure.retry_at = time.monotonic() + failure.delay

    def _ok(self, key: str) -> None:
        if self.failures.pop(key, None) is not None:
            where = {"dir": key} if key == self.directory else {"file": key}
            event(logging.INFO, "recovered", **where)

    def _drop(self, path: str) -> None:
        """Forget ``path``'s work in progress: its next attempt starts from
        what is on disk (an index without a complete page is removed)."""
        inc = self.active.pop(path, None)
        if inc is not None:
            inc.abandon()
        self.settled.pop(path, None)
        self._let_go(path)

    # -- one look ---------------------------------------------------------------------------
    def _forget_purged(self, files: list[str]) -> None:
        listed = set(files)
        for f in [f for f in list(self.active) + list(self.settled) + list(self.failures)
                  if f not in listed and f != self.directory and f != self._catalog_key]:
            inc = self.active.pop(f, None)
            if inc is not None:
                inc.close()
            self.settled.pop(f, None)
            self._let_go(f)
            self.failures.pop(f, None)
        if set(self.state.reached) - listed:
            self.state.reached = {f: r for f, r in self.state.reached.items() if f in listed}
        kept = self.directory if self.index_root is None else self.index_root.mirror(self.directory)[1]
        for name in os.listdir(kept) if kept == self.directory or os.path.isdir(kept) else ():
            if name.startswith(".") and name.endswith(".idx.gtidx"):
                idx = os.path.join(kept, name[1:-len(".gtidx")])
                if not os.path.lexists(idx):
                    IndexMeta.remove(idx)          # a sidecar whose index is gone
                continue
            if not name.endswith(".idx"):
                continue
            idx = os.path.join(kept, name)
            binlog = os.path.join(self.directory, name[:-4])
            if not os.path.lexists(binlog) and IndexMeta.read(idx) is not None:
                safefile.discard(idx)
                IndexMeta.remove(idx)
                event(logging.INFO, "removed index of purged binlog", index=idx)

    def _handle(self, path: str, last: bool) -> None:
        st = os.stat(path)
        if self.settled.get(path) == (st.st_size, st.st_mtime_ns):
            return
        self._touched.add(path)
        idx = self.index_of(path)
        b, checked = self._binlog(path, st)
        growing = False
        try:
            if b.flavor != MARIADB.name:
                self._foreign = b.flavor
            growing = still_written(b, newest=last)
            if growing:
                self._growing = path
            # a link, a FIFO or anything but a regular file is not a server's index
            theirs = path not in self.active and self.index_root is None and flavor_of(b).server_writes \
                and safefile.is_regular(idx) and IndexMeta.read(idx) is None
            if theirs and self._server_owned(b, idx, growing):
                if not growing:
                    self.settled[path] = (st.st_size, st.st_mtime_ns)
                self._reached(path, st.st_size)        # the server's business: not a lag of ours
                return
            if growing:
                self._follow(b, path, st, checked)
            else:
                self._finish(b, path, idx)
                self.settled[path] = (st.st_size, st.st_mtime_ns)
        finally:
            if growing and path in self.active:
                self._kept[path] = b
            else:
                b.close()

    def _binlog(self, path: str, st) -> tuple[Binlog, bool]:
        """``path`` to look at, and whether what its index read of it is
        checked unchanged: the file kept open since the last look, when it is
        the same file grown (``Binlog.refresh``) and that check holds (its
        FDE and preamble parsed once), else the file opened now."""
        b, inc = self._kept.pop(path, None), self.active.get(path)
        if b is not None:
            try:
                if inc is not None and b.refresh(st) and inc.unchanged(b):
                    return b, True
            except (GtidxError, OSError):
                pass                                   # opened again: what it meets is reported there
            b.close()
        return open_binlog(path), False

    def _let_go(self, path: str) -> None:
        b = self._kept.pop(path, None)
        if b is not None:
            b.close()

    def index_of(self, path: str) -> str:
        """Where ``path``'s index is kept: beside it, or under --index-dir
        (its directory made there)."""
        if self.index_root is None:
            return index_path(path)
        idx = self.index_root.mirror(path, ".idx")[1]
        os.makedirs(os.path.dirname(idx), exist_ok=True)
        return idx

    def _server_owned(self, b: Binlog, idx: str, growing: bool) -> bool:
        """An index gtidx did not write: the server's. Leave it alone, unless
        the binlog is closed and the index cannot serve it (then it is wrong)."""
        if growing:
            if not self.server_indexes:
                self.server_indexes = True
                event(logging.INFO, "server writes its own indexes", file=b.path)
            return True
        status = open_index(b, idx, deep=True)
        status.close()
        if status.usable:
            self.server_indexes = True
            return True
        event(logging.WARNING, "replacing unusable index", index=idx, state=status.state, reason=status.reason)
        return False

    def _follow(self, b: Binlog, path: str, st, checked: bool) -> None:
        inc = self.active.get(path)
        if inc is None:
            if self.server_indexes and not os.path.lexists(self.index_of(path)) \
                    and time.time() - st.st_mtime < self.settings.server_grace:
                return     # give the server a moment to create its own index first
            inc = self.active[path] = self._start(b)
        else:
            self._restart_if_changed(inc, b, checked)
        before = inc.processed
        new = inc.advance(b)
        if inc.processed != before or path not in self.state.reached:
            self._reached(path, inc.processed, new, inc.processed - before)
        if new:
            event(logging.DEBUG, "indexed", file=path, offset=inc.processed, records=len(inc.offsets),
                   lag_bytes=b.size - inc.processed)

    def _start(self, b: Binlog) -> IncrementalIndex:
        inc = IncrementalIndex(b.path, page_size=self.settings.page_size, span_min=self.settings.span_min,
                               flavor=flavor_of(b), index=self.index_of(b.path))
        how = inc.start(b)
        fresh = how != "resumed"                        # a resumed index's bytes were counted by its writer
        self._reached(b.path, inc.processed, fresh and len(inc.offsets), fresh and inc.processed)
        event(logging.INFO, "following", file=b.path, how=how, offset=inc.processed, records=len(inc.offsets))
        return inc

    @staticmethod
    def _restart_if_changed(inc: IncrementalIndex, b: Binlog, checked: bool = False) -> None:
        """A server crash truncated or rewrote what we indexed, or something
        replaced or removed our index: start over (from what is on disk).
        ``checked``: ``inc.unchanged(b)`` holds already."""
        if inc.replaced():
            event(logging.WARNING, "index replaced or removed under tail; starting over", file=b.path)
        elif checked or inc.unchanged(b):
            return
        else:
            event(logging.WARNING, "binlog truncated or rewritten under the index; reindexing", file=b.path,
                   size=b.size, indexed=inc.processed)
        inc.close()
        inc.start(b)

    def _finish(self, b: Binlog, path: str, idx: str) -> None:
        inc = self.active.pop(path, None)
        if inc is None:
            if safefile.is_regular(idx):
                status = open_index(b, idx, deep=True)
                status.close()
                if status.usable and not status.partial:
                    if status.meta is not None and status.meta.binlog_etag is None:
                        self._unquiet.add(path)
                    self._reached(path, b.size)
                    return                               # already complete and current
                why = status.reason or status.state
            else:
                why = "not a regular file" if os.path.lexists(idx) else "missing"
            meta = IndexMeta.read(idx)
            if meta is not None and meta.partial:
                inc = self._start(b)
            else:
                r = build_index(path, page_size=self.settings.page_size, span_min=self.settings.span_min,
                                max_ratio=self.settings.max_ratio, force=True, index_root=self.index_root)
                event(logging.INFO, "built", file=path, records=r.records, size=r.size, why=why)
                self._reached(path, b.size, r.records, b.size)
                self._unquiet.add(path)
                return
        self.active[path] = inc                          # a failure below abandons it
        self._restart_if_changed(inc, b)
        before, records = inc.processed, len(inc.offsets)
        how = inc.finish(b, self.settings.max_ratio)
        self._reached(path, b.size, len(inc.offsets) - records, b.size - before)
        self.active.pop(path, None)
        self._unquiet.add(path)
        event(logging.INFO, "finished", file=path, how=how, records=len(inc.offsets))


def tail(directory: str, *, once: bool = False, settings: TailSettings | None = None, index_root=None,
         **kw) -> Tailer:
    """Follow ``directory`` until stopped (SIGTERM/SIGINT), or catch up once.
    Settings as a TailSettings, or as keywords (interval, page_size, ...).
    ``index_root``: keep the indexes under that local directory (as
    ``build --index-dir``), not beside the binlogs."""
    t = Tailer(os.fspath(directory), settings or TailSettings(**kw), index_root)
    t.run(once=once)
    return t
