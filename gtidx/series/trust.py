"""What a catalog says of a series' files, and how far it is trusted: its
entries are checked cheaply against what is there now (a stat, or one LIST
of an object-store prefix), then taken (start states, seq ranges) until a
file, opened, differs from its entry."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..binlog.mariadb import Binlog
from ..errors import BadInputError, CorruptCatalogError, GtidxError
from ..index.files import IndexRoot
from ..inputs import as_int, as_path
from ..liblog import log
from .listing import catalog_class
from .results import SeveralHistories

if TYPE_CHECKING:
    from .. import catalog


def listed_catalog(listing, index_root, storage_options: dict | None, flavor: str | None = None
                   ) -> "catalog.Catalog | None":
    """The catalog of the binlogs of ``listing`` (``listing.list_series``'s):
    the one it loaded (an object-store prefix's, for its flavor) when it
    looked under this ``index_root``, else loaded now; None when there is
    none, the files are one alone or in several directories, or it is
    damaged (a warning: the binlogs are read instead). ``flavor``: the
    binlogs' (``listing.catalog_class``: None is MariaDB's); a catalog of
    the other flavor is damaged for them."""
    store, path, files = listing.store, listing.path, listing.files
    if files == [path]:
        return None
    directory = store.split(files[0])[0]
    if any(store.split(f)[0] != directory for f in files):
        return None
    kind = catalog_class(flavor)
    if listing.catalog is not None and listing.catalog[0] == index_root:
        found, damaged = listing.catalog[1:]
        if found is not None and type(found) is not kind:      # the flavor was read elsewhere: not these
            try:
                kind.adopt(store, found.directory, found.index_root, found.raw, found.where)
            except CorruptCatalogError as e:
                found, damaged = None, e
    else:
        root = None if index_root is None else IndexRoot(as_path(index_root, "index_root"), storage_options)
        found = damaged = None
        try:
            found = kind.load(store, directory, root)
        except CorruptCatalogError as e:
            damaged = e
    if damaged is not None:
        log.warning("%s: %s; not used, the binlogs are read instead (%s)", damaged.path, damaged.message,
                    damaged.hint)
    return found


class CatalogTrust:
    """The catalog entries of a series (``_catalog``: path -> entry, while
    trusted). What an entry gives the series, and what forgetting one
    clears, are the flavor's: the hooks ``take_entry``, ``read_instead``,
    ``forget_entry``, ``check_binlog`` and ``open_binlog_of`` (MariaDB's
    ``BinlogSeries`` here; ``MysqlSeries`` has its own)."""

    HISTORIES = "GTID_LIST states"      # what does not continue between histories, in messages

    def histories_rule(self, entries: list) -> list:
        from .. import catalog
        return catalog.histories_of(entries)

    def take_entry(self, path: str, e) -> None:
        """Take the trusted entry ``e`` as what ``path`` is: its start state and seq ranges."""
        self._start[path] = e.start.copy()
        self.learn_from(path, e.seq_ranges())

    def read_instead(self, path: str, b) -> None:
        """``path``, opened as ``b``, differs from its entry: what it holds now."""
        self._start[path] = b.start_state.copy()

    def check_binlog(self, path: str):
        """``path`` opened (its binlog only) to compare it with its entry."""
        return Binlog(path, self.store)

    def open_binlog_of(self, path: str):
        """The binlog of ``path`` if the series has it open, else None."""
        return self._open[path].binlog if path in self._open else None

    def forget_entry(self, path: str) -> None:
        """What the series took of ``path``'s entry, forgotten (``_distrust``)."""
        if self._end is not None and self._end[0][0] == path:
            self._end = None
        self._start.pop(path, None)
        self._learned.discard(path)
        for ranges in self._ranges.values():
            ranges.pop(path, None)
        for dips in self._dips.values():
            dips.discard(path)
        self._planners.clear()

    def newer(self, path: str, last: int) -> bool:
        """Does the catalog say every group of ``path`` is stamped after the
        second ``last``? Never here: a flavor whose entries bound a file's
        lowest timestamp says so (``MysqlCatalogUse.newer``)."""
        return False

    def use_catalog(self, cat: "catalog.Catalog | None", history: int | None = None, *,
                    listings: dict | None = None) -> None:
        """Take what the catalog says of these files: their start states (no
        file opened for them), the end state of the newest (once it is seen
        to be the file the catalog describes), and each file's seq_no ranges
        (``learn_from``: the planner knows which file holds a GTID without a walk).
        Every entry is checked first against what is there now, cheaply
        (``_entry_problem``: a stat, or one LIST of an object-store prefix;
        ``listings``: LISTs already made, see ``listing.list_files``); then it is
        trusted until its file, opened, differs from it (size, fingerprint,
        GTID_LIST): then it is dropped and the file is read.

        The files must be one history (``catalog.assign_histories``): with
        several, ``history`` picks one (its files only are answered from);
        without it, BadInputError (exit 2) naming them: never mixed."""
        from .. import catalog
        entries = cat.entries() if cat is not None else {}
        listed = [(p, entries.get(os.path.basename(p))) for p in self.files]
        known = [e for _, e in listed if e is not None]
        groups = self.histories_rule(known)
        if history is not None:
            history = as_int(history, "history", 1)
            names = dict(groups).get(history)
            if names is None:
                raise BadInputError(f"no history {history} in the catalog of these binlogs",
                                    hint=catalog.describe_histories(groups) if groups else
                                    "no catalog here: gtidx catalog build makes one")
            keep = set(names)
            self.files = [p for p, e in listed if e is not None and e.name in keep]
            self._names = {os.path.basename(f): f for f in self.files}
            listed = [(p, e) for p, e in listed if p in self.files]
            self.history = history
        elif len(groups) > 1:
            raise SeveralHistories(
                f"these binlogs hold {len(groups)} histories ({self.HISTORIES} that do not continue each "
                f"other: binlogs of several servers, or a name reused): {catalog.describe_histories(groups)}",
                groups=groups, hint="answer within one: --history N (history=N); gtidx catalog show lists them")
        elif groups:
            self.history = groups[0][0]
        self.trust({path: e for path, e in listed if e is not None}, listings=listings)

    def trust(self, entries: dict[str, "catalog.Entry"], *, listings: dict | None = None) -> None:
        """Take catalog entries ({path: entry}, of one history; ``use_catalog``
        picks them) as what these files are: their start states and seq_no
        ranges without opening them, each after a cheap check against what
        is there now (``_entry_problem``: a stat, or one LIST of an
        object-store prefix; ``listings``: LISTs already made), then until
        its file, opened, differs (``Entry.problem``: identity, size,
        fingerprint, GTID_LIST)."""
        listings = dict(listings or {})
        opened = []
        mine = set(self.files)
        for path, e in entries.items():
            if path not in mine:
                continue
            why = self._entry_problem(path, e, listings, opened)
            if why:
                log.warning("%s: catalog entry is stale (%s); reading the file", path, why)
                continue
            self._catalog[path] = e
            self.take_entry(path, e)
        if opened:
            log.warning("%d binlog object(s) have another ETag than their catalog entry but the same content "
                        "(uploaded again?), first %s: each lookup opens them to compare; gtidx catalog build "
                        "records their ETags", len(opened), opened[0])

    def _entry_problem(self, path: str, e: "catalog.Entry", listings: dict, opened: list) -> str:
        """Why the catalog entry ``e`` does not describe the file at ``path``
        as it is now ('' when it may): a file grown, cut, written, replaced
        or gone since the catalog was made is read, not taken from its
        entry. A local file's identity (device, inode, size, times: one
        ``stat``) must be the recorded one (``Entry.local_problem``). In an
        object store one LIST of the prefix (``listings``, made once per
        directory and kept) gives every object's size and ETag: the
        recorded ones, it is the object described. An object whose ETag is
        no longer the entry's (or either is unknown) but whose size is may
        hold the same bytes uploaded again (in other parts): it is opened
        and its fingerprint decides (``Entry.matches``; ``path`` is added
        to ``opened`` when it still matches)."""
        if not self.store.remote:
            try:
                return e.local_problem(os.stat(path))
            except OSError:
                return f"the catalog has {e.raw.get('size')} bytes, the file is gone"
        directory, name = self.store.split(path)
        if directory not in listings:
            try:
                listings[directory] = self.store.listing(directory)
            except GtidxError as x:          # LIST denied (a master-bin.index read without it)
                log.warning("%s: cannot list the prefix to check the catalog's entries (%s); each is "
                            "checked when its file is opened", directory, x.message)
                listings[directory] = None
        listing = listings[directory]
        if listing is None:
            return ""
        size, etag = listing.get(name, (None, None))
        if size is None:
            return f"the catalog has {e.raw.get('size')} bytes, the file is gone"
        if size != e.raw.get("size"):
            return f"the catalog has {e.raw.get('size')} bytes, the file {size}"
        fingerprint = e.fingerprint()
        if etag is not None and fingerprint.binlog_etag is not None and fingerprint.is_object(size, etag):
            self._listed_same.add(path)         # the very object described: its entry answers unopened
            return ""
        try:
            with self.check_binlog(path) as b:
                why = e.matches(b)
                if why:
                    self.read_instead(path, b)      # read instead: what it holds now
                elif etag is not None and fingerprint.binlog_etag is not None:
                    opened.append(path)         # another ETag, the same bytes
                return why
        except GtidxError as x:
            return f"cannot read it: {x.message}"

    def cataloged(self, path: str, *, check: bool = False) -> "catalog.Entry | None":
        """The catalog entry ``path`` is answered from (None: it has none, or
        it was found stale). ``check``: open the file first and compare it
        with its entry, as a lookup that reads the file does."""
        path = self.resolve(path)
        entry = self._catalog.get(path)
        if check and entry is not None:
            b = self.open_binlog_of(path)
            if b is not None:
                why = entry.problem(b)
            else:
                with self.check_binlog(path) as b:          # the binlog only: no index needed to compare
                    why = entry.problem(b)
            if why:
                self._distrust(path, why)
                entry = None
        return entry

    def _distrust(self, path: str, why: str) -> None:
        """The file at ``path`` is not what its catalog entry describes: forget the entry."""
        log.warning("%s: catalog entry is stale (%s); reading the file", path, why)
        del self._catalog[path]
        self._listed_same.discard(path)
        self._distrusted += 1
        self.forget_entry(path)
