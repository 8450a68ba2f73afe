"""Progress display of long work: `gtidx build` on a terminal (a real pseudo-terminal),
silent in pipes, CliRunner and with --quiet; admin.build's progress hook."""
import json
import os
import pty
import re
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, ROOT
from gtidx import admin, api
from gtidx.cli import cli

MULTIFILE = FIXTURES / "mariadb-10.11" / "multifile"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("COLUMNS", None)


@pytest.fixture
def binlogs(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(MULTIFILE, d)
    for p in d.iterdir():
        p.chmod(0o644)
    return d


def on_terminal(*args, cwd, stdout_pipe=False, env=ENV):
    """Run ``python -m gtidx ARGS`` with a pseudo-terminal as stdin, stderr and
    (unless ``stdout_pipe``) stdout: (exit code, bytes the terminal got, stdout piped)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "gtidx", *map(str, args)], cwd=cwd, env=env,
                         stdin=slave, stdout=subprocess.PIPE if stdout_pipe else slave, stderr=slave)
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:              # EIO: every holder of the terminal's other end has closed it
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    piped = p.stdout.read() if stdout_pipe else b""
    return p.wait(timeout=300), got, piped


def screen(raw: bytes) -> list[str]:
    """The lines a terminal shows after ``raw``: carriage returns, erase-to-end-of-line."""
    lines, line, col = [], [], 0
    text = raw.decode()
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("\x1b[K", i):
            del line[col:]
            i += 3
            continue
        if c == "\r":
            col = 0
        elif c == "\n":
            lines.append("".join(line))
            line, col = [], 0
        else:
            line[col:col + 1] = [c]
            col += 1
        i += 1
    if line:
        lines.append("".join(line))
    return lines


def plain(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gtidx", *map(str, args)], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=60)


def untimed(lines):
    return [re.sub(r" in \d+\.\d+ s", " in T s", x) for x in lines]


def test_build_on_a_terminal_shows_progress_and_the_same_lines(binlogs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(binlogs, other)
    code, raw, _ = on_terminal("build", ".", cwd=binlogs)
    assert code == 0, raw
    assert b"files 0/5  0.0/0.6 MB" in raw and b"MB/s  ETA " in raw and b"files 5/5" in raw
    piped = plain("build", ".", cwd=other)
    assert piped.returncode == 0 and piped.stderr == ""
    shown = screen(raw)
    assert untimed(shown) == untimed(piped.stdout.splitlines())
    assert len(shown) == 5 and all(" records, " in x for x in shown)
    # Again: every index is current, the output is exactly the piped one.
    code, raw, _ = on_terminal("build", ".", cwd=binlogs)
    assert code == 0 and b"files 0/5" in raw
    assert screen(raw) == plain("build", ".", cwd=other).stdout.splitlines()


def test_quiet_draws_nothing(binlogs):
    code, raw, _ = on_terminal("build", "--quiet", ".", cwd=binlogs)
    assert code == 0
    assert b"\x1b" not in raw and b"files " not in raw and raw.count(b"\r\n") == 5
    assert all(" records, " in x for x in screen(raw))


def test_json_on_a_terminal_is_one_clean_document(binlogs, tmp_path):
    code, raw, _ = on_terminal("build", "--json", ".", cwd=binlogs)
    assert code == 0
    assert b"files 0/5" in raw                   # drawn on stderr, erased before the document
    shown = screen(raw)
    assert len(shown) == 1
    assert [x["action"] for x in json.loads(shown[0])["results"]] == ["built"] * 5


def test_stdout_not_a_terminal_means_no_progress(binlogs):
    code, raw, out = on_terminal("build", ".", cwd=binlogs, stdout_pipe=True)
    assert code == 0 and raw == b""
    assert out.decode().count(" records, ") == 5


def test_pipes_and_clirunner_get_no_progress(binlogs, tmp_path):
    r = CliRunner().invoke(cli, ["build", str(binlogs)])
    assert r.exit_code == 0 and r.stderr == "" and "\r" not in r.output and "\x1b" not in r.output
    p = plain("build", "--force", ".", cwd=binlogs)
    assert p.returncode == 0 and p.stderr == "" and p.stdout.count(" records, ") == 5


def test_a_failed_file_on_a_terminal_is_one_line_among_the_results(binlogs):
    (binlogs / "master-bin.index").unlink()
    (binlogs / "master-bin.000024").write_bytes(b"not a binlog at all" * 10)
    code, raw, _ = on_terminal("build", ".", cwd=binlogs)
    assert code == 2
    shown = screen(raw)
    assert len(shown) == 6 and sum(" records, " in x for x in shown) == 5
    assert shown[-1].startswith("gtidx: ./master-bin.000024") and "not a binlog" in shown[-1]


def test_changes_on_a_terminal_shows_files_and_rows(binlogs, tmp_path):
    """gtidx changes: binlogs read of those planned and rows so far, erased
    at the end (--parquet: nothing else on the screen); its rows on a
    terminal are exactly the lines a pipe gets."""
    code, raw, _ = on_terminal("changes", "--parquet", tmp_path / "out", ".", cwd=binlogs)
    assert code == 0 and b"files 0/5  0 rows" in raw and raw.endswith(b"\r\x1b[K")
    assert screen(raw) == [] and len(list((tmp_path / "out").iterdir())) == 5
    code, raw, _ = on_terminal("changes", "--table", "fx.t_myi", ".", cwd=binlogs)
    assert code == 0 and b"files 0/5  0 rows" in raw
    piped = plain("changes", "--table", "fx.t_myi", ".", cwd=binlogs)
    assert piped.returncode == 0 and piped.stderr == "" and "\x1b" not in piped.stdout
    assert screen(raw) == piped.stdout.splitlines() and len(screen(raw)) == 47
    code, raw, _ = on_terminal("changes", "--quiet", "--parquet", tmp_path / "out", ".", cwd=binlogs)
    assert code == 0 and raw == b""


# -- the library's hook -------------------------------------------------------------------------

def test_api_build_progress_counts_files_and_bytes(binlogs, tmp_path):
    seen = []
    missing = tmp_path / "missing"
    files = api.list_binlogs(binlogs)
    total = sum(os.path.getsize(f) for f in files)
    results = list(admin.build([binlogs, missing, files[0]], progress=seen.append, force=True))
    assert len(results) == 7 and isinstance(results[5], api.GtidxError)
    assert seen[0] == admin.BuildProgress(None, 0, 6, 0, total + os.path.getsize(files[0]))
    ends = [p for p in seen[1:]]
    assert [p.files_done for p in ends] == [1, 2, 3, 4, 5, 6]        # small files: one call as each ends
    assert [p.file for p in ends] == [*files, files[0]]
    assert ends[-1].bytes_done == ends[-1].bytes == seen[0].bytes
    assert [p.bytes_done for p in ends] == sorted(p.bytes_done for p in ends)


def test_api_build_progress_must_be_callable(binlogs):
    with pytest.raises(api.BadInputError):
        list(admin.build(binlogs, progress=5))


# -- spark: the phase and its Spark tasks, as the driver's status tracker sees them --------------

SPARK_ENV = {**ENV, "SPARK_LOCAL_IP": "127.0.0.1"}       # the driver listens on loopback only


def test_spark_build_on_a_terminal_shows_phase_and_tasks(binlogs):
    pytest.importorskip("pyspark")
    (binlogs / "master-bin.index").unlink()
    code, raw, _ = on_terminal("spark", "build", ".", "--master", "local[2]", cwd=binlogs, env=SPARK_ENV)
    assert code == 0, raw[-2000:]
    assert b"spark: building indexes" in raw and re.search(rb"tasks \d/5", raw)
    assert b"[Stage " not in raw                    # Spark's own console bar is off: one display
    shown = screen(raw)
    assert not [x for x in shown if "spark: " in x]  # erased before the results
    assert shown[-5:] == [f"./master-bin.0000{n}.idx: built (2 records)" for n in range(18, 23)]


def in_process_on_terminal(*args) -> tuple[int, bytes]:
    """``gtidx ARGS`` run in this process (a Spark command: on the tests'
    shared session) with a pseudo-terminal as its stdout and stderr: (exit
    code, bytes the terminal got). The driver JVM's stderr reaches the
    terminal too: its lines are forwarded to ``sys.stderr`` as they come."""
    import threading
    master, slave = pty.openpty()
    term = os.fdopen(slave, "w", buffering=1)
    got = []

    def read():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:          # EIO: the terminal's other end is closed
                return
            if not chunk:
                return
            got.append(chunk)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = 0
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sys, "stdout", term)
            mp.setattr(sys, "stderr", term)
            try:
                cli.main(args=list(map(str, args)), prog_name="gtidx")
            except SystemExit as e:
                code = e.code
    finally:
        term.close()
        reader.join(timeout=30)
        os.close(master)
    return code, b"".join(got)


def test_spark_quiet_draws_nothing(spark, binlogs, tmp_path):
    """--quiet on a terminal: nothing drawn, not Spark's console bar either.
    In this process on the shared session (the command in its own process on
    a terminal: the test above); the same run without --quiet draws, on the
    same kind of terminal. The directory is named whole: the shared session's
    Python workers run in the tests' working directory."""
    (binlogs / "master-bin.index").unlink()
    other = tmp_path / "other"
    shutil.copytree(binlogs, other)
    code, raw = in_process_on_terminal("spark", "build", other, "--master", "local[2]")
    assert code == 0 and b"spark: building indexes" in raw, raw[-2000:]
    code, raw = in_process_on_terminal("spark", "build", "--quiet", binlogs, "--master", "local[2]")
    assert code == 0, raw[-2000:]
    assert b"spark: " not in raw and b"[Stage " not in raw
    assert screen(raw)[-5:] == [f"{binlogs}/master-bin.0000{n}.idx: built (2 records)" for n in range(18, 23)]


def test_api_build_progress_inside_a_big_binlog(live_server, tmp_path):
    """A binlog past 16 MiB (written by the live server) reports as it goes:
    bytes grow within the file, never past it, then the file ends."""
    live_server.sql("CREATE DATABASE IF NOT EXISTS gtidx_progress")
    live_server.sql("CREATE TABLE IF NOT EXISTS gtidx_progress.big (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)")
    live_server.sql("FLUSH BINARY LOGS")
    name = live_server.sql("SHOW MASTER STATUS")[0][0]
    conn = live_server.connect()
    with conn.cursor() as c:
        for i in range(40):
            c.execute("INSERT INTO gtidx_progress.big (b) VALUES (REPEAT(%s, 1048576))", (chr(97 + i % 26),))
    conn.commit()
    live_server.sql("FLUSH BINARY LOGS")
    binlog = tmp_path / name
    shutil.copyfile(live_server.binlog_dir / name, binlog)
    size = binlog.stat().st_size
    assert size > 40 << 20
    seen = []
    [result] = admin.build(binlog, progress=seen.append)
    assert result.action == "built"
    assert seen[0] == admin.BuildProgress(None, 0, 1, 0, size) and seen[-1] == admin.BuildProgress(str(binlog), 1, 1, size, size)
    inside = seen[1:-1]
    assert len(inside) >= 2 and all(p.files_done == 0 and p.file == str(binlog) for p in inside)
    assert all(0 < p.bytes_done < size for p in inside)
    assert [p.bytes_done for p in seen] == sorted(p.bytes_done for p in seen)
