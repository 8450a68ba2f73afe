"""Every example in README.md runs: the fenced python blocks (the Spark one
too), and the commands of the console and sh blocks, against a copy of a
bundled fixture with the README's paths substituted. Every name the docs
call as ``gtidx.X`` resolves."""
from __future__ import annotations

import ast
import importlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, ROOT

README = ROOT / "README.md"
DEMO = FIXTURES / "mariadb-10.11" / "multifile"     # the Quickstart's fixture
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)

# Blocks not run here, each with the reason (a new block must be added to a test or here).
RUN_ELSEWHERE = {
    "Quickstart": ".ci/run runs the Quickstart's two commands verbatim",
    "Archives": "tests/test_s3.py runs them against moto_server (test_s3_readme_archives_story)",
    "Spark on a cluster": "needs a cluster and an object store: tests/test_spark_cluster.py runs this flow "
                          "on a standalone master and worker against moto_server",
}


def readme_blocks() -> list[tuple[str, str, str, int]]:
    """(section, language, body, line) for every fenced block of README.md."""
    text = README.read_text()
    out = []
    for m in FENCE.finditer(text):
        head = text[:m.start()]
        section = re.findall(r"^## (.+)$", head, re.M)[-1]
        out.append((section, m.group(1), m.group(2), head.count("\n") + 2))
    return out


def blocks(lang: str, *, section: str | None = None, spark: bool | None = None):
    found = [(s, body, line) for s, lng, body, line in readme_blocks()
             if lng == lang and s not in RUN_ELSEWHERE
             and (section is None or s == section)
             and (spark is None or spark == ("gtidx spark" in body or "from gtidx import spark" in body))]
    return found


@pytest.fixture
def demo(tmp_path):
    """A copy of the bundled binlogs and the README's paths mapped onto it."""
    d = tmp_path / "binlog"
    shutil.copytree(DEMO, d)
    shutil.copytree(FIXTURES / "mysql-9.7" / "rotated", tmp_path / "mysql-binlogs")     # MySQL binlogs
    (tmp_path / "wanted.csv").write_text("gtid\n0-2-432\n1-1-420\n9-9-9\n0-2-432,1-1-420,2-1-400,5-1-301,6-1-12\n")
    paths = {"/var/lib/mysql/binlog": str(d), "/var/lib/mysql-binlogs": str(tmp_path / "mysql-binlogs"),
             "/tmp/gtidx-demo": str(d), "/data/binlogs": str(d),
             "wanted.parquet": str(tmp_path / "wanted.parquet"), "wanted.csv": str(tmp_path / "wanted.csv"),
             "found.parquet": str(tmp_path / "found.parquet"), '"local[*]"': '"local[2]"'}
    return d, paths


def substitute(text: str, paths: dict) -> str:
    for k, v in paths.items():
        text = text.replace(k, v)
    return text


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [e.get("PYTHONPATH")])])
    return e


def gtidx_cmd(line: str) -> list[str]:
    argv = shlex.split(line)
    assert argv[0] == "gtidx", line
    return [sys.executable, "-m", "gtidx", *argv[1:]]


# -- every block is run somewhere ------------------------------------------------------

def test_every_readme_block_is_run():
    handled = {"python", "console", "sh"}
    for section, lang, body, line in readme_blocks():
        if section in RUN_ELSEWHERE:
            continue
        assert lang in handled, f"README.md:{line}: a ```{lang} block that no test runs"
        if lang == "sh":        # sh blocks outside the Quickstart: the Spark commands (test_spark_commands)
            assert all(x.startswith("gtidx spark ") for x in body.splitlines() if x.strip()), \
                f"README.md:{line}: a ```sh block that no test runs"
    assert blocks("python", spark=False) and blocks("python", spark=True)
    assert blocks("console") and blocks("sh", spark=True)


def test_ci_runs_the_quickstart_verbatim():
    quick = [b for s, lng, b, _ in readme_blocks() if s == "Quickstart"]
    assert len(quick) == 1
    lines = [x for x in quick[0].splitlines() if x.strip()]
    assert len(lines) == 2, "the Quickstart holds two commands: install + main job, then the tests"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "## Quickstart" in ci and '"${QUICKSTART[0]}"' in ci and '"${QUICKSTART[1]}"' in ci
    # a newcomer's pip is Debian 12's own (23.0.1), which backtracks for many minutes over the
    # extras: the first command makes its venv and upgrades that pip before it installs, and
    # CI takes no step of its own before the commands (no venv, no pip) that would hide it
    first = lines[0]
    assert first.index("-m venv .venv") < first.index("--upgrade pip") < first.index("pip install -c constraints.txt -e")
    commands = [x for x in ci.split('step "quickstart 1')[0].splitlines() if not x.lstrip().startswith("#")]
    assert not any(re.search(r"\bpip\b|-m venv|activate", x) for x in commands), commands


