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
