"""The library API: what the CLI, the Spark job and the tail sidecar call.

    import gtidx
    with gtidx.open("/var/lib/mysql/binlogs") as logs:     # a file, a directory or master-bin.index
        logs.locate("0-1-100")            # Location(file, start, end, resume, ...)
        logs.state_at("master-bin.000042", 1234)           # StateAt: as BINLOG_GTID_POS
        logs.replica_start("0-1-100,1-2-50")               # ReplicaStart: where a replica begins

Every lookup uses the file's ``.idx`` when it is usable (complete, intact,
current) and otherwise answers by a sequential scan, logging one warning
(logger ``gtidx``); each result says which path answered (``via``). Every
failure is a ``GtidxError``; an argument of the wrong type or form (checked
at each public entry point: ``_path``, ``parse_offset``, ``_gtid``,
``_position``) is a ``BadInputError``.
"""
from __future__ import annotations

import builtins
import logging
import operator
import os
import re
from collections import OrderedDict
from typing import Callable, Iterator, NamedTuple

from . import idxformat as fmt
from .binlog import CHECKSUM_CRC32, Binlog, Group
from .errors import BadInputError, CorruptBinlogError, GtidxError, GtidxIOError, NotFoundError, quoted
from .filebuf import open_file
from .gtid import BinlogState, Gtid, Position
from .indexfile import (DEFAULT_MAX_RATIO, BuildResult, IndexState, IndexStatus, build_index, index_path,
                        open_index, verify_index)

log = logging.getLogger("gtidx")

_BINLOG_NAME = re.compile(r".+\.[0-9]{6,}$")
_OFFSET = re.compile(r"(-?)(?:0[xX]([0-9a-fA-F]+)|([0-9]+))")


# -- arguments: every public entry point checks what it is given ---------------------------
# (a wrong type must be a BadInputError here, not a TypeError from deep inside)

