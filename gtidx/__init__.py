"""gtidx: a GTID binlog sidecar indexer for MariaDB.

    >>> import gtidx
    >>> gtidx.state_at("master-bin.000002", 14167).position   # like BINLOG_GTID_POS
    >>> with gtidx.open("/var/lib/mysql/binlog") as logs:      # a file, a directory or master-bin.index
    ...     logs.locate("0-2-432")
    ...     logs.at_time("2024-05-01T10:00:00Z").position          # where a restore to then stops
    >>> for result in gtidx.build("/var/lib/mysql/binlog"):    # BuildResult (or GtidxError) per file
    ...     print(result)
"""
from .errors import GtidxError

__version__ = "0.1.0"

# Public names of the library, each imported from its module on first use so
# that `import gtidx` stays cheap (the CLI needs none of it, `gtidx --help` not
# even the value types): name -> module, or (module, its name there) where the
# two differ.
_LAZY = {
    "Gtid": "gtid",
    "BinlogState": "gtid",
    "Position": "gtid",
    "open": ("api", "open_binlogs"),      # gtidx.open: api does not shadow the builtin
    "BinlogSeries": "api",
    "build": "admin",
    "state_at": "api",
    "scan": "api",
    "binlog_info": "api",
    "Location": "api",
    "StateAt": "api",
    "Probe": "api",
    "ReplicaStart": "api",
    "TimePoint": "api",
    "at_time": "api",
    "parse_time": "api",
    "BinlogInfo": "api",
    "BuildResult": "index.build",
    "build_catalog": "admin",
    "load_catalog": "admin",
}


def __getattr__(name):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'gtidx' has no attribute {name!r}")
    module, attr = where if isinstance(where, tuple) else (where, name)
    import importlib
    value = getattr(importlib.import_module(f".{module}", __name__), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Gtid", "BinlogState", "Position", "GtidxError", "__version__", *sorted(_LAZY)]
