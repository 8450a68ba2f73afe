"""``gtidx tail DIR --archive URL``: each closed binlog, with its index,
copied to an S3 prefix exactly once, and the prefix's catalog kept current
(``Archiver``, a thread beside the tail's loop).

Closed: the tail finished the binlog's index (``still_written`` is false:
its IN_USE flag is clear, or a later binlog exists) and a later binlog is
listed in the server's ``.index`` (the newest file is never taken, even
when a stopped server cleared its IN_USE). The tail calls ``closed(path)``
for every such file after each full look; what is archived already is
skipped at once.

One file, in this order, each step checked before the next:

1. the binlog, as the object ``URL/name``. Its expected ETag is computed
   of the local file (``storage.s3_etag``: the MD5, or of a multipart
   upload the MD5 of the parts' MD5s, parts of ``part_size``: s3fs's
   ``default_block_size`` storage option, else ``storage.UPLOAD_PART``):
   S3 computes the ETag of the bytes it received, so an object of this
   size and this ETag holds exactly the local bytes. An object already
   there with them is not uploaded again (a restart after kill -9 lists
   the prefix and uploads only what is missing; an object of an earlier
   run's other part size is judged with its own, ``_same_in_other_parts``);
   an object there with other bytes is never replaced (a name a server reused after RESET
   MASTER: the file fails, logged, counted and retried, so that an
   operator sees it). The upload is one PUT, or a multipart upload
   completed at its end: S3 makes the object whole at that moment, so an
   interrupted upload (kill -9, SIGTERM, a failure) leaves no object under
   the name, and nothing half-uploaded looks complete. SIGTERM (the tail's
   ``stopping``) stops an upload between two parts (aborted); the parts a
   kill -9 left are aborted before the file's next upload. The object is read
   back (HEAD) and its size and ETag compared; an object that does not
   match is removed and the file retried.
2. its index, ``URL/name.idx`` (one PUT, ETag compared) and the index's
   fingerprint bound to the archived object's ETag (``IndexMeta``'s
   sidecar object), so lookups on the archive trust it as they trust an
   index ``gtidx build`` wrote there.
3. the archive's catalog (``gtidx-catalog.json`` of the prefix, MariaDB's
   or MySQL's), written whole with one PUT: it lists exactly the binlog
   objects of the prefix, the new one's entry made from the walk of the
   local file and checked against the object (its fingerprint and start
   state, a few ranged GETs), with the object's ETag.

Nothing local is changed or removed; binlogs purged locally stay in the
archive. A failure is logged once per condition and the file retried with a
growing delay (up to ``retry_max``), like the tail's own failures.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field

from .. import storage
from ..binlog.mysql import open_binlog
from ..errors import BadInputError, GtidxError, GtidxIOError
from ..index.files import index_path
from ..index.meta import IndexMeta
from ..series.listing import catalog_class, list_files
from .logfmt import event


class ArchiveConflict(GtidxIOError):
    """The archive holds another object under a binlog's name."""


@dataclass
class ArchiveState:
    """What the archiver did, for ``--metrics``: counters, the files waiting
    (name -> time.time() they were first seen closed) and what fails now.
    Each value replaced whole (another thread reads it)."""
    uploaded_files: int = 0
    uploaded_bytes: int = 0
    errors: dict = field(default_factory=dict)    # condition -> count
    retries: int = 0
    last_upload: float = 0.0
    pending: dict = field(default_factory=dict)
    failing: dict = field(default_factory=dict)   # name -> condition


