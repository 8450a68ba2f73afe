"""The library's logger, ``gtidx``, with ``logging`` imported on first use.

Most commands have nothing to warn about, and importing ``logging`` costs
about as much as a whole lookup (issue 16: the CLI's start-up). ``log``
stands for ``logging.getLogger("gtidx")``: every attribute is the real
logger's, fetched (``logging`` imported) the first time one is asked for.

``on_use(fn)`` calls ``fn(logger)`` when that logger is first fetched
through ``log``, or at once when it already was or ``logging`` is already
imported; ``fn`` returns what undoes its work. ``on_use`` returns a function
that undoes it, or drops ``fn`` if it was never called. The CLI puts its
one-line stderr handler on the logger this way, for one command.
"""
from __future__ import annotations

import sys

NAME = "gtidx"

_waiting: list = []         # [fn, its undo or None]: calls to make when the logger is first fetched


class _Logger:
    """``logging.getLogger(NAME)``, fetched on first use."""

    _logger = None

    def get(self):
        if self._logger is None:
            import logging
            type(self)._logger = logging.getLogger(NAME)
            for call in list(_waiting):
                if call[1] is None:
                    call[1] = call[0](self._logger)
        return self._logger

    def __getattr__(self, attr):
        return getattr(self.get(), attr)


log = _Logger()


def on_use(fn):
    """Call ``fn(logger)`` once the library's logger is in use (see above)."""
    call = [fn, None]
    if log._logger is not None or "logging" in sys.modules:
        call[1] = fn(log.get())
        return call[1]
    _waiting.append(call)

    def undo() -> None:
        _waiting.remove(call)
        if call[1] is not None:
            call[1]()
    return undo
