"""The shell both flavors' series share (``mariadb.BinlogSeries``,
``mysql.MysqlSeries``): made from a list of files (``from_path``: of a file,
directory, ``*.index`` or URL), where they are (``store``) and their
indexes (``index_root``); naming a file of the series (``resolve``); a
context manager that closes what it opened (``close``, each flavor's own)."""
from __future__ import annotations

import os

from .. import storage
from ..errors import BadInputError, NotFoundError
from ..index.files import IndexRoot
from ..inputs import as_int, as_path
from .listing import list_path
from .trust import listed_catalog


def same_file(a: str, b: str) -> bool:
    """Are the local paths ``a`` and ``b`` the same file (False when either is missing)?"""
    try:
        return os.path.samefile(a, b)
    except OSError:         # one of them is missing: not the same file
        return False


class SeriesShell:
    """An ordered series of one server's binlog files: the parts that do not
    depend on the flavor. Subclasses answer, make themselves of a listing
    (``from_listing``: ``from_path`` lists and calls it) and close what they
    open (``close``); ``use_catalog`` takes a trusted catalog."""

    _NAME = "SeriesShell"          # the class a wrong ``files`` argument is reported for
    _NAME_HINT: str | None = None  # and what to say about it
    FLAVOR: str | None = None      # the binlogs' flavor ("mysql"; None: MariaDB's): which catalog class

    def __init__(self, files: list[str], *, use_index: bool = True, cache: int = 32,
                 storage_options: dict | None = None, store=None, index_root=None):
        if isinstance(files, (str, bytes, os.PathLike)) or not hasattr(files, "__iter__"):
            raise BadInputError(f"{self._NAME}() takes a list of binlog paths, not {type(files).__name__}",
                                hint=self._NAME_HINT)
        files = [as_path(f, "binlog path") for f in files]
        if not files:
            raise BadInputError("no binlog files")
        if store is None:      # where they are: a URL names its object store
            store = storage.resolve(files[0], storage_options)[0]
            files = [storage.resolve(f, storage_options)[1] for f in files]
        self.store = store
        # indexes kept apart (a local directory or URL mirroring the binlogs' places): looked up first
        self.index_root = None if index_root is None or isinstance(index_root, IndexRoot) else \
            IndexRoot(as_path(index_root, "index_root"), storage_options)
        self.files = files
        self.use_index = use_index
        self._names = {os.path.basename(f): f for f in files}
        self._cache = as_int(cache, "cache", 1)
        self._heads: dict = {}       # path -> the object its listing opened (``take_over``), until opened
        self.one_flavor = False      # the listing read these files' one flavor: another met is a mix

    @classmethod
    def from_listing(cls, listing, *, storage_options: dict | None = None, history: int | None = None, **kw):
        """``from_path`` of binlogs already listed (``listing.list_series``:
        the façade lists once, and picks the class by their flavor), with
        their catalog (of the class's ``FLAVOR``) when there is one and
        indexes are used; ``history``: the catalog's history to answer in
        (binlogs of several histories are refused without one)."""
        listing = listing.checked()
        found = (listed_catalog(listing, kw.get("index_root"), storage_options, cls.FLAVOR)
                 if kw.get("use_index", True) else None)
        series = cls(listing.files, store=listing.store, storage_options=storage_options, **kw)
        series.take_over(listing)
        if found is not None or history is not None:
            try:
                series.use_catalog(found, history, listings=listing.listings)
            except BaseException:
                series.close()
                raise
        return series

    def take_over(self, listing) -> None:
        """What the listing the series is made of opened and read: its open
        objects (``Listing.heads``), each the series' first open of its
        file, and whether it read the files' flavor (``one_flavor``)."""
        self._heads = {h.path: h for h in listing.heads}
        self.one_flavor = listing.flavor is not None

    def head(self, path: str):
        """The object ``path`` as its listing opened it, once (None: open it)."""
        return self._heads.pop(path, None)

    @classmethod
    def from_path(cls, path, *, storage_options: dict | None = None, history: int | None = None, **kw):
        """The binlogs of a file, directory or ``*.index`` (or URL): see ``from_listing``."""
        return cls.from_listing(list_path(path, storage_options), storage_options=storage_options,
                                history=history, **kw)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def resolve(self, file: str | os.PathLike) -> str:
        """The series' own path of ``file``: one of its paths, its name alone,
        or (local) another path of the same file; else a file that exists in
        the store (answered as itself). NotFoundError otherwise."""
        file = as_path(file, "file")
        if file in self.files:
            return file
        name = os.path.basename(file)
        if name in self._names and (os.path.dirname(file) == "" or
                                    (not self.store.remote and same_file(file, self._names[name]))):
            return self._names[name]
        if self.store.exists(file):
            return file
        raise NotFoundError(f"{file} is not one of these binlogs", hint=f"{len(self.files)} files")
