"""A replica start is one answer, whatever index lies beside the binlogs.

For replica positions drawn from every MariaDB fixture set (10.11 and 11.8),
the library (``replica_start``), ``gtidx seek --replica`` (text and
``--json``) and Spark's ``locate`` give, with gtidx's index (two layouts),
with an 11.8 server's own index and with none, what a brute-force reading of
the binlog bytes gives by MariaDB's rule (sql/sql_repl.cc):
``check_slave_start_position`` refuses a GTID the binlog state lacks,
``gtid_find_binlog_file`` picks the newest file whose GTID_LIST
``contains_all_slave_gtid`` (dropping a domain whose GTID is its last
there), ``init_binlog_sender`` reads that file from offset 4, and per domain
the groups up to the replica's GTID are skipped. Only ``via`` may differ."""
from __future__ import annotations

import functools
import json
import os
import re
import shutil

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import fixture_sets
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.cli import cli
from gtidx.errors import GtidxError
from gtidx.gtid import BinlogState, Gtid, Position
from gtidx.index.build import build_index

SETS = fixture_sets()
# gtidx's index: small pages and spans (records inside every file), and a record at every group
LAYOUTS = {"gtidx": (256, 2048), "gtidx-span1": (64, 1)}
NO_INDEX = "none"


# -- the binlog bytes, read once per set --------------------------------------------------------

@functools.cache
def facts(name: str):
    """(file names, start states, groups per file) of a set, or the error reading it gives."""
    d = next(s for s in SETS if _name(s) == name)
    names, heads, groups = [], [], []
    try:
        for f in api.list_binlogs(d):
            with Binlog(f) as b:
                names.append(os.path.basename(b.path))
                heads.append(b.start_state.copy())
                groups.append([(g.gtid, g.start, g.end, g.timestamp) for g in b.groups()])
    except GtidxError as e:
        return e
    return names, heads, groups


def _name(d) -> str:
    return f"{d.parent.name}/{d.name}"


def _contains_all_slave_gtid(pos: dict, head: BinlogState) -> bool:
    """sql_repl.cc's test of a GTID_LIST (in its order: by domain, a domain's last entry last)."""
    entries = head.entries()
    for i, (d, s, n) in enumerate(entries):
        want = pos.get(d)
        if want is None:
            return False
        if want.server == s and want.seq <= n:
            if want.seq < n or (i + 1 < len(entries) and entries[i + 1][0] == d):
                return False
    return True


def brute(name: str, position: str):
    """MariaDB's replica start, from the bytes alone: ("refused", why) or the answer's
    (file, offset, state, skip, first) with file names relative to the set."""
    got = facts(name)
    if isinstance(got, GtidxError):
        return ("error", str(got))
    names, heads, groups = got
    pos = {g.domain: g for g in Position.parse(position)}
    seqs, domains = {}, set()               # the server's binlog state: the last file's start plus its groups
    for d, s, n in heads[-1].entries():
        seqs[d, s] = n
        domains.add(d)
    for gtid, *_ in groups[-1]:
        seqs[gtid.domain, gtid.server] = gtid.seq
        domains.add(gtid.domain)
    for g in pos.values():
        have = seqs.get((g.domain, g.server))
        if not (have is not None and have >= g.seq) and g.domain in domains:
            return ("refused", "not in the master's binlog")
    found = next((i for i in reversed(range(len(names))) if _contains_all_slave_gtid(pos, heads[i])), None)
    if found is None:
        return ("refused", "purged")
    skip = dict(pos)
    for d, s, n in heads[found].entries():
        if skip.get(d) == Gtid(d, s, n):
            del skip[d]
    kept = Position(skip.values())
    first = None
    for i in range(found, len(names)):
        for gtid, start, end, ts in groups[i]:
            want = skip.get(gtid.domain)
            if want is None:
                first = (str(gtid), names[i], start, end, end, ts)
                break
            if gtid.server != want.server or gtid.seq < want.seq:
                continue
            del skip[gtid.domain]
            if gtid.seq > want.seq:
                first = (str(gtid), names[i], start, end, end, ts)
                break
        if first is not None:
            break
    return (names[found], 4, str(heads[found]), str(kept), first)


# -- the layouts: the same binlogs with each kind of index, and none ----------------------------

