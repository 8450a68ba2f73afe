"""Generate reference MySQL binlog fixtures from a real MySQL 9.7 server.

Uses the server of ``tools/mysql97.py`` (started when it is not running),
starts it over with ``RESET BINARY LOGS AND GTIDS`` (it deletes that
server's binlogs and forgets its GTIDs: use a development server), runs
named workloads one after the other, each between two ``FLUSH BINARY
LOGS`` (so a scenario's first PREVIOUS_GTIDS holds what the scenarios before
it left), and for each scenario writes into ``OUT/<scenario>/``:

- the binlog file(s) the scenario produced, under the server's names
  (``binlog.NNNNNN``), plus for ``rotated`` a ``binlog.index`` listing just
  those files as ``./binlog.NNNNNN``;
- ``oracle.json``: ``server`` (VERSION()), ``server_uuid``, ``scenario``,
  ``description``, ``options`` (server variables as the scenario started), ``gtid_executed`` (@@gtid_executed after the
  scenario), and ``files[]`` with ``name``, ``size``, ``checksum``
  (CRC32/NONE, the FDE's checksum-algorithm byte),
  ``previous_gtids`` (the Info the server shows for the file's
  Previous_gtids event: the set as it prints it), ``events`` (``[pos, type,
  end_log_pos, info]`` per event of ``SHOW BINLOG EVENTS``, info cut at 80
  characters but a GTID event's; the events inside a Transaction_payload
  are shown by the server at the payload's end, with length 0) and ``groups`` (``[gtid,
  start, end]`` per transaction, derived from those events: a transaction
  runs from its Gtid / Gtid_tagged_log_event / Anonymous_Gtid event to
  just before the next one, or the file's Rotate/Stop; each one's last event
  is checked to be a terminator: Xid, XA_prepare, a COMMIT/ROLLBACK/XA
  query, a Transaction_payload or a DDL's single query).

Workloads use fixed random seeds: the structure of the output is the same on
every run (timestamps, hence checksums and compressed bytes, differ).

Usage (from the repository root):

    tools/make_mysql_fixtures                     # all scenarios -> fixtures/mysql-9.7/
    tools/make_mysql_fixtures --only tagged empty
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.mysql97 import MySQL97  # noqa: E402

DEFAULT_OUT = REPO / "fixtures" / "mysql-9.7"
FOREIGN = ["3e11fa47-71ca-11e1-9e33-c80aa9429562", "00000000-0000-0000-0000-0000000000aa",
           "f0000000-1111-2222-3333-444444444444"]
GTID_EVENTS = ("Gtid", "Gtid_tagged_log_event", "Anonymous_Gtid")
ENDS_FILE = ("Rotate", "Stop")


class Session:
    def __init__(self, srv: MySQL97):
        self.conn = srv.connect()
        self.cur = self.conn.cursor()

    def sql(self, query: str, args=None) -> list[tuple]:
        self.cur.execute(query, args)
        return list(self.cur.fetchall())

    def one(self, query: str):
        return self.sql(query)[0][0]


def _row(rng: random.Random, n: int = 40) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def _insert(s: Session, rng: random.Random, rows: int = 1, width: int = 40) -> None:
    values = ",".join("(%s)" for _ in range(rows))
    s.sql(f"INSERT INTO fx.t(v) VALUES {values}", [_row(rng, width) for _ in range(rows)])


def _mixed(s: Session, rng: random.Random, n: int) -> None:
    """Single and multi-row inserts, updates, deletes, multi-statement transactions."""
    for _ in range(n):
        k = rng.random()
        if k < 0.4:
            _insert(s, rng, rng.randint(1, 5))
        elif k < 0.55:
            s.sql("UPDATE fx.t SET v = %s WHERE id %% 7 = %s", (_row(rng, 20), rng.randint(0, 6)))
        elif k < 0.65:
            s.sql("DELETE FROM fx.t WHERE id %% 11 = %s LIMIT 2", (rng.randint(0, 10),))
        else:
            s.sql("BEGIN")
            for _ in range(rng.randint(2, 4)):
                _insert(s, rng)
            s.sql("COMMIT")


def w_single(s: Session, rng: random.Random) -> None:
    """One server UUID: DML, DDL, CREATE TABLE ... SELECT, XA (prepare + commit,
    prepare + rollback, one phase), a ~200 KB transaction, a rolled-back one
    (not logged)."""
    s.sql("CREATE TABLE fx.s (id INT PRIMARY KEY, v VARCHAR(200))")
    _mixed(s, rng, 25)
    s.sql("CREATE TABLE fx.s2 AS SELECT id, v FROM fx.t WHERE id < 20")
    s.sql("ALTER TABLE fx.s ADD COLUMN w INT")
    for i, end in enumerate(("XA COMMIT 'x{}'", "XA ROLLBACK 'x{}'", None)):
        s.sql(f"XA START 'x{i}'")
        _insert(s, rng)
        s.sql(f"XA END 'x{i}'")
        if end is None:
            s.sql(f"XA COMMIT 'x{i}' ONE PHASE")
        else:
            s.sql(f"XA PREPARE 'x{i}'")
            s.sql(end.format(i))
    s.sql("BEGIN")
    _insert(s, rng)
    s.sql("ROLLBACK")
    s.sql("BEGIN")
    for _ in range(4):
        _insert(s, rng, 250, 190)          # ~200 KB of rows in one transaction
    s.sql("COMMIT")
    _mixed(s, rng, 10)
    s.sql("DROP TABLE fx.s2")


def w_uuids(s: Session, rng: random.Random) -> None:
    """Several UUIDs with gaps: SET gtid_next='uuid:n' (some n out of order,
    some empty transactions: Gtid, BEGIN, COMMIT), between the server's own."""
    numbers = {u: sorted(rng.sample(range(1, 60), 12)) for u in FOREIGN}
    todo = [(u, n) for u in FOREIGN for n in numbers[u]]
    rng.shuffle(todo)
    for u, n in todo:
        s.sql(f"SET gtid_next = '{u}:{n}'")
        if rng.random() < 0.2:
            s.sql("BEGIN")
            s.sql("COMMIT")
        elif rng.random() < 0.1:
            s.sql(f"CREATE TABLE fx.u{n}_{u[:4]} (a INT)")
        else:
            _insert(s, rng, rng.randint(1, 3))
        s.sql("SET gtid_next = 'AUTOMATIC'")
        if rng.random() < 0.3:
            _mixed(s, rng, 1)