def _path(value, what: str = "path") -> str:
    """A file system path given by the caller: str or os.PathLike (of str)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise BadInputError(f"{what} must be a str or os.PathLike, not {type(value).__name__}",
                            hint="bytes paths: os.fsdecode() them" if isinstance(value, bytes) else None)
    if not value:
        raise BadInputError(f"{what} is empty")
    if "\0" in value:
        raise BadInputError(f"{what} {quoted(value)} contains a NUL character")
    return value


def _int(value, what: str, minimum: int | None = None) -> int:
    if isinstance(value, (bool, str)):            # int(True) and "4" are not what was meant
        raise BadInputError(f"{what} must be an int, not {type(value).__name__}")
    try:
        value = operator.index(value)
    except TypeError:
        raise BadInputError(f"{what} must be an int, not {type(value).__name__}") from None
    if minimum is not None and value < minimum:
        raise BadInputError(f"{what} must be at least {minimum}, not {value}")
    return value


def parse_offset(value) -> int:
    """A binlog offset as a user gives it: an int >= 0, or text of ASCII
    digits, decimal or ``0x`` hex (not ``1_000``, not other scripts' digits,
    as Python's ``int()`` would take)."""
    if isinstance(value, str):
        m = _OFFSET.fullmatch(value)
        if m is None:
            raise BadInputError(f"{quoted(value)} is not an offset",
                                hint="ASCII decimal digits, or hex like 0x11d")
        sign, hexa, dec = m.groups()
        digits = (hexa or dec).lstrip("0")
        if len(digits) > (16 if hexa else 20):      # past 2**64: no file is that big
            raise BadInputError(f"offset {quoted(value)} is too large", hint="offsets are below 2**64")
        value = int(digits or "0", 16 if hexa else 10)
        value = -value if sign else value
    value = _int(value, "offset")
    if value < 0:
        raise BadInputError(f"offset {value} is negative")
    return value


def _gtid(value) -> Gtid:
    return value if isinstance(value, Gtid) else Gtid.parse(value)


def _position(value) -> Position:
    if isinstance(value, Position):
        return value
    if isinstance(value, Gtid):
        return Position([value])
    return Position.parse(value)


# -- results ------------------------------------------------------------------------------

class BinlogInfo(NamedTuple):
    file: str
    size: int
    server_version: str
    checksum: str            # "CRC32" or "NONE"
    growing: bool            # FDE IN_USE flag: still written, or not closed cleanly
    start_state: BinlogState  # from the GTID_LIST event
    body_start: int          # offset after the GTID_LIST event


class StateAt(NamedTuple):
    """The answer to "what GTID state holds at FILE offset N"."""
    file: str
    offset: int
    state: BinlogState       # every (domain, server) entry
    via: str                 # "index" or "scan"

    @property
    def position(self) -> Position:
        """One GTID per domain: what BINLOG_GTID_POS(file, offset) prints."""
        return self.state.position()


class Location(NamedTuple):
    """Where a GTID's event group is: its GTID event at ``start``, its last
    event ending at ``end``; a reader resuming after it continues at ``resume``."""
    gtid: Gtid
    file: str
    start: int
    end: int
    resume: int
    timestamp: int
    via: str


class ReplicaStart(NamedTuple):
    """Where the server starts sending to a replica at ``position``: it reads
    ``file`` from ``offset`` (state there: ``state``), skipping per domain
    every group up to and including the position's GTID (``skip``); the first
    group it sends is ``first`` (None when the replica is up to date)."""
    position: Position
    file: str
    offset: int
    state: BinlogState
    skip: Position
    first: Location | None
    via: str


# -- one file -------------------------------------------------------------------------

def binlog_info(path: str | os.PathLike) -> BinlogInfo:
    with Binlog(_path(path)) as b:
        return _info(b)


def _info(b: Binlog) -> BinlogInfo:
    return BinlogInfo(b.path, b.size, b.fde.server_version,
                      "CRC32" if b.fde.checksum == CHECKSUM_CRC32 else "NONE",
                      b.growing, b.start_state.copy(), b.body_start)


def scan(path: str | os.PathLike) -> tuple[BinlogInfo, Iterator[Group]]:
    """The file's facts, and an iterator over its event groups in file order.
    The file stays open until the iterator is exhausted or closed."""
    b = Binlog(_path(path))
    info = _info(b)

    def groups():
        try:
            yield from b.groups()
        finally:
            b.close()
    return info, groups()


class _File:
    """An open binlog with its index status, as one lookup set keeps it."""

    def __init__(self, path: str, use_index: bool):
        self.binlog = Binlog(path)
        self.index: IndexStatus | None = None
        if use_index:
            self.index = open_index(self.binlog)
            if not self.index.usable:
                self._fallback(f"{self.index.state}: {self.index.reason}")

    @property
    def path(self) -> str:
        return self.binlog.path

    def _fallback(self, why: str) -> None:
        log.warning("%s: no usable index (%s); answering by scan", self.path, why)
        if self.index is not None:
            self.index.close()
            self.index = IndexStatus(self.index.path, IndexState.STALE, why)

    @property
    def reader(self):
        return self.index.reader if self.index is not None and self.index.usable else None

    def start_record(self) -> tuple[int, BinlogState]:
        b = self.binlog
        return b.body_start, b.start_state.copy()

    def trusted(self, offset: int) -> bool:
        """An index record's offset must be the end of the file or hold a real
        event (its CRC checks out): a cheap guard against a stale index."""
        b = self.binlog
        return (offset == b.size and not b.growing) or b.event_ok(offset)

    def record(self, search) -> tuple[int, BinlogState, str]:
        """(offset, state, via) to scan from: the index record ``search``
        picks, or the start of the file."""
        r = self.reader
        if r is not None:
            try:
                rec = search(r)
            except GtidxError as e:
                self._fallback(f"index failed: {e}")
            else:
                if rec is None or rec.offset <= self.binlog.body_start:
                    return (*self.start_record(), "index")    # record 0: checked at open
                if self.trusted(rec.offset):
                    return rec.offset, rec.state.copy(), "index"
                self._fallback(f"record at offset {rec.offset} is not an event in this binlog (stale index)")
        return (*self.start_record(), "scan")

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
        self.binlog.close()


def _samefile(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:         # one of them is missing: not the same file
        return False


def _contains(state: BinlogState, g: Gtid) -> bool:
    """Has the binlog logged ``g`` by this state (seq per (domain, server) grows)?"""
    seq = state.get(g.domain, g.server)
    return seq is not None and seq >= g.seq


# -- a set of binlogs -----------------------------------------------------------------------

def list_binlogs(path: str | os.PathLike) -> list[str]:
    """The binlog files named by ``path``: one file; a ``*.index`` file (the
    server's list, see ``_listed``); or a
    directory (its ``*.index`` if there is exactly one, else every file named
    like ``name.000001``), in binlog order."""
    path = _path(path)
    if os.path.isdir(path):
        try:
            indexes = sorted(f for f in os.listdir(path) if f.endswith(".index"))
        except OSError as e:
            raise GtidxIOError.from_os(e, path) from None
        if len(indexes) == 1:
            return list_binlogs(os.path.join(path, indexes[0]))
        if len(indexes) > 1:
            raise BadInputError(f"{len(indexes)} binlog index files in {path}: {', '.join(indexes)}",
                                path=path, hint="name one of them")
        names = sorted(f for f in os.listdir(path) if _BINLOG_NAME.fullmatch(f))
        if not names:
            raise NotFoundError("no binlog files here", path=path)
        return [os.path.join(path, n) for n in names]
    if path.endswith(".index") and os.path.isfile(path):
        base = os.path.dirname(path)
        try:
            with builtins.open(path, "rb") as f:   # this module's open() is gtidx.open
                lines = [os.fsdecode(ln.strip()) for ln in f if ln.strip()]    # names as the OS has them
        except OSError as e:
            raise GtidxIOError.from_os(e, path) from None
        if any("\0" in ln for ln in lines):
            raise CorruptBinlogError("binlog index has a NUL byte in a file name", path=path)
        files = [_listed(base, ln) for ln in lines]
        if not files:
            raise NotFoundError("binlog index lists no files", path=path)
        return files
    if not os.path.exists(path):
        raise GtidxIOError("No such file or directory", path=path)
    return [path]


def _listed(base: str, line: str) -> str:
    """A binlog named in ``master-bin.index``: relative to the index file; an
    absolute path as the server sees it, or, when that does not exist here
    (a container, a chroot, a copied directory), the same name beside the
    index file."""
    if not os.path.isabs(line):
        return os.path.normpath(os.path.join(base, line))
    if os.path.exists(line):
        return line
    beside = os.path.join(base, os.path.basename(line))
    return beside if os.path.exists(beside) else line


class Binlogs:
    """A set of binlog files in order (one file, or a server's whole list)."""

    def __init__(self, files: list[str], *, use_index: bool = True, cache: int = 32):
        if isinstance(files, (str, bytes, os.PathLike)) or not hasattr(files, "__iter__"):
            raise BadInputError(f"Binlogs() takes a list of binlog paths, not {type(files).__name__}",
                                hint="gtidx.open(path) takes one file, directory or master-bin.index")
        files = [_path(f, "binlog path") for f in files]
        if not files:
            raise BadInputError("no binlog files")
        self.files = files
        self.use_index = use_index
        self._open: OrderedDict[str, _File] = OrderedDict()
        self._cache = _int(cache, "cache", 1)
        self._start: dict[str, BinlogState] = {}
        self._end = None
        self._names = {os.path.basename(f): f for f in self.files}

    @classmethod
    def from_path(cls, path, **kw) -> "Binlogs":
        return cls(list_binlogs(path), **kw)

    def __enter__(self) -> "Binlogs":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()

    # -- files ------------------------------------------------------------------
    def resolve(self, file: str | os.PathLike) -> str:
        file = _path(file, "file")
        if file in self.files:
            return file
        name = os.path.basename(file)
        if name in self._names and (os.path.dirname(file) == "" or
                                    _samefile(file, self._names[name])):
            return self._names[name]
        if os.path.exists(file):
            return file
        raise NotFoundError(f"{file} is not one of these binlogs", hint=f"{len(self.files)} files")

    def _file(self, path: str) -> _File:
        f = self._open.get(path)
        if f is not None:
            self._open.move_to_end(path)
            return f
        f = _File(path, self.use_index)
        self._open[path] = f
        if len(self._open) > self._cache:
            _, old = self._open.popitem(last=False)
            old.close()
        return f

    def start_state(self, path: str) -> BinlogState:
        """The file's GTID_LIST state (cached: cheap to ask for many files)."""
        st = self._start.get(path)
        if st is None:
            if path in self._open:
                st = self._open[path].binlog.start_state.copy()
            else:
                with Binlog(path) as b:
                    st = b.start_state.copy()
            self._start[path] = st
        return st

    def end_state(self) -> BinlogState:
        """The state after the last complete event of the last file."""
        f = self._file(self.files[-1])
        b = f.binlog
        if self._end is None or self._end[0] != (b.path, b.size):
            offset, state, via = f.record(lambda r: r.last_record())
            end = b.complete_end(offset)
            state, _ = self._apply(f, state, offset, end, via)
            self._end = ((b.path, b.size), state)
        return self._end[1].copy()

    # -- lookups ------------------------------------------------------------------
    def state_at(self, file, offset: int) -> StateAt:
        """The binlog state at ``offset`` of ``file``, as BINLOG_GTID_POS gives it.
        NotFoundError when the offset is not the start of an event or the end of
        the file (the server returns NULL). ``offset``: see ``parse_offset``."""
        offset = parse_offset(offset)
        f = self._file(self.resolve(file))
        b = f.binlog
        if offset > b.size:
            raise NotFoundError(f"offset {offset} is past the end of the file (size {b.size})",
                                path=b.path, offset=offset)
        if offset < b.body_start:
            state = b.state_at(offset)     # inside the preamble: no index needed
            via = "index" if f.reader is not None else "scan"
        else:
            start, state, via = f.record(lambda r: r.at_offset(offset))
            state, via = self._apply(f, state, start, offset, via)
        if state is None:
            raise NotFoundError("not the start of an event", path=b.path, offset=offset,
                                hint="BINLOG_GTID_POS returns NULL here too")
        return StateAt(b.path, offset, state, via)

    def _apply(self, f: _File, state: BinlogState, start: int, target: int, via: str):
        """(state at ``target`` or None if it is not a boundary, via)."""
        try:
            return (state if f.binlog.apply_until(state, start, target) else None), via
        except CorruptBinlogError:
            if via != "index":
                raise
        # The scan from an index record broke: the index does not match this
        # binlog after all. Answer from the start of the file.
        f._fallback(f"scan from the record at {start} broke (stale index)")
        state = f.binlog.start_state.copy()
        return (state if f.binlog.apply_until(state, f.binlog.body_start, target) else None), "scan"

    def locate(self, gtid: Gtid | str) -> Location:
        """The event group of ``gtid``. NotFoundError, naming the earliest and
        latest states, when these binlogs do not hold it.

        As the server decides whether a GTID is in its binlog: it is when the
        latest state has it (seq per (domain, server) at least its seq) and
        the earliest does not (else it was purged); the file is the last one
        whose GTID_LIST state does not have it yet.
        """
        g = _gtid(gtid)
        if not _contains(self.end_state(), g):
            raise self._not_here(f"GTID {g}", "never written")
        path = self._file_for(g)
        if path is None:
            raise self._not_here(f"GTID {g}", "purged: the earliest binlog starts after it")
        f = self._file(path)
        start, _, via = f.record(lambda r: r.search(lambda _, st: not _contains(st, g)))
        loc = self._find_group(f, g, start, None, via)
        if loc is None and start > f.binlog.body_start:
            # seq_no went backwards in this binlog (gtid_strict_mode=OFF) and
            # the descent passed the group: look in the part it skipped.
            loc = self._find_group(f, g, f.binlog.body_start, start, "scan")
        if loc is None:
            raise self._not_here(f"GTID {g}", f"no such group in {os.path.basename(path)}")
        return loc

    def _find_group(self, f: _File, g: Gtid, start: int, stop: int | None, via: str) -> Location | None:
        key = (g.seq, g.domain)
        for begin, end, (ts, server, seq, domain, _) in f.binlog.group_spans(start):
            if stop is not None and begin >= stop:
                break
            if (seq, domain) == key and server == g.server:
                return Location(g, f.path, begin, end, end, ts, via if f.reader else "scan")
        return None

    def replica_start(self, position: Position | str, *, strict: bool = False) -> ReplicaStart:
        """Where the server starts sending to a replica at ``position`` (one GTID
        per domain), as MariaDB's binlog dump does it:

        * each requested GTID must be in the binlog (the latest state has its
          (domain, server) at that seq or later) or its domain must be absent;
          otherwise "not in the master's binlog" ("diverged" when the domain
          went past the seq on another server);
        * the file is the newest whose GTID_LIST state is before the position
          (none: the position is older than every file, binlogs purged);
        * the offset is the last index record before the position (offset 4,
          the whole file, without an index);
        * per domain, groups are skipped until the requested GTID's server logs
          a seq at least the requested one: equal is skipped too, greater is
          the first sent (with ``strict``, the replica's gtid_strict_mode, a
          greater seq is the "hole" error); domains the start state already
          ends with the requested GTID skip nothing.
        """
        pos = _position(position)
        latest = self.end_state()
        for g in pos:
            seq = latest.get(g.domain, g.server)
            if (seq is not None and seq >= g.seq) or latest.last(g.domain) is None:
                continue
            diverged = latest.last(g.domain).seq >= g.seq
            raise NotFoundError(
                f"connecting replica requested to start from GTID {g}, which is not in the "
                f"master's binlog{' (the replica has probably diverged: the binlog has higher seq_no)' if diverged else ''}",
                hint=f"latest state {latest or '(empty)'}")
        path = next((p for p in reversed(self.files) if self.start_state(p).is_before(pos)), None)
        if path is None:
            raise NotFoundError(
                "could not find the GTID state requested by the replica in any binlog file: the "
                "replica's position is too old and the binlogs it needs have been purged",
                hint=f"earliest state {self.start_state(self.files[0]) or '(empty)'}")
        f = self._file(path)
        offset, state, via = f.record(lambda r: r.before_position(pos))
        if via == "scan":
            offset, state = 4, f.binlog.start_state.copy()   # the server reads the whole file
        skip = {g.domain: g for g in pos}
        for g in state:
            if skip.get(g.domain) == g:
                del skip[g.domain]        # the replica stops exactly here in that domain
        first = self._first_sent(path, offset, dict(skip), strict, via)
        return ReplicaStart(pos, path, offset, state, Position(skip.values()), first, via)

    def _first_sent(self, path: str, offset: int, skip: dict, strict: bool, via: str) -> Location | None:
        for i in range(self.files.index(path), len(self.files)):
            f = self._file(self.files[i])
            start = max(offset, f.binlog.body_start) if self.files[i] == path else None
            for begin, end, (ts, server, seq, domain, _) in f.binlog.group_spans(start):
                want = skip.get(domain)
                if want is None:
                    return Location(Gtid(domain, server, seq), f.path, begin, end, end, ts, via)
                if server != want.server or seq < want.seq:
                    continue                           # before the replica's position
                del skip[domain]
                if seq == want.seq:
                    continue                           # the replica's last GTID in this domain
                if strict:
                    raise NotFoundError(
                        f"the binlog is missing the GTID {want} requested by the replica (a prior "
                        f"and a later seq_no exist, {Gtid(domain, server, seq)} follows), and GTID "
                        "strict mode is enabled", path=f.path, offset=begin)
                return Location(Gtid(domain, server, seq), f.path, begin, end, end, ts, via)
        return None

    def _file_for(self, g: Gtid) -> str | None:
        """The file that holds ``g``: the last one whose start state does not
        have it yet (binary search: seq numbers grow per (domain, server))."""
        lo, hi = 0, len(self.files)       # first file whose start state has g
        while lo < hi:
            mid = (lo + hi) // 2
            if _contains(self.start_state(self.files[mid]), g):
                hi = mid
            else:
                lo = mid + 1
        return None if lo == 0 else self.files[lo - 1]

    def _not_here(self, what: str, why: str) -> NotFoundError:
        earliest = self.start_state(self.files[0])
        try:
            latest = self.end_state()
        except GtidxError:
            latest = None
        return NotFoundError(f"{what} is not in these binlogs ({why})",
                             hint=f"earliest state {earliest or '(empty)'}; latest {latest or '(unknown)'}")


def open(path: str | os.PathLike, **kw) -> Binlogs:  # noqa: A001 (gtidx.open)
    """A file, a directory of binlogs or a ``master-bin.index``."""
    return Binlogs.from_path(path, **kw)


def state_at(path: str | os.PathLike, offset: int, **kw) -> StateAt:
    """One-shot: the state at ``offset`` of one binlog file."""
    path = _path(path)
    with Binlogs([path], **kw) as logs:
        return logs.state_at(path, offset)


class BuildProgress(NamedTuple):
    """Where a ``build`` run stands, as its ``progress`` callback sees it."""
    file: str | None     # the binlog being indexed or just finished (None: before the first file)
    files_done: int      # files finished (built, skipped or failed)
    files: int           # files in the run
    bytes_done: int      # binlog bytes done: finished files whole, the current one as far as read
    bytes: int           # the binlogs' sizes when the run started, summed


def build(paths, *, progress: Callable[[BuildProgress], None] | None = None,
          **kw) -> Iterator[BuildResult | GtidxError]:
    """Build the index of every binlog named by ``paths`` (files, directories,
    .index files), in order. Yields each file's BuildResult, or the
    GtidxError that stopped that file or path (the others still get built);
    the error's ``binlog`` attribute names that file or path.

    ``progress``, if given, is called with a BuildProgress: once when every
    path is listed (the total is the sum of the files' sizes then), as each
    file's indexing advances (every 16 MiB) and as each file ends. Other
    keywords: ``build_index``'s."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    elif isinstance(paths, bytes) or not hasattr(paths, "__iter__"):
        raise BadInputError(f"build() takes a path or a list of paths, not {type(paths).__name__}")
    paths = [_path(p) for p in paths]
    if progress is not None and not callable(progress):
        raise BadInputError(f"progress must be a callable or None, not {type(progress).__name__}")
    for name in ("page_size", "span_min"):
        if name in kw:
            kw[name] = _int(kw[name], name, 1)
    ratio = kw.get("max_ratio")
    if ratio is not None and (isinstance(ratio, (bool, str)) or not isinstance(ratio, (int, float))):
        raise BadInputError(f"max_ratio must be a number or None, not {type(ratio).__name__}")
    plan = []                           # (path, its files or the error listing it)
    for p in paths:
        try:
            plan.append((p, [(f, _size(f)) for f in list_binlogs(p)]))
        except GtidxError as e:
            e.binlog = p
            plan.append((p, e))
    files = sum(len(x) for _, x in plan if not isinstance(x, GtidxError))
    total = sum(size for _, x in plan if not isinstance(x, GtidxError) for _, size in x)
    done_files = done_bytes = 0
    if progress is not None:
        progress(BuildProgress(None, 0, files, 0, total))
    for p, listed in plan:
        if isinstance(listed, GtidxError):
            yield listed
            continue
        for f, size in listed:
            tick = None
            if progress is not None:
                def tick(offset, f=f, size=size, base=done_bytes, n=done_files):
                    progress(BuildProgress(f, n, files, base + min(offset, size), total))
            try:
                result = build_index(f, progress=tick, **kw)
            except GtidxError as e:
                e.binlog = f
                result = e
            done_files, done_bytes = done_files + 1, done_bytes + size
            if progress is not None:
                progress(BuildProgress(f, done_files, files, done_bytes, total))
            yield result


def _size(path: str) -> int:
    """A binlog's size for progress; one that cannot be read counts 0 (its build says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
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
    index = _path(index, "index")
    if not index.endswith(".idx"):
        raise BadInputError(f"{index} is not an .idx file", hint="the index of FILE is FILE.idx")
    return index[:-4]


def _read_index(index: str):
    """An IndexReader over the open file ``index`` (read page by page: memory
    stays bounded whatever its size), and the file to close."""
    from .reader import IndexReader
    f = open_file(index)
    try:
        return IndexReader(f, path=index), f
    except BaseException:
        f.close()
        raise


def index_info(index: str | os.PathLike) -> IndexInfo:
    """Facts about an .idx file and whether it can serve its binlog."""
    index = _path(index, "index")
    binlog = _binlog_of(index)
    r, f = _read_index(index)
    with f:
        stats = r.check()            # every page and the whole tree
    with Binlog(binlog) as b:
        status = open_index(b, index)
        status.close()
        return IndexInfo(index, binlog, status.state, status.reason, status.owner, r.page_size,
                         stats["pages"], stats["records"], stats["levels"], r.size, b.size)


def index_records(index: str | os.PathLike):
    """(page_size, iterator of Record(offset, state)) of an .idx file, in
    binlog order. The file stays open until the iterator is exhausted or closed."""
    r, f = _read_index(_path(index, "index"))

    def records():
        with f:
            yield from r.records()
    return r.page_size, records()


def verify(index: str | os.PathLike) -> dict:
    """Check every page, the tree, and every record against a scan of the binlog."""
    index = _path(index, "index")
    return verify_index(_binlog_of(index), index)


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


def status(directory: str | os.PathLike) -> list[FileStatus]:
    """Per binlog of ``directory``: its index state and how far behind it is.
    A binlog that cannot be read (listed but absent, empty, truncated,
    encrypted...) is a row in state "error", not a failure of the whole call."""
    import time
    out = []
    now = time.time()
    for path in list_binlogs(directory):
        try:
            try:
                out.append(_file_status(path, now))
            except OSError as e:
                raise GtidxIOError.from_os(e, path) from None
        except GtidxError as e:
            try:
                size = os.stat(path).st_size
            except OSError:
                size = 0
            out.append(FileStatus(path, size, "error", 0, size, 0.0, str(e), e))
    return out


def _file_status(path: str, now: float) -> FileStatus:
    from .indexmeta import IndexMeta
    st = os.stat(path)
    idx = index_path(path)
    fp = IndexMeta.read(idx)
    with Binlog(path) as b:
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
            if fp is None and (s_.usable or (s_.state == IndexState.INCOMPLETE and b.growing)):
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


def seek(spec: str, path: str | os.PathLike = ".", *, strict: bool = False, replica: bool = False):
    """``spec`` is one GTID (-> Location) or a replication position with
    several domains (-> ReplicaStart). With ``replica``, ``spec`` is always a
    replica's position (-> ReplicaStart), a single domain too."""
    pos = _position(spec)
    with Binlogs.from_path(path) as logs:
        if len(pos) == 1 and not replica:
            return logs.locate(next(iter(pos)))
        return logs.replica_start(pos, strict=strict)


__all__ = ["open", "Binlogs", "state_at", "scan", "binlog_info", "build", "build_index",
           "verify_index", "index_path", "list_binlogs", "StateAt", "Location", "ReplicaStart",
           "BinlogInfo", "IndexInfo", "index_info", "index_records", "verify", "seek", "status",
           "FileStatus", "BuildProgress", "parse_offset",
           "DEFAULT_MAX_RATIO", "fmt"]
