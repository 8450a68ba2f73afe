"""Point-in-time lookups (issue 13 item 5) on real binlogs whose GTID event
timestamps step backwards, inside a file and across FLUSH BINARY LOGS, with
``mariadb-binlog --stop-datetime`` as the oracle: for every T the position
gtidx answers is the GTIDs it replays, and the offset is where it stops.

``mariadb-binlog`` stops at the first event of any type whose timestamp is
at least T. The groups here are autocommit statements (every event of a
group has its GTID event's timestamp) and each FLUSH BINARY LOGS is run
at the timestamp of the next group, so the ROTATE, FORMAT_DESCRIPTION,
GTID_LIST and BINLOG_CHECKPOINT events it writes are never later than the
group after them (the groups are a day ahead of the real time that the
checkpoints written in the background carry): there the first such event is a GTID event or lies just
before one, and both rules give the same answer (docs/design.md says where
they differ)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from gtidx import admin, api
from gtidx.index.build import build_index
from conftest import private
from tools.mariadb import MariaDB

pytestmark = pytest.mark.live

# A day ahead: the BINLOG_CHECKPOINT events the server's background thread
# writes carry the real time, earlier than every group then.
BASE = int(time.time()) + 86400
# per file, the timestamps (seconds after BASE) of its groups, in the order logged
FILES = [[100, 300, 200, 500, 400, 400],
         [250, 150, 600, 350],
         [50, 700, 650, 700],
         # down twice in a row: 40 below the highest before it (780), 20 below the one before;
         # then groups a walk from an index record could start at, past the 780 one
         [710, 780, 760, 740, 741, 742, 743, 744],
         [820]]
END_FLUSH = 900          # the last FLUSH: after it the active binlog has no groups


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory):
    """The closed binlogs written as FILES says and the active one after them."""
    srv = private(MariaDB(tmp_path_factory.mktemp("pitr-srv")), "a private MariaDB server")
    try:
        srv.sql("CREATE DATABASE t")
        srv.sql("CREATE TABLE t.a (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
        conn = srv.connect()
        try:
            with conn.cursor() as cur:
                first = None
                for stamps in FILES:
                    cur.execute("SET TIMESTAMP=%s", (BASE + stamps[0],))
                    cur.execute("FLUSH BINARY LOGS")
                    if first is None:
                        cur.execute("SHOW MASTER STATUS")
                        first = cur.fetchone()[0]
                    for i, ts in enumerate(stamps):
                        cur.execute("SET TIMESTAMP=%s", (BASE + ts,))
                        # domain 1 now and then: the position has two domains
                        cur.execute("SET SESSION gtid_domain_id=%s", (i % 3 == 2,))
                        cur.execute("INSERT INTO t.a (v) VALUES (%s)", (ts,))
                cur.execute("SET TIMESTAMP=%s", (BASE + END_FLUSH,))
                cur.execute("FLUSH BINARY LOGS")
        finally:
            conn.close()
        files = api.list_binlogs(srv.binlog_dir / "master-bin.index")
        names = [os.path.basename(f) for f in files]
        out = tmp_path_factory.mktemp("pitr-binlogs")
        copies = []
        for f in files[names.index(first):]:
            shutil.copy(f, out / os.path.basename(f))
            copies.append(str(out / os.path.basename(f)))
        yield copies
    finally:
        srv.stop()


def _stop_datetime(files, t: int):
    """What ``mariadb-binlog --stop-datetime`` replays: (the position; the
    file and the end of the last event it printed, (0, 0) for none)."""
    stamp = api.format_time(t).replace("T", " ").rstrip("Z")
    out = subprocess.run(["mariadb-binlog", f"--stop-datetime={stamp}", *files], capture_output=True,
                         text=True, check=True, env={**os.environ, "TZ": "UTC"}).stdout
    state = api.binlog_info(files[0]).start_state
    for d, s, q in re.findall(r"\tGTID (\d+)-(\d+)-(\d+)", out):
        state.apply(int(d), int(s), int(q))
    ends = re.findall(r"end_log_pos (\d+)", out)
    file = max(0, len(re.findall(r"\tStart: binlog v 4", out)) - 1)
    return state.position(), (file, int(ends[-1]) if ends else 0)


def _last_end(files, at: tuple) -> tuple:
    """(file number, offset) where the last group before ``at`` ends, (0, 0): none."""
    ends = [(i, g.end) for i, f in enumerate(files) for g in api.scan(f)[1]]
    return max((e for e in ends if e <= at), default=(0, 0))


def _times():
    stamps = sorted({ts for f in FILES for ts in f} | {END_FLUSH})
    return sorted({0, *stamps, *(s - 1 for s in stamps), *(s + 1 for s in stamps), END_FLUSH + 100})


@pytest.mark.parametrize("use_index", [False, True, "catalog"])
def test_at_time_is_where_stop_datetime_stops(binlogs, tmp_path, use_index):
    """Without an index, with one, and with a catalog (whose per-file
    timestamp bounds skip files and, with the index records, the start of
    the file the answer is in)."""
    files = binlogs
    if use_index:
        files = []
        for f in binlogs:
            files.append(str(shutil.copy(f, tmp_path / os.path.basename(f))))
            build_index(files[-1], page_size=64, span_min=1, max_ratio=None, force=True)
    if use_index == "catalog":
        admin.build_catalog(str(tmp_path))
    wrong, vias = [], set()
    with (api.open_binlogs(str(tmp_path)) if use_index == "catalog" else
          api.BinlogSeries(files, use_index=bool(use_index))) as logs:
        assert use_index != "catalog" or logs.files == files
        for dt in _times():
            t = BASE + dt
            got = logs.at_time(t)
            position, (file, stop) = _stop_datetime(files, t)
            # it stops right before the group, or in the preamble of the
            # binlog the group opens (its FORMAT_DESCRIPTION, GTID_LIST and
            # BINLOG_CHECKPOINT events carry the FLUSH's time, as late as the group)
            # where it stops: right before our group, or after the events
            # that end the binlog before it or open its binlog
            ours = (files.index(got.file), got.offset)
            if got.position != position or not _last_end(files, ours) <= (file, stop) <= ours:
                wrong.append((dt, got.file, got.offset, got.gtid, got.position, position, files[file], stop))
            if got.gtid is not None:
                assert got.timestamp >= t
                assert api.state_at(got.file, got.offset).position == got.position
            vias.add(got.via)
    assert wrong == []
    if use_index == "catalog":       # some walks started at an index record, past the file's start
        assert "index" in vias, vias


def test_timestamps_really_step_back(binlogs):
    """The binlogs are what the test means: group timestamps go down inside
    a file and from one file to the next."""
    stamps = []
    for f in binlogs:
        _, groups = api.scan(f)
        stamps.append([g.timestamp - BASE for g in groups])
    assert stamps == FILES + [[]]