def w_tagged(s: Session, rng: random.Random, foreign: list[str] = FOREIGN) -> None:
    """Tagged GTIDs (Gtid_tagged_log_event, type 42): SET gtid_next =
    'AUTOMATIC:Alpha' (the tag is lowercased), 'AUTOMATIC:beta_2',
    'uuid:tag:n' for another UUID (with gaps), among untagged ones; GTID
    numbers from 127 to 2**63 - 2, tagged and not, and a 32-character tag.
    ``foreign``: the other UUIDs (three). A server skips a GTID it executed
    before without logging it: on a server that ran this workload, new ones."""
    for i in range(30):
        k = rng.random()
        if k < 0.35:
            s.sql(f"SET gtid_next = 'AUTOMATIC:{rng.choice(['Alpha', 'beta_2'])}'")
            _mixed(s, rng, 1)
            s.sql("SET gtid_next = 'AUTOMATIC'")
        elif k < 0.55:
            s.sql(f"SET gtid_next = '{foreign[0]}:ops:{3 * i + 1}'")
            _insert(s, rng)
            s.sql("SET gtid_next = 'AUTOMATIC'")
        else:
            _mixed(s, rng, 1)
    s.sql("SET gtid_next = 'AUTOMATIC:ddl'")
    s.sql("CREATE TABLE fx.tagged (a INT)")
    s.sql("SET gtid_next = 'AUTOMATIC'")
    # GTID numbers of every width the tagged event's variable-length integers
    # take (1 to 9 bytes, up to the largest, 2**63 - 2), and a 32-character tag
    for gno in [127, 128, 1 << 13, 1 << 20, 1 << 27, 1 << 34, 1 << 41, 1 << 48, 1 << 55, 1 << 56, 1 << 62,
                (1 << 63) - 2]:
        for spec in (f"{foreign[2]}:edge:{gno}", f"{foreign[2]}:{gno}", f"{foreign[1]}:{'T' * 32}:{gno}"):
            s.sql(f"SET gtid_next = '{spec}'")
            _insert(s, rng)
            s.sql("SET gtid_next = 'AUTOMATIC'")


