"""Generate reference binlog fixtures from a real MariaDB 10.11 server.

Starts a private server with tools/mariadb.py (never the system service), runs
named workloads on it one after the other, and for each scenario writes into
``OUT/<scenario>/``:

- the binlog file(s) the scenario produced, copied under the server's names
  (``master-bin.NNNNNN``), plus for ``multifile`` a ``master-bin.index``
  listing just those files as ``./master-bin.NNNNNN``;
- ``oracle.json``, in the same schema as ``fixtures/mariadb-11.8/*/oracle.json``:
  ``server`` (VERSION()), ``server_state`` (@@gtid_binlog_state right after
  the scenario), ``files[]`` with ``name``, ``size``, ``groups`` (``[gtid,
  start, end]`` for every event group, from an independent walk of the event
  headers, cross-checked against ``mariadb-binlog`` and ``SHOW BINLOG
  EVENTS``) and ``pos`` (``[offset, answer]``: what the server's
  ``BINLOG_GTID_POS(file, offset)`` returned, or null), plus extra keys
  (``scenario``, ``description``, ``options``, per file ``checksum``,
  ``encrypted``, ``gtid_list``; ``notes`` where something is special).

Each scenario starts and ends with FLUSH BINARY LOGS, so it has its own
file(s); its first file's GTID_LIST carries the state left by the scenarios
that ran before it on the same server. ``encrypted`` runs on a second server
with binlog encryption (file_key_management). Workloads use fixed random seeds,
so the structure of the output is the same on every run (timestamps differ).

Usage (from the repository root; takes about half a minute):

    tools/make_fixtures                       # all scenarios -> fixtures/mariadb-10.11/
    tools/make_fixtures --only xa nonmono     # just these (they then start from a fresh server)
    tools/make_fixtures --out /tmp/fx --workdir /tmp/fx-work --keep

Needs MariaDB 10.11 (mariadbd, mariadb-install-db, mariadb-binlog, the
file_key_management plugin) and PyMySQL.
"""
from __future__ import annotations

import argparse
import inspect
import json
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tools.mariadb import MariaDB, find_binary

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "fixtures" / "mariadb-10.11"

# ---------------------------------------------------------------------------
# Binlog facts (independent of the gtidx package on purpose)

MAGIC = b"\xfebin"
HEADER_LEN = 19
STOP, ROTATE, FORMAT_DESCRIPTION = 3, 4, 15
BINLOG_CHECKPOINT, GTID, GTID_LIST, START_ENCRYPTION = 161, 162, 163, 164
# Events that never belong to an event group: they end the group before them.
NON_GROUP = {STOP, ROTATE, FORMAT_DESCRIPTION, BINLOG_CHECKPOINT, GTID_LIST, START_ENCRYPTION}
# SHOW BINLOG EVENTS' Event_type names of the event types that matter here.
SERVER_TYPE_NAMES = {"Stop": STOP, "Rotate": ROTATE, "Format_desc": FORMAT_DESCRIPTION,
                     "Binlog_checkpoint": BINLOG_CHECKPOINT, "Gtid": GTID,
                     "Gtid_list": GTID_LIST, "Start_encryption": START_ENCRYPTION}


@dataclass
class Event:
    offset: int
    length: int
    type: int | None          # None: unknown (an encrypted event, before the server told us)
    gtid: str | None = None   # "D-S-N" for GTID events
    info: str | None = None   # SHOW BINLOG EVENTS' Info column, for server-read events

    @property
    def end(self) -> int:
        return self.offset + self.length


