"""The index against live servers: a real replica connection (10.11) agrees
with gtidx's replica start point, and a real MariaDB 11.8 answers
BINLOG_GTID_POS from an index that gtidx wrote."""
from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pymysql
import pytest

from conftest import ROOT, AttachedServer
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import NotFoundError
from gtidx.gtid import Gtid, Position
from gtidx.index.build import build_index
from gtidx.index.files import verify_index
from test_live import write_rotated
from tools.mariadb import NO_TLS

pytestmark = pytest.mark.live


# -- replica start vs a real replica (MariaDB 10.11) -----------------------------------------------

class Refused(str):
    """The server (or gtidx) refused the position: the error text."""


def what_a_replica_gets(srv, position: str, server_id: int):
    """What a real replica connection receives: (the Rotate event the server sends
    first, as (file, offset): where it starts reading; the first Gtid or None), or
    Refused(text)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent, RotateEvent
    stream = BinLogStreamReader(connection_settings=srv.connection_settings(), server_id=server_id,
                                auto_position=position, is_mariadb=True, blocking=False,
                                only_events=[RotateEvent, MariadbGtidEvent])
    start = None
    try:
        for ev in stream:
            if isinstance(ev, RotateEvent):
                start = start or (ev.next_binlog, ev.position)
                continue
            return start, Gtid.parse(ev.gtid)
        return start, None
    except pymysql.err.OperationalError as e:
        return Refused(e)
    finally:
        stream.close()


def first_gtid_a_replica_gets(srv, position: str, server_id: int):
    """What a real replica connection receives first: a Gtid, None, or Refused(text)."""
    got = what_a_replica_gets(srv, position, server_id)
    return got if isinstance(got, Refused) else got[1]


def gtidx_first(logs: api.BinlogSeries, position: str):
    try:
        r = logs.replica_start(position, strict=True)   # mysql-replication sets @slave_gtid_strict_mode=1
    except NotFoundError as e:
        return Refused(e)
    return None if r.first is None else r.first.gtid


@pytest.fixture(scope="module")
def replica_binlogs(live_server):
    """Several files of a multi-domain, multi-server mix; closed ones indexed by gtidx."""
    write_rotated(live_server, 4, 60, seed=500, last=40)
    index = live_server.binlog_dir / "master-bin.index"
    files = api.list_binlogs(index)
    for f in files[:-1]:
        build_index(f, page_size=512, span_min=2048, force=True)
    return files


def sample_positions(files, rnd) -> list[str]:
    groups = []
    for f in files:
        with Binlog(f) as b:
            groups += [(f, g) for g in b.groups()]
    positions = {""}
    with api.BinlogSeries(files) as logs:
        for f, g in rnd.sample(groups, min(40, len(groups))):
            state = logs.state_at(f, g.end).state
            pos = state.position()
            positions.add(str(pos))
            # the same place named by another server's GTID of that domain
            others = [x for x in state if x.domain == g.gtid.domain and x != state.last(g.gtid.domain)]
            if others:
                positions.add(str(Position([others[0] if p.domain == g.gtid.domain else p for p in pos])))
            # a position that lacks a domain
            if len(pos) > 1:
                positions.add(",".join(str(p) for p in list(pos)[1:]))
        latest = logs.end_state()
    last = latest.position()
    d0 = next(iter(last))
    positions.add(str(Position([Gtid(d0.domain, d0.server, d0.seq + 1000)] +
                               [p for p in last if p.domain != d0.domain])))        # never written
    positions.add(str(Position([Gtid(d0.domain, 77, d0.seq - 3)] +
                               [p for p in last if p.domain != d0.domain])))        # diverged
    positions.add(str(Position([Gtid(99, 1, 5)] + list(last))))                     # domain the binlog lacks
    return sorted(positions)


def _same_refusal(real: str, mine: str) -> bool:
    """Same reason: 'not in the master's binlog' (also 'diverged'), or purged, or a hole."""
    for server_words, gtidx_words in (("diverged", "diverged"), ("not in the master's binlog", "not in the master's binlog"),
                                      ("missing the GTID", "missing the GTID"),
                                      ("purged", "purged")):
        if server_words in real:
            return gtidx_words in mine
    return False


def test_replica_start_matches_a_real_replica(live_server, replica_binlogs):
    rnd = random.Random(42)
    positions = sample_positions(replica_binlogs, rnd)
    assert len(positions) >= 40
    mismatches, kinds = [], {"first": 0, "none": 0, "error": 0}
    with api.BinlogSeries(replica_binlogs) as logs:
        for i, pos in enumerate(positions):
            real = first_gtid_a_replica_gets(live_server, pos, server_id=1000 + i)
            mine = gtidx_first(logs, pos)
            if isinstance(real, Refused) or isinstance(mine, Refused):
                ok = isinstance(real, Refused) and isinstance(mine, Refused) and _same_refusal(real, mine)
                kinds["error"] += ok
            else:
                assert real is None or isinstance(real, Gtid)
                ok = real == mine
                kinds["first" if real else "none"] += ok
            if not ok:
                mismatches.append((pos, real, mine))
    assert not mismatches, mismatches[:5]
    assert kinds["first"] >= 30 and kinds["error"] >= 2


