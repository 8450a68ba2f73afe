"""`gtidx seek --replica POSITION`: always a replica start (a single domain too),
and the small owners around the CLI (tail's interval default, Binlog's entry)."""
import json

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.cli import cli
from gtidx.errors import BadInputError, GtidxError, NotFoundError
from gtidx.tail import TailSettings

M1011, M118 = FIXTURES / "mariadb-10.11", FIXTURES / "mariadb-11.8"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _expected(directory, position):
    with api.open_binlogs(directory) as logs:
        return logs.replica_start(position)


def _as_json(r) -> dict:
    first = r.first
    return {"position": str(r.position), "file": r.file, "offset": r.offset, "state": str(r.state),
            "skip": str(r.skip), "via": r.via,
            "first": None if first is None else {
                "gtid": str(first.gtid), "file": first.file, "start": first.start, "end": first.end,
                "resume": first.resume, "timestamp": first.timestamp, "via": first.via}}


# Single-domain replica positions: the mixed fixtures' binlogs start with domain 0 alone
# (GTID_LIST 0-1-4 / 0-1-1); the other domains begin later in the file.
@pytest.mark.parametrize("directory, position", [
    (M1011 / "mixed", "0-1-10"),
    (M1011 / "mixed", "0-1-4"),
    (M118 / "mixed", "0-1-500"),
    (M118 / "multifile", "0-1-7997,1-2-1878,2-1-1566,5-1-301"),
    (M1011 / "multifile", "0-2-456,1-2-478,2-2-439,5-1-301,6-1-12"),   # BINLOG_GTID_POS mid-000021
], ids=lambda v: getattr(v, "name", v))
def test_replica_equals_the_library(directory, position):
    want = _expected(directory, position)
    r = run("seek", "--json", "--replica", position, directory)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == _as_json(want)
    r = run("seek", "--replica", position, directory)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == f"replica at {want.position} starts in {want.file} at offset {want.offset} (via {want.via})"
    assert lines[1] == f"  state there: {want.state or '(empty)'}"
    assert lines[-1].startswith("  first group sent: ")


def test_single_domain_replica_gets_a_replica_start_not_a_location():
    d = M1011 / "mixed"
    loc = run("seek", "--json", "--gtid", "0-1-10", d)
    start = run("seek", "--json", "--replica", "0-1-10", d)
    assert loc.exit_code == start.exit_code == 0
    assert set(json.loads(loc.stdout)) >= {"gtid", "start", "end", "resume"}      # --gtid: where the group is
    doc = json.loads(start.stdout)
    assert doc["skip"] == "0-1-10" and doc["first"]["gtid"] == "2-2-1"           # --replica: what it gets next


def test_multi_domain_replica_is_the_gtid_shorthand():
    d, position = M118 / "multifile", "0-1-7997,1-2-1878,2-1-1566,5-1-301"
    for extra in ([], ["--json"]):
        a = run("seek", *extra, "--gtid", position, d)
        b = run("seek", *extra, "--replica", position, d)
        assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout


def test_single_domain_replica_refused_as_the_library_refuses():
    # Every multifile binlog's GTID_LIST has domains 0..6: a replica naming domain 0 only
    # matches no file (the server's error 1236); exit 1 with the library's message.
    d = M118 / "multifile"
    with pytest.raises(NotFoundError) as e:
        _expected(d, "0-1-8000")
    r = run("seek", "--replica", "0-1-8000", d)
    assert r.exit_code == 1 and r.stderr == f"gtidx: {e.value}\n" and r.stdout == ""
    r = run("seek", "--json", "--replica", "0-1-8000", d)
    assert r.exit_code == 1 and json.loads(r.stdout) == {"error": e.value.as_dict()}


@pytest.mark.parametrize("args", [[], ["--gtid", "0-1-10", "--replica", "0-1-10"]], ids=["neither", "both"])
def test_exactly_one_of_gtid_and_replica(args):
    r = run("seek", *args, M1011 / "mixed")
    assert r.exit_code == 2 and "exactly one of --gtid" in r.stderr and r.stdout == ""
    r = run("seek", "--json", *args, M1011 / "mixed")
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["exit_code"] == 2 and "exactly one of --gtid" in err["message"]


def test_bad_replica_position_is_bad_input():
    r = run("seek", "--replica", "0-1-", M1011 / "mixed")
    assert r.exit_code == 2 and "bad GTID" in r.stderr


def test_tail_interval_default_has_one_owner(monkeypatch):
    # The CLI's default is TailSettings' own, read when the command runs: change the owner,
    # the CLI follows (a copied number would not).
    monkeypatch.setattr(TailSettings, "interval", 0.5)
    cmd = cli.get_command(None, "tail")
    ctx = cmd.make_context("tail", ["/nonexistent"])
    assert ctx.params["interval"] == 0.5
    opt = next(p for p in cmd.params if p.name == "interval")
    assert "default: 0.5;" in opt.get_help_record(ctx)[1]


@pytest.mark.parametrize("bad", [None, 5, 1.5, ["x"], "a\0b", b"a\0b"], ids=repr)
def test_binlog_rejects_a_non_path_as_bad_input(bad):
    with pytest.raises(BadInputError):
        Binlog(bad)


def test_binlog_missing_path_is_still_an_io_error(tmp_path):
    with pytest.raises(GtidxError) as e:
        Binlog(tmp_path / "nope")
    assert e.value.exit_code == 3