@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """{set name: {layout: directory}}: made on first use of a set."""
    root = tmp_path_factory.mktemp("replica-offset")
    made = {}

    def get(name: str) -> dict:
        if name not in made:
            src = next(s for s in SETS if _name(s) == name)
            out = {}
            has_server_index = any(src.glob("*.idx"))
            for layout in [NO_INDEX, *LAYOUTS] + (["server"] if has_server_index else []):
                d = root / name.replace("/", "-") / layout
                shutil.copytree(src, d)
                for p in d.iterdir():
                    p.chmod(0o644)
                    if p.suffix == ".idx" and layout != "server":
                        p.unlink()
                if layout in LAYOUTS:
                    page, span = LAYOUTS[layout]
                    for f in api.list_binlogs(d):
                        try:
                            build_index(f, page_size=page, span_min=span, max_ratio=None, force=True)
                        except GtidxError:
                            pass            # the encrypted set: nothing to index, the layout has none
                out[layout] = d
            made[name] = out
        return made[name]
    return get


def _relative(text: str, d) -> str:
    return text.replace(f"{d}/", "")


def library_answer(d, position: str, use_index: bool):
    try:
        with api.BinlogSeries(api.list_binlogs(d), use_index=use_index) as logs:
            r = logs.replica_start(position)
    except GtidxError as e:
        return ("error", _relative(e.message, d))
    first = r.first
    return (_relative(r.file, d), r.offset, str(r.state), str(r.skip),
            None if first is None else (str(first.gtid), _relative(first.file, d), first.start, first.end,
                                        first.resume, first.timestamp))


def _agrees(answer, expected) -> bool:
    """An answer (as ``library_answer`` gives it) against the brute force."""
    if expected[0] == "refused":
        return answer[0] == "error" and expected[1] in answer[1]
    if expected[0] == "error":
        return answer[0] == "error"
    return answer == expected


# -- positions: replica states drawn from the sets ----------------------------------------------

SET_NAMES = [_name(s) for s in SETS]


@st.composite
def replica_position(draw, name: str) -> str:
    """A position for the set ``name``: a state at a group end or a file start, as
    BINLOG_GTID_POS gives it, then perhaps changed: a domain named by another server's
    entry, a seq_no moved by one, a domain dropped, one domain alone, a domain the
    binlog lacks."""
    got = facts(name)
    if isinstance(got, GtidxError):
        gtids = draw(st.lists(st.builds(Gtid, st.integers(0, 3), st.integers(1, 2), st.integers(1, 500)),
                              min_size=1, max_size=3, unique_by=lambda g: g.domain))
        return str(Position(gtids))
    _, heads, groups = got
    i = draw(st.integers(0, len(heads) - 1))
    j = draw(st.integers(-1, len(groups[i]) - 1))
    state = heads[i].copy()
    for gtid, *_ in groups[i][:j + 1]:
        state.apply(gtid.domain, gtid.server, gtid.seq)
    pos = {g.domain: g for g in state.position()} or {0: Gtid(0, 1, 1)}
    changes = draw(st.sampled_from([0, 0, 0, 1, 1, 2]))         # most positions as the server gives them
    for d in draw(st.permutations(sorted(pos)))[:changes]:
        change = draw(st.sampled_from(["other server", "other server", "seq+1", "seq-1", "drop"]))
        g = pos[d]
        others = [x for x in state if x.domain == d and x != g]
        if change == "other server" and others:
            pos[d] = draw(st.sampled_from(others))
        elif change == "seq+1":
            pos[d] = Gtid(d, g.server, g.seq + 1)
        elif change == "seq-1" and g.seq > 1:
            pos[d] = Gtid(d, g.server, g.seq - 1)
        elif change == "drop" and len(pos) > 1:
            del pos[d]
    if draw(st.integers(0, 9)) == 0:
        pos = {d: pos[d] for d in [draw(st.sampled_from(sorted(pos)))]}
    if draw(st.integers(0, 9)) == 0:
        pos[77] = Gtid(77, 1, 5)
    return str(Position(pos.values()))


def replica_positions():
    """(set name, position) over every set."""
    return st.sampled_from(SET_NAMES).flatmap(lambda name: st.tuples(st.just(name), replica_position(name)))


# -- the library and the CLI ---------------------------------------------------------------------

def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _cli_json(d, position: str):
    r = run("seek", "--json", "--replica", position, d)
    doc = json.loads(r.stdout)
    if "error" in doc:
        assert r.exit_code == doc["error"]["exit_code"] != 0
        return ("error", _relative(doc["error"]["message"], d)), r.exit_code
    assert r.exit_code == 0 and set(doc) == {"position", "file", "offset", "state", "skip", "first", "via"}
    first = doc["first"]
    return (_relative(doc["file"], d), doc["offset"], doc["state"], doc["skip"],
            None if first is None else (first["gtid"], _relative(first["file"], d), first["start"],
                                        first["end"], first["resume"], first["timestamp"])), 0


