"""The catalog of an archive: one small JSON object per directory or URL
prefix of binlogs, so that lookups over thousands of files read it once and
then only the files they need.

It lives at ``<directory>/gtidx-catalog.json`` (or, with ``--index-dir`` /
``index_root``, at that directory's mirrored place under the root, as the
indexes do: archives are often read-only). The name is not hidden: it is an
object an operator lists, copies and deletes with the archive, and it matches
neither a binlog's name (``name.000001``) nor a server's ``*.index``, so no
listing mistakes it for one. It is written whole, atomically (a local
exclusive temporary file and rename; one PUT in an object store): a reader
sees the old catalog or the new one.

Format (``"v": 1``; a MySQL archive's adds ``"flavor": "mysql"`` and has
its own entries: ``catalog_mysql``)::

    {"v": 1, "sha256", "histories": [{"id", "first", "last", "files", "start_state",
                                      "end_state", "gaps": [name, ...]}],
     "files": [{"name", "size", "etag" | "identity",
                "fingerprint": {"head_crc32", "tail_crc32", "head_adler32", "tail_adler32"},
                "server_version", "checksum", "in_use", "start_state", "end_state", "end",
                "groups", "server_ids", "first_timestamp", "last_timestamp", "max_timestamp",
                "max_timestamp_drop", "ranges", "repeats", "index": {"path", "status"}, "history"}]}

States are ``d-s-n,...`` strings (each domain's last GTID last, as MariaDB
lists them); timestamps are the GTID events' (unix seconds; null for a file
without groups); ``ranges``/``repeats`` are what ``IndexMeta`` stores (per
(domain, server) the lowest and highest seq_no logged in the file, and the
pairs whose seq_no does not always grow): what lets a lookup plan without
opening the file. ``fingerprint`` is ``IndexMeta``'s (size and the CRC32s
and Adler-32s of the first and last 64 KiB): ``catalog build`` keeps an entry
while the file's size, fingerprint and GTID_LIST match (``Entry.matches``); a
file replaced under a reused name does not.

Nothing in a catalog changes an answer; it only spares reading files, and
only once checked (``load``, ``Entry.problem``):

* ``sha256`` is the SHA-256 of the catalog's canonical JSON without it
  (``checksum``). A catalog without it (made by an older gtidx), with one
  that does not match, that is not JSON, or whose values are not of their
  kind (``_invalid``) is damaged (``CorruptCatalogError``): lookups read the
  binlogs instead (one warning), ``catalog show`` fails (exit 3),
  ``catalog build``, ``build`` and ``tail`` write it again whole
  (``Catalog.to_rewrite``). So is anything at its name but a regular file
  (a FIFO is refused, never waited on).
* Each entry records its file's identity: ``identity`` for a local file
  (``index.meta.stat_identity``: device, inode, size, mtime and ctime),
  ``etag`` for an object (its ETag; with the size). A lookup takes an
  entry only while the file's identity is the recorded one: a local file
  written, touched, copied or replaced since is read (``stat``, or
  ``fstat`` when opened); an object is checked against one LIST of its
  prefix (``BinlogSeries.use_catalog``): the recorded size and ETag, unread;
  the same size with another ETag (uploaded again in other parts) or none
  known, opened: its fingerprint decides.
* The limit of this trust: whoever can write the catalog and recompute its
  checksum, leaving the files' identities as recorded, decides what it
  says. The checksum tells damage and edits by hand; the identity a
  catalog that does not describe these very files.

Histories (``assign_histories``, the one owner of the rule): files are taken
in binlog order; a file continues a history when that history's end state
precedes its start state (every (domain, server) of the end state is in the
start state, at that seq_no or later): exactly equal is a contiguous
continuation, else a gap (files missing between them) that is reported.
A file that continues no history (an empty or unrelated GTID_LIST: another
server, a RESET MASTER, a name reused after a failover) starts a new one.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import NamedTuple

from . import safefile
from .binlog.events import CHECKSUM_CRC32
from .binlog.mariadb import Binlog
from .errors import CorruptCatalogError, GtidxError, GtidxIOError, quoted
from .gtid import BinlogState, LatestGtids, SeqRanges
from .index.files import IndexRoot, open_index
from .index.meta import IndexMeta, local_identity, object_etag, stat_identity
from .jsonkinds import U32, is_bool, is_str, list_of, nat, obj, optional, parsed_by, row

NAME = "gtidx-catalog.json"
VERSION = 1
CHECKSUM = "sha256"       # the key of the catalog's checksum
_BATCH = 1 << 20          # groups handed over per walk batch (bytes of binlog)


def places(store, directory: str, index_root: IndexRoot | None = None) -> list:
    """Where the catalog of ``directory`` may be, in the order readers look
    (under ``index_root`` first); writers use the first."""
    beside = (store, store.join(directory, NAME))
    if index_root is None:
        return [beside]
    return [index_root.mirror(directory, "/" + NAME), beside]


def directory_of(store, path: str, kind: str | None) -> str:
    """The archive directory of a listed path: itself, or the directory of a
    ``*.index`` file or of one binlog."""
    if kind == "directory":
        return path.rstrip("/") if store.remote else path
    return store.split(path)[0] or "."


def directory_of_files(store, files: list[str]) -> str | None:
    """The directory a catalog of ``files`` (listed binlogs) describes: theirs,
    or None when they are in several (a catalog describes one)."""
    directory = store.split(files[0])[0]
    if any(store.split(f)[0] != directory for f in files):
        return None
    return directory


class Entry(NamedTuple):
    """A catalog entry (``raw``: its JSON object) with its states parsed."""
    raw: dict
    start: BinlogState
    end: BinlogState

    @classmethod
    def of(cls, raw: dict) -> "Entry":
        """The entry of a readable file's JSON object (one without ``error``)."""
        return cls(raw, BinlogState.parse(raw["start_state"]), BinlogState.parse(raw["end_state"]))

    @property
    def name(self) -> str:
        return self.raw["name"]

    def seq_ranges(self) -> dict:
        """{(domain, server): (lowest, highest, goes down)}, as ``BinlogSeries.learn_from`` takes them."""
        repeats = {tuple(p) for p in self.raw.get("repeats", ())}
        return {(d, s): (lo, hi, (d, s) in repeats) for d, s, lo, hi in self.raw.get("ranges", ())}

    def fingerprint(self) -> IndexMeta:
        fp = self.raw["fingerprint"]
        etag = self.raw.get("etag")
        adlers = [fp.get(k) if type(fp.get(k)) is int else None for k in ("head_adler32", "tail_adler32")]
        return IndexMeta(self.raw["size"], fp["head_crc32"], fp["tail_crc32"],
                         binlog_etag=etag if isinstance(etag, str) else None,
                         head_adler32=adlers[0], tail_adler32=adlers[1])

    def problem(self, b: Binlog) -> str:
        """Why a lookup may not answer from this entry for the file ``b`` as
        opened ('' if it may): a local file's identity is the recorded one
        (``local_problem``) and its content matches (``matches``)."""
        st = b.file_stat
        return (st is not None and self.local_problem(st)) or self.matches(b)

    def local_problem(self, st: os.stat_result) -> str:
        """Why this entry does not describe the local file whose ``stat`` is
        ``st`` ('' if it may): its identity must be the one recorded."""
        if st.st_size != self.raw["size"]:
            return f"the catalog has {self.raw['size']} bytes, the file {st.st_size}"
        if self.raw.get("identity") != stat_identity(st):
            return "the file is not the one the catalog recorded (device, inode or times differ: written, copied " \
                   "or replaced since)"
        return ""

    def matches(self, b: Binlog) -> str:
        """Why this entry does not describe the content of ``b`` as it is now
        ('' if it does): size, fingerprint and start state (``start_of``)."""
        if b.size != self.raw["size"]:
            return f"the catalog has {self.raw['size']} bytes, the file {b.size}"
        fingerprint = self.fingerprint()
        if not fingerprint.matches(b):
            if fingerprint.legacy and not fingerprint.same_object(b):
                return "its fingerprint is from an older gtidx (CRC32s only: they cannot tell the content)"
            return "its content differs from the catalog's fingerprint (a replaced file or a reused name)"
        if self.start_of(b) != self.start:
            return f"its {self.START} differs from the catalog's"
        return ""

    START = "GTID_LIST"         # what a file's start is, in messages

    @staticmethod
    def start_of(b: Binlog):
        """The start state of ``b`` as the entry records it (its GTID_LIST's)."""
        return b.start_state


