"""gtidx: a GTID binlog sidecar indexer for MariaDB.

    >>> import gtidx
    >>> gtidx.state_at("master-bin.000002", 14167).position   # like BINLOG_GTID_POS
    >>> with gtidx.open("/var/lib/mysql/binlog") as logs:      # a file, a directory or master-bin.index
    ...     logs.locate("0-2-432")
    >>> for result in gtidx.build("/var/lib/mysql/binlog"):    # BuildResult (or GtidxError) per file
    ...     print(result)
"""
from .errors import GtidxError
from .gtid import BinlogState, Gtid, Position

__version__ = "0.1.0"

# Public names of the library, each imported from its module on first use so
# that `import gtidx` stays cheap (the CLI and the value types need none of it).
_LAZY = {
    "open": "api",
    "build": "api",
    "state_at": "api",
    "scan": "api",
    "binlog_info": "api",
    "Location": "api",
    "StateAt": "api",
    "ReplicaStart": "api",
    "BinlogInfo": "api",
    "BuildResult": "indexfile",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gtidx' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Gtid", "BinlogState", "Position", "GtidxError", "__version__", *sorted(_LAZY)]
