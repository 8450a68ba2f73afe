"""Point-in-time lookups (issue 13 item 5): parsing T, the answer against
brute force over every group of the fixtures (with and without indexes),
and ``gtidx seek --time``. The live comparison with ``mariadb-binlog
--stop-datetime`` on timestamps that step back is in test_pitr_live.py."""
from __future__ import annotations

import datetime as dt
import json
import shutil

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

import gtidx
from conftest import FIXTURES
from gtidx import admin, api
from gtidx.binlog.mariadb import Binlog
from gtidx.cli import cli
from gtidx.errors import BadInputError
from gtidx.gtid import Gtid
from gtidx.index.build import build_index

SETS = [FIXTURES / "mariadb-10.11" / "multifile", FIXTURES / "mariadb-11.8" / "multifile",
        FIXTURES / "mariadb-10.11" / "mixed"]


# -- T --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("2024-05-01T10:00:00Z", 1714557600),
    ("2024-05-01T12:00:00+02:00", 1714557600),
    ("2024-05-01 10:00:00", 1714557600),            # naive: UTC
    ("2024-05-01T10:00", 1714557600),
    ("2024-05-01", 1714521600),
    ("2024-05-01T10:00:00.5Z", 1714557600.5),
    ("@1714557600", 1714557600),
    (" @1714557600 ", 1714557600),
    ("@1714557600.25", 1714557600.25),
    (1714557600, 1714557600),
    (1714557600.0, 1714557600),
    (dt.datetime(2024, 5, 1, 10), 1714557600),
    (dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))), 1714557600),
])
def test_parse_time(text, expected):
    got = api.parse_time(text)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("bad", ["", "yesterday", "@", "@12x", "2024-13-01", "10:00", "@1e9",
                                 True, None, b"@1", float("nan"), float("inf"), [1]])
def test_parse_time_rejects(bad):
    with pytest.raises(BadInputError) as e:
        api.parse_time(bad)
    assert e.value.exit_code == 2


def test_format_time_round_trips():
    for t in (0, 1714557600, 1714557600.5):
        assert api.parse_time(api.format_time(t)) == t
    assert api.format_time(1714557600) == "2024-05-01T10:00:00Z"


# -- the answer -------------------------------------------------------------------------------

def _brute(files, t):
    """(file, offset, gtid, position) by walking every group from the first file."""
    state = api.binlog_info(files[0]).start_state
    for f in files:
        for g in api.scan(f)[1]:
            if g.timestamp >= t:
                return f, g.start, g.gtid, state.position()
            state.apply(*g.gtid)
    return files[-1], None, None, state.position()


def _copies(src, tmp_path, index):
    files = []
    for f in api.list_binlogs(src):
        files.append(str(shutil.copy(f, tmp_path / f.rsplit("/", 1)[1])))
        if index:
            build_index(files[-1], page_size=256, span_min=4096, max_ratio=None, force=True)
    return files


@pytest.fixture(scope="module", params=[(s, index) for s in SETS for index in (False, True, "catalog")],
                ids=lambda p: f"{p[0].parent.name}-{p[0].name}-{p[1] if p[1] == 'catalog' else 'index' if p[1] else 'scan'}")
def series(request, tmp_path_factory):
    src, index = request.param
    d = tmp_path_factory.mktemp("pitr")
    files = _copies(src, d, index)
    stamps = sorted({g.timestamp for f in files for g in api.scan(f)[1]})
    if index == "catalog":
        admin.build_catalog(str(d))
    with (api.open_binlogs(str(d)) if index == "catalog" else api.BinlogSeries(files, use_index=index)) as logs:
        assert logs.files == files
        yield files, stamps, logs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_at_time_is_the_first_group_that_late(series, data):
    files, stamps, logs = series
    t = data.draw(st.one_of(st.sampled_from(stamps), st.integers(stamps[0] - 3, stamps[-1] + 3),
                            st.floats(stamps[0] - 1, stamps[-1] + 1)))
    got = logs.at_time(t)
    file, offset, gtid, position = _brute(files, t)
    assert (got.file, got.gtid, got.position) == (file, gtid, position)
    if gtid is None:
        assert got.timestamp is None and got.offset == api.binlog_info(file).size
    else:
        assert got.offset == offset and got.timestamp >= t
        assert logs.state_at(got.file, got.offset).position == got.position