class Catalog:
    """A loaded (or new) catalog of one directory: the format's shell
    (checksum, load and save, identities, histories, refresh) with
    MariaDB's entries. A flavor's catalog is a subclass stating its
    ``FLAVOR`` (the JSON's ``flavor``; MariaDB's has none) and its entry:
    ``Entry``, ``Describer``, ``READABLE`` (the check of an entry's JSON),
    ``open_binlog`` and ``assign_histories`` (``catalog_mysql.MysqlCatalog``)."""

    FLAVOR: str | None = None       # the "flavor" a catalog of these binlogs states (None: none, MariaDB's)
    KIND = "MariaDB"                # the binlogs' name in messages

    def __init__(self, store, directory: str, index_root: IndexRoot | None = None, raw: dict | None = None,
                 where: tuple | None = None):
        self.store = store
        self.directory = directory
        self.index_root = index_root
        flavor = {} if self.FLAVOR is None else {"flavor": self.FLAVOR}
        self.raw = raw or {"v": VERSION, **flavor, "histories": [], "files": []}
        self.where = where or places(store, directory, index_root)[0]

    # -- the flavor's entry (MariaDB's here) ----------------------------------------
    # ``readable(e)``: is ``e`` a readable file's entry, each value of its kind; ``seconds(e)``: its
    # groups' (first, last) timestamps in unix seconds (None: no group)
    open_binlog = staticmethod(lambda path, store: Binlog(path, store))
    entry_of = staticmethod(lambda raw: Entry.of(raw))
    describer = staticmethod(lambda: Describer())
    assign_histories = staticmethod(lambda files: assign_histories(files))
    readable = staticmethod(lambda e: _READABLE(e))
    seconds = staticmethod(lambda e: (e["first_timestamp"], e["last_timestamp"]))

    @property
    def files(self) -> list[dict]:
        return self.raw["files"]

    @property
    def histories(self) -> list[dict]:
        return self.raw["histories"]

    def entries(self) -> dict[str, Entry]:
        """{name: Entry} of the entries that describe a readable file."""
        out = {}
        for e in self.files:
            if "error" in e:
                continue
            out[e["name"]] = self.entry_of(e)
        return out

    # -- reading and writing -------------------------------------------------------
    @classmethod
    def load(cls, store, directory: str, index_root: IndexRoot | None = None) -> "Catalog | None":
        """The catalog of ``directory`` (under ``index_root`` first), or None
        when there is none; CorruptCatalogError (exit 3) when it is damaged:
        see the module's doc."""
        found = stored(store, directory, index_root)
        return None if found is None else cls.adopt(store, directory, index_root, *found)

    @classmethod
    def adopt(cls, store, directory: str, index_root, d: dict, where: tuple) -> "Catalog":
        """The catalog ``d`` (``parse``d: its checksum checked) as this
        flavor's, once it states this flavor and each value is of its kind;
        else CorruptCatalogError: a catalog of the other flavor's binlogs
        is not trusted."""
        if d.get("flavor") != cls.FLAVOR:
            theirs = d.get("flavor")
            raise _damaged(where[1], f"it describes {'MariaDB' if theirs is None else quoted(str(theirs))} "
                                     f"binlogs, these are {cls.KIND} binlogs")
        why = _invalid(d, cls.readable)
        if why:
            raise _damaged(where[1], why)
        return cls(store, directory, index_root, d, where)

    @classmethod
    def to_rewrite(cls, store, directory: str, index_root: IndexRoot | None = None, *, warn) -> "Catalog | None":
        """The catalog of ``directory`` to make current and write (``build``,
        ``catalog build``, ``tail``): the one stored, or an empty one in place
        of a damaged one (``warn(err)`` told; every file is then read), or
        None when there is none."""
        try:
            return cls.load(store, directory, index_root)
        except CorruptCatalogError as e:
            warn(e)
            return cls(store, directory, index_root)

    def save(self) -> str:
        """Write the catalog whole with its checksum (atomically: exclusive
        temporary file and rename, or one PUT); returns where."""
        store, path = places(self.store, self.directory, self.index_root)[0]
        self.raw[CHECKSUM] = checksum(self.raw)
        data = json.dumps(self.raw, separators=(",", ":"), sort_keys=False).encode() + b"\n"
        if store.remote:
            store.put(path, data)
        else:
            try:
                if self.index_root is not None:     # under an --index-dir; beside binlogs never
                    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                safefile.remove_orphans(path)       # what a writer killed while saving left
                safefile.write_file(path, [data])
            except OSError as e:
                raise GtidxIOError.from_os(e, path) from None
        self.where = (store, path)
        return path

    # -- keeping it current --------------------------------------------------------
    def refresh(self, files: list[str], *, only=None, walkers: dict | None = None) -> dict:
        """Make the entries of ``files`` (paths in ``self.store``, in binlog
        order; the catalog then lists exactly these) current: an entry is
        kept while the file's size and fingerprint match, else the file is
        walked once. Every entry's index status is looked at again.

        ``only`` (a set of paths; ``gtidx tail``, which knows what it
        changed): the files looked at; the others keep their entries as they
        are, unread (a file without an entry is always looked at).
        ``walkers``: {path: Describer} of files that grow (tail's active
        file): walked on from where their last entry stopped, not again.
        A kept entry records the file's identity as it is now (its content
        matched). Returns counts {"kept", "walked", "failed"}."""
        old = {e["name"]: e for e in self.files}
        out, counts = [], {"kept": 0, "walked": 0, "failed": 0}
        for path in files:
            name = self.store.split(path)[1]
            prev = old.get(name)
            if only is not None and path not in only and prev is not None:
                out.append(prev)
                continue
            try:
                with self.open_binlog(path, self.store) as b:
                    entry = None
                    if prev is not None and "error" not in prev:
                        if self.entry_of(prev).matches(b) == "":
                            # the fingerprint masks IN_USE: a server clears it after a
                            # binlog's last event, at the same size
                            entry = dict(prev, in_use=b.growing)
                            entry.pop("etag", None)        # the file's as it is now (content matched)
                            entry.pop("identity", None)
                            entry.update(_identity_of(b))
                            counts["kept"] += 1
                    if entry is None:
                        walker = (walkers or {}).get(path)
                        entry = (walker or self.describer()).entry(b)
                        counts["walked"] += 1
                    entry["index"] = _index_of(b, self.index_root)
            except GtidxError as e:
                counts["failed"] += 1
                entry = {"name": name, "size": _size(self.store, path), "error": str(e)}
            entry["name"] = name
            out.append(entry)
        self.raw["files"] = out
        self.raw["histories"] = self.assign_histories(out)
        return counts


