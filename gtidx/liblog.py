"""The library's logger, ``gtidx``, with ``logging`` imported on first use.

Most commands have nothing to warn about, and importing ``logging`` is a
large share of the CLI's start-up (docs/benchmarks.md). ``log``
stands for ``logging.getLogger("gtidx")``: every attribute is the real
logger's, fetched (``logging`` imported) the first time one is asked for.

``on_use(fn)`` calls ``fn(logger)`` when that logger is first fetched
through ``log``, or at once when it already was or ``logging`` is already
imported; ``fn`` returns what undoes its work (and must not log through
``log``). ``on_use`` returns a function that undoes it, or drops ``fn`` if it
was never called. The CLI puts its one-line stderr handler on the logger
this way, for one command.
"""
from __future__ import annotations

import _thread
import sys

NAME = "gtidx"

_waiting: list = []         # [fn, its undo or None]: calls to make when the logger is first fetched
_lock = _thread.allocate_lock()     # threads warning at once fetch it, and make those calls, once


class _Logger:
    """``logging.getLogger(NAME)``, fetched on first use."""

    _logger = None

    def get(self):
        if self._logger is None:
            with _lock:
                if self._logger is None:
                    import logging
                    logger = logging.getLogger(NAME)
                    for call in list(_waiting):
                        if call[1] is None:
                            call[1] = call[0](logger)
                    type(self)._logger = logger
        return self._logger

    def __getattr__(self, attr):
        return getattr(self.get(), attr)


log = _Logger()


def on_use(fn):
    """Call ``fn(logger)`` once the library's logger is in use (see above)."""
    call = [fn, None]
    with _lock:
        waits = log._logger is None and "logging" not in sys.modules
        if waits:
            _waiting.append(call)
    if not waits:
        call[1] = fn(log.get())
        return call[1]

    def undo() -> None:
        with _lock:
            _waiting.remove(call)
        if call[1] is not None:
            call[1]()
    return undo


def about_a_file(record) -> tuple[str, str] | None:
    """(path, what) of a warning about one file: a record logged as
    ``log.warning("%s: what ...", path, ...)``, the path first; None for any
    other. The CLI says such warnings once per command with the files
    counted, Spark sends them from its executors to the driver."""
    msg, args = record.msg, record.args
    if not (isinstance(msg, str) and msg.startswith("%s: ") and isinstance(args, tuple) and args):
        return None
    try:
        return str(args[0]), msg[4:] % args[1:]
    except (TypeError, ValueError):
        return None
