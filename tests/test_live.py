"""Against the live private MariaDB 10.11: the scanner on the server's active
binlog, including while the server is writing it, must agree with the
server's own BINLOG_GTID_POS."""
from __future__ import annotations

import random
import threading
import time

import pytest

from gtidx.binlog import events as binlog_events
from gtidx.binlog.mariadb import Binlog
from gtidx.gtid import Position

pytestmark = pytest.mark.live


def server_pos(conn, name: str, offset: int):
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (name, offset))
        answer = cur.fetchone()[0]
    return None if answer is None else Position.parse(answer)


def setup_schema(srv) -> None:
    srv.sql("CREATE DATABASE IF NOT EXISTS gtidx_live")
    srv.sql("CREATE TABLE IF NOT EXISTS gtidx_live.t (id INT AUTO_INCREMENT PRIMARY KEY, "
            "d INT, v VARCHAR(200)) ENGINE=InnoDB")
    srv.sql("CREATE TABLE IF NOT EXISTS gtidx_live.m (id INT AUTO_INCREMENT PRIMARY KEY, "
            "v VARCHAR(50)) ENGINE=MyISAM")


def write_mix(conn, n: int, seed: int) -> None:
    """n transactions over 3 domains and 2 server ids: inserts, multi-row
    transactions, updates, deletes, MyISAM, DDL, statement-format."""
    rnd = random.Random(seed)
    with conn.cursor() as cur:
        for i in range(n):
            cur.execute(f"SET SESSION gtid_domain_id={rnd.choice([0, 0, 1, 2])}, "
                        f"server_id={rnd.choice([1, 1, 2])}")
            kind = rnd.randrange(10)
            if kind < 4:
                cur.execute("INSERT INTO gtidx_live.t (d, v) VALUES (%s, %s)", (i, "x" * rnd.randrange(200)))
            elif kind == 4:
                cur.execute("BEGIN")
                for _ in range(rnd.randrange(2, 30)):
                    cur.execute("INSERT INTO gtidx_live.t (d, v) VALUES (%s, REPEAT('m', 150))", (i,))
                cur.execute("COMMIT")
            elif kind == 5:
                cur.execute("UPDATE gtidx_live.t SET v = CONCAT('u', %s) ORDER BY id DESC LIMIT 3", (i,))
            elif kind == 6:
                cur.execute("DELETE FROM gtidx_live.t ORDER BY id LIMIT 1")
            elif kind == 7:
                cur.execute("INSERT INTO gtidx_live.m (v) VALUES (%s)", (f"my{i}",))
            elif kind == 8:
                cur.execute(f"CREATE TABLE IF NOT EXISTS gtidx_live.ddl{i % 3} (a INT)")
                cur.execute(f"DROP TABLE IF EXISTS gtidx_live.ddl{(i + 1) % 3}")
            else:
                cur.execute("SET SESSION binlog_format=STATEMENT")
                cur.execute("INSERT INTO gtidx_live.t (d, v) VALUES (%s, 'stmt')", (i,))
                cur.execute("SET SESSION binlog_format=ROW")
        cur.execute("SET SESSION gtid_domain_id=0, server_id=1")


def write_rotated(srv, files: int, n: int, seed: int, last: int) -> None:
    """The schema, then ``files`` binlogs of ``n`` write_mix transactions
    each (FLUSH BINARY LOGS after each), and ``last`` more in the active one."""
    setup_schema(srv)
    conn = srv.connect()
    for i in range(files):
        write_mix(conn, n, seed=seed + i)
        srv.sql("FLUSH BINARY LOGS")
    write_mix(conn, last, seed=seed + 100)
    conn.close()


@pytest.fixture
def fresh_binlog(live_server):
    """A new active binlog file of the live server: (name, path)."""
    setup_schema(live_server)
    live_server.sql("FLUSH BINARY LOGS")
    name = live_server.sql("SHOW MASTER STATUS")[0][0]
    return name, live_server.binlog_dir / name