def test_replica_start_offset_is_where_a_real_replica_starts(live_server, replica_binlogs):
    """The Rotate event a 10.11 replica receives first names the file the server
    reads and the offset it starts from: 4, the file's start, whatever index there
    is. ``replica_start`` gives that file and offset, and the file's GTID_LIST as
    its state, with gtidx's index (records inside the files) and without."""
    positions = sample_positions(replica_binlogs, random.Random(7))
    real = {p: what_a_replica_gets(live_server, p, server_id=2000 + i) for i, p in enumerate(positions)}
    answered, through_records = 0, 0
    for use_index in (True, False):
        with api.BinlogSeries(replica_binlogs, use_index=use_index) as logs:
            for p in positions:
                if isinstance(real[p], Refused):
                    continue
                r = logs.replica_start(p, strict=True)
                assert (os.path.basename(r.file), r.offset) == real[p][0], (p, use_index)
                assert r.state == logs.start_state(r.file), (p, use_index)
                assert (r.first and r.first.gtid) == real[p][1], (p, use_index)
                answered += 1
                if use_index and r.via == "index":      # the walk began at a record inside the file
                    f = logs.opened(r.file)
                    through_records += f.record(lambda x: x.before_position(r.position))[0] > f.binlog.body_start
    assert answered >= 60 and through_records >= 10, (answered, through_records)


