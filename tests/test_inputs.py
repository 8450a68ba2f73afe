"""What users type and what gtidx shows back: bad input is exit 2 and one
line (never an internal error), a time is compared exactly (a fraction of a
second past a group's second is later than it), a password in a URL is never
shown, and a --from batch is echoed harmlessly and read as it is answered."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, ROOT
from gtidx import admin, api
from gtidx.cli import cli
from gtidx.errors import BadInputError, redact, shown

MULTIFILE = FIXTURES / "mariadb-10.11" / "multifile"
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def run(*args, **kw):
    return CliRunner().invoke(cli, [str(a) for a in args], **kw)


def gtidx(*args, stdin: bytes = b"", timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gtidx", *map(str, args)], input=stdin, capture_output=True,
                          env=ENV, timeout=timeout)


def _no_internal_error(r) -> None:
    """A CliRunner result that is an answer or a bad input's one line: never a crash."""
    assert r.exit_code in (0, 1, 2), (r.exit_code, r.output[-300:], r.exception)
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output[-300:]
    if r.exit_code == 2 and r.output.startswith("gtidx: "):
        assert r.output.count("\n") == 1, r.output[:300]


# -- bad input: exit 2, one line -------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["seek", "--time", "@" + "9" * 5000],                   # int() refuses 4,300+ digits
    ["seek", "--time", "@99999999999999999999"],            # past any datetime
    ["seek", "--time", "@253402300800"],                    # year 10000
    ["seek", "--time", "@-62135596801"],                    # year 0
    ["seek", "--time", "9999-12-31T23:59:59-01:00"],        # year 10000 in UTC
    ["seek", "--time", "0001-01-01T00:00:00+01:00"],        # year 0 in UTC
    ["seek", "--time", "2026-11-22T03:16:29." + "1" * 5000 + "Z"],
    ["seek", "--time", "@1." + "1" * 5000],
    ["seek", "--time", "2026-11-22T03:16:29+01:00:00.5"],   # a fraction in the offset
    ["seek", "--time", "２０２６-11-22"],
    ["seek", "--history", "9" * 5000, "--gtid", "0-1-1"],
    ["tail", "--once", "--interval", "nan"],
    ["tail", "--once", "--retry-max", "nan"],
    ["tail", "--once", "--interval", "１"],
    ["build", "--max-ratio", "nan"],
])
def test_bad_input_is_exit_2_and_one_short_line(args, tmp_path):
    d = tmp_path / "logs"
    shutil.copytree(MULTIFILE, d)
    r = run(*args, d)
    _no_internal_error(r)
    assert r.exit_code == 2, r.output
    assert len(r.output) < 600, r.output[:300]


_DIGITS = st.text("0123456789", max_size=30) | st.text("0123456789", min_size=4290, max_size=4400)
_TIMES = st.one_of(
    st.text(),
    st.builds("@{}{}{}".format, st.sampled_from(["", "-"]), _DIGITS,
              st.sampled_from(["", "."]).flatmap(lambda dot: st.just("") if not dot else _DIGITS.map(dot.__add__))),
    st.builds("{:04d}-{:02d}-{:02d}{}{:02d}:{:02d}:{:02d}{}{}".format, st.integers(0, 99999), st.integers(0, 13),
              st.integers(0, 32), st.sampled_from(["T", " ", "t", "٢"]), st.integers(0, 25), st.integers(0, 61),
              st.integers(0, 61), st.sampled_from(["", ".", ",", ".0000001", "." + "0" * 70 + "1", ".1234567"]),
              st.sampled_from(["", "Z", "+01:00", "-23:59", "+24:00", "+01:00:00.5", "+14:00"])),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-10 ** 30, 10 ** 30),
)


@settings(max_examples=400, deadline=None)
@given(_TIMES)
def test_parse_time_answers_or_says_bad_input(value):
    """Any text or number: a time (exact, formatted back to the same time) or a BadInputError."""
    try:
        t = api.parse_time(value)
    except BadInputError as e:
        assert e.exit_code == 2 and "\n" not in str(e) and len(str(e)) < 400
        return
    if isinstance(value, str):              # text has at most 64 digits of a second: formatted exactly
        assert api.parse_time(api.format_time(t)) == t
    assert api.first_second(t) - 1 < t <= api.first_second(t)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.builds("0x{}".format, st.text("0123456789abcdefABCDEF_", max_size=40)),
                 st.text("0123456789", min_size=15, max_size=5000), st.text("-+ 0123456789١٢", max_size=30)))
