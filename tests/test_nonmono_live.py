"""Non-monotonic GTID histories (gtid_strict_mode=OFF, SET gtid_seq_no) written
by a real MariaDB 10.11, with the server as the oracle: every GTID is found
where SHOW BINLOG EVENTS has it (the first occurrence, the others listed), and
replica starts agree with a real replica connection whether gtidx answers
from a scan or from an index of any page size and span."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, private
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import NotFoundError
from gtidx.gtid import Gtid, Position
from gtidx.index.build import build_index
from tools.mariadb import MariaDB

pytestmark = pytest.mark.live

# issue 11 item 1: domain 5, (seq_no, server_id), FLUSH BINARY LOGS between the lists
ROTATIONS = [
    [(100, 1), (101, 2), (102, 1), (103, 2), (104, 1), (105, 2)],
    [(50, 1), (51, 2), (52, 1), (101, 2), (53, 1)],
    [(104, 2), (200, 1), (60, 2), (61, 1)],
    [(30, 2), (31, 1), (101, 1), (300, 2)],
]
# the 10.11 nonmono fixture's domain-5 plan, in one file: 100, 101, 102, then 50, 51, ...
ONE_FILE = [(100, 1), (None, 1), (None, 1), (50, 1), (51, 1), (None, 1), (40, 2), (None, 2),
            (200, 1), (None, 1), (150, 2), (60, 1), (None, 1), (300, 1), (None, 1)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A private 10.11 of our own: a clean binlog directory, gtid_strict_mode=0."""
    srv = private(MariaDB(tmp_path_factory.mktemp("nonmono-srv"), {"gtid_strict_mode": "0"}), "a private MariaDB server")
    try:
        srv.sql("CREATE DATABASE t")
        srv.sql("CREATE TABLE t.a (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB")
        yield srv
    finally:
        srv.stop()


def _trx(cur, domain: int, server_id: int, seq: int | None) -> None:
    cur.execute("SET SESSION gtid_domain_id=%s, server_id=%s", (domain, server_id))
    if seq is not None:
        cur.execute("SET SESSION gtid_seq_no=%s", (seq,))
    cur.execute("INSERT INTO t.a (v) VALUES (%s)", (f"{domain}-{server_id}-{seq}",))


def _write(srv: MariaDB, rotations, domain: int = 5) -> list[str]:
    """Each list of (seq_no, server_id) of ``domain`` into its own file, an
    ordinary domain-0 transaction after each; the closed files, in order."""
    srv.sql("FLUSH BINARY LOGS")
    first = srv.sql("SHOW MASTER STATUS")[0][0]
    conn = srv.connect()
    try:
        with conn.cursor() as cur:
            for i, groups in enumerate(rotations):
                for seq, sid in groups:
                    _trx(cur, domain, sid, seq)
                    _trx(cur, 0, 1, None)
                cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
    files = api.list_binlogs(srv.binlog_dir / "master-bin.index")
    names = [os.path.basename(f) for f in files]
    return files[names.index(first):-1]


def server_groups(srv: MariaDB, path: str) -> list[tuple[Gtid, int, int]]:
    """(gtid, start, end) of every event group, from SHOW BINLOG EVENTS."""
    rows = srv.sql(f"SHOW BINLOG EVENTS IN '{os.path.basename(path)}'")
    out, cur = [], None
    for _, pos, etype, _, _, info in rows:
        if cur is not None and etype in ("Gtid", "Gtid_list", "Binlog_checkpoint", "Rotate", "Stop"):
            out.append((cur[0], cur[1], pos))
            cur = None
        if etype == "Gtid":
            cur = (Gtid.parse(info.split("GTID ")[1].split()[0]), pos)
    if cur is not None:
        out.append((cur[0], cur[1], rows[-1][4]))
    return out


def _occurrences(srv: MariaDB, files) -> dict:
    """{gtid: [(file name, start, end), ...]} in file order, from SHOW BINLOG EVENTS."""
    out = {}
    for f in files:
        for g, start, end in server_groups(srv, f):
            out.setdefault(g, []).append((os.path.basename(f), start, end))
    return out


