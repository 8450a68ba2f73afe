"""gtidx: a GTID binlog sidecar indexer for MariaDB.

    >>> import gtidx
    >>> gtidx.state_at("master-bin.000002", 14167).position   # like BINLOG_GTID_POS
"""
from .errors import GtidxError
from .gtid import BinlogState, Gtid, Position

__version__ = "0.1.0"

# Re-exported from gtidx.api on first use, so `import gtidx` stays cheap.
_API = frozenset({"scan", "state_at", "binlog_info"})


def __getattr__(name):
    if name in _API:
        import importlib
        return getattr(importlib.import_module(".api", __name__), name)
    raise AttributeError(f"module 'gtidx' has no attribute {name!r}")


__all__ = ["Gtid", "BinlogState", "Position", "GtidxError", "__version__", *sorted(_API)]