def describe(b: Binlog) -> dict:
    """A catalog entry for the open binlog ``b``: one walk of its groups."""
    return Describer().entry(b)


class Describer:
    """``describe`` of a binlog that grows (``gtidx tail``'s active file):
    each ``entry`` walks only what was written since the last one, from the
    end of the last complete group, so a file is walked once however often
    its entry is made. What was walked must still be there: a file cut or
    rewritten under it (a server crash), or another file under its name, is
    walked again from its start (its GTID_LIST and ``IndexMeta`` fingerprint
    of the prefix walked are compared). The entry of a snapshot equals
    ``describe`` of it (the seq ranges do not depend on where walks stop)."""

    def __init__(self):
        self.stop = None            # where the next walk starts (None: from the start)

    def _reset(self, b: Binlog) -> None:
        self.start = b.start_state.copy()
        self.end = self.start.copy()
        self.seen = SeqRanges({(d, s): q for d, s, q in self.start})
        self.first = self.last = self.top = None
        self.drop = self.groups = 0
        self.servers = set()
        self.stop = b.body_start
        self.mark = None            # IndexMeta of the prefix walked

    def _unchanged(self, b: Binlog) -> bool:
        return (self.stop is not None and b.size >= self.stop and b.start_state == self.start and
                (self.mark is None or self.mark.matches(b)))

    def advance(self, b: Binlog) -> None:
        """Walk ``b`` (a new snapshot of the file) from where the last walk stopped."""
        if not self._unchanged(b):
            self._reset(b)
        end, seen, servers = self.end, self.seen, self.servers
        stretch = LatestGtids()
        first, last, top, drop = self.first, self.last, self.top, self.drop
        try:
            for stop, rows, _ in b.group_batches(_BATCH, self.stop, self.stop):
                self.stop = stop
                if not rows:
                    continue
                stretch.add_rows_watching(rows, 3, 1, 2, seen)
                seen.settle(stretch)
                stretch.clear()
                apply = end.apply
                for ts, server, seq, domain, _ in rows:
                    apply(domain, server, seq)
                    servers.add(server)
                    if first is None:
                        first = top = ts
                    elif top - ts > drop:       # below the highest before it (what _time_skip needs)
                        drop = top - ts
                    last = ts
                    if ts > top:
                        top = ts
                self.groups += len(rows)
            self.mark = IndexMeta.of(b, self.stop)
        except BaseException:
            self.stop = None            # half walked: the next walk starts over
            raise
        self.first, self.last, self.top, self.drop = first, last, top, drop

    def entry(self, b: Binlog) -> dict:
        """The catalog entry of ``b`` as it is now (walked first, as far as needed)."""
        self.advance(b)
        ranges = self.seen.ranges
        return {
            **entry_core(b),
            "start_state": str(self.start), "end_state": str(self.end), "end": self.stop,
            "groups": self.groups, "server_ids": sorted(self.servers),
            "first_timestamp": self.first, "last_timestamp": self.last,
            "max_timestamp": self.top, "max_timestamp_drop": self.drop if self.first is not None else None,
            "ranges": sorted([d, s, lo, hi] for (d, s), (lo, hi) in ranges.items()),
            "repeats": sorted([d, s] for d, s in self.seen.repeats),
        }