def w_compressed(s: Session, rng: random.Random) -> None:
    """binlog_transaction_compression=ON: DML transactions as
    Transaction_payload events (ZSTD), big and small, tagged too; DDL is
    not compressed."""
    s.sql("SET SESSION binlog_transaction_compression = ON")
    _mixed(s, rng, 20)
    s.sql("BEGIN")
    for _ in range(3):
        _insert(s, rng, 200, 190)
    s.sql("COMMIT")
    s.sql("CREATE TABLE fx.c (a INT)")
    s.sql("SET gtid_next = 'AUTOMATIC:zip'")
    _insert(s, rng, 3)
    s.sql("SET gtid_next = 'AUTOMATIC'")
    _mixed(s, rng, 10)
    s.sql("SET SESSION binlog_transaction_compression = OFF")
    _mixed(s, rng, 3)


def w_nochecksum(s: Session, rng: random.Random) -> None:
    """binlog_checksum=NONE for the middle file (setting it rotates, as does
    setting CRC32 back: the first and last files are short CRC32 ones)."""
    s.sql("SET GLOBAL binlog_checksum = NONE")
    _mixed(s, rng, 40)
    s.sql("SET GLOBAL binlog_checksum = CRC32")


def w_rotated(s: Session, rng: random.Random) -> None:
    """Three files by FLUSH BINARY LOGS, with binlog.index."""
    for _ in range(3):
        _mixed(s, rng, 15)
        s.sql("FLUSH BINARY LOGS")
    _mixed(s, rng, 5)


def w_anonymous(s: Session, rng: random.Random) -> None:
    """Anonymous transactions (Anonymous_Gtid events, type 34) among GTID
    ones: gtid_mode=ON_PERMISSIVE for a while, a session with gtid_next =
    'ANONYMOUS'."""
    s.sql("SET GLOBAL gtid_mode = ON_PERMISSIVE")
    _mixed(s, rng, 3)
    s.sql("SET gtid_next = 'ANONYMOUS'")
    _mixed(s, rng, 8)
    s.sql("CREATE TABLE fx.anon (a INT)")
    s.sql("SET gtid_next = 'AUTOMATIC'")
    _mixed(s, rng, 3)
    s.sql("SET GLOBAL gtid_mode = ON")


def w_empty(s: Session, rng: random.Random) -> None:
    """A file with no transaction: FDE, Previous_gtids, Rotate."""


SCENARIOS = {
    "single": w_single, "uuids": w_uuids, "tagged": w_tagged, "compressed": w_compressed,
    "nochecksum": w_nochecksum, "rotated": w_rotated, "anonymous": w_anonymous, "empty": w_empty,
}


def _terminates(event: list, began: bool) -> bool:
    _, etype, _, info = event
    if etype in ("Xid", "XA_prepare", "Transaction_payload", "Incident"):
        return True
    if etype == "Query":
        text = info.split(" /* xid=")[0].strip().upper()
        if text in ("COMMIT", "ROLLBACK") or text.startswith(("XA COMMIT", "XA ROLLBACK")):
            return True
        return not began and text != "BEGIN" and not text.startswith("XA START")
    return False


