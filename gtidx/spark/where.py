"""What a Spark executor needs to open the binlogs itself, and the way its
warnings reach the driver.

``Where`` is shipped in the closures of every job (``locate``, the data
sources): an executor needs no local copy of anything. The warnings an
executor's library calls log go to an accumulator (``warnings_accumulator``)
that the driver says once (``say_warnings``).
"""
from __future__ import annotations

import json
import logging
import sys
from typing import NamedTuple

from pyspark import TaskContext
from pyspark.accumulators import AccumulatorParam

from .. import api
from ..errors import BadInputError
from ..liblog import about_a_file, log


class Where(NamedTuple):
    """Where the binlogs and indexes are, as each executor opens them itself
    (shipped in the closures: an executor needs no local copy of anything):
    ``storage_options`` for URLs (``storage.resolve``; without them, the
    executor's own AWS_* variables, profile or instance role) and the
    ``index_root`` (``BinlogSeries``); ``kind``: the series class the
    façade picked for the binlogs' flavor (``api.series_class``; None:
    MariaDB's ``BinlogSeries``)."""
    storage_options: dict | None = None
    index_root: str | None = None
    kind: type | None = None
    warnings: object = None      # an accumulator (``warnings_accumulator``) the executors' warnings go to

    def series(self, files: list[str]) -> api.BinlogSeries:
        _ToDriver.route(self.warnings)
        return (self.kind or api.BinlogSeries)(files, storage_options=self.storage_options, index_root=self.index_root)

    def open_listing(self, listing: api.Listing, history: int | None = None) -> api.BinlogSeries:
        """The binlogs of ``listing`` (``api.list_series``'s: listed once, on
        the driver) with their catalog, as ``gtidx.open`` has them. The
        listing is not kept: executors open ``series(files)``."""
        _ToDriver.route(self.warnings)
        return (self.kind or api.BinlogSeries).from_listing(listing, storage_options=self.storage_options,
                                                            index_root=self.index_root, history=history)


class _ListParam(AccumulatorParam):
    """An accumulator of lists: each task's items appended."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):
        a.extend(b)
        return a


def warnings_accumulator(sc):
    """An accumulator for ``locate(warnings=...)``: the library's warnings on
    the executors, as (path or None, what) pairs, in place of their stderr."""
    return sc.accumulator([], _ListParam())


def say_warnings(acc) -> None:
    """The executors' warnings gathered in ``acc`` (after the action that ran
    them), each once, through the library's logger on the driver: the CLI
    says them once per command, the files counted."""
    for path, what in dict.fromkeys(tuple(x) for x in acc.value):
        if path is None:
            log.warning("%s", what)
        else:
            log.warning("%s: %s", path, what)


class _ToDriver:
    """In an executor (a Spark task runs), the library's warnings go to the
    accumulator of the ``Where`` that opened the series last, when it has
    one, else to stderr as Python's last resort says them. On the driver
    nothing changes: its logger is the caller's (the CLI's)."""

    acc = None
    handler = None

    @classmethod
    def route(cls, acc) -> None:
        if TaskContext.get() is None:
            return
        cls.acc = acc
        if cls.handler is None:
            class Handler(logging.Handler):
                def emit(self, record):
                    if cls.acc is None:
                        sys.stderr.write(record.getMessage() + "\n")
                        return
                    cls.acc.add([about_a_file(record) or (None, record.getMessage())])
            cls.handler = Handler(logging.WARNING)
            logging.getLogger("gtidx").addHandler(cls.handler)


def parse_storage_options(text: str | None) -> dict | None:
    """The data source's ``storage_options`` option: a JSON object."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise BadInputError("the gtidx data source's storage_options option must be a JSON object",
                            hint='.option("storage_options", json.dumps({"endpoint_url": ...}))')
    return value