def _cli_text(d, position: str):
    """(exit code, stdout without its ``(via ...)``, the error line): warnings aside."""
    r = run("seek", "--replica", position, d)
    errors = [ln for ln in r.stderr.splitlines() if not ln.startswith("gtidx: warning: ")]
    return r.exit_code, re.sub(r" \(via \w+\)", "", _relative(r.stdout, d)), _relative("\n".join(errors), d)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(drawn=replica_positions())
def test_replica_start_is_one_answer_with_and_without_an_index(layouts, drawn):
    name, position = drawn
    expected = brute(name, position)
    event(expected[0] if expected[0] in ("refused", "error") else "first sent" if expected[4] else "up to date")
    dirs = layouts(name)
    plain = library_answer(dirs[NO_INDEX], position, use_index=False)
    assert _agrees(plain, expected), (name, position, plain, expected)
    for layout, d in dirs.items():
        assert library_answer(d, position, use_index=True) == plain, (name, position, layout)
    json_answers = {layout: _cli_json(d, position) for layout, d in dirs.items()}
    text_answers = {layout: _cli_text(d, position) for layout, d in dirs.items()}
    assert json_answers[NO_INDEX][0] == plain, (name, position)
    for layout in dirs:
        assert json_answers[layout] == json_answers[NO_INDEX], (name, position, layout)
        assert text_answers[layout] == text_answers[NO_INDEX], (name, position, layout)
    if plain[0] != "error":
        assert text_answers[NO_INDEX][1].splitlines()[0] == \
            f"replica at {Position.parse(position)} starts in {plain[0]} at offset 4"


def test_the_readme_position_starts_at_offset_4_with_and_without_an_index(layouts):
    """The issue's case: 0-2-432,... answered 443 through the index and 4 by scan."""
    position = "0-2-432,1-1-420,2-1-400,5-1-301,6-1-12"
    expected = brute("mariadb-10.11/multifile", position)
    assert expected[:2] == ("master-bin.000019", 4) and expected[4][0] == "1-1-422"
    for layout, d in layouts("mariadb-10.11/multifile").items():
        with api.BinlogSeries(api.list_binlogs(d), use_index=layout != NO_INDEX) as logs:
            r = logs.replica_start(position)
            assert r.via == ("scan" if layout == NO_INDEX else "index"), layout
            assert library_answer(d, position, layout != NO_INDEX) == expected, layout
            assert logs.state_at(r.file, r.offset).state == r.state      # BINLOG_GTID_POS(file, 4)


# -- Spark ---------------------------------------------------------------------------------------

@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(drawn=st.sampled_from(SET_NAMES).flatmap(
    lambda name: st.tuples(st.just(name), st.lists(replica_position(name), min_size=1, max_size=40))))
def test_spark_replica_starts_are_one_answer_with_and_without_an_index(layouts, spark, drawn):
    """Spark's locate answers a position (a comma: several domains) with the library's
    replica start: ``start`` is its offset, ``resume`` the first group's start when in that file."""
    import gtidx.spark as gs
    name, drawn_positions = drawn
    positions = sorted({p for p in drawn_positions if "," in p})
    if not positions:
        return
    rows = {}
    for layout, d in layouts(name).items():
        df = spark.createDataFrame([(p,) for p in positions], "gtid string")
        rows[layout] = {r.gtid: (r.kind, r.found, _relative(r.file or "", d), r.start, r.end, r.resume,
                                 r.timestamp, r.first_gtid, r.reason and _relative(r.reason, d))
                        for r in gs.locate(spark, df, str(d)).collect()}
    for p in positions:
        expected = brute(name, p)
        mine = rows[NO_INDEX][p]
        if expected[0] in ("refused", "error"):
            assert not mine[1] and (expected[0] == "error" or expected[1] in mine[8]), (name, p, mine)
        else:
            file, offset, _, _, first = expected
            assert mine == ("position", True, file, offset, None,
                            first[2] if first and first[1] == file else None,
                            first[5] if first else None, first[0] if first else None, None), (name, p)
        for layout in rows:
            assert rows[layout][p] == mine, (name, p, layout)