# -- the documented names ----------------------------------------------------------------

def documented_names() -> set[str]:
    """``gtidx.X`` as the README, docs/ and the package's docstrings write it."""
    texts = [README.read_text(), *(p.read_text() for p in (ROOT / "docs").glob("*.md"))]
    for p in (ROOT / "gtidx").glob("*.py"):
        tree = ast.parse(p.read_text())
        texts += [ast.get_docstring(n) or "" for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    return {m for t in texts for m in re.findall(r"(?<![\w.])gtidx\.([A-Za-z_]\w*)", t)}


def test_documented_names_resolve():
    import gtidx
    names = documented_names()
    assert {"open", "build", "state_at", "Gtid", "Position", "BinlogState", "GtidxError"} <= names
    for name in sorted(names):
        if importlib.util.find_spec(f"gtidx.{name}") is not None:
            continue                                          # a module: gtidx.binlog, gtidx.cli
        assert hasattr(gtidx, name), f"gtidx.{name} is documented but does not exist"
    for name in gtidx.__all__:
        assert getattr(gtidx, name) is not None and name in dir(gtidx)


def test_no_module_shadows_a_builtin():
    """``gtidx.open`` is the package's name for ``api.open_binlogs``: no module
    of gtidx defines a top-level name that hides a builtin (``open``...)."""
    import builtins

    import gtidx
    from gtidx import api
    assert gtidx.open is api.open_binlogs and gtidx.BinlogSeries is api.BinlogSeries
    for p in sorted((ROOT / "gtidx").glob("*.py")):
        top = set()
        for n in ast.parse(p.read_text()).body:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                top.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                top |= {t.id for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                        if isinstance(t, ast.Name)}
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                top |= {(a.asname or a.name).split(".")[0] for a in n.names}
        shadowing = {x for x in top if not x.startswith("__")} & set(dir(builtins))
        assert not shadowing, f"gtidx/{p.name} hides builtins: {sorted(shadowing)}"


def test_import_gtidx_stays_cheap():
    code = "import sys, gtidx; print(sorted(m for m in sys.modules if m.startswith('gtidx')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "gtidx.api" not in r.stdout and "gtidx.indexfile" not in r.stdout, r.stdout


# -- python blocks -------------------------------------------------------------------------

def run_python(body: str, line: int, paths: dict) -> None:
    code = compile(substitute(body, paths), f"README.md:{line}", "exec")
    exec(code, {"__name__": "__readme__"})


def test_library_examples(demo, monkeypatch, capsys):
    d, paths = demo
    monkeypatch.chdir(d)                        # `Binlog("master-bin.000020")` names a file here
    for _, body, line in blocks("python", spark=False):
        run_python(body, line, paths)
    out = capsys.readouterr().out
    assert "0-2-432,1-2-453,2-2-419,5-1-301,6-1-12" in out       # state_at's position, as `gtidx pos` says
    assert len(list(d.glob("*.idx"))) == 5                       # gtidx.build indexed every file


# The row-changes example's table and row, as the demo binlogs have them: fx.t_inno (positional
# columns), its row @1=3395 updated by 0-1-448 and 0-2-431 in the example's time range and
# inserted by 0-2-381 before it.
CHANGES_EXAMPLE = {"shop.customers": "fx.t_inno", "['id']": "['@1']", "'42'": "'3395'"}


def test_spark_examples(demo, capsys):
    pytest.importorskip("pyspark", reason="the spark extra: pip install -e '.[spark]'")
    from pyspark.sql import SparkSession
    d, paths = demo
    paths = {**paths, **CHANGES_EXAMPLE}
    import pandas as pd
    pd.DataFrame({"gtid": ["0-2-432", "1-1-420", "9-9-9"]}).to_parquet(paths["wanted.parquet"])
    ours = SparkSession.getActiveSession() is None
    try:
        for _, body, line in blocks("python", spark=True):
            run_python(body, line, paths)
    finally:
        if ours and SparkSession.getActiveSession() is not None:
            SparkSession.getActiveSession().stop()
    assert len(list(d.glob("*.idx"))) == 5                       # gs.build indexed every file
    hits = [ln for ln in capsys.readouterr().out.splitlines() if "master-bin." in ln]
    assert [ln.split("|")[1].strip() for ln in hits] == ["0-2-431", "0-1-448"], hits   # the row's two updates


def test_spark_commands(demo):
    """The Spark section's sh block, through the CLI in this process (its JVM
    is reused: a JVM start per command would double the time)."""
    pytest.importorskip("pyspark", reason="the spark extra: pip install -e '.[spark]'")
    from click.testing import CliRunner

    from gtidx.cli import cli
    d, paths = demo
    ran = 0
    for _, body, line in blocks("sh", spark=True):
        for cmd in filter(str.strip, body.splitlines()):
            argv = gtidx_cmd(substitute(cmd, paths))[3:]
            r = CliRunner().invoke(cli, argv)
            assert r.exit_code == 0, f"README.md:{line}: {cmd}: {r.output[-2000:]}"
            ran += 1
    assert ran == 2 and len(list(d.glob("*.idx"))) == 5
    assert (d.parent / "found.parquet").is_dir()


# -- console blocks: `$ gtidx ...` lines, their exit code, and the output shown for the demo --------

def console_commands(body: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown after it) of a console block."""
    out = []
    for ln in body.splitlines():
        if ln.startswith("$ "):
            out.append((ln[2:], []))
        elif out and ln.strip():
            out[-1][1].append(ln)
    return out


def test_console_examples(demo):
    d, paths = demo
    ran = 0
    for _, body, line in blocks("console"):
        background = []
        try:
            for shown_cmd, shown in console_commands(body):
                cmd = substitute(shown_cmd, paths)
                if cmd.endswith("&"):                       # gtidx tail DIR &: runs until SIGTERM
                    p = subprocess.Popen(gtidx_cmd(cmd[:-1]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=env(), cwd=d.parent)
                    background.append((cmd, p))
                    wait_for_line(p, "event=start", cmd)
                    continue
                r = subprocess.run(gtidx_cmd(cmd), capture_output=True, text=True, env=env(), cwd=d.parent)
                assert r.returncode == 0, f"README.md:{line}: {cmd}: exit {r.returncode}: {r.stderr}"
                if "/tmp/gtidx-demo" in shown_cmd:          # the Quickstart's demo: the output as shown
                    assert r.stdout.splitlines() == [substitute(s, paths) for s in shown], f"README.md:{line}: {cmd}"
                ran += 1
        finally:
            for cmd, p in background:
                p.send_signal(signal.SIGTERM)
                try:
                    rc = p.wait(timeout=30)
                finally:
                    p.kill()
                assert rc == 0, f"{cmd}: SIGTERM must stop it cleanly, exit {rc}: {p.stderr.read()[-2000:]}"
                ran += 1
    assert ran >= 6


def wait_for_line(p: subprocess.Popen, needle: str, cmd: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        ln = p.stderr.readline()
        if not ln and p.poll() is not None:
            break
        seen.append(ln)
        if needle in ln:
            return
    raise AssertionError(f"{cmd}: no {needle!r} line: {''.join(seen)[-2000:]}")


# -- dependencies: the runtime ones are what gtidx/ imports ----------------------------------

MODULE_OF = {"mysql-replication": "pymysqlreplication", "PyMySQL": "pymysql", "pyspark": "pyspark"}


def test_runtime_dependencies_are_what_the_package_imports():
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def module(req: str) -> str:
        name = re.match(r"[A-Za-z0-9_.-]+", req).group(0)
        return MODULE_OF.get(name, name.lower().replace("-", "_"))

    declared = {module(r) for r in project["dependencies"]}
    spark_extra = {module(r) for r in project["optional-dependencies"]["spark"]}
    imported = {}
    for p in (ROOT / "gtidx").glob("*.py"):
        for n in ast.walk(ast.parse(p.read_text())):
            names = ([a.name for a in n.names] if isinstance(n, ast.Import)
                     else [n.module] if isinstance(n, ast.ImportFrom) and n.level == 0 else [])
            for top in {x.split(".")[0] for x in names} - set(sys.stdlib_module_names) - {"gtidx"}:
                imported.setdefault(top, set()).add(p.name)
    # optional: spark.py's and changes.py's (its data source) under the spark extra, storage.py's
    # (object stores, imported for URLs only) under s3
    s3_extra = {module(r) for r in project["optional-dependencies"]["s3"]}
    spark_files = {"spark.py", "changes.py"}
    runtime = {m for m, where in imported.items() if not (where <= spark_files or where == {"storage.py"})}
    assert runtime == declared, f"imported outside spark.py and storage.py: {runtime}; declared: {declared}"
    assert {m for m, where in imported.items() if where <= spark_files} <= spark_extra
    assert {m for m, where in imported.items() if where == {"storage.py"}} <= s3_extra