class Archiver:
    """Uploads the closed binlogs handed to ``closed`` in a daemon thread,
    in the order given; ``close`` stops it between two parts of an upload
    (which is then aborted: no object appears)."""

    def __init__(self, url: str, storage_options: dict | None = None, *, part_size: int | None = None,
                 retry_max: float = 30.0, retry_min: float = 0.2, index_of=index_path, stopping=lambda: False):
        store, prefix = storage.resolve(url, storage_options)
        if not store.remote or store.protocol not in ("s3", "s3a"):
            raise BadInputError(f"--archive {url!r}: expected an S3 prefix, s3://bucket/prefix/")
        if part_size is None:
            # s3fs's own option for the part size of its multipart writes, as a user sets it
            part_size = (storage_options or {}).get("default_block_size") or storage.UPLOAD_PART
        if type(part_size) is not int or part_size < 1:
            raise BadInputError(f"default_block_size {part_size!r}: expected a number of bytes (the upload's "
                                "part size; S3 takes parts of at least 5 MiB)")
        self.store, self.prefix = store, prefix.rstrip("/")
        self.outside_stop = stopping                # the tail's stop (SIGTERM): no new file, no next part
        self.part_size, self.retry_max, self.retry_min = part_size, retry_max, retry_min
        self.index_of = index_of                    # where a binlog's index is (Tailer.index_of: --index-dir)
        self.state = ArchiveState()
        self.done: set[str] = set()                 # names archived and checked
        self.queue: list[str] = []
        self.cond = threading.Condition()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="gtidx-archive", daemon=True)
        try:
            store.listing(self.prefix, empty_if_missing=True)   # a bad option is bad input, said at once
        except GtidxIOError as e:
            event(logging.WARNING, "archive not reachable yet", url=self.url(""), error=e)

    def start(self) -> "Archiver":
        event(logging.INFO, "archive", url=self.url(""))
        self.thread.start()
        return self

    def url(self, name: str) -> str:
        return self.prefix + "/" + name

    def closed(self, path: str) -> None:
        """``path`` is closed and its index finished: archive it (once)."""
        name = os.path.basename(path)
        with self.cond:
            if name in self.done or path in self.queue:
                return
            self.queue.append(path)
            self.state.pending = {**self.state.pending, name: time.time()}
            self.cond.notify()

    def close(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()
        if self.thread.is_alive():
            self.thread.join()

    def drain_once(self) -> bool:
        """Archive what waits in the calling thread, each file tried once
        (``gtidx tail --once``); what failed is in ``state.failing``. Once
        stopped (``stopping()``: SIGTERM) it stops between two files, or
        between two parts of an upload (aborted: no object appears): whether
        it stopped with files left."""
        for path in list(self.queue):
            try:
                if self._stop_asked():
                    raise InterruptedError
                self._one(path, 0.0)
            except InterruptedError:
                event(logging.INFO, "archive stopped", file=path, left=len(self.queue))
                return True
        return False

    def _stop_asked(self) -> bool:
        return self.stopping or self.outside_stop()

    # -- the thread ----------------------------------------------------------------------
    def _run(self) -> None:
        delay = 0.0
        while True:
            with self.cond:
                while not self._stop_asked() and (not self.queue or delay):
                    if not self.cond.wait(delay or None) and delay:
                        delay = 0.0
                if self._stop_asked():
                    return
                path = self.queue[0]
            try:
                delay = self._one(path, delay)
            except InterruptedError:
                return

    def _one(self, path: str, delay: float) -> float:
        """Archive ``path``: the delay before the next attempt (0: done)."""
        name = os.path.basename(path)
        try:
            self.archive(path)
        except InterruptedError:
            raise
        except (GtidxError, OSError) as e:
            if isinstance(e, FileNotFoundError) and not os.path.lexists(path):
                event(logging.ERROR, "purged before it was archived", file=path)
                self._failed(name, e, delay)
                self._forget(path, name)
                return 0.0
            return self._failed(name, e, delay)
        except Exception as e:     # noqa: BLE001 - a bug of ours: logged, retried like a failure
            return self._failed(name, GtidxError(f"internal error: {type(e).__name__}: {e}"), delay)
        recovered = name in self.state.failing
        self._forget(path, name)
        with self.cond:
            self.done.add(name)
        if recovered:
            event(logging.INFO, "archive recovered", file=path)
        return 0.0

    def _forget(self, path: str, name: str) -> None:
        """``path`` waits no more: archived, or purged before it could be."""
        with self.cond:
            if path in self.queue:
                self.queue.remove(path)
            self.state.pending = {k: v for k, v in self.state.pending.items() if k != name}
        self.state.failing = {k: v for k, v in self.state.failing.items() if k != name}

    def _failed(self, name: str, e: BaseException, delay: float) -> float:
        condition = _condition(e)
        st = self.state
        st.errors = {**st.errors, condition: st.errors.get(condition, 0) + 1}
        if name in st.failing:
            st.retries += 1
        if st.failing.get(name) != condition:
            event(logging.ERROR, "cannot archive", file=name, error=e, retrying="with backoff")
            st.failing = {**st.failing, name: condition}
        return min(max(delay * 2, self.retry_min), self.retry_max)

    # -- one file ------------------------------------------------------------------------
    def archive(self, path: str) -> bool:
        """Archive the closed binlog ``path`` (binlog, index, catalog); whether
        anything was uploaded (False: the archive had it already)."""
        store, name = self.store, os.path.basename(path)
        listing = store.listing(self.prefix, empty_if_missing=True)
        st = os.stat(path)
        expected = storage.s3_etag(path, self.part_size)
        now = os.stat(path)
        if (now.st_ino, now.st_size, now.st_mtime_ns, now.st_ctime_ns) != \
                (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns):
            raise GtidxIOError("the binlog changed while its checksum was computed", path=path)
        target = self.url(name)
        uploaded = False
        have = listing.get(name)
        if have is not None and have != (st.st_size, expected) and self._same_in_other_parts(path, target, have):
            expected = have[1]
        if have is not None and have != (st.st_size, expected):
            raise ArchiveConflict(f"the archive holds another {name} ({have[0]} bytes, ETag {have[1]}; "
                                  f"this one {st.st_size} bytes, ETag {expected}): not replaced", path=target,
                                  hint="a binlog name used twice (RESET MASTER?): archive to another prefix")
        if have is None:
            started = time.time()
            if store.abort_uploads(target):
                event(logging.INFO, "aborted an interrupted upload", object=target)
            etag = store.upload(target, path, self.part_size, stopping=self._stop_asked)
            info = store.info(target)
            got = (int(info["size"]), info.get("ETag") or info.get("etag"))
            if got != (st.st_size, expected) or etag != expected:
                store.remove(target)          # ours, and wrong: no object that looks complete
                raise GtidxIOError(f"uploaded object does not match the binlog ({got[0]} bytes, ETag {got[1]}; "
                                   f"expected {st.st_size}, {expected}): removed, retrying", path=target)
            uploaded = True
            self._uploaded(st.st_size, started, target)
        self._index(path, name, listing, expected, st.st_size)
        self._catalog(path, target)
        return uploaded

    def _same_in_other_parts(self, path: str, target: str, have: tuple) -> bool:
        """Whether the object ``target`` (size and ETag ``have``), of a
        multipart upload in parts of another size (an earlier run's part
        size), holds the local file's bytes: its ETag computed again with
        the object's own part size."""
        if have[0] != os.path.getsize(path) or "-" not in (have[1] or ""):
            return False
        part = self.store.part_size(target)
        return part is not None and part != self.part_size and storage.s3_etag(path, part) == have[1]

    def _uploaded(self, size: int, started: float, target: str) -> None:
        st = self.state
        st.uploaded_files += 1
        st.uploaded_bytes += size
        st.last_upload = time.time()
        event(logging.INFO, "archived", object=target, size=size, seconds=round(st.last_upload - started, 3))

    def _index(self, path: str, name: str, listing: dict, etag: str, size: int) -> None:
        """The binlog's finished index beside the archived object, with its
        fingerprint bound to the object's ETag; none when it has none."""
        idx = self.index_of(path)
        meta = IndexMeta.read(idx)
        if meta is not None and (meta.partial or meta.size != size):
            raise GtidxIOError("the index does not cover the closed binlog yet", path=idx)
        try:
            data = storage.LOCAL.read_bytes(idx)
        except FileNotFoundError:
            return
        except OSError as e:
            raise GtidxIOError.from_os(e, idx) from None
        target = self.url(name + ".idx")
        import hashlib
        local = '"%s"' % hashlib.md5(data).hexdigest()
        if listing.get(name + ".idx") != (len(data), local):
            self.store.put(target, data)
            info = self.store.info(target)
            if (int(info["size"]), info.get("ETag") or info.get("etag")) != (len(data), local):
                raise GtidxIOError("uploaded index does not match the local one", path=target)
            self.state.uploaded_bytes += len(data)
        if meta is not None:
            remote = meta.replace(binlog_etag=etag)
            current = IndexMeta.read_of(self.store.open(target))
            if current != remote and not remote.write_object(self.store, target, local):
                raise GtidxIOError("the index object changed while its fingerprint was written", path=target)

    def _catalog(self, path: str, target: str) -> None:
        """The archive's catalog: every binlog object of the prefix, the new
        one's entry walked locally and checked against the object."""
        with open_binlog(path) as b:
            kind = catalog_class(b.flavor)
            walker = kind.describer()
            walker.advance(b)
        listings: dict = {}
        files = list_files(self.prefix + "/", self.store, listings, "directory")
        cat = kind.to_rewrite(self.store, self.prefix, warn=lambda e: event(
            logging.WARNING, "archive catalog damaged, making it again", url=self.url(""), error=e))
        if cat is None:
            cat = kind(self.store, self.prefix)
        before = {e["name"]: e for e in cat.files}
        cat.refresh(files, only={target}, walkers={target: walker})
        if [e["name"] for e in cat.files] != list(before) or before.get(os.path.basename(target)) != \
                next(e for e in cat.files if e["name"] == os.path.basename(target)):
            cat.save()


def _condition(e: BaseException) -> str:
    return type(e).__name__ if not isinstance(e, GtidxError) else f"{type(e).__name__}: {e.message}"[:120]