def _copy(files, dest) -> list[str]:
    dest.mkdir()
    out = []
    for f in files:
        shutil.copyfile(f, dest / os.path.basename(f))
        out.append(str(dest / os.path.basename(f)))
    return out


@pytest.fixture(scope="module")
def rotations(server, tmp_path_factory):
    files = _write(server, ROTATIONS)
    assert len(files) == 4
    occurrences = _occurrences(server, files)
    copy = _copy(files, tmp_path_factory.mktemp("rotations") / "binlogs")
    return copy, occurrences


def _check_all(files, occurrences, use_index=True):
    wrong = []
    with api.BinlogSeries(files, use_index=use_index) as logs:
        for g, occ in occurrences.items():
            try:
                loc = logs.locate(g)
            except NotFoundError as e:
                wrong.append((str(g), "not found", str(e)))
                continue
            mine = [(os.path.basename(o.file), o.start, o.end) for o in loc.occurrences] or \
                [(os.path.basename(loc.file), loc.start, loc.end)]
            if mine != occ or (os.path.basename(loc.file), loc.start, loc.end) != occ[0]:
                wrong.append((str(g), mine, occ))
    return wrong


def test_locate_across_rotations_finds_every_occurrence(rotations):
    files, occurrences = rotations
    assert len(occurrences[Gtid(5, 2, 101)]) == 2          # logged twice, in two files
    assert _check_all(files, occurrences) == []
    assert _check_all(files, occurrences, use_index=False) == []
    with api.BinlogSeries(files) as logs:
        for missing in ("5-1-99", "5-2-102", "5-1-500", "5-3-1", "7-1-1"):
            with pytest.raises(NotFoundError):
                logs.locate(missing)


def test_state_at_every_group_boundary_is_binlog_gtid_pos(server, rotations):
    """On the non-monotonic history, the state at each group's start and end
    is what the server's BINLOG_GTID_POS says (the most recent GTID per
    domain in file order, not the highest)."""
    files, occurrences = rotations
    wrong = []
    with api.BinlogSeries(files) as logs:
        for occ in occurrences.values():
            for name, start, end in occ:
                for offset in (start, end):
                    theirs = server.sql("SELECT BINLOG_GTID_POS(%s, %s)", (name, offset))[0][0]
                    mine = logs.state_at(os.path.join(os.path.dirname(files[0]), name), offset).position
                    if mine != Position.parse(theirs):
                        wrong.append((name, offset, str(mine), theirs))
    assert wrong == []


@pytest.mark.parametrize("page_size,span", [(64, 1), (512, 256), (4096, 65536)])
def test_locate_across_rotations_with_indexes(rotations, tmp_path, page_size, span):
    files, occurrences = rotations
    files = _copy(files, tmp_path / "idx")
    for f in files:
        build_index(f, page_size=page_size, span_min=span, max_ratio=None, force=True)
    assert _check_all(files, occurrences) == []


# tools/campaign found it (domains of its own, 61-63: the tests below use 5, 7
# and 8 up): in a domain, server 2 steps back (71 -> 53) and jumps
# (125) inside the third binlog while every start state still grows.
INSIDE_ONE_FILE = [[(70, 1), (71, 2), (77, 1)], [(78, 1)],
                   [(53, 2), (125, 2), (91, 2), (92, 2), (93, 2), (94, 1)]]


@pytest.mark.parametrize("domain,layout", [(61, None), (62, (64, 1)), (63, (4096, 65536))])
def test_a_dip_inside_one_binlog_is_never_not_found(server, tmp_path, domain, layout):
    """The start states cannot show a seq_no that steps back and recovers
    inside one binlog: "not in these binlogs" is only said once every binlog
    was walked. Each GTID is asked of a fresh BinlogSeries, as `gtidx seek` does."""
    files = _write(server, INSIDE_ONE_FILE, domain=domain)
    occurrences = _occurrences(server, files)
    copies = _copy(files, tmp_path / "binlogs")
    if layout is not None:
        for f in copies:
            build_index(f, page_size=layout[0], span_min=layout[1], max_ratio=None, force=True)
    wrong = []
    for g, occ in occurrences.items():
        assert len(occ) == 1, (g, occ)
        with api.BinlogSeries(copies, use_index=layout is not None) as logs:
            try:
                loc = logs.locate(g)
                mine = (os.path.basename(loc.file), loc.start, loc.end)
            except NotFoundError as e:
                mine = str(e)
        if mine != occ[0]:
            wrong.append((str(g), mine, occ[0]))
    assert wrong == [], wrong
    with api.BinlogSeries(copies) as logs:      # and what was never written stays so
        with pytest.raises(NotFoundError, match="never written"):
            logs.locate(Gtid(domain, 2, 126))