def entry_core(b: Binlog) -> dict:
    """What every flavor's entry records of the open binlog ``b`` as it is
    now: its size, identity, fingerprint, server version, checksum and
    IN_USE flag (``name`` set by ``Catalog.refresh``)."""
    fp = IndexMeta.of(b)
    return {"name": None, "size": b.size, **_identity_of(b),
            "fingerprint": {"head_crc32": fp.head_crc32, "tail_crc32": fp.tail_crc32,
                            "head_adler32": fp.head_adler32, "tail_adler32": fp.tail_adler32},
            "server_version": b.fde.server_version,
            "checksum": "CRC32" if b.fde.checksum == CHECKSUM_CRC32 else "NONE", "in_use": b.growing}


def _identity_of(b: Binlog) -> dict:
    """What an entry records of the identity of the open binlog ``b``:
    {"identity": ...} of a local file (``local_identity``), {"etag": ...}
    of an object (``object_etag``; {} when the store gives no strong one)."""
    if b.file_stat is not None:
        return {"identity": local_identity(b)}
    etag = object_etag(b)
    return {"etag": etag} if etag is not None else {}


# -- checking what was read ------------------------------------------------------------

def checksum(raw: dict) -> str:
    """The SHA-256 (hex) of the catalog ``raw`` without its checksum, as
    canonical JSON (sorted keys, no spaces, ASCII): what ``save`` stores
    and ``load`` compares."""
    body = {k: v for k, v in raw.items() if k != CHECKSUM}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _damaged(path: str, why: str) -> CorruptCatalogError:
    return CorruptCatalogError(f"damaged catalog: {why}", path=path, hint="gtidx catalog build makes it again")