def test_every_second_of_a_fixture(series):
    files, stamps, logs = series
    for t in range(stamps[0] - 1, stamps[-1] + 2):
        got = logs.at_time(t)
        assert (got.file, got.offset if got.gtid else None, got.gtid, got.position) == _brute(files, t)


def test_gtidx_open_at_time():
    src = FIXTURES / "mariadb-11.8" / "multifile"
    with gtidx.open(src) as logs:
        first = api.scan(logs.files[0])[1].__next__()
        p = logs.at_time(api.format_time(first.timestamp))
    assert isinstance(p, gtidx.TimePoint)
    assert (p.file, p.offset, p.gtid) == (logs.files[0], first.start, first.gtid)
    assert p.position == api.binlog_info(logs.files[0]).start_state.position()


# -- the command ------------------------------------------------------------------------------

def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_seek_time_json():
    src = FIXTURES / "mariadb-11.8" / "multifile"
    files = api.list_binlogs(src)
    stamps = sorted({g.timestamp for f in files for g in api.scan(f)[1]})
    r = run("seek", "--time", f"@{stamps[-1]}", "--json", src)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert set(doc) == {"time", "file", "offset", "gtid", "position", "via"}
    file, offset, gtid, position = _brute(files, stamps[-1])
    assert doc == {"time": api.format_time(stamps[-1]), "file": file, "offset": offset, "gtid": str(gtid),
                   "position": str(position), "via": "scan"}
    assert Gtid.parse(doc["gtid"]) == gtid


def test_seek_time_later_than_every_group():
    src = FIXTURES / "mariadb-11.8" / "multifile"
    files = api.list_binlogs(src)
    r = run("seek", "--time", "2999-01-01T00:00:00Z", "--json", src)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    with api.BinlogSeries(files) as logs:
        end = str(logs.end_state().position())
    assert doc == {"time": "2999-01-01T00:00:00Z", "file": files[-1], "offset": api.binlog_info(files[-1]).size,
                   "gtid": None, "position": end, "via": "index"}
    r = run("seek", "--time", "2999-01-01T00:00:00Z", src)
    assert r.exit_code == 0 and r.stdout.startswith("no group at 2999-01-01T00:00:00Z or later: ")


def test_seek_time_text():
    src = FIXTURES / "mariadb-10.11" / "multifile"
    r = run("seek", "--time", "1970-01-01", src)
    assert r.exit_code == 0, r.output
    first = next(api.scan(api.list_binlogs(src)[0])[1])
    assert r.stdout.split()[:4] == [api.list_binlogs(src)[0], "offset", str(first.start), str(first.gtid)]


@pytest.mark.parametrize("args", [["--time", "soon"], ["--time", "@x"]])
def test_seek_bad_time_is_one_line_exit_2(args):
    r = run("seek", *args, FIXTURES / "mariadb-10.11" / "multifile")
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("gtidx: time ")


def test_seek_time_excludes_gtid_and_replica():
    src = FIXTURES / "mariadb-10.11" / "multifile"
    for other in (["--gtid", "0-1-1"], ["--replica", "0-1-1"]):
        r = run("seek", "--time", "@0", *other, src)
        assert r.exit_code == 2 and "exactly one of --gtid GTID, --replica POSITION, --time T and --from FILE" in r.output


def test_the_catalog_spares_the_walk_of_older_binlogs(tmp_path, monkeypatch):
    """With a catalog, the binlogs whose groups are all older than T are not
    walked (nor opened, but the newest): the same answer as the walk of
    everything. (Starting inside a binlog at an index record: the live test,
    whose timestamps vary inside a binlog.)"""
    files = _copies(SETS[0], tmp_path, True)
    admin.build_catalog(str(tmp_path))
    groups = [(f, g) for f in files for g in api.scan(f)[1]]
    f, g = groups[-3]                             # late in the newest binlog
    expected = _brute(files, g.timestamp)[:3]
    walked = []
    real = Binlog.group_spans
    monkeypatch.setattr(Binlog, "group_spans", lambda self, start=None: (walked.append((self.path, start)),
                                                                        real(self, start))[1])
    with api.open_binlogs(str(tmp_path)) as logs:
        got = logs.at_time(g.timestamp)
    assert (got.file, got.offset, got.gtid) == expected
    assert [w[0] for w in walked] == [f], walked
