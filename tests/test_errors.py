"""Bad input through the library's public entry points: every failure is a
GtidxError (a wrong type or value is a BadInputError), never a TypeError,
ValueError or FileNotFoundError from deep inside; one damaged file does not
fail ``binlog_status`` or ``build`` for the others."""
from __future__ import annotations

import pathlib
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import FIXTURES
from gtidx import admin, api
from gtidx.errors import BadInputError, GtidSyntaxError, GtidxError, GtidxIOError, NotFoundError
from gtidx.gtid import Gtid, Position

M118 = FIXTURES / "mariadb-11.8"
XA = M118 / "xa" / "master-bin.000006"
ENCRYPTED = FIXTURES / "mariadb-10.11" / "encrypted" / "master-bin.000002"

HUGE = "9" * 5000          # past Python's int max str digits (4300)


@pytest.fixture
def multifile(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    for p in d.iterdir():
        p.chmod(0o644)
    return d


# -- GTIDs: bounded digits ------------------------------------------------------------------

@pytest.mark.parametrize("text", [f"0-1-{HUGE}", f"{HUGE}-1-1", f"0-{HUGE}-1", f"0-1-1,0-2-{HUGE}"])
def test_gtid_part_with_thousands_of_digits_is_bad_input(text):
    with pytest.raises(GtidSyntaxError) as e:
        Position.parse(text)
    assert "more than 20 digits" in str(e.value)
    assert len(str(e.value)) < 400                  # the input is quoted, not echoed whole


def test_gtid_leading_zeros_still_parse():
    assert Gtid.parse("0-1-" + "0" * 5000 + "7") == Gtid(0, 1, 7)


# -- offsets: ASCII digits only ---------------------------------------------------------------

@pytest.mark.parametrize("text", ["４２３", "٤٢٣", "4_23", "0x1_a7", " 423", "423 ", "+423", "1e3",
                                  "0o17", "0x", "", "-", HUGE, "0x" + "f" * 17])
def test_offset_text_must_be_ascii_digits(text):
    with pytest.raises(BadInputError):
        api.parse_offset(text)
    with pytest.raises(BadInputError):
        api.state_at(XA, text)


@pytest.mark.parametrize("text, value", [("423", 423), ("0x1a7", 423), ("0X1A7", 423), ("0", 0),
                                         (423, 423), ("0" * 30 + "4", 4)])
def test_offset_forms_accepted(text, value):
    assert api.parse_offset(text) == value


def _offset_by_the_rule(text: str):
    """The rule parse_offset's docstring states, written out: ASCII decimal
    or 0x hex, an optional minus (then refused as negative), at most 2**64's
    digits after leading zeros; anything else refused (None)."""
    import re
    m = re.fullmatch(r"(-?)(?:0[xX]([0-9a-fA-F]+)|([0-9]+))", text)
    if m is None:
        return None
    sign, hexa, dec = m.groups()
    digits = (hexa or dec).lstrip("0")
    if len(digits) > (16 if hexa else 20) or (sign and int(digits or "0", 16 if hexa else 10)):
        return None
    return int(digits or "0", 16 if hexa else 10)


@given(st.one_of(st.text(alphabet="0123456789", max_size=25), st.text(alphabet="0123456789xXaF-_ +٣４", max_size=25),
                 st.integers(0, 10**22).map(str)))
def test_offset_text_follows_the_rule(text):
    # the plain-decimal fast path and the pattern path give what the rule gives
    want = _offset_by_the_rule(text)
    if want is None:
        with pytest.raises(BadInputError):
            api.parse_offset(text)
    else:
        assert api.parse_offset(text) == want


def test_negative_offset():
    for v in (-1, "-1", "-0x10"):
        with pytest.raises(BadInputError, match="negative"):
            api.parse_offset(v)


def test_state_at_takes_text_offsets_as_the_cli_does():
    assert api.state_at(XA, "0x1a7").position == api.state_at(XA, 423).position


# -- wrong types at every public entry point -------------------------------------------------

BAD_PATHS = [None, 5, b"/tmp", 1.5, "", "a\0b", ["x"]]
BAD_GTIDS = [None, 5, b"0-1-1", 1.5, (0, 1, 1)]
BAD_OFFSETS = [None, 4.0, b"4", True, [4], "4.0"]


@pytest.mark.parametrize("bad", BAD_PATHS, ids=repr)
@pytest.mark.parametrize("call", [
    lambda p: api.state_at(p, 4),
    lambda p: api.binlog_info(p),
    lambda p: api.scan(p),
    lambda p: api.open_binlogs(p),
    lambda p: api.list_binlogs(p),
    lambda p: admin.binlog_status(p),
    lambda p: admin.index_info(p),
    lambda p: admin.index_records(p),
    lambda p: admin.verify(p),
    lambda p: api.seek("0-1-1", p),
    lambda p: list(admin.build([p])),
    lambda p: api.BinlogSeries([p]),
], ids=["state_at", "binlog_info", "scan", "open_binlogs", "list_binlogs", "binlog_status", "index_info",
        "index_records", "verify", "seek", "build", "BinlogSeries"])
def test_bad_path_types(call, bad):
    with pytest.raises(BadInputError):
        call(bad)


@pytest.mark.parametrize("bad", [XA, str(XA), pathlib.PurePath("x"), 7], ids=repr)
def test_binlogs_wants_a_list(bad):
    with pytest.raises(BadInputError, match="list of binlog paths"):
        api.BinlogSeries(bad)


@pytest.mark.parametrize("bad", BAD_OFFSETS, ids=repr)
def test_bad_offset_types(bad):
    with pytest.raises(BadInputError):
        api.state_at(XA, bad)
    with api.open_binlogs(XA) as logs:
        with pytest.raises(BadInputError):
            logs.state_at(XA, bad)


@pytest.mark.parametrize("bad", BAD_GTIDS, ids=repr)
def test_bad_gtid_types(bad):
    with api.open_binlogs(XA) as logs:
        with pytest.raises(BadInputError):
            logs.locate(bad)
        with pytest.raises(BadInputError):
            logs.replica_start(bad)
    with pytest.raises(BadInputError):
        api.seek(bad, XA)


def test_gtid_objects_are_accepted():
    with api.open_binlogs(XA) as logs:
        assert logs.locate(Gtid(0, 1, 1035)).start == 423
        with pytest.raises(NotFoundError) as e1:
            logs.replica_start(Gtid(0, 1, 1035))
        with pytest.raises(NotFoundError) as e2:
            logs.replica_start(Position([Gtid(0, 1, 1035)]))
        assert str(e1.value) == str(e2.value)


@pytest.mark.parametrize("kw", [{"page_size": "4096"}, {"page_size": 4096.0}, {"span_min": None},
                                {"max_ratio": "0.02"}, {"page_size": True}])
def test_bad_build_settings(kw, tmp_path):
    p = tmp_path / XA.name
    shutil.copy(XA, p)
    with pytest.raises(BadInputError):
        list(admin.build(p, **kw))


def test_binlogs_cache_must_be_a_positive_int():
    for bad in (0, "3", None):
        with pytest.raises(BadInputError):
            api.BinlogSeries([str(XA)], cache=bad)


# -- missing files ------------------------------------------------------------------------------

def test_state_at_on_a_missing_file(multifile, tmp_path):
    with api.open_binlogs(multifile) as logs:
        # same name as one of the set, in a directory that does not exist
        with pytest.raises(NotFoundError):
            logs.state_at(tmp_path / "gone" / "master-bin.000020", 4)
    with pytest.raises(GtidxIOError):
        api.state_at(tmp_path / "gone", 4)


def test_build_goes_on_past_a_missing_path(multifile, tmp_path):
    a, b = multifile / "master-bin.000018", multifile / "master-bin.000019"
    missing = tmp_path / "nope" / "master-bin.000001"
    out = list(admin.build([a, missing, b]))
    assert [type(r).__name__ for r in out] == ["BuildResult", "GtidxIOError", "BuildResult"]
    assert out[0].action == out[2].action == "built"
    assert out[1].binlog == str(missing) and out[1].exit_code == 3
    assert (multifile / "master-bin.000019.idx").exists()


def test_build_error_names_its_binlog(multifile):
    (multifile / "master-bin.000020").write_bytes(b"")
    out = list(admin.build(multifile))
    bad = [r for r in out if isinstance(r, GtidxError)]
    assert len(out) == 5 and len(bad) == 1
    assert bad[0].binlog == str(multifile / "master-bin.000020")


# -- status: one row per file, whatever happened to it --------------------------------------------

def test_status_isolates_missing_and_damaged_binlogs(multifile):
    files = sorted(multifile.glob("master-bin.0*"))
    files[0].unlink()                                       # listed in master-bin.index, gone
    files[1].write_bytes(b"")                               # empty
    files[2].write_bytes(ENCRYPTED.read_bytes())            # encrypted (by a real 10.11)
    data = files[4].read_bytes()
    files[4].write_bytes(data[:len(data) // 2])             # cut in the middle
    rows = admin.binlog_status(multifile)
    assert [r.file for r in rows] == [str(f) for f in files]
    assert [r.state for r in rows[:3]] == ["error"] * 3
    assert rows[3].state == "missing" and rows[3].error is None   # no index yet: fine
    assert rows[4].state != "error"                         # a cut file is readable: no index yet
    assert isinstance(rows[0].error, GtidxIOError) and "No such file" in rows[0].detail
    assert "empty file" in rows[1].detail and rows[1].error.exit_code == 2
    assert "encrypted" in rows[2].detail and rows[2].size == ENCRYPTED.stat().st_size
