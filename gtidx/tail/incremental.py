"""One binlog's index written while the binlog grows, and resumed after a
restart (``IncrementalIndex``).

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
"""
from __future__ import annotations

import errno
import os

from .. import safefile
from ..binlog.mariadb import Binlog
from ..binlog.walk import CHECK_SPAN
from ..errors import CorruptIndexError, GtidxError
from ..filebuf import ReadFile
from ..gtid import SeqRanges
from ..index import format as fmt
from ..index.build import build_index
from ..index.files import MARIADB, index_path
from ..index.meta import IndexMeta, Progress, masked, now, seen_fields
from ..index.reader import PartialIndex
from ..index.writer import IndexWriter


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
                 span_min: int = fmt.DEFAULT_SPAN_MIN, flavor=MARIADB, index: str | None = None):
        self.binlog_path = binlog_path
        self.flavor = flavor               # index.files' flavor dispatch: codec, policy
        self.path = index or index_path(binlog_path)     # ``index``: kept apart (tail --index-dir)
        self.page_size = page_size
        self.span_min = span_min
        self.writer: IndexWriter | None = None
        self.sink: _PageFile | None = None
        self.offsets: list[int] = []       # every record's offset, in order
        self.policy = flavor.policy(span_min)   # where records go; how far the binlog is read
        self.how = ""
        self._read_guard = None            # (processed, the bytes before it: ``_guard``)
        self._prefix_fp: IndexMeta | None = None   # the fingerprint of the records on disk, while they stay

    # -- start: resume from disk, or fresh -------------------------------------
    def start(self, b: Binlog) -> str:
        """Resume from the partial index on disk when it is ours, matches this
        binlog and has the same settings; else start afresh. Returns how.
        A failure (OSError) leaves no new file behind."""
        IndexMeta.remove_orphans(self.path)
        self._prefix_fp = None
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
        if self._read_guard is None or self._read_guard[0] != self.processed:
            self._read_guard = self._guard(b)    # else the same bytes ``unchanged`` just compared
        return new

    @property
    def processed(self) -> int:
        """The binlog is read up to here (a group boundary)."""
        return self.policy.walked

    def _guard(self, b: Binlog) -> tuple:
        # the last CHECK_SPAN bytes read (walk's rule), themselves: compared on every look, a
        # digest would cost 10 times the read (the server clears the FDE's IN_USE flag when it
        # rotates: masked)
        return self.processed, masked(b.buffer, max(0, self.processed - CHECK_SPAN), self.processed)

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
        """Stamp the index with its progress. The fingerprint (the CRCs of
        the binlog's first and last 64 KiB of the prefix the records on disk
        cover) is taken again only when that prefix moved (a leaf written):
        most looks change the progress fields alone."""
        prefix, fp = self.on_disk_prefix(), self._prefix_fp
        progress = {"processed": self.processed, "records": len(self.offsets), "updated": now(),
                    "ranges": None, "repeats": None, **seen_fields(self.policy.finished())}
        if fp is None or fp.size != prefix or prefix >= b.size:
            fp = IndexMeta.of(b, prefix, state=Progress.PARTIAL, page_size=self.page_size,
                              span_min=self.span_min, **progress)
            # a prefix that is all of the binlog may carry its identity (``IndexMeta.of``): not kept
            self._prefix_fp = fp if prefix < b.size else None
            meta = fp
        else:
            meta = fp.replace(**progress)
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