def groups_of(events: list[list]) -> list[list]:
    """[gtid, start, end] per transaction: from its GTID event to the next
    one or the file's Rotate/Stop (see the module doc); each checked to end
    with a terminator."""
    out = []
    cur = None
    for ev in events + [[None, "End", None, ""]]:
        pos, etype, end_pos, info = ev
        if etype in GTID_EVENTS or etype in ENDS_FILE or etype == "End":
            if cur is not None:
                body = [e for e in cur[3] if e[2] != e[0]]     # without the payload's inner events
                began = any(e[1] == "Query" and (e[3] == "BEGIN" or e[3].startswith("XA START")) for e in body)
                if not body or not _terminates(body[-1], began):
                    raise SystemExit(f"transaction at {cur[1]} ends with {body[-1] if body else None}")
                out.append([cur[0], cur[1], body[-1][2]])
                cur = None
            if etype in GTID_EVENTS:
                gtid = info.split("'")[1]
                cur = [None if gtid == "ANONYMOUS" else gtid, pos, end_pos, []]
            continue
        if cur is not None:
            cur[3].append(ev)
    return out


def _checksum(path: Path) -> str:
    """CRC32 or NONE: the FORMAT_DESCRIPTION's checksum-algorithm byte (the
    5th from its end), read here without gtidx."""
    data = path.read_bytes()[:4096]
    length = int.from_bytes(data[4 + 9:4 + 13], "little")
    return {0: "NONE", 1: "CRC32"}[data[4 + length - 5]]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="+", choices=list(SCENARIOS))
    args = ap.parse_args(argv)
    srv = MySQL97().ensure()
    s = Session(srv)
    s.sql("SET GLOBAL binlog_checksum = CRC32")
    if s.one("SELECT @@GLOBAL.gtid_mode") != "ON":
        s.sql("SET GLOBAL gtid_mode = ON")
    s.sql("DROP DATABASE IF EXISTS fx")
    s.sql("RESET BINARY LOGS AND GTIDS")
    s.sql("CREATE DATABASE fx")
    s.sql("CREATE TABLE fx.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200))")
    version = s.one("SELECT VERSION()")
    server_uuid = s.one("SELECT @@server_uuid")
    for name in args.only or SCENARIOS:
        work = SCENARIOS[name]
        rng = random.Random(f"gtidx-mysql-{name}")
        s.sql("FLUSH BINARY LOGS")
        first = s.sql("SHOW BINARY LOG STATUS")[0][0]
        options = {v: s.one(f"SELECT @@{v}") for v in ("binlog_format", "gtid_mode", "binlog_row_image",
                                                        "binlog_transaction_compression")}
        work(s, rng)
        gtid_executed = s.one("SELECT @@GLOBAL.gtid_executed")
        s.sql("FLUSH BINARY LOGS")
        names = [r[0] for r in s.sql("SHOW BINARY LOGS")]
        files = [n for n in names[:-1] if n >= first]
        out = args.out / name
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        entries = []
        for f in files:
            events = [[int(r[1]), r[2], int(r[4]), str(r[5]) if r[2] in GTID_EVENTS else str(r[5])[:80]]
                      for r in s.sql(f"SHOW BINLOG EVENTS IN '{f}'")]
            prev = [e for e in s.sql(f"SHOW BINLOG EVENTS IN '{f}'") if e[2] == "Previous_gtids"]
            shutil.copyfile(srv.datadir / f, out / f)
            entries.append({
                "name": f, "size": (out / f).stat().st_size, "checksum": _checksum(out / f),
                "previous_gtids": prev[0][5] if prev else None,
                "events": events, "groups": groups_of(events),
            })
        if name == "rotated":
            (out / "binlog.index").write_text("".join(f"./{f}\n" for f in files))
        oracle = {"server": version, "server_uuid": server_uuid, "scenario": name,
                  "description": " ".join((work.__doc__ or "").split()), "options": options,
                  "gtid_executed": gtid_executed, "files": entries}
        (out / "oracle.json").write_text(json.dumps(oracle, indent=1) + "\n")
        total = sum(e["size"] for e in entries)
        print(f"{name}: {', '.join(files)} ({total} bytes, {sum(len(e['groups']) for e in entries)} groups)")
        time.sleep(0.1)


if __name__ == "__main__":
    main()
