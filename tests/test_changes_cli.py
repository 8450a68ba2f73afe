"""``gtidx changes``: the changed rows of binlogs without Spark. Row for row
what ``show.decode_group`` gives, group by group (its definition), as JSON
Lines, text lines and Parquet files; its filters give the rows of the whole
filtered; bad input is one line and exit 2; a damaged binlog ends its
output with the error and the others go on (exit 3); URLs read as files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, ROOT, copy_set
from gtidx import api, show
from gtidx import changes as library
from gtidx.binlog.mariadb import Binlog
from gtidx.cli import cli
from gtidx.errors import BadInputError, GtidxError
from gtidx.inputs import format_time

pq = pytest.importorskip("pyarrow.parquet", reason="the parquet extra: pip install -e '.[parquet]'")

MULTI = FIXTURES / "mariadb-10.11" / "multifile"
KEYS = ["gtid", "file", "offset", "timestamp", "table", "op", "before", "after", "changed", "unknown"]


def fixture_dirs() -> list[Path]:
    """Every fixture directory whose binlogs mariadb-binlog reads (not the encrypted set)."""
    return sorted(p.parent for p in FIXTURES.glob("mariadb-*/*/oracle.json") if p.parent.name != "encrypted")


def defined_rows(d: Path, files=None) -> list[dict]:
    """The definition: every row of every group of the binlogs in ``d`` as
    ``show.decode_group`` gives it, with its group's fields (through JSON, as
    ``gtidx show --json`` prints them)."""
    out = []
    for f in files or api.list_binlogs(d):
        with Binlog(f) as b:
            for g in b.groups():
                doc = json.loads(json.dumps(show.decode_group(b, g).as_dict()))
                out += [{"gtid": doc["gtid"], "file": os.path.basename(f), "offset": g.start,
                         "timestamp": g.timestamp, **r} for r in doc["rows"]]
    return out


def run(*args) -> "click.testing.Result":      # noqa: F821
    return CliRunner().invoke(cli, ["changes", *map(str, args)])


def json_lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines()]


def json_text(v):
    """A --json value as the Parquet maps hold it (the Spark source's text)."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, dict):
        return v["hex"]
    return json.dumps(v)


def as_text_row(r: dict) -> dict:
    image = (lambda m: None if m is None else {k: json_text(v) for k, v in m.items()})
    return {**r, "before": image(r["before"]), "after": image(r["after"])}


def parquet_rows(path: Path) -> list[dict]:
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        for k in ("before", "after"):
            r[k] = None if r[k] is None else dict(r[k])
    return rows


def cli_subprocess(*args, env=None) -> subprocess.CompletedProcess:
    """``gtidx changes ARGS`` in a new process (``env``: variables set, or unset where None)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "gtidx", "changes", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env={k: v for k, v in full.items() if v is not None})


# -- row for row the definition --------------------------------------------------------------

def test_json_text_and_parquet_are_decode_group_on_every_fixture(tmp_path, monkeypatch):
    """Every fixture directory with rows: --json is the definition row for
    row; the text lines are those rows as show writes them; each binlog's
    Parquet file, read back, is its JSON rows with the values as text (in
    row groups of at most ROW_GROUP_ROWS)."""
    from gtidx.cli import changes as command
    monkeypatch.setattr(command, "ROW_GROUP_ROWS", 100)
    dirs = 0
    for d in fixture_dirs():
        expected = defined_rows(d)
        if not expected:
            continue
        dirs += 1
        r = run("--json", d)
        assert r.exit_code == 0, (d, r.output)
        got = json_lines(r.stdout)
        assert len(got) == len(expected) and all(list(x) == KEYS for x in got), d
        assert got == expected, (d, next(((a, b) for a, b in zip(got, expected) if a != b), None))
        # text: the same rows, each show's row text on one line after its group's fields
        r = run(d)
        assert r.exit_code == 0, (d, r.output)
        lines = r.stdout.splitlines()
        assert len(lines) == len(expected)
        for line, row in zip(lines, expected):
            head = f"{row['gtid']} {row['file']} {row['offset']} {format_time(row['timestamp'])} "
            assert line.startswith(head) and "\n" not in line
        # parquet: one file per binlog, its rows the JSON rows as text
        out = tmp_path / d.parent.name / d.name
        r = run("--parquet", out, d)
        assert r.exit_code == 0 and r.stdout == "", (d, r.output)
        names = [os.path.basename(f) for f in api.list_binlogs(d)]
        assert sorted(p.name for p in out.iterdir()) == sorted(n + ".parquet" for n in names)
        back = []
        for n in names:
            f = pq.ParquetFile(out / f"{n}.parquet")
            assert all(f.metadata.row_group(i).num_rows <= 100 for i in range(f.metadata.num_row_groups))
            assert b"gtidx:error" not in (f.metadata.metadata or {})
            back += parquet_rows(out / f"{n}.parquet")
        assert back == [as_text_row(x) for x in expected], d
    assert dirs >= 15


def test_parquet_encodes_and_describes_columns_as_readers_use_them(tmp_path):
    """Dictionaries for the repeating columns (file, table, op, the images'
    column names), none for the values; min/max statistics for the columns a
    reader filters on, none for the images."""
    r = run("--parquet", tmp_path, MULTI)
    assert r.exit_code == 0, r.output
    f = pq.ParquetFile(tmp_path / "master-bin.000018.parquet")
    group = f.metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    for name in ("file", "table", "op", "before.key_value.key", "after.key_value.key"):
        assert chunks[name].has_dictionary_page, name
    for name in ("before.key_value.value", "after.key_value.value", "changed.list.element"):
        assert not chunks[name].has_dictionary_page, name
    for name in ("gtid", "file", "offset", "timestamp", "table", "op"):
        assert chunks[name].is_stats_set, name
    assert not chunks["before.key_value.value"].is_stats_set


def test_parquet_row_groups_are_bounded_by_their_values_bytes(tmp_path, monkeypatch):
    """A row group is written once its values reach ROW_GROUP_BYTES, whatever its rows."""
    from gtidx.cli import changes as command
    monkeypatch.setattr(command, "ROW_GROUP_BYTES", 4000)
    r = run("--parquet", tmp_path, MULTI)
    assert r.exit_code == 0, r.output
    f = pq.ParquetFile(tmp_path / "master-bin.000018.parquet")
    sizes = [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)]
    assert len(sizes) > 10 and max(sizes) < 100, sizes
    assert parquet_rows(tmp_path / "master-bin.000018.parquet") == \
        [as_text_row(x) for x in defined_rows(MULTI) if x["file"] == "master-bin.000018"]


def test_text_line_is_show_row_text_on_one_line():
    """The text of a row is show's (``row_parts``): the lines ``gtidx show``
    prints for it, joined; a line break in a value is written as \\n."""
    d = MULTI
    f = api.list_binlogs(d)[0]
    with Binlog(f) as b:
        g = next(g for g in b.groups() if any(r.op == "update" for r in show.decode_group(b, g).rows))
        changes = show.decode_group(b, g)
    text = show.format_text(changes, format_time(g.timestamp)).splitlines()
    r = run("--gtid", g.gtid, d)
    assert r.exit_code == 0, r.output
    (line, *_) = [x for x in r.stdout.splitlines()]
    row = changes.rows[0]
    head, images, notes = show.row_parts(row)
    # the statement, images and notes show prints, in show's order, on the line
    at = text.index(f"### {head}")
    assert text[at + 1] == f"### {images[0][0]}" and text[at + 2] == f"###   {images[0][1][0]}"
    assert line == (f"{g.gtid} {os.path.basename(f)} {g.start} {format_time(g.timestamp)} {head} "
                    + " ".join(f"{label} {', '.join(items)}" for label, items in images)
                    + "".join(f"  # {n}" for n in notes))
    odd = show.RowChange("d.t", "insert", None, {"a": "x\ny\\n", "b": b"\x00"}, None, [], 0)
    assert show.row_line(odd) == "INSERT INTO `d`.`t` SET a='x\\ny\\\\n', b=X'00'"


def test_subprocess_equals_clirunner(tmp_path):
    r = cli_subprocess("--json", MULTI)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert json_lines(r.stdout) == defined_rows(MULTI)
    r = cli_subprocess("--parquet", tmp_path / "out", MULTI)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    assert len(list((tmp_path / "out").iterdir())) == 5 and not list((tmp_path / "out").glob(".*"))


# -- filters: the rows of the whole, filtered -------------------------------------------------------

@pytest.mark.parametrize("scenario", ["mariadb-10.11/multifile", "mariadb-11.8/nonmono"])
def test_filters_give_the_rows_of_the_whole_filtered(tmp_path, scenario):
    d = copy_set(tmp_path, FIXTURES / scenario, build="11.8" not in scenario)   # 11.8: the server's own .idx
    everything = defined_rows(d)
    if "multifile" in scenario:
        assert len({r["file"] for r in everything}) > 1                         # rows in several files
    tables = sorted({r["table"] for r in everything})
    times = sorted({r["timestamp"] for r in everything})
    gtids = [r["gtid"] for r in everything]
    twice = sorted({g for g in gtids if len({(r["file"], r["offset"]) for r in everything if r["gtid"] == g}) > 1})
    if "nonmono" in scenario:
        assert twice                                # a GTID logged twice: both groups' rows
    mid = times[len(times) // 2]
    first_file, last_file = everything[0], everything[-1]
    cases = [
        (["--table", tables[0]], lambda r: r["table"] == tables[0]),
        (["--table", tables[-1], "--table", "no.such"], lambda r: r["table"] == tables[-1]),
        (["--table", "no.such"], lambda r: False),
        # a group's exact timestamp: --since keeps it, --until leaves it out
        (["--since", f"@{mid}"], lambda r: r["timestamp"] >= mid),
        (["--until", f"@{mid}"], lambda r: r["timestamp"] < mid),
        (["--since", format_time(mid), "--until", format_time(mid + 1)], lambda r: r["timestamp"] == mid),
        (["--since", f"@{mid}.5"], lambda r: r["timestamp"] > mid),
        (["--until", f"@{mid}.5"], lambda r: r["timestamp"] <= mid),
        (["--since", f"@{mid}", "--until", f"@{mid}"], lambda r: False),
        (["--gtid", gtids[len(gtids) // 3]], lambda r: r["gtid"] == gtids[len(gtids) // 3]),
        (["--gtid", first_file["gtid"], "--gtid", last_file["gtid"], "--gtid", "77-1-1"],
         lambda r: r["gtid"] in (first_file["gtid"], last_file["gtid"])),
        (["--gtid", "77-1-1"], lambda r: False),
        (["--gtid", last_file["gtid"], "--until", f"@{times[0]}"], lambda r: False),
        (["--gtid", gtids[0], "--table", tables[0]], lambda r: r["gtid"] == gtids[0] and r["table"] == tables[0]),
        (["--table", tables[0], "--since", f"@{mid}"], lambda r: r["table"] == tables[0] and r["timestamp"] >= mid),
    ]
    cases += [(["--gtid", g], lambda r, g=g: r["gtid"] == g) for g in twice[:3]]
    for args, keep in cases:
        r = run("--json", *args, d)
        assert r.exit_code == 0, (args, r.output)
        assert json_lines(r.stdout) == [x for x in everything if keep(x)], args
    # a GTID written in another form is the same GTID
    g = gtids[0]
    domain, server, seq = g.split("-")
    r = run("--json", "--gtid", f"{domain}-{server}-0{seq}", d)
    assert json_lines(r.stdout) == [x for x in everything if x["gtid"] == g]


def test_library_changes_per_binlog(tmp_path):
    """gtidx.changes.changes: per binlog, its number of those planned and its rows;
    bad arguments refused when it is called."""
    d = copy_set(tmp_path, MULTI)
    got = list(library.changes(d))
    assert [(os.path.basename(b.path), b.number, b.count) for b in got] == \
        [(os.path.basename(f), n, 5) for n, f in enumerate(api.list_binlogs(d), 1)]
    rows = [r for b in library.changes(d) for r in b.rows]
    assert all(isinstance(r, library.ChangedRow) for r in rows)
    assert [r.gtid for r in rows] == [r["gtid"] for r in defined_rows(d)]
    one = rows[len(rows) // 2]
    located = list(library.changes(d, gtids=one.gtid, tables=[one.table]))
    assert [os.path.basename(b.path) for b in located] == [one.file] and located[0].count == 1
    for kw in ({"tables": ["nodot"]}, {"tables": "x."}, {"since": "soon"}, {"until": 1.5j}, {"gtids": ["1-2"]}):
        with pytest.raises(BadInputError):
            library.changes(d, **kw)


# -- bad input: one line, exit 2 ------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["--table", "orders"], ["--table", "shop."], ["--since", "yesterday"], ["--until", "2026-13-01"],
    ["--gtid", "0-1"], ["--gtid", "3e11fa47-71ca-11e1-9e33-c80aa9429562:5"], ["--json", "--parquet", "out"],
    ["--parquet", "s3://bucket/out"], ["--history", "x"],
])
def test_bad_input_is_one_line_and_exit_2(args):
    r = cli_subprocess(*args, MULTI)
    assert r.returncode == 2, (args, r.stderr)
    lines = r.stderr.splitlines()
    if args[0] != "--history":                      # click's usage error: its usage text, as elsewhere
        assert len(lines) == 1 and lines[0].startswith("gtidx: "), (args, r.stderr)
        assert r.stdout == ("" if "--json" not in args else r.stdout.splitlines()[0] + "\n")
    r = cli_subprocess("--json", *args, MULTI) if "--json" not in args else r
    assert r.returncode == 2 and json.loads(r.stdout.splitlines()[-1])["error"]["exit_code"] == 2, args


def test_parquet_into_a_file_and_a_missing_path(tmp_path):
    (tmp_path / "file").write_text("")
    r = cli_subprocess("--parquet", tmp_path / "file", MULTI)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "not a directory" in r.stderr
    r = cli_subprocess(tmp_path / "missing")
    assert r.returncode == 3 and r.stderr.splitlines() == [f"gtidx: {tmp_path / 'missing'}: No such file or directory"]


# -- a damaged binlog: its output ends with the error, the others go on -----------------------------

def damage_a_rows_event(d: Path) -> tuple[str, int]:
    """Flip a byte inside the first rows event of the middle group with rows
    of the second binlog: (that binlog's name, the group's start)."""
    f = api.list_binlogs(d)[1]
    with Binlog(f) as b:
        groups = [g for g in b.groups() if show.decode_group(b, g).rows]
        g = groups[len(groups) // 2]
        ev = next(e for e in b.events_between(g.start, g.end) if e.type in (23, 24, 25, 30, 31, 32))
    data = bytearray(Path(f).read_bytes())
    data[ev.offset + 19 + 10] ^= 0xFF
    Path(f).write_bytes(bytes(data))
    return os.path.basename(f), g.start


def test_a_damaged_binlog_ends_its_output_and_the_others_go_on(tmp_path):
    d = tmp_path / "binlogs"
    import shutil
    shutil.copytree(MULTI, d)
    whole = defined_rows(MULTI)
    name, start = damage_a_rows_event(d)
    before = [r for r in whole if r["file"] != name or r["offset"] < start]
    after = [r for r in whole if r["file"] > name]
    assert after and any(r["file"] == name for r in before)
    # JSON Lines: the rows before the damage, the error, then the next binlogs' rows
    r = cli_subprocess("--json", d)
    assert r.returncode == 3, r.stderr
    lines = json_lines(r.stdout)
    at = next(i for i, x in enumerate(lines) if "error" in x)
    assert lines[:at] == [x for x in before if x["file"] <= name]
    assert lines[at]["error"]["path"] == str(d / name) and lines[at]["error"]["exit_code"] == 3
    assert lines[at + 1:] == after
    assert r.stderr.splitlines() == [f"gtidx: {d / name}, offset {lines[at]['error']['offset']}: "
                                     f"{lines[at]['error']['message']}"]
    # text: the same rows, the error on stderr
    r = cli_subprocess(d)
    assert r.returncode == 3 and len(r.stdout.splitlines()) == len(before) and len(r.stderr.splitlines()) == 1
    # Parquet: every binlog's file, the damaged one's with the rows before and the error in its metadata
    out = tmp_path / "out"
    r = cli_subprocess("--parquet", out, d)
    assert r.returncode == 3 and len(r.stderr.splitlines()) == 1, r.stderr
    got = {p.name: parquet_rows(p) for p in out.iterdir()}
    assert len(got) == 5
    assert [x for n in sorted(got) for x in got[n]] == [as_text_row(x) for x in before]
    error = json.loads(pq.ParquetFile(out / f"{name}.parquet").metadata.metadata[b"gtidx:error"])
    assert error["exit_code"] == 3 and error["path"] == str(d / name)


# -- a URL ---------------------------------------------------------------------------------------

def test_a_url_gives_the_rows_of_the_files(tmp_path):
    pytest.importorskip("boto3")
    pytest.importorskip("s3fs")
    from tools.s3server import AWS_ENV, MotoServer
    with MotoServer(tmp_path) as server:
        client = server.bucket("gtidx-changes")
        for f in MULTI.iterdir():
            if f.name.startswith("master-bin"):
                client.put_object(Bucket="gtidx-changes", Key=f"multifile/{f.name}", Body=f.read_bytes())
        env = {**{k: v or None for k, v in AWS_ENV.items()}, "AWS_ENDPOINT_URL": server.url}
        url = "s3://gtidx-changes/multifile/"
        r = cli_subprocess("--json", url, env=env)
        assert r.returncode == 0, r.stderr
        everything = defined_rows(MULTI)
        assert json_lines(r.stdout) == everything
        g = everything[len(everything) // 2]["gtid"]
        r = cli_subprocess("--json", "--gtid", g, "--storage-option", f"endpoint_url={server.url}", url, env=env)
        assert r.returncode == 0 and json_lines(r.stdout) == [x for x in everything if x["gtid"] == g], r.stderr
        r = cli_subprocess("--parquet", tmp_path / "out", url, env=env)
        assert r.returncode == 0, r.stderr
        assert [x for p in sorted((tmp_path / "out").iterdir()) for x in parquet_rows(p)] == \
            [as_text_row(x) for x in everything]


def test_a_binlog_that_cannot_be_read_is_an_error_among_the_others(tmp_path):
    """Not a damaged event: a file listed that is no binlog (its FDE broken)."""
    d = tmp_path / "binlogs"
    import shutil
    shutil.copytree(MULTI, d)
    files = api.list_binlogs(d)
    data = bytearray(Path(files[0]).read_bytes())
    data[30] ^= 0xFF
    Path(files[0]).write_bytes(bytes(data))
    r = run("--json", d)
    assert r.exit_code in (2, 3), r.output
    lines = json_lines(r.stdout)
    assert "error" in lines[0] and lines[1:] == [x for x in defined_rows(MULTI) if x["file"] != os.path.basename(files[0])]
    assert isinstance(next(iter(next(iter(library.changes(d))).rows)), GtidxError)
