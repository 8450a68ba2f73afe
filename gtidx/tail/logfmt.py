"""The sidecar's log: one logfmt line per event (``ts=... level=...
event=... key=value ...``), on the ``gtidx.tail`` logger, which every module
of the tail writes to (a caller sets one level for all of it)."""
from __future__ import annotations

import json
import logging
import time

log = logging.getLogger("gtidx.tail")


def event(level: int, msg: str, **fields) -> None:
    """One structured (logfmt) log line: event=... key=value ..."""
    log.log(level, msg, extra={"fields": fields})


class LogfmtFormatter(logging.Formatter):
    """A record as one logfmt line: its time (UTC, milliseconds), level,
    message as ``event`` and its ``fields``; a value with a space or ``=``
    in it, or empty, is quoted (JSON)."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [f"ts={ts}", f"level={record.levelname.lower()}", f"event={record.getMessage()}"]
        for k, v in getattr(record, "fields", {}).items():
            v = str(v)
            parts.append(f"{k}={json.dumps(v) if (' ' in v or '=' in v or not v) else v}")
        return " ".join(parts)