def stored(store, directory: str, index_root: IndexRoot | None = None) -> tuple | None:
    """(the catalog of ``directory`` as ``parse`` reads it, (store, path)),
    or None when there is none; CorruptCatalogError when it is damaged."""
    for st, path in places(store, directory, index_root):
        try:
            data = st.read_object(path)
        except GtidxError as e:         # not a regular file, unreadable
            raise _damaged(path, e.message) from None
        if data is not None:
            return parse(data, path), (st, path)
    return None


def parse(data: bytes, path: str) -> dict:
    """The catalog stored as ``data``, its format and checksum checked (see
    the module's doc); its flavor and values: ``Catalog.adopt``."""
    try:
        d = json.loads(data)
    except (ValueError, RecursionError) as e:        # not UTF-8 or not JSON, nested beyond the parser
        raise _damaged(path, f"not JSON ({type(e).__name__})") from None
    if not isinstance(d, dict) or d.get("v") != VERSION:
        raise _damaged(path, f"not a version-{VERSION} gtidx catalog")
    if CHECKSUM not in d:
        raise _damaged(path, f"no {CHECKSUM} (made by an older gtidx: unverified)")
    try:
        good = d[CHECKSUM] == checksum(d)
    except (ValueError, RecursionError):             # NaN, nesting beyond the encoder
        good = False
    if not good:
        raise _damaged(path, f"its {CHECKSUM} does not match its content (edited or damaged)")
    return d


FILE_FIELDS = {
    "name": is_str, "size": nat(),
    "fingerprint": obj({"head_crc32": nat(U32), "tail_crc32": nat(U32)},
                       {"head_adler32": optional(nat(U32)), "tail_adler32": optional(nat(U32))}),
    "server_version": is_str, "checksum": is_str, "in_use": is_bool,
    "index": obj({"path": is_str, "status": is_str}), "history": optional(nat())}


def readable_entry(fields: dict):
    """The check of a readable file's entry: the fields every flavor's entry
    has (``FILE_FIELDS``, and its identity: an ``etag`` or an ``identity``)
    and the flavor's own ``fields``."""
    return obj({**FILE_FIELDS, **fields}, {"etag": is_str, "identity": is_str})


