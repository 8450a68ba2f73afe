"""gtidx tail: keep the ``.idx`` of a live server's binlogs current.

``Tailer`` follows a binlog directory (its ``master-bin.index`` and the
active file) and indexes event groups as soon as they are complete, writing
full index pages as they fill; when a file is rotated it finishes that
file's index (root, fsync) and moves on.

Crash safety comes from the writer being deterministic and append-only:
every record sits in exactly one leaf, and leaves reach the disk in record
order. After a ``kill -9``, the complete nodes on disk hold the records up to
the last full leaf; replaying them through a fresh writer (pages already on
disk are compared, not rewritten) rebuilds its in-memory right edge exactly,
and only the binlog after the last record on disk is read again. A leaf's
first key on disk is the union of the GTIDs since the previous leaf's first
key rather than its own record's GTIDs; replayed in its place it makes the
writer take the same decisions (a union is never shorter) and carry the same
bytes up, so the finished index equals a clean ``gtidx build`` record for
record.

Each partial index carries its progress in its ``IndexMeta`` (the
``user.gtidx`` xattr, or a sidecar file where there are no xattrs): the
binlog prefix its records cover (with CRC32s of its first and last 64 KiB),
how far the tail has read, and when. It is stamped through the open file,
never by name: a ``build --force`` that renamed another index in meanwhile
keeps its own fingerprint (and tail notices and starts over).

An index is never shrunk in place (a reader may have it mapped): a new index,
and one resumed with a torn last page, are written to a fresh temporary file
that is renamed over the old one. Every file is created exclusively, never
through a link planted at its name (see ``safefile``).

A sidecar must keep running: a failure (disk full, read-only filesystem,
permission denied, the directory gone) is logged once per condition, the
file is retried with a growing delay (up to ``retry_max`` seconds), what a
failed write left (an index without a single complete page, a temporary
file) is removed, and one line says when the file recovers.

When the directory has a catalog (``gtidx catalog build``), the tail keeps
it current as ``build`` does and never makes one (a damaged one it writes
again whole, as ``build`` does): a binlog's entry is written when the
binlog closes (with the new binlog's first entry), the growing binlog's
again when it grew, at most every ``catalog_interval`` seconds, walking only
what was written since (``catalog.Describer``). An entry of the growing
file describes it at one size (its identity, size and fingerprint): readers
compare before they take it (see ``BinlogSeries.trust``).

A binlog that shrank or changed under an index (a server crash that
truncated or rewrote the tail), or that is gone (purged), leaves no wrong
index behind: it is rebuilt or removed, and logged. Indexes written by the
server itself (MariaDB 11.4+ with ``binlog_gtid_index=ON``) carry no
fingerprint and are left alone.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import select
import signal
import threading
import time
from dataclasses import dataclass, field

from .. import catalog
from ..index import format as fmt
from .. import safefile, storage
from ..api import list_binlogs
from ..binlog.mariadb import Binlog
from ..errors import CorruptIndexError, GtidxError
from ..gtid import SeqRanges
from ..index.build import DEFAULT_MAX_RATIO, build_index, record_identity
from ..index.files import MARIADB, flavor_of, index_path, open_index, still_written
from ..index.meta import FINGERPRINT_SPAN, QUIET_S, IndexMeta, Progress, digest_masked, now, seen_fields
from ..filebuf import ReadFile
from ..binlog.mysql import open_binlog
from ..index.reader import PartialIndex
from ..index.writer import IndexWriter

log = logging.getLogger("gtidx.tail")


def _event(level: int, msg: str, **fields) -> None:
    """One structured (logfmt) log line: event=... key=value ..."""
    log.log(level, msg, extra={"fields": fields})


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [f"ts={ts}", f"level={record.levelname.lower()}", f"event={record.getMessage()}"]
        for k, v in getattr(record, "fields", {}).items():
            v = str(v)
            parts.append(f"{k}={json.dumps(v) if (' ' in v or '=' in v or not v) else v}")
        return " ".join(parts)


class _ReplayMismatch(Exception):
    pass


class _PageFile:
    """The index file as the writer's sink. The first ``existing`` pages are
    already on disk (from before a restart): the writer's replay produces them
    again, and they are compared rather than written.

    A new index (``existing`` 0), or one whose file holds more than its
    ``existing`` whole pages (a torn or unfinished node), is written to a new
    temporary file (the whole pages copied) that ``publish`` renames over the
    index: the old file is never shrunk under a reader that maps it. A new
    index appears under its name only once it holds a page (never as an
    empty file). An index of whole pages only is opened in place, never
    through a link."""

    def __init__(self, path: str, page_size: int, existing: int):
        self.path = path
        self.page_size = page_size
        self.existing = existing
        self.emitted = 0
        self.replaying = True                # a page that differs is an error (see ``replay_done``)
        self.tmp: str | None = None          # not published yet
        self.fd = -1
        if existing == 0:
            self.fd, self.tmp = safefile.create_temp(path)
            return
        old = safefile.open_for_update(path)
        try:
            if os.fstat(old).st_size == existing * page_size:
                self.fd, old = old, -1
                return
            self._copy_to_temp(old, existing)
        except BaseException:
            self.close()
            raise
        finally:
            if old >= 0:
                os.close(old)

    def _copy_to_temp(self, src: int, pages: int) -> None:
        """Go on in a new temporary file holding the first ``pages`` pages of
        ``src`` (the caller closes ``src``)."""
        self.fd, self.tmp = safefile.create_temp(self.path)
        keep = pages * self.page_size
        done = 0
        while done < keep:
            chunk = os.pread(src, min(keep - done, 1 << 20), done)
            if not chunk:
                raise _ReplayMismatch("index shorter than its pages")
            os.pwrite(self.fd, chunk, done)
            done += len(chunk)
        self.existing = pages

    def replay_done(self) -> None:
        """The records on disk are replayed. The pages on disk past the ones
        the replay gave back were sealed by the record that came next, which
        is not on disk: one the binlog may no longer hold (a server crash cut
        its tail) or hold otherwise. Such a page that comes out different is
        not an error: the index goes on in a new file (see ``_diverge``). No
        page of the old file outlives a finished index: a partial index has
        no root page, and the writer's last page is the root, so it is written
        past the old pages or differs from one of them."""
        self.replaying = False

    def _diverge(self, keep: int) -> None:
        """Past its first ``keep`` pages the index differs from the file: go
        on in a new temporary file holding those, that ``publish`` renames
        over the index (the old one is never shrunk under a reader)."""
        old, old_tmp, self.fd, self.tmp = self.fd, self.tmp, -1, None
        try:
            self._copy_to_temp(old, keep)
        except _ReplayMismatch as e:
            raise CorruptIndexError(f"cannot rewrite the index: {e}", path=self.path) from None
        finally:
            os.close(old)
            if old_tmp is not None:
                safefile.discard(old_tmp)

    def publish(self, force: bool = False) -> None:
        """Put a new file in place under the index's name (rename), once it
        holds a page (or when ``force``)."""
        if self.tmp is not None and (force or self.existing or self.emitted):
            os.fsync(self.fd)
            safefile.publish(self.tmp, self.path)
            self.tmp = None

    def at_path(self) -> bool:
        """Is the index's name still this (published) file, not replaced or
        removed?"""
        return self.fd >= 0 and self.tmp is None and safefile.same_file(self.fd, self.path)

    def __call__(self, page: bytes) -> None:
        self.emitted += 1
        offset = (self.emitted - 1) * self.page_size
        if self.emitted <= self.existing:
            if os.pread(self.fd, self.page_size, offset) == page:
                return
            if self.replaying:
                raise _ReplayMismatch(f"page {self.emitted} on disk differs from the replay")
            self._diverge(self.emitted - 1)
        os.pwrite(self.fd, page, offset)

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.tmp is not None:
            safefile.discard(self.tmp)
            self.tmp = None


class IncrementalIndex:
    """One binlog's index, written while the binlog grows; resumable."""

    def __init__(self, binlog_path: str, *, page_size: int = fmt.DEFAULT_PAGE_SIZE,
                 span_min: int = fmt.DEFAULT_SPAN_MIN, flavor=MARIADB):
        self.binlog_path = binlog_path
        self.flavor = flavor               # indexfile's flavor dispatch: codec, policy
        self.path = index_path(binlog_path)
        self.page_size = page_size
        self.span_min = span_min
        self.writer: IndexWriter | None = None
        self.sink: _PageFile | None = None
        self.offsets: list[int] = []       # every record's offset, in order
        self.policy = flavor.policy(span_min)   # where records go; how far the binlog is read
        self.how = ""
        self._read_guard = None            # CRC32 of the 64 KiB before ``processed``

    # -- start: resume from disk, or fresh -------------------------------------
    def start(self, b: Binlog) -> str:
        """Resume from the partial index on disk when it is ours, matches this
        binlog and has the same settings; else start afresh. Returns how.
        A failure (OSError) leaves no new file behind."""
        IndexMeta.remove_orphans(self.path)
        try:
            why = self._resume(b)
            if why:
                self._fresh(b)
                self.how = f"fresh ({why})"
            else:
                self.how = "resumed"
            self._save_progress(b)
            self.sink.publish()
        except BaseException:
            self.abandon()
            raise
        self._read_guard = self._guard(b)
        return self.how

    def _fresh(self, b: Binlog) -> None:
        self._open_writer(0)
        self.policy = self.flavor.policy(self.span_min)
        offset, gtids = self.policy.first(b)
        self.writer.add(offset, gtids)
        self.offsets = [offset]

    def _open_writer(self, existing_pages: int) -> None:
        self.close()
        self.sink = _PageFile(self.path, self.page_size, existing_pages)
        self.writer = IndexWriter(self.page_size, self.sink, self.flavor.codec)

    def _resume(self, b: Binlog) -> str:
        """'' when resumed, else why not."""
        meta = IndexMeta.read(self.path)
        if meta is None:
            return "no index of ours" if os.path.lexists(self.path) else "no index yet"
        if not meta.partial:
            return "index is finished, binlog still growing" if meta.size != b.size else "finished"
        if meta.page_size != self.page_size or meta.span_min != self.span_min:
            return "index made with other settings"
        prefix = meta.size
        if not meta.matches(b):
            return "binlog changed under the index (truncated or rewritten)"
        try:
            with ReadFile(self.path, nofollow=True) as f:
                part = PartialIndex(f, path=self.path, codec=self.flavor.codec)
            records = part.records()
        except (OSError, GtidxError) as e:
            return f"unreadable partial index: {e}"
        if not records or part.page_size != self.page_size:
            return "no complete leaf on disk"
        first = records[0]
        offset0, state0 = self.flavor.first(b)
        if first.offset != offset0 or first.state != state0:
            return "record 0 does not match the binlog"
        last = records[-1]
        if last.offset > b.size:
            return "records past the end of the binlog"
        # Records written after the last progress save are not covered by the
        # fingerprint: re-derive them from the binlog and compare.
        covered = max((r for r in records if r.offset <= prefix), key=lambda r: r.offset, default=records[0])
        state = covered.state.copy()
        pos = covered.offset
        for r in records:
            if r.offset <= covered.offset:
                continue
            if not self.flavor.apply_until(b, state, pos, r.offset) or state != r.state:
                return "records past the saved progress do not match the binlog"
            pos = r.offset
        try:
            self._open_writer(part.pages)
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise                  # disk full, ...: the caller retries later
            return f"cannot reopen the index: {e.strerror}"
        except _ReplayMismatch as e:
            return f"replay failed: {e}"
        try:
            for offset, gtids in part.keys:
                self.writer.add(offset, gtids)
        except (_ReplayMismatch, GtidxError) as e:
            return f"replay failed: {e}"
        self.sink.replay_done()
        self.offsets = [offset for offset, _ in part.keys]
        # the proof goes on from the last record's state, with what was found before
        seen = meta.seen() if self.flavor.keeps_seen else None
        self.policy = self.flavor.policy(self.span_min)
        self.policy.resume(last.offset, self.offsets, None if seen is None else
                           SeqRanges.resumed({(d, s): q for d, s, q in last.state}, *seen))
        return ""

    # -- advance, finish --------------------------------------------------------------
    def advance(self, b: Binlog) -> int:
        """Index every complete group from where we are to the end of ``b``
        (a fresh snapshot of the growing file); returns the new records."""
        new = 0
        add = self.writer.add
        for end, gtids in self.policy.advance(b):
            add(end, gtids)
            self.offsets.append(end)
            new += 1
        if new:
            self._save_progress(b)
            self.sink.publish()
        self._read_guard = self._guard(b)
        return new

    @property
    def processed(self) -> int:
        """The binlog is read up to here (a group boundary)."""
        return self.policy.walked

    def _guard(self, b: Binlog) -> tuple:
        # the server clears the FDE's IN_USE flag when it rotates: masked
        return self.processed, digest_masked(b.buffer, max(0, self.processed - FINGERPRINT_SPAN), self.processed)

    def unchanged(self, b: Binlog) -> bool:
        """Is what we have read of the binlog still there, the same? False
        after a server crash truncated or rewrote its tail."""
        if b.size < self.processed:
            return False
        return self._read_guard is None or self._guard(b) == self._read_guard

    def finish(self, b: Binlog, max_ratio: float | None) -> str:
        """The binlog is closed: index its end, write the root, fsync. Over
        the size budget, the clean build (which fits it) replaces ours."""
        self.advance(b)
        self.writer.close()
        self.sink.sync()
        size = self.sink.emitted * self.page_size
        if max_ratio is not None and size > max_ratio * b.size:
            self.close()
            build_index(b.path, page_size=self.page_size, span_min=self.span_min, max_ratio=max_ratio,
                        force=True)
            return "rebuilt to fit the size budget"
        IndexMeta.of(b, page_size=self.page_size, span_min=self.span_min,
                     **seen_fields(self.policy.finished())).write(self.sink.fd, self.path)
        self.sink.publish(force=True)
        self.close()
        return "finished"

    def on_disk_prefix(self) -> int:
        """The binlog offset the records on disk reach: the records of the
        leaf still in memory are not on disk yet."""
        in_memory = self.writer.nodes[0].records if self.writer is not None else 0
        on_disk = len(self.offsets) - in_memory
        return self.offsets[on_disk - 1] if on_disk > 0 else 0

    def _save_progress(self, b: Binlog) -> None:
        meta = IndexMeta.of(b, self.on_disk_prefix(), state=Progress.PARTIAL, page_size=self.page_size,
                            span_min=self.span_min, processed=self.processed, records=len(self.offsets),
                            updated=now(), **seen_fields(self.policy.finished()))
        meta.write(self.sink.fd, self.path)      # this file's, whatever is at the name now

    def replaced(self) -> bool:
        """Has something else (``build --force``, a user) replaced or removed
        the index under its name since we opened it?"""
        return self.sink is not None and self.sink.tmp is None and not self.sink.at_path()

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()
            self.sink = None

    def abandon(self) -> None:
        """After a failure: close, and remove the index we published if it
        holds no complete page yet (an empty file serves no reader)."""
        sink = self.sink
        try:
            if sink is not None and sink.at_path() and os.fstat(sink.fd).st_size < self.page_size:
                safefile.discard(self.path)
                IndexMeta.remove(self.path)
        except OSError:
            pass
        self.close()