def walk_events(data: bytes) -> tuple[list[Event], dict]:
    """All events of a closed binlog file, by summing event lengths.

    Returns the events and file facts (checksum algorithm, encrypted, the
    GTID_LIST's GTIDs). After a START_ENCRYPTION event the headers are
    encrypted except the event length (bytes 9..12 stay in clear text), so
    only offsets and lengths are known there.
    """
    if data[:4] != MAGIC:
        raise ValueError("not a binlog file (bad magic)")
    events, facts = [], {"checksum": None, "encrypted": False, "gtid_list": None}
    off = 4
    while off < len(data):
        if off + HEADER_LEN > len(data):
            raise ValueError(f"truncated event header at {off}")
        _ts, etype, server_id, length = struct.unpack_from("<IBII", data, off)
        if length < HEADER_LEN or off + length > len(data):
            raise ValueError(f"bad event length {length} at {off}")
        if facts["encrypted"]:
            events.append(Event(off, length, None))
            off += length
            continue
        ev = Event(off, length, etype)
        body = off + HEADER_LEN
        if etype == FORMAT_DESCRIPTION:
            alg = data[off + length - 5]
            facts["checksum"] = {0: "NONE", 1: "CRC32"}.get(alg, f"alg{alg}")
        elif etype == START_ENCRYPTION:
            facts["encrypted"] = True
        elif etype == GTID:
            seq_no, domain = struct.unpack_from("<QI", data, body)
            ev.gtid = f"{domain}-{server_id}-{seq_no}"
        elif etype == GTID_LIST and facts["gtid_list"] is None:
            count = struct.unpack_from("<I", data, body)[0] & 0x0FFFFFFF
            facts["gtid_list"] = [
                "%d-%d-%d" % struct.unpack_from("<IIQ", data, body + 4 + 16 * i)
                for i in range(count)]
        events.append(ev)
        off += length
    return events, facts


def event_groups(events: list[Event]) -> list[list]:
    """``[gtid, start, end]`` per group: a GTID event and every event after it
    up to the next GTID event, non-group event or end of file."""
    groups, current = [], None
    for ev in events:
        if ev.type == GTID:
            current = [ev.gtid, ev.offset, ev.end]
            groups.append(current)
        elif ev.type in NON_GROUP:
            current = None
        elif current is not None:
            current[2] = ev.end
    return groups


# ---------------------------------------------------------------------------
# Cross-checks against the server's own readers

AT_RE = re.compile(r"^# at (\d+)$")
GTID_LINE_RE = re.compile(
    r"^#\d{6} +\d+:\d\d:\d\d server id (\d+) +end_log_pos (\d+) .*\tGTID (\d+)-(\d+)-(\d+)")


def check_with_mariadb_binlog(path: Path, events: list[Event]) -> None:
    """mariadb-binlog must see the same event offsets and the same GTIDs at
    the same offsets as our header walk (it also verifies the checksums; its
    default GTID strict mode would reject the nonmono file)."""
    run = subprocess.run([find_binary("mariadb-binlog", "mysqlbinlog"),
                          "--verify-binlog-checksum", "--skip-gtid-strict-mode", str(path)],
                         capture_output=True, text=True, errors="replace")
    if run.returncode != 0:
        raise RuntimeError(f"mariadb-binlog {path.name} failed: {run.stderr[-2000:]}")
    offsets, gtids, last_line = [], [], ""
    for line in run.stdout.splitlines():
        m = AT_RE.match(line)
        if m:
            offsets.append(int(m.group(1)))
        m = GTID_LINE_RE.match(line)
        if m:
            at = AT_RE.match(last_line)
            if not at:
                raise RuntimeError(f"{path.name}: GTID line not right after '# at': {line}")
            server_id, _end, domain, server2, seq = m.groups()
            if server_id != server2:
                raise RuntimeError(f"{path.name}: GTID server id mismatch: {line}")
            gtids.append((f"{domain}-{server_id}-{seq}", int(at.group(1))))
        last_line = line
    ours = [(e.gtid, e.offset) for e in events if e.type == GTID]
    if offsets != [e.offset for e in events]:
        diff = sorted(set(offsets) ^ {e.offset for e in events})[:10]
        raise RuntimeError(f"{path.name}: event offsets differ from mariadb-binlog's: {diff}")
    if gtids != ours:
        bad = next((i for i, (a, b) in enumerate(zip(gtids, ours)) if a != b),
                   min(len(gtids), len(ours)))
        raise RuntimeError(f"{path.name}: GTID #{bad} differs from mariadb-binlog's: "
                           f"ours {ours[bad:bad + 1]}, mariadb-binlog {gtids[bad:bad + 1]}")