def test_parse_offset_answers_or_says_bad_input(text):
    try:
        offset = api.parse_offset(text)
    except BadInputError as e:
        assert e.exit_code == 2 and len(str(e)) < 400
        return
    assert 0 <= offset < 2 ** 64 + 10 ** 20


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs") / "multifile"
    shutil.copytree(MULTIFILE, d)
    assert run("build", "-q", d).exit_code == 0
    return d


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_cli_inputs_answer_or_say_bad_input(indexed, data):
    """seek --time/--gtid/--replica, pos, probe, --history with any text:
    an answer, not found, or exit 2, never an internal error."""
    text = data.draw(st.one_of(_TIMES.map(str), st.text(min_size=1),
                               st.text("0123456789-,:", min_size=1, max_size=60),
                               st.text("0123456789", min_size=18, max_size=5000)))
    text = text.replace("\0", "") or "x"        # argv cannot hold NUL
    files = api.list_binlogs(str(indexed))
    how = data.draw(st.sampled_from(["time", "gtid", "replica", "pos", "probe", "history"]))
    args = {"time": ["seek", "--time", text, indexed], "gtid": ["seek", "--gtid", text, indexed],
            "replica": ["seek", "--replica", text, indexed], "pos": ["pos", files[-1], text],
            "probe": ["probe", files[0], text], "history": ["seek", "--history", text, "--gtid", "0-1-1", indexed]}
    _no_internal_error(run(*args[how]))


# -- times compare exactly -------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["scan", "index", "catalog"])
@pytest.mark.parametrize("src", [FIXTURES / "mariadb-10.11" / "multifile", FIXTURES / "mariadb-11.8" / "multifile",
                                 FIXTURES / "mariadb-10.11" / "mixed"], ids=lambda p: f"{p.parent.name}-{p.name}")