# -- following a directory -------------------------------------------------------------------

@dataclass
class TailSettings:
    interval: float = 0.2
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


class Tailer:
    def __init__(self, directory: str, settings: TailSettings | None = None):
        self.directory = os.fspath(directory)
        self.settings = settings or TailSettings()
        self.active: dict[str, IncrementalIndex] = {}
        self.settled: dict[str, tuple[int, int]] = {}   # closed files done: (size, mtime_ns)
        self.server_indexes = False                     # the server writes its own indexes
        self.failures: dict[str, _Failure] = {}         # by binlog path (or the directory)
        self._stopping = False                          # set by stop(), which takes no lock
        self._wake = -1                                 # run()'s wake-up pipe (write end)
        self._touched: set[str] = set()                 # files looked at in this poll (not settled)
        self._growing: str | None = None                # the binlog still written, as this poll saw it
        self._catalog = _CatalogKeeper()
        self._catalog_key: str | None = None            # the catalog's path: its failures' key
        self._foreign: str | None = None                # a binlog not MariaDB's seen: its flavor
        self._catalog_skipped = False                   # "catalog not kept" said once
        self._unquiet: set[str] = set()                 # finished while written: identity not recorded yet

    @property
    def failed(self) -> list[str]:
        """The files (or the directory) whose last attempt failed."""
        return list(self.failures)

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
            _event(logging.INFO, "start", dir=self.directory, once=once, interval=self.settings.interval)
            try:
                while not self._stopping:
                    started = time.monotonic()
                    self.poll(retry_all=once)
                    if once:
                        break
                    delay = self.settings.interval - (time.monotonic() - started)
                    if delay > 0 and not self._stopping:
                        select.select([wake_r], [], [], delay)
            finally:
                for inc in self.active.values():
                    inc.close()
                _event(logging.INFO, "stop", dir=self.directory)
        finally:
            wake_w, self._wake = self._wake, -1
            os.close(wake_w)
            os.close(wake_r)

    def poll(self, retry_all: bool = False) -> None:
        """One look at the directory. Files that failed are tried again once
        their delay is over (every one with ``retry_all``)."""
        if not self._due(self.directory, retry_all):
            return
        try:
            files = list_binlogs(self.directory)
            self._forget_purged(files)
        except (GtidxError, OSError) as e:
            self._failed(self.directory, e, "cannot list binlogs")
            return
        except Exception as e:       # noqa: BLE001 - a bug of ours: the sidecar logs it and goes on
            self._failed(self.directory, _internal(e), "cannot list binlogs")
            return
        self._ok(self.directory)
        self._growing = None
        for i, f in enumerate(files):
            if self._stopping:
                return
            if not self._due(f, retry_all):
                continue
            try:
                self._handle(f, last=(i == len(files) - 1))
            except (GtidxError, OSError) as e:
                if isinstance(e, FileNotFoundError) and not os.path.lexists(f):
                    self._drop(f)                  # purged (or the directory went) while we looked
                    continue
                self._failed(f, e, "cannot index")
            except Exception as e:   # noqa: BLE001 - a bug of ours: this file backs off, the others go on
                self._failed(f, _internal(e), "cannot index")
            else:
                self._ok(f)
        if not self._stopping:
            self._record_identities()
            self._keep_catalog(files, retry_all)

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
                how = record_identity(path)
            except (GtidxError, OSError) as e:      # purged, or unreadable: its lookups check the content
                _event(logging.DEBUG, "identity not recorded", file=path, error=str(e))
            else:
                if how:
                    _event(logging.DEBUG, "identity recorded", file=path)
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
        if self._foreign is not None:              # the catalog describes MariaDB binlogs only
            if not self._catalog_skipped and os.path.lexists(key):
                self._catalog_skipped = True
                _event(logging.WARNING, "catalog not kept: it describes MariaDB binlogs only",
                       catalog=key, flavor=self._foreign)
            return
        if not self._due(key, retry_all):
            return
        try:
            done = self._catalog.keep(directory, files, touched, self._growing, self.settings.catalog_interval)
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
            _event(logging.INFO if done["closed"] else logging.DEBUG, "catalog updated", catalog=key,
                   files=done["files"], walked=done["walked"], kept=done["kept"], failed=done["failed"])

    # -- failures: log once, back off, clean up, recover ---------------------------------
    def _due(self, key: str, retry_all: bool) -> bool:
        failure = self.failures.get(key)
        return failure is None or retry_all or time.monotonic() >= failure.retry_at

    def _failed(self, key: str, e: BaseException, what: str) -> None:
        for path in list(self.active) + list(self.settled) if key == self.directory else [key]:
            self._drop(path)                       # the next attempt starts from what is on disk
        condition = _condition(e)
        failure = self.failures.get(key)
        if failure is None or failure.condition != condition:
            where = {"dir": key} if key == self.directory else {"file": key}
            _event(logging.ERROR, what, **where, error=e, retrying="with backoff")
            failure = self.failures[key] = _Failure(condition, self.settings.interval)
        else:
            failure.delay = min(failure.delay * 2, max(self.settings.retry_max, self.settings.interval))
        failure.retry_at = time.monotonic() + failure.delay

    def _ok(self, key: str) -> None:
        if self.failures.pop(key, None) is not None:
            where = {"dir": key} if key == self.directory else {"file": key}
            _event(logging.INFO, "recovered", **where)

    def _drop(self, path: str) -> None:
        """Forget ``path``'s work in progress: its next attempt starts from
        what is on disk (an index without a complete page is removed)."""
        inc = self.active.pop(path, None)
        if inc is not None:
            inc.abandon()
        self.settled.pop(path, None)

    # -- one look ---------------------------------------------------------------------------
    def _forget_purged(self, files: list[str]) -> None:
        listed = set(files)
        for f in [f for f in list(self.active) + list(self.settled) + list(self.failures)
                  if f not in listed and f != self.directory and f != self._catalog_key]:
            inc = self.active.pop(f, None)
            if inc is not None:
                inc.close()
            self.settled.pop(f, None)
            self.failures.pop(f, None)
        for name in os.listdir(self.directory):
            if name.startswith(".") and name.endswith(".idx.gtidx"):
                idx = os.path.join(self.directory, name[1:-len(".gtidx")])
                if not os.path.lexists(idx):
                    IndexMeta.remove(idx)          # a sidecar whose index is gone
                continue
            if not name.endswith(".idx"):
                continue
            idx = os.path.join(self.directory, name)
            binlog = idx[:-4]
            if not os.path.lexists(binlog) and IndexMeta.read(idx) is not None:
                safefile.discard(idx)
                IndexMeta.remove(idx)
                _event(logging.INFO, "removed index of purged binlog", index=idx)

    def _handle(self, path: str, last: bool) -> None:
        st = os.stat(path)
        if self.settled.get(path) == (st.st_size, st.st_mtime_ns):
            return
        self._touched.add(path)
        idx = index_path(path)
        with open_binlog(path) as b:
            if b.flavor != MARIADB.name:
                self._foreign = b.flavor
            growing = still_written(b, newest=last)
            if growing:
                self._growing = path
            # a link, a FIFO or anything but a regular file is not a server's index
            theirs = path not in self.active and flavor_of(b).server_writes and safefile.is_regular(idx) \
                and IndexMeta.read(idx) is None
            if theirs and self._server_owned(b, idx, growing):
                if not growing:
                    self.settled[path] = (st.st_size, st.st_mtime_ns)
                return
            if growing:
                self._follow(b, path, st)
            else:
                self._finish(b, path, idx)
                self.settled[path] = (st.st_size, st.st_mtime_ns)

    def _server_owned(self, b: Binlog, idx: str, growing: bool) -> bool:
        """An index gtidx did not write: the server's. Leave it alone, unless
        the binlog is closed and the index cannot serve it (then it is wrong)."""
        if growing:
            if not self.server_indexes:
                self.server_indexes = True
                _event(logging.INFO, "server writes its own indexes", file=b.path)
            return True
        status = open_index(b, idx, deep=True)
        status.close()
        if status.usable:
            self.server_indexes = True
            return True
        _event(logging.WARNING, "replacing unusable index", index=idx, state=status.state, reason=status.reason)
        return False

    def _follow(self, b: Binlog, path: str, st) -> None:
        inc = self.active.get(path)
        if inc is None:
            if self.server_indexes and not os.path.lexists(index_path(path)) \
                    and time.time() - st.st_mtime < self.settings.server_grace:
                return     # give the server a moment to create its own index first
            inc = self.active[path] = self._start(b)
        else:
            self._restart_if_changed(inc, b)
        new = inc.advance(b)
        if new:
            _event(logging.DEBUG, "indexed", file=path, offset=inc.processed, records=len(inc.offsets),
                   lag_bytes=b.size - inc.processed)

    def _start(self, b: Binlog) -> IncrementalIndex:
        inc = IncrementalIndex(b.path, page_size=self.settings.page_size, span_min=self.settings.span_min,
                               flavor=flavor_of(b))
        how = inc.start(b)
        _event(logging.INFO, "following", file=b.path, how=how, offset=inc.processed, records=len(inc.offsets))
        return inc

    @staticmethod
    def _restart_if_changed(inc: IncrementalIndex, b: Binlog) -> None:
        """A server crash truncated or rewrote what we indexed, or something
        replaced or removed our index: start over (from what is on disk)."""
        if inc.replaced():
            _event(logging.WARNING, "index replaced or removed under tail; starting over", file=b.path)
        elif inc.unchanged(b):
            return
        else:
            _event(logging.WARNING, "binlog truncated or rewritten under the index; reindexing", file=b.path,
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
                    return                               # already complete and current
                why = status.reason or status.state
            else:
                why = "not a regular file" if os.path.lexists(idx) else "missing"
            meta = IndexMeta.read(idx)
            if meta is not None and meta.partial:
                inc = self._start(b)
            else:
                r = build_index(path, page_size=self.settings.page_size, span_min=self.settings.span_min,
                                max_ratio=self.settings.max_ratio, force=True)
                _event(logging.INFO, "built", file=path, records=r.records, size=r.size, why=why)
                self._unquiet.add(path)
                return
        self.active[path] = inc                          # a failure below abandons it
        self._restart_if_changed(inc, b)
        how = inc.finish(b, self.settings.max_ratio)
        self.active.pop(path, None)
        self._unquiet.add(path)
        _event(logging.INFO, "finished", file=path, how=how, records=len(inc.offsets))


class _CatalogKeeper:
    """What ``Tailer`` knows of the catalog it keeps: the catalog as it last
    read or wrote it (with the file's identity: another writer, ``catalog
    build`` or ``build``, makes it read again), the growing file's
    ``catalog.Describer`` (each byte walked once), and when that file's entry
    was last made."""

    def __init__(self):
        self.cat: catalog.Catalog | None = None
        self.seen: tuple | None = None             # (inode, size, mtime) of the catalog as we know it
        self.walkers: dict[str, catalog.Describer] = {}
        self.growing_at = float("-inf")

    def reset(self) -> None:
        """Read the catalog again and make it current whole next time."""
        self.cat = self.seen = None

    @staticmethod
    def _stamp(path: str) -> tuple | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def keep(self, directory: str, files: list[str], touched: set, growing: str | None,
             interval: float) -> dict | None:
        """Write the catalog of ``directory`` if it exists and is due; the
        counts of ``Catalog.refresh`` (and files, closed) when written."""
        store = storage.LOCAL
        path = catalog.places(store, directory)[0][1]
        stamp = self._stamp(path)
        if stamp is None:
            self.reset()
            return None                            # no catalog here: tail makes none
        now = time.monotonic()
        if self.cat is None or stamp != self.seen or self.cat.directory != directory:
            cat = catalog.Catalog.to_rewrite(store, directory, warn=lambda e: _event(
                logging.WARNING, "catalog damaged, making it again", catalog=path, error=e))
            if cat is None:
                self.reset()
                return None
            only = None                            # every entry looked at
        else:
            cat = self.cat
            only = {f for f in touched if f != growing}
            if growing is not None and growing in touched and now - self.growing_at >= interval:
                entry = next((e for e in cat.files if e["name"] == os.path.basename(growing)), None)
                if entry is None or entry.get("size") != os.stat(growing).st_size:
                    only.add(growing)
            if not only and [os.path.basename(f) for f in files] == [e["name"] for e in cat.files]:
                return None                        # nothing new
        before = [e["name"] for e in cat.files]
        known = set(before)
        if growing is not None:
            self.walkers.setdefault(growing, catalog.Describer())
        counts = cat.refresh(files, only=only, walkers=self.walkers)
        cat.save()
        self.cat, self.seen = cat, self._stamp(path)
        looked = (lambda f: only is None or f in only or os.path.basename(f) not in known)
        listed = set(files)
        for f in list(self.walkers):               # a closed file's walker, its last entry made
            if f not in listed or (f != growing and looked(f)):
                del self.walkers[f]
        if growing is not None and looked(growing):
            self.growing_at = now
        closed = only is None or any(f != growing for f in only) or \
            [os.path.basename(f) for f in files] != before
        return {"files": len(files), "closed": closed, **counts}


def tail(directory: str, *, once: bool = False, settings: TailSettings | None = None, **kw) -> Tailer:
    """Follow ``directory`` until stopped (SIGTERM/SIGINT), or catch up once.
    Settings as a TailSettings, or as keywords (interval, page_size, ...)."""
    t = Tailer(os.fspath(directory), settings or TailSettings(**kw))
    t.run(once=once)
    return t
