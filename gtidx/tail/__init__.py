"""gtidx tail: keep the ``.idx`` of a live server's binlogs current.

``tailer``: the loop following a binlog directory (``Tailer``, ``tail``,
``TailSettings``). ``incremental``: one binlog's index written as the binlog
grows and resumed after a restart (``IncrementalIndex``). ``keeper``: the
directory's catalog kept current (``CatalogKeeper``). ``logfmt``: the log
lines (``LogfmtFormatter``), all on the ``gtidx.tail`` logger. ``watch``:
what wakes the loop (inotify, or polling). ``metrics``: ``--metrics``'
/metrics and /healthz (imported only then). ``archive``: ``--archive``'s
uploads to S3 (``Archiver``, imported only then).
"""
from __future__ import annotations

from .incremental import IncrementalIndex
from .keeper import CatalogKeeper
from .logfmt import LogfmtFormatter
from .tailer import TailSettings, Tailer, tail

__all__ = ["CatalogKeeper", "IncrementalIndex", "LogfmtFormatter", "TailSettings", "Tailer", "tail"]