# A seq that jumps ahead and steps back inside the first binlog (10, 15, 11:
# its end state is 11, the last logged), then 12 to 16 in the second: every
# start state and the end state grow, and the bounds name the second binlog
# for 15, whose first copy is in the first. (A seq_no left to the server
# after such a dip is the highest one plus 1: 16, which is why every seq is
# set here.) Domains of their own (64-67, 69).
HIDDEN_COPY = [[(10, 1), (15, 1), (11, 1)], [(12, 1), (13, 1), (14, 1), (15, 1), (16, 1)]]


@pytest.mark.parametrize("domain,layout", [(64, None), (65, (64, 1)), (66, (4096, 65536)), (67, "no seen")])
def test_an_earlier_copy_hidden_in_a_recovered_dip_is_the_answer(server, tmp_path, domain, layout):
    """The bounds lead to the second binlog's 15; the first copy hides in the
    first binlog, whose start and end states look monotonic. A fresh
    BinlogSeries (as `gtidx seek` has) must answer the first copy and list
    both, as SHOW BINLOG EVENTS has them: from the walk of the earlier binlog
    (no index, or an index without what build saw) or from what build
    stored with its index."""
    files = _write(server, HIDDEN_COPY, domain=domain)
    occurrences = _occurrences(server, files)
    twice = Gtid(domain, 1, 15)
    assert len(occurrences[twice]) == 2
    copies = _copy(files, tmp_path / "binlogs")
    if layout is not None:
        for f in copies:
            if layout == "no seen":        # an index from before gtidx stored what it saw
                build_index(f, max_ratio=None, force=True)
                os.removexattr(f + ".idx", "user.gtidx")
            else:
                build_index(f, page_size=layout[0], span_min=layout[1], max_ratio=None, force=True)
    wrong = []
    for g, occ in occurrences.items():
        with api.BinlogSeries(copies, use_index=layout is not None) as logs:
            loc = logs.locate(g)
        mine = [(os.path.basename(o.file), o.start, o.end) for o in loc.occurrences] or \
            [(os.path.basename(loc.file), loc.start, loc.end)]
        if (os.path.basename(loc.file), loc.start, loc.end) != occ[0] or mine != occ:
            wrong.append((str(g), mine, occ))
    assert wrong == [], wrong
    with api.BinlogSeries(copies) as logs:
        with pytest.raises(NotFoundError, match="never written"):
            logs.locate(Gtid(domain, 1, 17))


def test_later_copies_are_listed_from_stored_ranges(server, tmp_path):
    """11 is logged again in a recovered dip of the second binlog (13, 11,
    14): the bounds show nothing. With gtidx's indexes (which store each
    binlog's seq ranges) a fresh lookup lists both copies, as SHOW BINLOG
    EVENTS has them."""
    domain = 68
    files = _write(server, [[(10, 1), (11, 1), (12, 1)], [(13, 1), (11, 1), (14, 1)]], domain=domain)
    occurrences = _occurrences(server, files)
    twice = Gtid(domain, 1, 11)
    assert len(occurrences[twice]) == 2
    copies = _copy(files, tmp_path / "binlogs")
    for f in copies:
        build_index(f, max_ratio=None, force=True)
    with api.BinlogSeries(copies) as logs:
        loc = logs.locate(twice)
    assert [(os.path.basename(o.file), o.start, o.end) for o in loc.occurrences] == occurrences[twice]
    assert (os.path.basename(loc.file), loc.start, loc.end) == occurrences[twice][0]


