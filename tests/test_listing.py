"""The façade lists the binlogs it is given once (``series.listing.list_series``)
and picks the series by the flavor decided there: every lookup lists once,
whatever its flavor, and answers as before."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, count_listings
from gtidx import api
from gtidx.errors import NotFoundError

MULTI = FIXTURES / "mariadb-10.11" / "multifile"
ROTATED = FIXTURES / "mysql-9.7" / "rotated"


def test_state_at_probe_states_at_list_once(monkeypatch):
    listed = count_listings(monkeypatch)
    file = str(MULTI / "master-bin.000019")
    assert api.state_at(file, 531).via in ("index", "scan")
    assert listed == [file]
    listed.clear()
    assert api.probe(file, 600).before == 573
    assert listed == [file]
    listed.clear()
    mysql = str(ROTATED / "binlog.000015")
    got = list(api.states_at([(file, 531), (file, 685), (mysql, 4), (file, 4)]))
    assert [type(r).__name__ for r in got] == ["StateAt", "StateAt", "MysqlStateAt", "StateAt"], got
    assert listed == [file, mysql]          # one series per file, kept open: listed once each
    listed.clear()
    assert type(api.state_at(mysql, 4)).__name__ == "MysqlStateAt"
    assert listed == [mysql]


def test_seek_and_open_list_once(monkeypatch):
    listed = count_listings(monkeypatch)
    gtid = api.scan(str(MULTI / "master-bin.000020"))[1].__next__().gtid
    assert api.seek(str(gtid), str(MULTI)).file.endswith("master-bin.000020")
    assert listed == [str(MULTI)]
    listed.clear()
    with api.open_binlogs(str(ROTATED)) as logs:
        assert type(logs).__name__ == "MysqlSeries"
    assert listed == [str(ROTATED)]
    listed.clear()
    assert [type(r).__name__ for r in api.seek_many([str(gtid), "0-1-999999"], str(MULTI))] == \
        ["Location", "NotFoundError"]
    assert listed == [str(MULTI)]


def test_single_file_lookups_keep_their_errors():
    """A directory, a missing path, a bad offset: the errors of before, in
    the order of before (the offset first)."""
    with pytest.raises(Exception, match="not a regular file"):
        api.state_at(str(MULTI), 4)
    with pytest.raises(Exception, match="not an offset"):
        api.state_at(str(FIXTURES / "nowhere"), "x")
    with pytest.raises(Exception, match="No such file"):
        api.probe(str(FIXTURES / "nowhere"), 4)
    with pytest.raises(NotFoundError, match="past the end"):
        api.state_at(str(ROTATED / "binlog.000015"), 999999)


def test_probe_of_a_mysql_binlog_answers_as_pos():
    """A MySQL binlog is probed as a MariaDB one is (tests/test_mysql_show.py
    holds every boundary against the server's): the event around the
    offset, the set at its start as ``pos`` says it."""
    path = str(ROTATED / "binlog.000015")
    r = api.probe(path, 200)
    assert r.before < 200 < r.after and r.damaged is None
    assert r.position == r.state == api.state_at(path, r.before).state
    with pytest.raises(NotFoundError):
        api.state_at(path, 200)


def test_a_gtid_over_several_histories_lists_once(tmp_path, monkeypatch):
    """seek, seek_many and show over a catalog of two histories look the GTID
    up in each history's series, all made of the one listing."""
    import gtidx
    from test_catalog import _two_histories
    d = _two_histories(tmp_path)
    gtidx.build_catalog(str(d))
    listed = count_listings(monkeypatch)
    got = api.seek("0-1-400", str(d))
    assert got.history == 1 and got.file.endswith("master-bin.000019")
    assert listed == [str(d)]
    listed.clear()
    assert [r.history for r in api.seek_many(["0-1-400"], str(d))] == [1]
    assert listed == [str(d)]
    listed.clear()
    assert api.show(str(d), gtid="0-1-400").gtid == got.gtid
    assert listed == [str(d)]