def test_a_fraction_past_a_groups_second_is_later_than_it(src, how, tmp_path):
    """T = a group's second s + 1e-7 (ISO 8601 and @ text): the answer is the
    first group of second s + 1 or later (binlog timestamps are whole
    seconds), never the group of second s; also where the catalog passes
    over binlogs and the index starts the walk."""
    d = tmp_path / "logs"
    shutil.copytree(src, d)
    if how != "scan":
        run("build", "-q", d)
    if how == "catalog":
        admin.build_catalog(str(d))
    with api.open_binlogs(str(d)) as logs:
        stamps = sorted({g.timestamp for f in logs.files for g in api.scan(f)[1]})
        for s in stamps[:: max(1, len(stamps) // 25)] + stamps[-2:]:
            later = logs.at_time(s + 1)
            iso = api.format_time(s).replace("Z", ".0000001Z")
            for text in (iso, f"@{s}.0000001", f"@{s}." + "0" * 60 + "1"):
                got = logs.at_time(text)
                assert (got.file, got.offset, got.gtid, got.position) == \
                       (later.file, later.offset, later.gtid, later.position), (text, s)
                assert got.timestamp is None or got.timestamp > s
            assert api.format_time(logs.at_time(iso).time) == iso
            assert logs.at_time(s).timestamp == s                 # the whole second still answers its group


def test_mysql_times_compare_exactly():
    """MySQL binlogs: a transaction's second (its original_commit_timestamp's)
    is earlier than that second + 1e-7, as for MariaDB: one rule."""
    for d in sorted((FIXTURES / "mysql-9.7").iterdir()):
        with api.open_binlogs(d) as logs:
            stamps = sorted({t.timestamp for f in logs.files for t in logs.opened(f).transactions()})
            for s in stamps[:: max(1, len(stamps) // 10)]:
                got, later = logs.at_time(f"@{s}.0000001"), logs.at_time(s + 1)
                assert (got.file, got.offset, got.gtid) == (later.file, later.offset, later.gtid), (d, s)


def test_seek_time_json_says_the_exact_time():
    files = api.list_binlogs(str(MULTIFILE))
    s = next(api.scan(files[0])[1]).timestamp
    iso = api.format_time(s).replace("Z", ".0000001Z")
    r = run("seek", "--time", iso, "--json", MULTIFILE)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["time"] == iso and doc["gtid"] == str(api.at_time(MULTIFILE, s + 1).gtid)


# -- passwords in URLs ---------------------------------------------------------------------------

SECRET = "S3cr3tPw"


@pytest.mark.parametrize("text, expected", [
    (f"s3://KEY:{SECRET}@bucket/p/x", "s3://***@bucket/p/x"),
    (f"ftp://user:{SECRET}@127.0.0.1:21/x: refused", "ftp://***@127.0.0.1:21/x: refused"),
    (f"http://u:p@{SECRET}@h/x", "http://***@h/x"),                       # the last @ ends it
    (f"ftp://u:{SECRET}@h", "ftp://***@h"),
    (f"a ftp://u:{SECRET}@h/x and s3://b/k@v", "a ftp://***@h/x and s3://b/k@v"),
    ("s3://bucket/prefix/ x@y", "s3://bucket/prefix/ x@y"),
    ("user@host", "user@host"),
])
def test_redact(text, expected):
    assert redact(text) == expected


def _secret_free(*texts) -> None:
    for t in texts:
        t = t.decode() if isinstance(t, bytes) else t
        assert SECRET not in t, t


@pytest.mark.parametrize("url", [f"ftp://user:{SECRET}@127.0.0.1:1/binlogs/",
                                 f"http://user:{SECRET}@127.0.0.1:1/binlogs/master-bin.000001"])
def test_a_password_in_a_url_is_never_shown(url):
    """A server that does not answer (a closed port): one line naming the
    URL without its password, exit 3, nothing else on stderr (no "Exception
    ignored" from a half-made file system); --json's path the same."""
    for args in (["seek", "--gtid", "0-1-1", url], ["pos", url.rstrip("/") + "/x", "4"]):
        p = gtidx(*args)
        _secret_free(p.stdout, p.stderr)
        assert p.returncode == 3, p.stderr
        assert p.stderr.count(b"\n") == 1 and b"***@127.0.0.1:1/" in p.stderr, p.stderr
        p = gtidx(*args, "--json")
        _secret_free(p.stdout, p.stderr)
        assert p.returncode == 3 and p.stderr.count(b"\n") == 1, p.stderr
        doc = json.loads(p.stdout)["error"]
        assert doc["path"].startswith(url.split("://")[0] + "://***@127.0.0.1:1/") and doc["exit_code"] == 3
    r = run("seek", "--gtid", "0-1-1", "--json", url)
    _secret_free(r.output)
    assert r.exit_code == 3


def test_a_file_system_that_fails_half_made_is_one_line():
    """FTPFileSystem refusing an option before it has a connection: its
    __del__ then fails ("no attribute 'ftp'"), which Python would print
    after the error line."""
    p = gtidx("seek", "--gtid", "0-1-1", "--storage-option", "tls=nonsense", f"ftp://u:{SECRET}@127.0.0.1:1/x/")
    _secret_free(p.stdout, p.stderr)
    assert p.returncode == 2 and p.stderr.count(b"\n") == 1 and b"Not supported nonsense" in p.stderr, p.stderr


def test_a_password_in_an_s3_url_and_in_a_batch_is_never_shown(tmp_path):
    url = f"s3://KEY:{SECRET}@bucket/binlogs/"
    p = gtidx("seek", "--gtid", "0-1-1", url, "--json")
    _secret_free(p.stdout, p.stderr)
    assert p.returncode in (2, 3) and p.stderr.count(b"\n") == 1, p.stderr
    lines = f"ftp://u:{SECRET}@127.0.0.1:1/x 4\n{api.list_binlogs(str(MULTIFILE))[0]} 4\n".encode()
    for json_flag in ([], ["--json"]):
        p = gtidx("pos", *json_flag, "--from", "-", stdin=lines)
        _secret_free(p.stdout, p.stderr)
        assert p.returncode == 3 and p.stdout.count(b"\n") == 2, p.stdout
        assert p.stdout.count(b"ftp://***@127.0.0.1:1/x") == 2, p.stdout          # the input and the error


@pytest.mark.parametrize("url, package", [("gs://bucket/binlogs/", "gcsfs"), ("sftp://u@127.0.0.1:1/x/", "paramiko")])
def test_a_missing_driver_names_its_package(url, package, monkeypatch):
    """The store's package cannot be imported (``sys.modules`` says so, as
    where it is not installed, also where it is): one line naming it."""
    monkeypatch.setitem(sys.modules, package, None)
    r = run("seek", "--gtid", "0-1-1", url)
    assert r.exit_code == 2 and package in r.output and "None is missing" not in r.output, r.output


# -- batches: echoed harmlessly, read as they are answered -----------------------------------------------

def test_shown():
    assert shown("0-1-5") == "0-1-5"
    assert shown("a\0b\x1b[31m\n") == "a\\x00b\\x1b[31m\\n"
    assert shown(b"\xff0-1".decode("utf-8", "surrogateescape")) == "\\xff0-1"
    long = shown("9" * 2_000_000)
    assert long == "9" * 200 + "... (2000000 characters)"


def test_from_echoes_nul_bad_utf8_and_huge_lines_escaped_and_cut():
    huge = b"9" * 2_000_000
    batch = b"0-1-\x00x\n\xff\xfe0-1-7\n\x1b[2Jclear\n" + huge + b"\n0-1-999999\n"
    p = gtidx("seek", "--from", "-", MULTIFILE, stdin=batch)
    assert p.returncode == 2, p.stderr
    out = p.stdout.decode("utf-8")             # valid UTF-8: every byte that was not is escaped
    lines = out.splitlines()
    assert len(lines) == 5 and len(out) < 3000, out[:500]
    assert lines[0].startswith("0-1-\\x00x: bad GTID")
    assert lines[1].startswith("\\xff\\xfe0-1-7: bad GTID")
    assert lines[2].startswith("\\x1b[2Jclear: ") and "\x1b" not in out and "\0" not in out
    assert lines[3].startswith("9" * 200 + "... (2000000 characters): ")
    assert lines[4].startswith("0-1-999999: ")
    p = gtidx("seek", "--json", "--from", "-", MULTIFILE, stdin=batch)
    docs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [d["input"] for d in docs] == ["0-1-\\x00x", "\\xff\\xfe0-1-7", "\\x1b[2Jclear",
                                          "9" * 200 + "... (2000000 characters)", "0-1-999999"]
    assert len(p.stdout) < 4000
    p = gtidx("pos", "--from", "-", api.list_binlogs(str(MULTIFILE))[0], stdin=b"4\x00\n\xff\n" + huge + b"\n")
    lines = p.stdout.decode("utf-8").splitlines()
    assert p.returncode == 2 and len(lines) == 3 and len(p.stdout) < 2000, p.stdout[:500]
    assert lines[0].startswith("4\\x00: ") and lines[1].startswith("\\xff: ")


def test_seek_many_reads_its_specs_as_it_answers():
    """An endless iterator of GTIDs: the first answers come after one share
    of it (65,536 specs), not after all of it."""
    gtids = [g for f in json.loads((MULTIFILE / "oracle.json").read_text())["files"] for g, _, _ in f["groups"]]
    taken = 0

    def endless():
        nonlocal taken
        while True:
            for g in gtids:
                taken += 1
                if taken > 200_000:
                    raise AssertionError("seek_many read 200,000 specs before answering one")
                yield g
    answers = api.seek_many(endless(), str(MULTIFILE))
    first = [next(answers) for _ in range(len(gtids))]
    assert [str(a.gtid) for a in first] == gtids
    assert taken <= 1 << 16
    answers.close()


@pytest.mark.parametrize("command", ["seek", "pos"])
def test_from_answers_before_its_input_ends(command):
    """gtidx reading a --from pipe that stays open: answers are written while
    the input is still coming (the batch is answered in bounded shares, its
    memory does not grow with its length), and in input order."""
    oracle = json.loads((MULTIFILE / "oracle.json").read_text())
    if command == "seek":
        one = [g for f in oracle["files"] for g, _, _ in f["groups"]]
        args, n = ["seek", "--from", "-", MULTIFILE], (1 << 16) + 1000
    else:
        one = [f"{MULTIFILE / f['name']} {off}" for f in oracle["files"] for off, _ in f["pos"]]
        args, n = ["pos", "--from", "-"], 2000
    lines = (one * (n // len(one) + 1))[:n]
    p = subprocess.Popen([sys.executable, "-m", "gtidx", *map(str, args)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV)
    got = []
    reader = threading.Thread(target=lambda: got.extend(iter(p.stdout.readline, b"")), daemon=True)
    reader.start()
    try:
        p.stdin.write(("\n".join(lines) + "\n").encode())
        p.stdin.flush()
        deadline = time.monotonic() + 120
        while not got and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)
        assert got, "no answer before the input ended"
    finally:
        p.stdin.close()
        p.wait(timeout=300)
        reader.join(timeout=60)
    assert len(got) == n
    if command == "seek":
        assert [x.split()[0].decode() for x in got[:len(one)]] == one