_TIME = optional(nat(U32))
_READABLE = readable_entry({
    "start_state": parsed_by(BinlogState.parse, GtidxError), "end_state": parsed_by(BinlogState.parse, GtidxError),
    "end": nat(), "groups": nat(),
    "server_ids": list_of(nat(U32)), "first_timestamp": _TIME, "last_timestamp": _TIME,
    "max_timestamp": _TIME, "max_timestamp_drop": _TIME,
    "ranges": list_of(row(nat(U32), nat(U32), nat(), nat())),
    "repeats": list_of(row(nat(U32), nat(U32)))})
_FAILED = obj({"name": is_str, "size": nat(), "error": is_str, "history": lambda v: v is None})
_HISTORY = obj({"id": nat(), "first": is_str, "last": is_str, "files": nat(), "start_state": is_str,
                    "end_state": is_str, "gaps": list_of(is_str)})


def _invalid(d: dict, readable) -> str:
    """What in the catalog ``d`` is not of its kind ('' when all is);
    ``readable``: the check of a readable file's entry."""
    if not list_of(_HISTORY)(d.get("histories")):
        return "bad histories"
    files = d.get("files")
    if type(files) is not list:
        return "no list of files"
    for i, e in enumerate(files):
        if not (_FAILED if type(e) is dict and "error" in e else readable)(e):
            name = e.get("name") if type(e) is dict else None
            return f"bad entry {i + 1}" + (f" ({quoted(name)})" if type(name) is str else "")
    return ""


def _index_of(b: Binlog, index_root: IndexRoot | None) -> dict:
    status = open_index(b, index_root=index_root)
    status.close()
    return {"path": status.path, "status": str(status.state)}


def _size(store, path: str) -> int:
    try:
        return store.size(path)
    except (OSError, GtidxError):
        return 0


# -- histories -------------------------------------------------------------------------

def _precedes(end: BinlogState, start: BinlogState) -> bool:
    """Can a binlog starting at ``start`` follow one ending at ``end`` in one
    server's history (every pair of ``end`` in ``start``, not lower)?"""
    for g in end:
        seq = start.get(g.domain, g.server)
        if seq is None or seq < g.seq:
            return False
    return True


def assign_histories(files: list[dict]) -> list[dict]:
    """Group catalog entries (in binlog order) into histories: sets each
    readable entry's ``history`` (1, 2, ... in order of first file) and
    returns the histories' summaries. See the module's doc for the rule."""
    open_: list[dict] = []      # summaries, with "_end" (BinlogState) while assigning
    for e in files:
        if "error" in e:
            e["history"] = None
            continue
        start, end = BinlogState.parse(e["start_state"]), BinlogState.parse(e["end_state"])
        exact = next((h for h in open_ if h["_end"] == start), None)
        h = exact or next((h for h in open_ if _precedes(h["_end"], start)), None)
        if h is None:
            h = {"id": len(open_) + 1, "first": e["name"], "last": e["name"], "files": 0,
                 "start_state": e["start_state"], "gaps": []}
            open_.append(h)
        elif exact is None:
            h["gaps"].append(e["name"])      # files missing before this one
        h["files"] += 1
        h["last"] = e["name"]
        h["end_state"] = e["end_state"]
        h["_end"] = end
        e["history"] = h["id"]
    for h in open_:
        del h["_end"]
    return open_


def histories_of(entries: list[Entry], assign=assign_histories) -> list[tuple[int, list[str]]]:
    """[(history id, [names in order])] of entries (in binlog order), by
    ``assign`` (a flavor's ``assign_histories``)."""
    raws = [dict(e.raw) for e in entries]
    assign(raws)
    out: dict[int, list[str]] = {}
    for r in raws:
        out.setdefault(r["history"], []).append(r["name"])
    return sorted(out.items())


def describe_histories(groups: list[tuple[int, list[str]]]) -> str:
    return "; ".join(f"history {h}: {names[0]}" + (f"..{names[-1]}" if len(names) > 1 else "") +
                     f" ({len(names)} file{'s' if len(names) != 1 else ''})" for h, names in groups)


__all__ = ["NAME", "VERSION", "CHECKSUM", "FILE_FIELDS", "readable_entry", "checksum", "parse", "stored", "Catalog", "Entry", "describe", "Describer",
           "entry_core", "assign_histories", "places", "directory_of", "directory_of_files", "histories_of",
           "describe_histories"]
