"""What the commands say beside their answers: warnings once per command,
short reasons, the facts of what was skipped."""
from __future__ import annotations

import shutil
import subprocess
import sys

from click.testing import CliRunner

from conftest import FIXTURES
from gtidx.cli import cli

MULTIFILE = FIXTURES / "mariadb-10.11" / "multifile"


def test_a_warning_about_many_files_is_one_line_that_counts_them(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(MULTIFILE, d)        # no indexes: each file the lookup opens is answered by scan
    p = subprocess.run([sys.executable, "-m", "gtidx", "seek", "--gtid", "0-2-432", str(d)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "(via scan)" in p.stdout, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("gtidx: warning: ") and " binlogs, master-bin.0000" in lines[0]
    assert f" in {d}: no usable index (missing: no index file); answering by scan" in lines[0]
    # one file: its path, as before
    p = subprocess.run([sys.executable, "-m", "gtidx", "seek", "--gtid", "0-2-432", str(d / "master-bin.000020")],
                       capture_output=True, text=True, timeout=120)
    assert p.stderr.splitlines() == [f"gtidx: warning: {d / 'master-bin.000020'}: no usable index "
                                     "(missing: no index file); answering by scan"]


def test_warnings_come_after_the_answer_and_json_stays_one_document(tmp_path):
    import json
    d = tmp_path / "binlogs"
    shutil.copytree(MULTIFILE, d)
    r = CliRunner().invoke(cli, ["seek", "--json", "--gtid", "0-2-432", str(d)])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["gtid"] == "0-2-432"
    assert r.stderr.count("gtidx: warning:") == 1


def test_a_skipped_build_says_one_short_reason_and_carries_the_index_facts(tmp_path):
    import gtidx
    d = tmp_path / "binlogs"
    shutil.copytree(MULTIFILE, d)
    built = {r.binlog: r for r in gtidx.build([str(d)])}
    assert {r.action for r in built.values()} == {"built"}
    r = CliRunner().invoke(cli, ["build", str(d)])
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [f"{b}.idx: skipped (index is valid and current)" for b in sorted(built)]
    for again in gtidx.build([str(d)]):
        first = built[again.binlog]
        assert again.action == "skipped" and again.reason == "index is valid and current"
        assert (again.records, again.pages, again.page_size, again.size, again.span_min) == \
            (first.records, first.pages, first.page_size, first.size, first.span_min)
        assert again.size == (d / f"{again.binlog}.idx").stat().st_size


def test_a_fitted_build_says_what_fitted_it(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(MULTIFILE, d)
    r = CliRunner().invoke(cli, ["build", str(d)])
    assert r.exit_code == 0
    assert all(x.endswith("[fitted to --max-ratio 2%: fewer or smaller pages than the server writes]")
               for x in r.stdout.splitlines()), r.stdout
    r = CliRunner().invoke(cli, ["build", "--force", "--max-ratio", "0.5", str(d)])
    assert "[" not in r.stdout, r.stdout


def test_offsets_in_the_magic_answer_as_4_for_both_flavors():
    """One rule for `pos`, MariaDB (BINLOG_GTID_POS answers so) and MySQL alike:
    offsets 0-3, inside the 4-byte magic, answer as offset 4; any other offset
    that is not the start of an event is not found (exit 1)."""
    for f in (MULTIFILE / "master-bin.000018", FIXTURES / "mysql-9.7" / "rotated" / "binlog.000014"):
        answers = [CliRunner().invoke(cli, ["pos", "--json", str(f), str(o)]) for o in range(6)]
        assert [r.exit_code for r in answers] == [0, 0, 0, 0, 0, 1], f
        import json
        said = [json.loads(r.stdout) for r in answers]
        assert [x.pop("offset") for x in said[:5]] == [0, 1, 2, 3, 4]
        assert all(x == said[4] for x in said[:5]) and said[4]["position"], f


def test_gathered_warnings_come_before_the_error_line(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(MULTIFILE, d)
    r = CliRunner().invoke(cli, ["pos", str(d / "master-bin.000020"), "58730"])     # inside an event
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("gtidx: warning: ") and "not the start of an event" in lines[1]