def server_events(cur, name: str) -> list[Event]:
    """SHOW BINLOG EVENTS, as Events (type known only for the types we care about)."""
    cur.execute(f"SHOW BINLOG EVENTS IN '{name}'")
    out = []
    for _log, pos, type_name, server_id, end_pos, info in cur.fetchall():
        ev = Event(pos, end_pos - pos, SERVER_TYPE_NAMES.get(type_name, -1), info=info)
        if ev.type == GTID:
            m = re.search(r"GTID (\d+)-(\d+)-(\d+)$", info)
            if not m or int(m.group(2)) != server_id:
                raise RuntimeError(f"{name}@{pos}: unexpected GTID info {info!r}")
            ev.gtid = "-".join(m.groups())
        out.append(ev)
    return out


def merge_server_events(name: str, walked: list[Event], served: list[Event]) -> list[Event]:
    """Check our walk against SHOW BINLOG EVENTS; fill in what encryption hid."""
    if [(e.offset, e.length) for e in walked] != [(e.offset, e.length) for e in served]:
        raise RuntimeError(f"{name}: event boundaries differ from SHOW BINLOG EVENTS")
    merged = []
    for w, s in zip(walked, served):
        if w.type is None:          # encrypted: trust the server for type and GTID
            merged.append(s)
            continue
        if s.type != -1 and s.type != w.type:
            raise RuntimeError(f"{name}@{w.offset}: type {w.type} but server says {s.type}")
        if s.type == -1 and w.type in SERVER_TYPE_NAMES.values():
            raise RuntimeError(f"{name}@{w.offset}: type {w.type} not recognised by the server")
        if w.type == GTID and w.gtid != s.gtid:
            raise RuntimeError(f"{name}@{w.offset}: GTID {w.gtid} but server says {s.gtid}")
        merged.append(w)
    return merged


# ---------------------------------------------------------------------------
# Oracle: sampled offsets and the server's BINLOG_GTID_POS answers

@dataclass
class Sampling:
    first_groups: int = 30   # every GTID start and group end of the first N groups
    boundaries: int = 300    # random event boundaries
    inside: int = 80         # random offsets strictly inside events


DEFAULT_SAMPLING = Sampling()


