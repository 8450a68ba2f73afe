"""Which binlogs a path names, and their one flavor.

``list_series`` is the one place both are decided: it lists the files of a
file, directory, ``*.index`` or URL prefix (``list_files``) and reads their
flavor, MariaDB's or MySQL's, from FORMAT_DESCRIPTIONs
(``binlog.mariadb.file_flavor``). The façade lists once and picks the
series class by that flavor.

* Local files: every file's FORMAT_DESCRIPTION is read (75 bytes each); a
  mix of both flavors is refused here.
* An object store (``objects_flavor``): reading every object is a GET each,
  so one object stands for the prefix. With a catalog (beside the objects
  or under ``index_root``) that describes one of the listed objects as the
  very object it walked (its size and ETag as the LIST shows them, the
  entry's own: ``IndexMeta.is_object``), the flavor is the catalog's (its
  ``flavor``, MySQL's or none: MariaDB's; an entry is a walked binlog of
  that flavor; ``catalog_class``) and no object is read: the catalog,
  loaded here once, is the series' (``Listing.catalog``). Otherwise the
  newest listed object is opened (one HEAD; for a URL naming one object,
  the HEAD that asked what it names) and its first 4 KiB are read (one
  ranged GET): the flavor is its FORMAT_DESCRIPTION's (an older object is
  read only when the newer one is no binlog), and the series takes that
  open object over (``Listing.heads``) for its first open of that file,
  which reads those same first bytes: a lookup that opens the newest file
  (every one without a catalog does) costs no request more.
  A mix is refused when the odd file is read: a MySQL object among
  MariaDB's, or the reverse, is an UnsupportedBinlogError (exit 2) of the
  series that meets it.
"""
import os
import re
from typing import NamedTuple  # (annotations evaluated here, not postponed: a NamedTuple
#                                 would compile each field's annotation string at import)

from .. import storage
from ..binlog.mariadb import file_flavor
from ..errors import BadInputError, CorruptBinlogError, GtidxError, GtidxIOError, NotFoundError, \
    UnsupportedBinlogError, quoted
from ..inputs import as_path

# compiled on first use (re's cache), not at import
_BINLOG_NAME = r".+\.[0-9]{6,}$"


class Listing(NamedTuple):
    """The binlogs a path names, as ``list_series`` found them."""
    store: object            # the storage.Store they are in
    path: str                # the path as resolved in ``store``
    files: list              # the binlog files, in binlog order
    flavor: str | None       # "mariadb", "mysql", or None: not known (nothing readable)
    listings: dict           # the LISTs of prefixes made on the way ({directory: {name: (size, ETag)}})
    error: GtidxError | None = None    # why the path could not be listed (then no files, no flavor)
    heads: tuple = ()        # objects opened here, their first bytes read (the flavor): the series takes them over
    catalog: tuple | None = None   # (index_root, Catalog or None, CorruptCatalogError or None): the catalog
                                   # looked for here (an object-store prefix), None: not looked for

    def checked(self) -> "Listing":
        """This listing, once it is known to have listed: else its error, raised
        where a series is made of it (the place a failed listing always failed)."""
        if self.error is not None:
            raise self.error
        return self

    def one_file(self) -> "Listing":
        """This listing as the one file its path names (``state_at``,
        ``probe``): the path itself, whatever it listed (a directory or
        ``*.index`` is then read as a binlog, and says it is none)."""
        return self._replace(files=[self.path], heads=tuple(h for h in self.heads if h.path == self.path))


def list_series(path, storage_options: dict | None = None, *, index_root=None, catalog: bool = True) -> Listing:
    """The binlogs of ``path`` (a file, directory, ``*.index`` or URL) and
    their one flavor (see the module: ``flavor_of_files``, ``objects_flavor``),
    listed once. A path that cannot be resolved or listed is not an error
    here: the Listing holds it (``error``, flavor None) and the series made
    of it raises it (``Listing.checked``), after the caller checked its
    other arguments, as it always has. A mix of local flavors is raised
    here. ``index_root`` and ``catalog`` (False: the series will not use
    one): where an object-store prefix's catalog is looked for."""
    try:
        store, where = storage.resolve(as_path(path), storage_options)
        listings: dict = {}
        if not store.remote:
            files = list_files(where, store, listings)
        else:
            kind, head = store.look(where)
            files = list_files(where, store, listings, kind)
    except GtidxError as e:
        return Listing(None, path, [], None, {}, e)
    if not store.remote:
        return Listing(store, where, files, flavor_of_files(files, store, where), listings)
    listing = Listing(store, where, files, None, listings, heads=(head,) if files == [where] and head else ())
    return objects_flavor(listing, index_root, storage_options, catalog)