def test_stored_ranges_spare_the_walk_of_earlier_binlogs(rotations, tmp_path, monkeypatch):
    """Where build stored what it saw with every index, a lookup in the last
    binlog walks only its own stretch of that binlog, and "never written" is
    said without walking any: the planner knows each file's seq ranges
    (domain 0 of the rotations grows; domain 5 does not)."""
    files = _copy(rotations[0], tmp_path / "binlogs")
    for f in files:
        build_index(f, max_ratio=None, force=True)
    walked = []
    real = Binlog.group_spans
    monkeypatch.setattr(Binlog, "group_spans", lambda self, start=None: (walked.append(self.path),
                                                                        real(self, start))[1])
    last = max((g for g in rotations[1] if g.domain == 0), key=lambda g: g.seq)   # domain 0 only grows
    with api.BinlogSeries(files) as logs:
        loc = logs.locate(last)
        assert (os.path.basename(loc.file), loc.start, loc.end) == rotations[1][last][0]
        assert loc.file == files[-1] and not loc.occurrences
        assert walked == [loc.file]
        walked.clear()
        with pytest.raises(NotFoundError, match="never written"):
            logs.locate(last._replace(seq=last.seq + 1))
        assert walked == []


def test_the_newest_binlogs_stored_ranges_give_the_end_bound(rotations, tmp_path, monkeypatch):
    """A closed newest binlog whose index stored what its build saw: the
    end bound of a pair that only grew there is its highest seq_no, with no
    descent to the index's last record; a pair that went down there (5-1:
    31 after the start state's 61) still takes the descent and the walk to
    the end. Every answer as the server's."""
    from gtidx.index.reader import IndexReader
    files = _copy(rotations[0], tmp_path / "binlogs")
    for f in files:
        build_index(f, max_ratio=None, force=True)
    descents = []
    real = IndexReader.last_record
    monkeypatch.setattr(IndexReader, "last_record", lambda self: (descents.append(self), real(self))[1])
    occurrences = rotations[1]
    grows = [g for g in occurrences if g.domain == 0]
    for g in grows[::3] + grows[-1:]:
        with api.BinlogSeries(files) as logs:          # a fresh series: nothing cached
            loc = logs.locate(g)
        assert (os.path.basename(loc.file), loc.start, loc.end) == occurrences[g][0]
    assert descents == []
    with api.BinlogSeries(files) as logs:        # (its message names the end state: that one is read)
        with pytest.raises(NotFoundError, match="never written"):
            logs.locate(grows[-1]._replace(seq=max(x.seq for x in grows) + 1))
    g = Gtid.parse("5-1-101")
    with api.BinlogSeries(files) as logs:
        loc = logs.locate(g)
    mine = [(os.path.basename(o.file), o.start, o.end) for o in loc.occurrences] or \
        [(os.path.basename(loc.file), loc.start, loc.end)]
    assert mine == occurrences[g]
    assert descents


def _seek(directory, gtid, *extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gtidx", "seek", "--gtid", gtid, str(directory), *extra],
                          capture_output=True, text=True, env=env)


def test_seek_cli_answers_the_issue_gtids(rotations):
    files, occurrences = rotations
    directory = os.path.dirname(files[0])
    for gtid in ("5-1-104", "5-1-50", "5-1-31", "5-2-30", "5-2-101"):
        occ = occurrences[Gtid.parse(gtid)]
        p = _seek(directory, gtid, "--json")
        assert p.returncode == 0, (gtid, p.stderr)
        out = json.loads(p.stdout)
        assert (os.path.basename(out["file"]), out["start"], out["end"]) == occ[0]
        assert [(os.path.basename(o["file"]), o["start"], o["end"]) for o in out["occurrences"]] == occ
        text = _seek(directory, gtid)
        assert text.returncode == 0 and text.stdout.startswith(f"{gtid} ")
        assert ("occurs 2 times" in text.stdout) == (len(occ) == 2), text.stdout


# -- replica start: index vs scan vs a real replica (issue 11 item 2) ------------------------------

@pytest.fixture(scope="module")
def one_file(server, rotations, tmp_path_factory):
    """The nonmono fixture's plan (seq_no back from 102 to 50 and up again),
    in one file after files of domain 0, in a domain of its own (7)."""
    files = _write(server, [ONE_FILE], domain=7)
    assert len(files) == 1
    return files[0]