def test_active_file_every_boundary_matches_the_server(live_server, fresh_binlog):
    name, path = fresh_binlog
    conn = live_server.connect()
    write_mix(conn, 250, seed=1)
    with Binlog(path) as b:
        assert b.growing, "the active binlog carries the IN_USE flag"
        offsets = [off for off, _, _, _ in b.headers()]
        end = b.complete_end()
        mids = [off + 7 for off in offsets[::5]]
        checks = sorted(set(offsets + mids + [0, 1, 3, end, end + 1, end + 1000]))
        wrong = []
        for off in checks:
            state = b.state_at(off)
            mine = None if state is None else state.position()
            theirs = server_pos(conn, name, off)
            if mine != theirs:
                wrong.append((off, str(mine), str(theirs)))
        assert not wrong, f"{len(wrong)} of {len(checks)} differ: {wrong[:5]}"
        assert len(list(b.groups())) >= 250
    conn.close()


def test_rotated_file_is_closed_and_ends_with_rotate(live_server, fresh_binlog):
    name, path = fresh_binlog
    write_mix(live_server.connect(), 20, seed=2)
    live_server.sql("FLUSH BINARY LOGS")
    nxt = live_server.sql("SHOW MASTER STATUS")[0][0]
    with Binlog(path) as b:
        assert not b.growing
        last = list(b.events())[-1]
        assert last.type == binlog_events.ROTATE and bytes(last.body[8:]) == nxt.encode()   # after the position: the next file
        assert all(b.event_ok(off) for off, *_ in b.headers())
        assert b.complete_end() == b.size


def test_growing_file_while_the_server_writes(live_server, fresh_binlog):
    """Snapshots of the file taken while a writer commits: each one yields
    only complete groups (a prefix of the final list), and its states agree
    with the server at the snapshot's group boundaries."""
    name, path = fresh_binlog
    stop = threading.Event()
    errors = []

    def writer():
        try:
            c = live_server.connect()
            i = 0
            while not stop.is_set():
                write_mix(c, 5, seed=100 + i)
                i += 1
            c.close()
        except Exception as e:  # surfaced by the main thread
            errors.append(e)

    t = threading.Thread(target=writer)
    t.start()
    conn = live_server.connect()
    snapshots = []
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            with Binlog(path) as b:
                groups = list(b.groups())
                snapshots.append(groups)
                for g in groups[-5:]:
                    for off in (g.start, g.end):
                        assert b.state_at(off).position() == server_pos(conn, name, off), (off, g)
            time.sleep(0.05)
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    with Binlog(path) as b:
        final = list(b.groups())
    assert len(snapshots) >= 10 and len(final) > len(snapshots[0])
    for snap in snapshots:
        assert final[:len(snap)] == snap
    conn.close()


def test_group_commit_ids_from_concurrent_commits(live_server, fresh_binlog):
    """Commits that the server groups carry FL_GROUP_COMMIT_ID (a GTID event
    with a commit id) and are walked as one group each."""
    name, path = fresh_binlog
    live_server.sql("SET GLOBAL binlog_commit_wait_count=4, binlog_commit_wait_usec=300000")
    try:
        def commit(i):
            c = live_server.connect()
            with c.cursor() as cur:
                for j in range(5):
                    cur.execute("INSERT INTO gtidx_live.t (d, v) VALUES (%s, 'gc')", (i * 100 + j,))
            c.close()
        threads = [threading.Thread(target=commit, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        live_server.sql("SET GLOBAL binlog_commit_wait_count=0, binlog_commit_wait_usec=100000")
    with Binlog(path) as b:
        groups = list(b.groups())
    grouped = [g for g in groups if g.flags2 & binlog_events.FL_GROUP_COMMIT_ID]
    assert len(grouped) >= 2
    assert len(groups) >= 20 and all(a.end <= b.start for a, b in zip(groups, groups[1:]))