def sample_offsets(events, groups, size, rng, s: Sampling) -> list[int]:
    picks = set(range(6))                        # before, inside and just after the magic
    picks.add(events[0].end)                     # FDE end
    for ev in events:
        if ev.type == GTID_LIST:                 # GTID_LIST start and end
            picks.update((ev.offset, ev.end))
            break
    for _gtid, start, end in groups[:s.first_groups]:
        picks.update((start, end))
    picks.update((size, size + 1, size + 1000))  # EOF and past it

    # Event boundaries, in three pools so each kind is well represented.
    in_group = set()
    for _gtid, start, end in groups:
        in_group.update(range(start + 1, end))
    gtid_starts = {e.offset for e in events if e.type == GTID}
    mid_group = {e.offset for e in events if e.offset in in_group}
    others = ({e.offset for e in events} - in_group - gtid_starts) | {size}
    chosen = set()
    for pool in (gtid_starts, mid_group, others):
        pool = sorted(pool - picks)
        chosen.update(rng.sample(pool, min(len(pool), s.boundaries // 3)))
    rest = sorted(({e.offset for e in events} | {size}) - picks - chosen)
    chosen.update(rng.sample(rest, min(len(rest), s.boundaries - len(chosen))))
    picks |= chosen

    inside, tries = set(), 0
    candidates = [e for e in events if e.length > 1]
    while len(inside) < s.inside and tries < 20 * s.inside:
        tries += 1
        ev = rng.choice(candidates)
        inside.add(rng.randint(ev.offset + 1, ev.end - 1))
    return sorted(picks | inside)


def gtid_pos_answers(cur, name: str, offsets: list[int]) -> list[list]:
    out = []
    for off in offsets:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (name, off))
        out.append([off, cur.fetchone()[0]])
    return out


def write_oracle(dest: Path, oracle: dict) -> None:
    (dest / "oracle.json").write_text(json.dumps(oracle) + "\n")


# ---------------------------------------------------------------------------
# Workload helpers

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu binlog gtid domain server sequence offset index page record state file "
         "event group commit rollback prepare insert update delete table row column").split()

OPTION_VARS = ("binlog_format", "binlog_checksum", "binlog_row_image", "binlog_annotate_row_events",
               "log_bin_compress", "log_bin_compress_min_len", "encrypt_binlog",
               "gtid_strict_mode", "max_binlog_size")

SCHEMA = [
    "CREATE DATABASE IF NOT EXISTS fx",
    "CREATE TABLE fx.t_inno (id INT AUTO_INCREMENT PRIMARY KEY, dom INT, srv INT,"
    " n INT NOT NULL DEFAULT 0, v VARCHAR(512)) ENGINE=InnoDB",
    "CREATE TABLE fx.t_myi (id INT AUTO_INCREMENT PRIMARY KEY, dom INT, v VARCHAR(512))"
    " ENGINE=MyISAM",
    "CREATE TABLE fx.t_big (id INT AUTO_INCREMENT PRIMARY KEY, b MEDIUMBLOB) ENGINE=InnoDB",
]


class Workload:
    """One client session plus a seeded random generator."""

    def __init__(self, server: MariaDB, rng: random.Random):
        self.server = server
        self.rng = rng
        self.conn = server.connect()
        self.cur = self.conn.cursor()
        self.domain, self.server_id = 0, 1
        self.ddl_counter = 0
        self.xa_counter = 0
        self.options = None   # set by snapshot_options()

    def x(self, sql: str, args=None):
        self.cur.execute(sql, args)
        return self.cur.fetchall()

    def scalar(self, sql: str, args=None):
        return self.x(sql, args)[0][0]

    def use(self, domain: int, server_id: int) -> None:
        if domain != self.domain:
            self.x("SET SESSION gtid_domain_id=%s", (domain,))
            self.domain = domain
        if server_id != self.server_id:
            self.x("SET SESSION server_id=%s", (server_id,))
            self.server_id = server_id

    def flush(self) -> str:
        """Rotate the binlog; returns the new current file's name."""
        self.x("FLUSH BINARY LOGS")
        return self.settle()

    def settle(self, timeout: float = 30.0) -> str:
        """After a rotation: wait for the BINLOG_CHECKPOINT event that names the
        new file (written once InnoDB has flushed the older files' commits).

        Without this, checkpoint events land at random places in the files
        and the fixtures' offsets change from run to run. With it, every file
        has exactly two at its start: one naming the file before it (in the
        header written by the rotation), then one naming the file itself.
        """
        name = self.current_file()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(r[2] == "Binlog_checkpoint" and r[5] == name
                   for r in self.x(f"SHOW BINLOG EVENTS IN '{name}'")):
                return name
            self.x("FLUSH NO_WRITE_TO_BINLOG ENGINE LOGS")   # makes InnoDB flush its log now
            time.sleep(0.02)
        raise RuntimeError(f"no binlog checkpoint for {name} after {timeout}s")

    def current_file(self) -> str:
        return self.x("SHOW MASTER STATUS")[0][0]

    def file_size(self) -> int:
        return self.x("SHOW MASTER STATUS")[0][1]

    def snapshot_options(self) -> dict:
        rows = dict(self.x("SHOW GLOBAL VARIABLES WHERE Variable_name IN ("
                           + ", ".join(["%s"] * len(OPTION_VARS)) + ")", OPTION_VARS))
        self.options = {k: rows[k] for k in OPTION_VARS if k in rows}
        return self.options

    def text(self, n: int) -> str:
        """About n characters of compressible pseudo-text."""
        words = self.rng.choices(WORDS, k=n // 5 + 1)
        words[::7] = [f"{self.rng.getrandbits(32):08x}" for _ in words[::7]]
        return " ".join(words)[:n]

    # -- single event groups ------------------------------------------------
    def insert_one(self):
        self.x("INSERT INTO fx.t_inno (dom, srv, v) VALUES (%s, %s, %s)",
               (self.domain, self.server_id, self.text(self.rng.randint(10, 200))))

    def multi_row_trx(self):
        self.x("BEGIN")
        for _ in range(self.rng.randint(2, 6)):
            rows = self.rng.randint(1, 5)
            self.x("INSERT INTO fx.t_inno (dom, srv, v) VALUES "
                   + ", ".join(["(%s, %s, %s)"] * rows),
                   [a for _ in range(rows) for a in
                    (self.domain, self.server_id, self.text(self.rng.randint(20, 250)))])
        if self.rng.random() < 0.5:
            self.update_rows()
        self.x("COMMIT")

    def _random_id_range(self, width: int) -> tuple[int, int]:
        top = self.scalar("SELECT COALESCE(MAX(id), 1) FROM fx.t_inno")
        lo = self.rng.randint(1, max(1, top - width))
        return lo, lo + width

    def update_rows(self):
        lo, hi = self._random_id_range(self.rng.randint(0, 8))
        self.x("UPDATE fx.t_inno SET n = n + 1, v = %s WHERE id BETWEEN %s AND %s",
               (self.text(self.rng.randint(10, 200)), lo, hi))

    def delete_rows(self):
        lo, hi = self._random_id_range(self.rng.randint(0, 4))
        self.x("DELETE FROM fx.t_inno WHERE id BETWEEN %s AND %s", (lo, hi))

    def myisam_insert(self):
        self.x("INSERT INTO fx.t_myi (dom, v) VALUES (%s, %s)",
               (self.domain, self.text(self.rng.randint(10, 200))))

    def innodb_and_myisam_trx(self):
        """One transaction touching both engines: two groups (MyISAM first)."""
        self.x("BEGIN")
        self.insert_one()
        self.myisam_insert()
        self.x("COMMIT")

    def statement_format(self):
        self.x("SET SESSION binlog_format=STATEMENT")
        if self.rng.random() < 0.5:
            self.x("INSERT INTO fx.t_inno (dom, srv, v) VALUES (%s, %s, %s)",
                   (self.domain, self.server_id, self.text(self.rng.randint(10, 200))))
        else:
            self.x("BEGIN")
            self.insert_one()
            self.update_rows()
            self.x("COMMIT")
        if self.rng.random() < 0.3:
            self.myisam_insert()
        self.x("SET SESSION binlog_format=ROW")

    def ddl_cycle(self):
        self.ddl_counter += 1
        t = f"fx.ddl_{self.ddl_counter}"
        self.x(f"CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB")
        self.x(f"INSERT INTO {t} VALUES (1, %s)", (self.text(40),))
        self.x(f"ALTER TABLE {t} ADD COLUMN w INT NOT NULL DEFAULT 7")
        self.x(f"DROP TABLE {t}")

    MIXED_OPS = (("insert_one", 30), ("multi_row_trx", 20), ("update_rows", 12),
                 ("delete_rows", 6), ("myisam_insert", 10), ("innodb_and_myisam_trx", 3),
                 ("statement_format", 8), ("ddl_cycle", 1))

    def mixed_op(self, domains=(0, 1, 2), server_ids=(1, 2)):
        self.use(self.rng.choice(domains), self.rng.choice(server_ids))
        names, weights = zip(*self.MIXED_OPS)
        getattr(self, self.rng.choices(names, weights)[0])()

    def mixed_until(self, size: int, **kw):
        """Mixed groups until the current binlog file is at least `size` bytes."""
        while self.file_size() < size:
            for _ in range(10):
                self.mixed_op(**kw)

    def close(self):
        self.conn.close()


# ---------------------------------------------------------------------------
# Scenarios: one function per workload, run in this order (manydomains last on
# the main server, as in the 11.8 set: after it every GTID_LIST and every
# BINLOG_GTID_POS answer would carry its 400 domains)

SCENARIOS = {}


def scenario(server="main", sampling=DEFAULT_SAMPLING, index=False):
    """Register a workload; `index`: also write master-bin.index for its files."""
    def register(fn):
        fn.server, fn.sampling, fn.index = server, sampling, index
        SCENARIOS[fn.__name__] = fn
        return fn
    return register


@scenario()
def mixed(w: Workload):
    """3 domains (0,1,2) x 2 server ids (1,2): single- and multi-row InnoDB
    transactions, updates, deletes, MyISAM (non-transactional) inserts, DDL
    (CREATE/ALTER/DROP TABLE), some statements in binlog_format=STATEMENT."""
    w.ddl_cycle()
    w.mixed_until(1_000_000)


@scenario()
def bigtrx(w: Workload):
    """A handful of InnoDB transactions of 200-400 KB each (one big UPDATE,
    one single multi-row INSERT), far bigger than 64 KiB, between small ones."""
    def small(n):
        for _ in range(n):
            w.mixed_op(domains=(0, 1), server_ids=(1, 2))

    def big_insert(target, one_statement=False):
        """About 2 x target bytes of binlog: the rows, and the statements
        again in the ANNOTATE_ROWS events."""
        values, total = [], 0
        while total < target:
            values.append(w.text(w.rng.randint(3000, 9000)))
            total += len(values[-1])
        if one_statement:
            w.x("INSERT INTO fx.t_big (b) VALUES " + ", ".join(["(%s)"] * len(values)), values)
            return
        w.x("BEGIN")
        first = None
        for v in values:
            w.x("INSERT INTO fx.t_big (b) VALUES (%s)", (v,))
            first = first or w.cur.lastrowid
        w.x("COMMIT")
        return first, first + len(values) - 1

    small(4)
    w.use(0, 1)
    lo, hi = big_insert(w.rng.randint(95_000, 135_000))
    small(3)
    w.use(1, 2)
    big_insert(w.rng.randint(95_000, 135_000))
    small(3)
    w.use(0, 2)   # before and after images: about twice the rows' size
    w.x("UPDATE fx.t_big SET b = REVERSE(b) WHERE id BETWEEN %s AND %s", (lo, hi))
    small(3)
    w.use(2, 1)
    big_insert(w.rng.randint(95_000, 135_000), one_statement=True)
    small(4)


@scenario()
def xa(w: Workload):
    """XA START/END/PREPARE then XA COMMIT or XA ROLLBACK (two GTIDs per XA
    transaction; some with bqual and formatID), a few XA COMMIT ONE PHASE,
    inserts from a second session while an XA is prepared, normal groups."""
    other = Workload(w.server, w.rng)
    start = w.file_size()
    try:
        while w.file_size() - start < 100_000:
            w.xa_counter += 1
            n = w.xa_counter
            xid = f"'fx-xa-{n}'" if n % 3 else f"'fx-gt-{n}','bq-{n}',{n}"
            w.use(w.rng.choice((0, 1)), w.rng.choice((1, 2)))
            w.x(f"XA START {xid}")
            for _ in range(w.rng.randint(1, 3)):
                w.insert_one()
            if w.rng.random() < 0.3:   # one old row by primary key: no gap locks
                w.x("UPDATE fx.t_inno SET n = n + 1 WHERE id = %s", (w.rng.randint(1, 500),))
            w.x(f"XA END {xid}")
            if n % 7 == 0:
                w.x(f"XA COMMIT {xid} ONE PHASE")
                continue
            w.x(f"XA PREPARE {xid}")
            for _ in range(w.rng.randint(0, 2)):   # inserts only: no lock waits
                other.use(w.rng.choice((0, 1, 2)), w.rng.choice((1, 2)))
                w.rng.choice((other.insert_one, other.myisam_insert))()
            w.x(f"XA {'ROLLBACK' if w.rng.random() < 0.3 else 'COMMIT'} {xid}")
            if w.rng.random() < 0.5:
                w.mixed_op(domains=(0, 1, 2), server_ids=(1, 2))
    finally:
        other.close()


@scenario()
def nonmono(w: Workload):
    """gtid_strict_mode=0 and SET gtid_seq_no: seq_no goes backwards inside
    domain 5 (100,101,102 then 50,51, then 200...), also across server ids;
    domain 6 written by server 2 then server 1 with lower seq_nos."""
    plan = [  # (domain, server_id, seq_no or None for the next one, operation)
        (5, 1, 100, "insert_one"), (5, 1, None, "insert_one"), (5, 1, None, "multi_row_trx"),
        (5, 1, 50, "insert_one"), (5, 1, 51, "myisam_insert"), (5, 1, None, "insert_one"),
        (5, 2, 40, "insert_one"), (5, 2, None, "insert_one"),
        (5, 1, 200, "insert_one"), (5, 1, None, "ddl_cycle"),
        (5, 2, 150, "insert_one"), (5, 1, 60, "insert_one"), (5, 1, None, "insert_one"),
        (6, 2, 10, "insert_one"), (6, 2, None, "insert_one"), (6, 1, 5, "insert_one"),
        (6, 1, None, "insert_one"), (5, 1, 300, "insert_one"), (5, 1, None, "insert_one"),
    ]
    for domain, server_id, seq_no, op in plan:
        w.use(domain, server_id)
        if seq_no is not None:
            w.x("SET SESSION gtid_seq_no=%s", (seq_no,))
        getattr(w, op)()


@scenario()
def nochecksum(w: Workload):
    """binlog_checksum=NONE (SET GLOBAL rotates the binlog) for ~200 KB of
    mixed groups, then back to CRC32; every file of the scenario is kept,
    including the short ones the rotations make."""
    w.x("SET GLOBAL binlog_checksum=NONE")
    w.settle()
    w.mixed_until(200_000)
    w.snapshot_options()
    w.x("SET GLOBAL binlog_checksum=CRC32")
    w.settle()


@scenario()
def compressed(w: Workload):
    """log_bin_compress=ON (log_bin_compress_min_len=10): compressed QUERY and
    ROWS events in ~250 KB of file (more before compression) of mixed groups."""
    old_min = w.scalar("SELECT @@GLOBAL.log_bin_compress_min_len")
    w.x("SET GLOBAL log_bin_compress=ON")
    w.x("SET GLOBAL log_bin_compress_min_len=10")
    w.mixed_until(250_000)
    w.snapshot_options()
    w.x("SET GLOBAL log_bin_compress=OFF")
    w.x("SET GLOBAL log_bin_compress_min_len=%s", (old_min,))


@scenario()
def empty(w: Workload):
    """A file with no event groups (FLUSH BINARY LOGS twice)."""


@scenario(index=True)
def multifile(w: Workload):
    """Five consecutive files of ~100 KB (FLUSH BINARY LOGS between them),
    with master-bin.index."""
    for i in range(5):
        w.mixed_until(100_000)
        if i < 4:
            w.flush()


@scenario(sampling=Sampling(first_groups=10, boundaries=90, inside=25))
def manydomains(w: Workload):
    """400 domains (100..499) x 2 server ids: every pair at least once, 1200
    small groups, so the GTID state has ~800 entries (more than a 4 KiB page
    at 16 bytes per GTID)."""
    pairs = [(d, s) for d in range(100, 500) for s in (1, 2)]
    pairs += [w.rng.choice(pairs) for _ in range(400)]
    w.rng.shuffle(pairs)
    for domain, server_id in pairs:
        w.use(domain, server_id)
        if w.rng.random() < 0.85:
            w.insert_one()
        else:
            w.myisam_insert()


@scenario(server="encrypted")
def encrypted(w: Workload):
    """Binlog encryption (encrypt_binlog=ON, file_key_management): FDE then
    START_ENCRYPTION, then ~50 KB of encrypted mixed groups and an XA."""
    w.mixed_until(30_000, domains=(0, 1), server_ids=(1, 2))
    w.use(1, 1)
    w.x("XA START 'fx-enc'")
    w.insert_one()
    w.x("XA END 'fx-enc'")
    w.x("XA PREPARE 'fx-enc'")
    w.x("XA COMMIT 'fx-enc'")
    w.mixed_until(50_000, domains=(0, 1), server_ids=(1, 2))


# ---------------------------------------------------------------------------
# Servers and the runner

def start_server(workdir: Path, kind: str) -> MariaDB:
    root = workdir / kind
    if root.exists():
        raise SystemExit(f"{root} already exists: use an empty --workdir")
    options = {}
    if kind == "encrypted":
        root.mkdir(parents=True)
        keys = root / "keys.txt"
        keys.write_text("1;" + "5eed" * 16 + "\n")   # a fixed test key: these are fixtures
        options = {"plugin-load-add": "file_key_management",
                   "file_key_management_filename": str(keys),
                   "encrypt_binlog": "ON"}
    srv = MariaDB(root, options).start()
    conn = srv.connect()
    with conn.cursor() as cur:
        for stmt in SCHEMA:
            cur.execute(stmt)
    conn.close()
    return srv


def file_oracle(cur, path: Path, size: int, sampling: Sampling, rng, notes: list) -> dict:
    """One ``files[]`` entry: walk, cross-check, sample, ask the server."""
    name = path.name
    data = path.read_bytes()
    if len(data) != size:
        raise RuntimeError(f"{name}: {len(data)} bytes but SHOW BINARY LOGS says {size}")
    walked, facts = walk_events(data)
    events = merge_server_events(name, walked, server_events(cur, name))
    if facts["encrypted"]:
        gl = next(e.info for e in events if e.type == GTID_LIST)   # "[D-S-N,...]"
        facts["gtid_list"] = [g for g in gl.strip("[]").split(",") if g]
        notes.append(f"{name}: encrypted after START_ENCRYPTION; mariadb-binlog cannot read "
                     "it, so event types and GTIDs come from SHOW BINLOG EVENTS (offsets and "
                     "lengths from our walk, which agree)")
    else:
        check_with_mariadb_binlog(path, events)
    groups = event_groups(events)
    pos = gtid_pos_answers(cur, name, sample_offsets(events, groups, size, rng, sampling))
    return {"name": name, "size": size, "groups": groups, "pos": pos,
            "checksum": facts["checksum"], "encrypted": facts["encrypted"],
            "gtid_list": facts["gtid_list"]}


def run_scenario(srv: MariaDB, fn, out_root: Path) -> dict:
    name = fn.__name__
    rng = random.Random(f"gtidx-fixtures:{name}")
    w = Workload(srv, rng)
    t0 = time.monotonic()
    first = w.flush()
    fn(w)
    server_state = w.scalar("SELECT @@GLOBAL.gtid_binlog_state")
    options = w.options or w.snapshot_options()
    after = w.flush()
    logs = [(n, size) for n, size in w.x("SHOW BINARY LOGS")]
    names = [n for n, _ in logs]
    files = logs[names.index(first):names.index(after)]

    dest = out_root / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    notes, oracle_files = [], []
    for fname, size in files:
        shutil.copyfile(srv.binlog_dir / fname, dest / fname)
        oracle_files.append(file_oracle(w.cur, dest / fname, size, fn.sampling,
                                        random.Random(f"{name}:{fname}"), notes))
    if fn.index:
        (dest / "master-bin.index").write_text("".join(f"./{n}\n" for n, _ in files))
    oracle = {"server": w.scalar("SELECT VERSION()"), "scenario": name,
              "description": " ".join(inspect.getdoc(fn).split()),
              "server_state": server_state, "options": options, "files": oracle_files}
    if notes:
        oracle["notes"] = notes
    write_oracle(dest, oracle)
    w.close()

    parts = []
    for f in oracle_files:
        nulls = sum(a is None for _, a in f["pos"])
        parts.append(f"{f['name']} {f['size']} B {len(f['groups'])} groups "
                     f"{len(f['pos'])} pos ({nulls} null)")
    print(f"{name}: {len(files)} file(s) [{'; '.join(parts)}] in {time.monotonic() - t0:.1f}s",
          flush=True)
    return oracle


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="make_fixtures", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="output directory (default: fixtures/mariadb-10.11)")
    ap.add_argument("--only", nargs="+", choices=list(SCENARIOS), metavar="SCENARIO",
                    help=f"run just these scenarios (of: {', '.join(SCENARIOS)})")
    ap.add_argument("--workdir", type=Path,
                    help="where the private servers live (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="do not remove the servers' files")
    a = ap.parse_args(argv)

    wanted = [n for n in SCENARIOS if not a.only or n in a.only]
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="make_fixtures-"))
    workdir.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    servers: dict[str, MariaDB] = {}
    t0 = time.monotonic()
    try:
        for name in wanted:
            fn = SCENARIOS[name]
            if fn.server not in servers:
                servers[fn.server] = start_server(workdir, fn.server)
            run_scenario(servers[fn.server], fn, a.out)
    finally:
        for srv in servers.values():
            srv.stop()
        if a.keep:
            print(f"servers kept in {workdir}")
        elif a.workdir:
            for kind in servers:
                shutil.rmtree(workdir / kind, ignore_errors=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"done: {len(wanted)} scenario(s) into {a.out} in {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
