"""What ``gtidx serve`` serves: the binlogs of a local directory or of an
object-store prefix (``s3://bucket/prefix/``, any fsspec URL the other
commands take, with their ``storage_options``), as the façade lists them
(``api.open_binlogs``: the catalog checked, the indexes used), within one
history (``history``: binlogs of several histories are refused without one,
in the series' words, as every lookup refuses them).

A connection opens the series once for its dump: the file list and the
replica's start come from it; the stream then reads the files through the
series' store (``Stream(store=...)``), an object through ranged reads.
"""
from __future__ import annotations

from .. import api
from ..binlog.mysql import open_binlog
from ..errors import BadInputError


def open_series(settings):
    """The series of ``settings.path`` (a ``ServeSettings``): close it after use."""
    return api.open_binlogs(settings.path, storage_options=settings.storage_options, history=settings.history)


def listed_files(settings) -> list[str]:
    """The binlogs a live directory holds now, listed again as a stream
    follows it (at every wake: the listing alone, no catalog checked)."""
    return api.list_binlogs(settings.path)


def source_facts(settings) -> tuple[str | None, str, str]:
    """The binlogs' flavor (the series' ``FLAVOR``), the binlog_checksum the
    source reports (``@@global.binlog_checksum``) and the server version in
    the FORMAT_DESCRIPTION: the newest binlog's, as the server it came from
    wrote it. Opening the series here also refuses, before the server
    listens, an archive that cannot be served: nothing there, several
    histories without ``history``."""
    with open_series(settings) as logs:
        if not logs.files:
            raise BadInputError(f"no binlogs in {settings.path}")
        with open_binlog(logs.files[-1], logs.store) as b:
            return logs.FLAVOR, ("CRC32" if b.checksum_len else "NONE"), b.fde.server_version