def objects_flavor(listing: Listing, index_root, storage_options: dict | None, catalog: bool) -> Listing:
    """``listing`` of objects with its flavor (see the module): MariaDB's
    when the prefix's catalog vouches for one of its objects (the catalog
    kept in it), else the newest object's that is a binlog, read from its
    head (the open objects kept in it); None when none can be read (the
    series' reads say why)."""
    store, files, looked = listing.store, listing.files, None
    directory = store.split(files[0])[0]
    names = listing.listings.get(directory)
    if catalog and names is not None and all(store.split(f)[0] == directory for f in files):
        from .. import catalog as catalogs
        from ..errors import CorruptCatalogError
        from ..index.files import IndexRoot
        found = damaged = None
        stated = "mariadb"
        if index_root is not None or catalogs.NAME in names:      # the LIST shows whether it is beside them
            root = None if index_root is None else IndexRoot(as_path(index_root, "index_root"), storage_options)
            try:
                raw = catalogs.stored(store, directory, root)
                if raw is not None:
                    stated = "mysql" if raw[0].get("flavor") == "mysql" else "mariadb"
                    found = catalog_class(stated).adopt(store, directory, root, *raw)
            except CorruptCatalogError as e:
                damaged = e
        looked = (index_root, found, damaged)
        if found is not None and any(e.fingerprint().is_object(*names.get(name, (None, None)))
                                     for name, e in found.entries().items()):
            return listing._replace(flavor=stated, catalog=looked)
    heads = {h.path: h for h in listing.heads}
    opened = []
    for f in reversed(files):           # the newest; an older one only where a newer one is no binlog
        head = _head(store, f, heads.get(f))
        if head is None:
            break                       # unreadable: the series' read of it says why
        opened.append(head)
        flavor = file_flavor(f, store, head)
        if flavor is not None:
            return listing._replace(flavor=flavor, heads=tuple(opened), catalog=looked)
    return listing._replace(heads=tuple(opened), catalog=looked)


def catalog_class(flavor: str | None):
    """The catalog class of binlogs of ``flavor`` (``catalog.Catalog``,
    MariaDB's, or ``catalog_mysql.MysqlCatalog``; None: MariaDB's)."""
    if flavor == "mysql":
        from ..catalog_mysql import MysqlCatalog
        return MysqlCatalog
    from ..catalog import Catalog
    return Catalog


def _head(store, f: str, head):
    """``f`` open (``head``, or opened here) with its first chunk read, or
    None when it is no object to read (gone, a prefix). A read the object
    store failed after its retries (throttled, timed out, cut) is raised:
    no flavor known, the question would be answered as MariaDB's (a MySQL
    GTID "not a MariaDB one") instead of saying that the store failed."""
    try:
        if head is None:
            head = store.open(f)
        head.pread(1 << head.CHUNK_SHIFT, 0)      # the first chunk: what a binlog's open reads first
        return head
    except OSError:
        return None                     # gone since it was listed
    except GtidxIOError as e:
        if not store.exists(f):
            return None                 # gone while it was read
        raise e from None
    except GtidxError:
        return None


def flavor_of_files(files: list, store, where: str) -> str | None:
    """"mysql" when the local ``files`` are MySQL binlogs, "mariadb" when
    MariaDB's, None when not known (none readable). A mix of both is an
    UnsupportedBinlogError (exit 2) naming one file of each (``where``: the
    path given). Objects of a store: ``objects_flavor``."""
    seen: dict[str, str] = {}
    for f in files:
        flavor = file_flavor(f, store)
        if flavor is not None:
            seen.setdefault(flavor, f)
    if len(seen) > 1:
        raise UnsupportedBinlogError(
            f"these binlogs mix MariaDB's and MySQL's ({os.path.basename(seen['mariadb'])} is a MariaDB "
            f"binlog, {os.path.basename(seen['mysql'])} a MySQL one): one series is one server's history",
            path=where, hint="give the files of one server (a directory or binlog.index of its own)")
    return next(iter(seen), None)


def list_path(path, storage_options: dict | None = None) -> Listing:
    """The binlogs of ``path`` listed (``list_files``), their flavor not
    read (None): what a series whose class is already chosen is made of
    (``SeriesShell.from_path``; Spark's changes source, MariaDB's). What
    the listing fails with is raised."""
    store, where = storage.resolve(as_path(path), storage_options)
    listings: dict = {}
    files = list_files(where, store, listings)
    return Listing(store, where, files, None, listings)


def list_binlogs(path: str | os.PathLike, *, storage_options: dict | None = None, store=None) -> list[str]:
    """The binlog files named by ``path``: one file; a ``*.index`` file (the
    server's list, see ``_listed``); or a
    directory (its ``*.index`` if there is exactly one, else every file named
    like ``name.000001``), in binlog order. ``path`` may be a URL
    (``s3://bucket/prefix/``: a prefix is a directory), opened with
    ``storage_options`` (see ``storage.resolve``) or in ``store``."""
    path = as_path(path)
    if store is None:
        store, path = storage.resolve(path, storage_options)
    return list_files(path, store, {})