def _positions(server, path) -> list[str]:
    """Every position a replica can be at inside the file (each group end's
    state), the same with each domain's other server, and the issue's case."""
    out = set()
    with api.BinlogSeries([path], use_index=False) as logs:
        start = logs.start_state(path)
        for g, _, end in server_groups(server, path):
            st = logs.state_at(path, end).state
            pos = st.position()
            out.add(str(pos))
            for other in st:
                if other.domain == 7 and other != st.last(7):
                    out.add(str(Position([other if p.domain == 7 else p for p in pos])))
        for seq in (102, 101, 103, 51, 200, 60, 150, 40):
            for sid in (1, 2):
                out.add(str(Position(list(start.position()) + [Gtid(7, sid, seq)])))
    return sorted(out)


def test_replica_start_index_equals_scan_equals_server(server, one_file, tmp_path):
    from test_live_index import first_gtid_a_replica_gets
    positions = _positions(server, one_file)
    real = {p: first_gtid_a_replica_gets(server, p, server_id=3000 + i) for i, p in enumerate(positions)}
    with Binlog(one_file) as b:
        assert [g.gtid.seq for g in b.groups() if g.gtid.domain == 7][:6] == [100, 101, 102, 50, 51, 103]
    configs = [None, (64, 1), (64, 256), (512, 1), (4096, 65536)]
    everything = api.list_binlogs(server.binlog_dir / "master-bin.index")    # as the server has them
    wrong = []
    for k, cfg in enumerate(configs):
        d = tmp_path / f"c{k}"
        files = _copy(everything, d)
        path = str(d / os.path.basename(one_file))
        if cfg is not None:
            build_index(path, page_size=cfg[0], span_min=cfg[1], max_ratio=None, force=True)
        with api.BinlogSeries(files, use_index=cfg is not None) as logs:
            wrong += [(cfg, *w) for w in _replica_disagreements(logs, positions, real)]
    assert wrong == [], wrong[:8]


# -- Spark plans with the same rule ----------------------------------------------------------------

def test_spark_locate_equals_the_library_on_rotations(spark, rotations, tmp_path):
    """gtidx.spark assigns GTIDs with api.plan_locate: a GTID of a (domain,
    server) that went backwards is answered as BinlogSeries.locate answers it."""
    gs = pytest.importorskip("gtidx.spark")
    files, occurrences = rotations
    values = [str(g) for g in occurrences] + ["5-1-99", "5-2-102", "7-1-1"]
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    for per_byte in (1.0, 1e-12):          # one pass per file, and index lookups
        rows = {r.gtid: r for r in gs.locate(spark, df, os.path.dirname(files[0]),
                                              pass_per_byte=per_byte).collect()}
        assert len(rows) == len(values)
        for v in values:
            occ = occurrences.get(Gtid.parse(v))
            r = rows[v]
            if occ is None:
                assert not r.found, v
            else:
                assert r.found and (os.path.basename(r.file), r.start, r.end) == occ[0], (v, r)


def test_spark_finds_the_copy_hidden_in_a_recovered_dip(spark, server, tmp_path):
    """The planning job learns each binlog's seq ranges (stored by build, or
    one walk where there is no index): Spark answers the first copy of a GTID
    whose earlier copy hides in a recovered dip, as SHOW BINLOG EVENTS has it,
    by index lookups and by the per-file pass."""
    gs = pytest.importorskip("gtidx.spark")
    domain = 69
    files = _write(server, HIDDEN_COPY, domain=domain)
    occurrences = _occurrences(server, files)
    bare = _copy(files, tmp_path / "bare")
    indexed = _copy(files, tmp_path / "indexed")
    for f in indexed:
        build_index(f, max_ratio=None, force=True)
    values = [str(g) for g in occurrences] + [f"{domain}-1-17"]
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    for directory in (bare, indexed):
        for per_byte in (1.0, 1e-12):
            rows = {r.gtid: r for r in gs.locate(spark, df, os.path.dirname(directory[0]),
                                                  pass_per_byte=per_byte).collect()}
            for v in values:
                occ = occurrences.get(Gtid.parse(v))
                r = rows[v]
                if occ is None:
                    assert not r.found and "never written" in r.reason, (v, r)
                else:
                    assert r.found and (os.path.basename(r.file), r.start, r.end) == occ[0], (v, r)


