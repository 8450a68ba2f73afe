"""The catalog a tail keeps current (``CatalogKeeper``).

When the directory has a catalog (``gtidx catalog build``), the tail keeps
it current as ``build`` does and never makes one (a damaged one it writes
again whole, as ``build`` does): a binlog's entry is written when the
binlog closes (with the new binlog's first entry), the growing binlog's
again when it grew, at most every ``catalog_interval`` seconds, walking only
what was written since (``catalog.Describer``; of a MySQL directory,
``catalog_mysql``'s). An entry of the growing
file describes it at one size (its identity, size and fingerprint): readers
compare before they take it (see ``BinlogSeries.trust``).
"""
from __future__ import annotations

import logging
import os
import time
from typing import NamedTuple

from .. import catalog, storage
from ..series.listing import catalog_class
from .logfmt import event


class CatalogWritten(NamedTuple):
    """What one write of the catalog did: how many files it lists, whether a
    file closed or the list changed (else only the growing file's entry
    was made again), and the counts of ``Catalog.refresh``."""
    files: int
    closed: bool
    walked: int
    kept: int
    failed: int


class CatalogKeeper:
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
             interval: float, flavor: str | None = None) -> CatalogWritten | None:
        """Write the catalog of ``directory`` if it exists and is due; what
        the write did, or None when there was nothing to write. ``flavor``:
        the binlogs' (None: MariaDB's); a catalog of the other flavor's is
        made again whole (``Catalog.adopt`` refuses it)."""
        store = storage.LOCAL
        kind = catalog_class(flavor)
        path = catalog.places(store, directory)[0][1]
        stamp = self._stamp(path)
        if stamp is None:
            self.reset()
            return None                            # no catalog here: tail makes none
        now = time.monotonic()
        if self.cat is None or stamp != self.seen or self.cat.directory != directory or type(self.cat) is not kind:
            cat = kind.to_rewrite(store, directory, warn=lambda e: event(
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
            walker = self.walkers.get(growing)
            if walker is None or type(walker) is not type(cat.describer()):      # a new file, or a flavor
                self.walkers[growing] = cat.describer()
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
        return CatalogWritten(len(files), closed, counts["walked"], counts["kept"], counts["failed"])