def test_replica_start_hole_in_strict_mode(live_server, replica_binlogs):
    """A GTID that does not exist between two that do: strict replicas get an error."""
    with api.BinlogSeries(replica_binlogs) as logs:
        latest = logs.end_state()
        holes = []
        for f in replica_binlogs:
            with Binlog(f) as b:
                seqs = {}
                for g in b.groups():
                    seqs.setdefault((g.gtid.domain, g.gtid.server), []).append(g.gtid.seq)
            for (d, s), ss in seqs.items():
                for a, c in zip(ss, ss[1:]):
                    if c > a + 1:
                        holes.append(Gtid(d, s, a + 1))
        assert holes, "the mix interleaves servers in a domain, so holes exist"
        hole = holes[len(holes) // 2]
        pos = str(Position([hole] + [p for p in latest.position() if p.domain != hole.domain]))
        real = first_gtid_a_replica_gets(live_server, pos, server_id=2000)
        assert isinstance(real, Refused) and "missing the GTID" in real
        with pytest.raises(NotFoundError, match="strict mode"):
            logs.replica_start(pos, strict=True)
        assert logs.replica_start(pos, strict=False).first is not None


# -- MariaDB 11.8 reads a gtidx-written index ----------------------------------------------------------

SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def m118():
    """A real MariaDB 11.8 (native GTID index), started with ../shared/tools/mariadb-11.8.sh:
    the server tools/test started (GTIDX_M118_SOCKET), or one the test starts itself in
    GTIDX_M118_ROOT (default /var/tmp/gtidx-ci-m118, as tools/test; the first start builds a Debian 13
    root with debootstrap, a few minutes)."""
    sock = os.environ.get("GTIDX_M118_SOCKET")
    started = None
    if not sock:
        root = Path(os.environ.get("GTIDX_M118_ROOT", "/var/tmp/gtidx-ci-m118"))
        sock = str(root / "srv" / "m118" / "mysqld.sock")
        if not _alive(sock):
            script = SHARED / "tools" / "mariadb-11.8.sh"
            if not script.exists():
                pytest.fail(f"MariaDB 11.8 is needed and {script} is missing", pytrace=False)
            r = subprocess.run(["bash", str(script), str(root)], capture_output=True, text=True, timeout=1500)
            if r.returncode != 0 or not _alive(sock):
                pytest.fail(f"could not start MariaDB 11.8: {r.stderr[-1500:]}", pytrace=False)
            started = root
    yield sock
    if started is not None:
        pid = (started / "srv" / "m118" / "mysqld.pid").read_text().strip()
        subprocess.run(["kill", pid])


def _alive(sock: str) -> bool:
    try:
        AttachedServer(sock)
        return True
    except Exception:
        return False


def _sql(sock: str, statement: str, args=None):
    return AttachedServer(sock).sql(statement, args)


def _hits(sock: str) -> int:
    return int(_sql(sock, "SHOW GLOBAL STATUS LIKE 'Binlog_gtid_index_hit'")[0][1])


def test_mariadb_118_answers_from_a_gtidx_built_index(m118):
    assert _sql(m118, "SELECT @@binlog_gtid_index")[0][0] == 1
    _sql(m118, "CREATE DATABASE IF NOT EXISTS gtidx_t")
    _sql(m118, "CREATE TABLE IF NOT EXISTS gtidx_t.t (id INT AUTO_INCREMENT PRIMARY KEY, d INT, v VARCHAR(300))")
    _sql(m118, "FLUSH BINARY LOGS")
    conn = pymysql.connect(unix_socket=m118, user="root", autocommit=True, **NO_TLS)
    with conn.cursor() as cur:
        for i in range(1500):     # ~600 KB of binlog in 3 domains
            cur.execute(f"SET SESSION gtid_domain_id={i % 3}")
            cur.execute("INSERT INTO gtidx_t.t (d, v) VALUES (%s, REPEAT('x', 300))", (i,))
    conn.close()
    name = _sql(m118, "SHOW MASTER STATUS")[0][0]
    _sql(m118, "FLUSH BINARY LOGS")              # closes the file and the server's index of it
    basename = _sql(m118, "SELECT @@log_bin_basename")[0][0]
    host_dir = Path(os.path.dirname(m118)) / "binlog"   # the chroot's /srv/m118/binlog
    assert basename.startswith("/srv/m118/binlog/")
    binlog = host_dir / name
    idx = Path(str(binlog) + ".idx")
    server_idx = idx.read_bytes()
    idx.unlink()
    res = build_index(binlog, page_size=1024, span_min=16384)
    assert res.action == "built" and res.records > 10 and idx.read_bytes() != server_idx
    os.chmod(idx, 0o644)
    with Binlog(binlog) as b:
        spans = list(b.group_spans())
    rnd = random.Random(7)
    offsets = sorted({e for _, e, _ in rnd.sample(spans, 40)} | {spans[-1][1], b.size})
    before = _hits(m118)
    with api.BinlogSeries([str(binlog)], use_index=False) as scan:
        for off in offsets:
            answer = _sql(m118, "SELECT BINLOG_GTID_POS(%s, %s)", (name, off))[0][0]
            assert Position.parse(answer) == scan.state_at(binlog, off).position, off
    assert _hits(m118) - before >= len(offsets), "the server must answer from the index"


def test_tail_beside_a_server_that_writes_its_own_indexes(m118, tmp_path):
    """MariaDB 11.8 with binlog_gtid_index=ON: gtidx tail leaves its .idx files
    alone; with the server's index switched off, gtidx indexes the new files."""
    from gtidx.index.files import IndexMeta
    from gtidx.tail import TailSettings, Tailer
    binlog_dir = Path(os.path.dirname(m118)) / "binlog"
    _sql(m118, "SET GLOBAL binlog_gtid_index=ON")
    _sql(m118, "FLUSH BINARY LOGS")
    _sql(m118, "CREATE DATABASE IF NOT EXISTS gtidx_t")
    _sql(m118, "CREATE TABLE IF NOT EXISTS gtidx_t.t (id INT AUTO_INCREMENT PRIMARY KEY, d INT, v VARCHAR(300))")
    Tailer(str(binlog_dir), TailSettings(server_grace=0)).run(once=True)    # catch up with older files
    for i in range(50):
        _sql(m118, "INSERT INTO gtidx_t.t (d, v) VALUES (%s, 'x')", (i,))
    before = {p.name: p.read_bytes() for p in binlog_dir.glob("*.idx")}
    Tailer(str(binlog_dir), TailSettings(server_grace=0)).run(once=True)
    after = {p.name: p.read_bytes() for p in binlog_dir.glob("*.idx")}
    assert set(after) == set(before)
    assert all(after[n] == before[n] for n in after if IndexMeta.read(str(binlog_dir / n)) is None)
    try:
        _sql(m118, "SET GLOBAL binlog_gtid_index=OFF")
        _sql(m118, "FLUSH BINARY LOGS")
        for i in range(50):
            _sql(m118, "INSERT INTO gtidx_t.t (d, v) VALUES (%s, 'y')", (i,))
        name = _sql(m118, "SHOW MASTER STATUS")[0][0]
        _sql(m118, "FLUSH BINARY LOGS")
    finally:
        _sql(m118, "SET GLOBAL binlog_gtid_index=ON")
    own = binlog_dir / f"{name}.idx"
    assert not own.exists()                           # the server did not index it
    Tailer(str(binlog_dir), TailSettings(server_grace=0)).run(once=True)
    assert own.exists() and IndexMeta.read(str(own)) is not None
    verify_index(binlog_dir / name)