def _random_plan(seed: int) -> list[list[tuple]]:
    """Three files of domain-8 transactions from servers 1-3, a third of them
    with seq_no set: back, forward, or again to a recent one (a repeat)."""
    import random
    rnd = random.Random(seed)
    files, recent = [], [10]
    for _ in range(3):
        groups = []
        for _ in range(rnd.randint(8, 16)):
            r = rnd.random()
            if r < 0.12:
                seq = rnd.choice(recent)                      # logged again
            elif r < 0.25:
                seq = max(1, rnd.choice(recent) - rnd.randint(1, 30))
            elif r < 0.33:
                seq = max(recent) + rnd.randint(2, 40)
            else:
                seq = None                                    # the server's next
            groups.append((seq, rnd.choice((1, 2, 3))))
            recent = (recent + [seq or max(recent) + 1])[-6:]
        files.append(groups)
    return files


def test_random_histories_replica_start_at_every_record(server, tmp_path):
    """Random non-monotonic histories (seq_no set back, forward, repeated):
    with a record at every group (span 1) the index path can see every dip
    and repeat, so it must agree with the scan and with a real replica."""
    from test_live_index import first_gtid_a_replica_gets
    repeat = [[(100, 1), (101, 1), (101, 1), (102, 2), (None, 1)], [(50, 2), (103, 1), (103, 1)],
              [(200, 1), (7, 2), (200, 1), (8, 2)]]
    for seed in (1, 2, 3):
        plan = repeat if seed == 3 else _random_plan(seed)      # 3: a GTID logged twice in a row
        files = _write(server, plan, domain=8 + seed)
        everything = api.list_binlogs(server.binlog_dir / "master-bin.index")
        positions = set()
        with api.BinlogSeries(everything, use_index=False) as logs:
            for f in files:
                for _, _, end in server_groups(server, f):
                    st = logs.state_at(f, end).state
                    pos = st.position()
                    positions.add(str(pos))
                    for other in st:
                        if other.domain == 8 + seed and other != st.last(8 + seed):
                            positions.add(str(Position([other if p.domain == other.domain else p for p in pos])))
        positions = sorted(positions)
        real = {p: first_gtid_a_replica_gets(server, p, server_id=5000 + 1000 * seed + i)
                for i, p in enumerate(positions)}
        d = tmp_path / f"seed{seed}"
        copies = _copy(everything, d)
        for f in files:
            build_index(str(d / os.path.basename(f)), page_size=64, span_min=1, max_ratio=None, force=True)
        wrong = []
        for use_index in (False, True):
            with api.BinlogSeries(copies, use_index=use_index) as logs:
                wrong += [(seed, use_index, *w) for w in _replica_disagreements(logs, positions, real)]
        assert wrong == [], wrong[:6]
        # every GTID, found with every=True where the server logged it (first occurrence)
        occurrences = _occurrences(server, files)
        with api.BinlogSeries(copies) as logs:
            for g, occ in occurrences.items():
                loc = logs.locate(g, every=True)
                mine = [(os.path.basename(o.file), o.start, o.end) for o in loc.occurrences] or \
                    [(os.path.basename(loc.file), loc.start, loc.end)]
                assert mine == occ, g


def _replica_disagreements(logs, positions, real) -> list:
    """(position, the server's answer, ours) wherever ``logs.replica_start``
    (strict) and the real replica connection's answer ``real[p]`` differ."""
    from test_live_index import Refused, _same_refusal
    out = []
    for p in positions:
        try:
            r = logs.replica_start(p, strict=True)
            mine = None if r.first is None else r.first.gtid
        except NotFoundError as e:
            mine = Refused(e)
        theirs = real[p]
        if isinstance(theirs, Refused) or isinstance(mine, Refused):
            ok = isinstance(theirs, Refused) and isinstance(mine, Refused) and _same_refusal(theirs, mine)
        else:
            ok = theirs == mine
        if not ok:
            out.append((p, str(theirs), str(mine)))
    return out