def list_files(path: str, store, listings: dict, kind: str | None = None) -> list[str]:
    """``list_binlogs`` of a path already resolved in ``store``; the LIST of a prefix it makes (an object store's
    directory) is kept in ``listings`` ({directory: {name: (size, ETag)}},
    ``FsspecStore.listing``): ``use_catalog`` checks the catalog's entries
    against it without listing again. ``kind``: ``store.kind(path)`` when
    already known (None: asked here)."""
    if kind is None:
        kind = store.kind(path)
    if kind == "directory":
        try:
            if store.remote:
                listing = store.listing(path)
                listings[store.split(store.join(path, "x"))[0]] = listing
                names = list(listing)
            else:
                names = store.listdir(path)
        except OSError as e:
            raise GtidxIOError.from_os(e, path) from None
        indexes = sorted(f for f in names if f.endswith(".index"))
        if len(indexes) == 1:
            return list_files(store.join(path, indexes[0]), store, listings)
        if len(indexes) > 1:
            raise BadInputError(f"{len(indexes)} binlog index files in {path}: {', '.join(indexes)}",
                                path=path, hint="name one of them")
        # by the number after the last dot: master-bin.1000000 follows .999999
        names = sorted((f for f in names if re.fullmatch(_BINLOG_NAME, f)),
                       key=lambda f: (f.rsplit(".", 1)[0], int(f.rsplit(".", 1)[1])))
        if not names:
            raise NotFoundError("no binlog files here", path=path)
        return [store.join(path, n) for n in names]
    if path.endswith(".index") and kind == "file":
        try:
            raw = store.read_bytes(path)
        except OSError as e:
            raise GtidxIOError.from_os(e, path) from None
        lines = [os.fsdecode(ln.strip()) for ln in raw.splitlines() if ln.strip()]    # names as the OS has them
        if any("\0" in ln for ln in lines):
            raise CorruptBinlogError("binlog index has a NUL byte in a file name", path=path)
        files = _listed(path, lines, store)
        if not files:
            raise NotFoundError("binlog index lists no files", path=path)
        return files
    if kind is None:
        raise GtidxIOError("No such file or directory", path=path)
    return [path]


_NOT_A_NAME = ("", ".", "..")      # what os.path.basename gives for a line that names no file


def _listed(index: str, lines: list[str], store=storage.LOCAL) -> list[str]:
    """The binlogs named by the ``lines`` of the server's list ``index``
    (``master-bin.index``, MySQL's ``binlog.index``). A line is used where it
    points (relative to the index file, or absolute) only when that path,
    symlinks and ``..`` resolved, is inside the index file's directory;
    otherwise the file of the same name beside the index file is meant (a
    server in a container or chroot, a copied directory, a hostile line):
    nothing outside the directory given is ever read, or written beside.
    In an object store: always the name beside it (an archive holds copies
    of the server's files, not its directories). A line whose file is not
    there either is an error naming it (a missing file, exit 3); a line that
    names a file inside that is missing is kept (``status`` reports it)."""
    base = store.split(index)[0]
    files = []
    for number, line in enumerate(lines, 1):
        path = None if store.remote else os.path.normpath(os.path.join(base, line))
        if path is None or not _inside(path, base):
            name = os.path.basename(line)
            if name in _NOT_A_NAME:
                raise _unlisted(index, number, line, "names no file")
            path = store.join(base, name)
            if not store.remote and not os.path.lexists(path):
                raise _unlisted(index, number, line, "no file of its name beside the index file")
            if not store.remote and not _inside(path, base):      # a symlink out
                raise _unlisted(index, number, line, f"{name} beside the index file leads outside its directory")
        files.append(path)
    return files


def _inside(path: str, base: str) -> bool:
    """Is ``path``, resolved (symlinks, ``..``), strictly below the directory
    ``base``, resolved too? A name directly in ``base`` that is not a symlink
    is, without resolving (a server's own list: one lstat a line)."""
    if os.path.dirname(path) == base and not os.path.islink(path):
        return os.path.basename(path) not in _NOT_A_NAME
    real, root = os.path.realpath(path), os.path.realpath(base or ".")
    return real != root and os.path.commonpath((real, root)) == root


def _unlisted(index: str, number: int, line: str, why: str) -> GtidxIOError:
    """The error of an index line gtidx will not read: it names the index file, the line and its text."""
    return GtidxIOError(f"line {number} {quoted(line)}: {why}", path=index,
                        hint="a listed path is read only inside the index file's directory, else the file "
                             "of its name beside it")
