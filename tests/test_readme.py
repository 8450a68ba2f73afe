"""Every example of the README and of the reference pages runs: the
README's recipes (console blocks with their output compared, the pycon block
as a doctest, the point-in-time restore piped through mariadb-binlog), the
fenced python blocks (the Spark ones too) and the commands of the console
and sh blocks of docs/, against a copy of a bundled fixture with the paths
shown substituted. docs/cli.md is held to each command's ``--help``; links
between the pages resolve; every name the docs call as ``gtidx.X`` resolves."""
from __future__ import annotations

import ast
import doctest
import importlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from servehelp import replica  # noqa: F401 - the private MariaDB 10.11 replica of the serve recipe

README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The pages whose examples run here; the other docs/ pages hold no runnable block (test below).
RUN_PAGES = [README, DOCS / "cli.md", DOCS / "library.md", DOCS / "spark.md"]
README_MAX_LINES = 300              # a tour: the reference lives in docs/
DEMO = FIXTURES / "mariadb-10.11" / "multifile"     # the Quickstart's fixture
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
HEADING = re.compile(r"^#{1,3} (.+)$", re.M)
RUNNABLE = {"python", "pycon", "console", "sh"}     # a ```text block shows output and runs nothing

# Blocks not run by the tests of this file, each with the test that runs it.
RUN_ELSEWHERE = {
    ("README.md", "Quickstart"): ".ci/run runs the Quickstart's two commands verbatim",
    ("README.md", "Index and search an S3 archive"):
        "tests/test_s3.py runs them against moto_server (test_s3_readme_archives_story)",
    ("README.md", "Ship the closed binlogs to S3"):
        "tests/test_archive.py runs them against moto_server (test_archive_readme_recipe)",
    ("README.md", "Run Spark on a cluster"):
        "needs a cluster and an object store: tests/test_spark_cluster.py runs the job through spark-submit "
        "and the CLI line on a standalone master and worker against moto_server (test_readme_cluster_job, "
        "test_readme_cluster_cli)",
}
# README sections run by a test of this file of their own (not by the runners of every block).
RUN_HERE = {("README.md", "Restore to 10:00 from the archive"): "test_serve_restore_recipe"}
# Console commands that are not gtidx's, and the test of this file that runs each.
RUN_BY = {"mariadb-binlog": "test_point_in_time_restore_replays_exactly_the_range",
          "sudo": "test_service_recipe", "curl": "test_service_recipe"}


def page_blocks(page: Path) -> list[tuple[str, str, str, int]]:
    """(section, language, body, line) for every fenced block of ``page``;
    the section is the title of the nearest heading above it (levels 1-3)."""
    text = page.read_text()
    fences = list(FENCE.finditer(text))
    headings = [h for h in HEADING.finditer(text) if not any(f.start() < h.start() < f.end() for f in fences)]
    out = []
    for m in fences:
        section = [h.group(1) for h in headings if h.start() < m.start()][-1]
        out.append((section, m.group(1), m.group(2), text.count("\n", 0, m.start()) + 2))
    return out


def readme_blocks() -> list[tuple[str, str, str, int]]:
    """(section, language, body, line) for every fenced block of README.md."""
    return page_blocks(README)


def blocks(lang: str, *, section: str | None = None, spark: bool | None = None, pages=RUN_PAGES):
    """(where, body, line) of the blocks of ``lang`` these tests run."""
    found = []
    for page in pages:
        for s, lng, body, line in page_blocks(page):
            if lng == lang and (page.name, s) not in RUN_ELSEWHERE and (page.name, s) not in RUN_HERE \
                    and (section is None or s == section) \
                    and (spark is None or spark == ("gtidx spark" in body or "from gtidx import spark" in body)):
                found.append((f"{page.relative_to(ROOT)}:{line}", body, line))
    return found


@pytest.fixture
def demo(tmp_path):
    """A copy of the bundled binlogs and the docs' paths mapped onto it."""
    return make_demo(tmp_path)


def make_demo(base: Path):
    d = base / "binlog"
    shutil.copytree(DEMO, d)
    shutil.copytree(FIXTURES / "mysql-9.7" / "rotated", base / "mysql-binlogs")     # MySQL binlogs
    (base / "wanted.csv").write_text("gtid\n0-2-432\n1-1-420\n9-9-9\n0-2-432,1-1-420,2-1-400,5-1-301,6-1-12\n")
    paths = {"/var/lib/mysql/binlog": str(d), "/var/lib/mysql-binlogs": str(base / "mysql-binlogs"),
             "/tmp/gtidx-demo": str(d), "/data/binlogs": str(d),
             "wanted.parquet": str(base / "wanted.parquet"), "wanted.csv": str(base / "wanted.csv"),
             "found.parquet": str(base / "found.parquet"), '"local[*]"': '"local[2]"'}
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
    for page in RUN_PAGES:
        for section, lang, body, line in page_blocks(page):
            where = f"{page.relative_to(ROOT)}:{line}"
            if (page.name, section) in RUN_ELSEWHERE:
                continue
            if (page.name, section) in RUN_HERE:
                assert callable(globals().get(RUN_HERE[page.name, section])), f"{where}: its test is missing"
                continue
            assert lang in RUNNABLE | {"text"}, f"{where}: a ```{lang} block that no test runs"
            if lang == "sh":        # sh blocks outside the Quickstart: the Spark commands (test_spark_commands)
                assert all(x.startswith("gtidx spark ") for x in body.splitlines() if x.strip()), \
                    f"{where}: a ```sh block that no test runs"
            if lang == "console":   # gtidx's commands, or one a named test here runs
                for cmd, _ in console_commands(body):
                    tool = shlex.split(cmd)[0]
                    assert tool == "gtidx" or tool in RUN_BY, f"{where}: {cmd}: no test runs it"
    for tool, test in RUN_BY.items():
        assert callable(globals().get(test)), f"{tool}: {test} is missing"
    for page in sorted(DOCS.glob("*.md")):
        if page not in RUN_PAGES:
            assert not [line for _, lang, _, line in page_blocks(page) if lang in RUNNABLE], \
                f"docs/{page.name} has examples that no test runs: add it to RUN_PAGES"
    assert blocks("python", spark=False) and blocks("python", spark=True) and blocks("pycon")
    assert blocks("console") and blocks("sh", spark=True)
    sections = {s for s, *_ in readme_blocks()}
    assert {s for p, s in RUN_ELSEWHERE if p == "README.md"} <= sections, "RUN_ELSEWHERE names a moved section"
    assert {s for p, s in RUN_HERE if p == "README.md"} <= sections, "RUN_HERE names a moved section"


def test_readme_is_a_tour():
    """The README stays short: what gtidx is, the Quickstart, the recipes;
    the reference is in docs/, linked from it."""
    text = README.read_text()
    assert len(text.splitlines()) < README_MAX_LINES
    for page in ("cli", "library", "spark", "correctness", "robustness", "benchmarks", "development"):
        assert f"(docs/{page}.md" in text, page
    assert "MariaDB and MySQL" in text.split("## Quickstart")[0]


def test_links_resolve():
    """Every relative link of the README and docs/ names a file that exists,
    and its #anchor a heading there (GitHub's slugs)."""
    def slugs(page: Path) -> set[str]:
        out = set()
        for title in HEADING.findall(page.read_text()) + re.findall(r"^#### (.+)$", page.read_text(), re.M):
            out.add(re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-"))
        return out
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        text = FENCE.sub("", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
            if anchor:
                assert anchor in slugs(dest), f"{page.relative_to(ROOT)}: link to {target}: no such heading"


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
    for p in (ROOT / "gtidx").rglob("*.py"):
        tree = ast.parse(p.read_text())
        texts += [ast.get_docstring(n) or "" for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    return {m for t in texts for m in re.findall(r"(?<![\w.])gtidx\.([A-Za-z_]\w*)", t)}


def test_documented_names_resolve():
    import gtidx
    names = documented_names()
    assert {"open", "build", "state_at", "Gtid", "Position", "BinlogState", "GtidxError"} <= names
    for name in sorted(names):
        if name == "changes":                                 # format("gtidx.changes"): a Spark data source's name
            from gtidx.spark.changes import ChangesDataSource
            assert ChangesDataSource.name() == "gtidx.changes"
            continue
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
    for p in sorted((ROOT / "gtidx").rglob("*.py")):
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
    assert "gtidx.api" not in r.stdout and "gtidx.index.files" not in r.stdout, r.stdout


# -- python blocks -------------------------------------------------------------------------

def run_python(body: str, where: str, paths: dict) -> None:
    code = compile(substitute(body, paths), where, "exec")
    exec(code, {"__name__": "__readme__"})


def test_library_examples(demo, monkeypatch, capsys):
    d, paths = demo
    monkeypatch.chdir(ROOT)                     # every example runs from the repo root: full paths only
    for where, body, _ in blocks("python", spark=False):
        run_python(body, where, paths)
    out = capsys.readouterr().out
    assert "0-2-432,1-2-453,2-2-419,5-1-301,6-1-12" in out       # state_at's position, as `gtidx pos` says
    assert len(list(d.glob("*.idx"))) == 5                       # gtidx.build indexed every file


# The row-changes example's table and row, as the demo binlogs have them: fx.t_inno (positional
# columns), its row @1=3395 updated by 0-1-448 and 0-2-431 in the example's time range and
# inserted by 0-2-381 before it.
CHANGES_EXAMPLE = {"shop.customers": "fx.t_inno", "['id']": "['@1']", "'42'": "'3395'"}


def test_spark_examples(spark, demo, capsys):
    """The Spark examples, in this process: their ``gs.session(...)`` gets the
    tests' shared session (conftest's ``spark``)."""
    d, paths = demo
    paths = {**paths, **CHANGES_EXAMPLE}
    import pandas as pd
    pd.DataFrame({"gtid": ["0-2-432", "1-1-420", "9-9-9"]}).to_parquet(paths["wanted.parquet"])
    for where, body, _ in blocks("python", spark=True):
        run_python(body, where, paths)
    assert len(list(d.glob("*.idx"))) == 5                       # gs.build indexed every file
    hits = [ln for ln in capsys.readouterr().out.splitlines() if "master-bin." in ln]
    assert [ln.split("|")[1].strip() for ln in hits] == ["0-2-431", "0-1-448"], hits   # the row's two updates


def test_spark_commands(spark, demo):
    """docs/spark.md's sh block, through the CLI in this process (the tests'
    shared session is reused: a JVM start per command would double the time)."""
    from click.testing import CliRunner

    from gtidx.cli import cli
    d, paths = demo
    ran = 0
    for where, body, _ in blocks("sh", spark=True):
        for cmd in filter(str.strip, body.splitlines()):
            argv = gtidx_cmd(substitute(cmd, paths))[3:]
            r = CliRunner().invoke(cli, argv)
            assert r.exit_code == 0, f"{where}: {cmd}: {r.output[-2000:]}"
            ran += 1
    assert ran == 2 and len(list(d.glob("*.idx"))) == 5
    assert (d.parent / "found.parquet").is_dir()


# -- console blocks: `$ gtidx ...` lines, their exit code, and the output shown ----------------

def console_commands(body: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown after it) of a console block."""
    out = []
    for ln in body.splitlines():
        if ln.startswith("$ "):
            out.append((ln[2:], []))
        elif out and ln.strip():
            out[-1][1].append(ln)
    return out


def shown_matches(shown: str, got: str) -> bool:
    """A line of output as the docs show it: literal, where ``...`` stands for
    what changes from run to run (a duration)."""
    return re.fullmatch(".*?".join(map(re.escape, shown.split("..."))), got) is not None


def test_console_examples(tmp_path):
    """Each console block on a fresh copy of the demo binlogs (a recipe holds
    every step it needs): every gtidx command exits 0 and prints the output
    shown, line for line; a command shown without output is only run."""
    ran = 0
    for n, (where, body, _) in enumerate(blocks("console")):
        d, paths = make_demo(tmp_path / str(n))
        background = []
        try:
            for shown_cmd, shown in console_commands(body):
                cmd = substitute(shown_cmd, paths)
                if shlex.split(cmd)[0] in RUN_BY:
                    continue                                # run by its own test (RUN_BY)
                if cmd.endswith("&"):                       # gtidx tail DIR &: runs until SIGTERM
                    p = subprocess.Popen(gtidx_cmd(cmd[:-1]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=env(), cwd=d.parent)
                    background.append((cmd, p))
                    wait_for_line(p, "event=start", cmd)
                    continue
                r = subprocess.run(gtidx_cmd(cmd), capture_output=True, text=True, env=env(), cwd=d.parent)
                assert r.returncode == 0, f"{where}: {cmd}: exit {r.returncode}: {r.stderr}"
                if shown:
                    want = [substitute(s, paths) for s in shown]
                    got = r.stdout.splitlines()
                    assert len(got) == len(want) and all(map(shown_matches, want, got)), \
                        f"{where}: {cmd}:\n" + "\n".join(got)
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
    assert ran >= 15


def test_python_recipe(demo):
    """The README's pycon block is a doctest: each statement runs and prints
    exactly what is shown (the paths mapped onto the demo binlogs)."""
    d, paths = demo
    (where, body, line), = blocks("pycon")
    test = doctest.DocTestParser().get_doctest(substitute(body, paths), {}, where, str(README), line)
    out = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test, out=out.append)
    assert result.attempted >= 8 and result.failed == 0, "".join(out)


# -- the point-in-time recipe, through mariadb-binlog ------------------------------------------

def _pitr_recipe(paths: dict) -> tuple[list[str], list[str]]:
    """(the recipe's `gtidx seek` commands, the argv of its mariadb-binlog command)."""
    (where, body, _), = blocks("console", section="Restore to a point in time")
    cmds = [substitute(c, paths) for c, _ in console_commands(body)]
    seeks = [c for c in cmds if c.startswith("gtidx seek ")]
    (replay,) = [c for c in cmds if c.startswith("mariadb-binlog ")]
    left, sink = replay.split(" | ")
    assert sink == "mariadb", replay                  # the output goes to the server being restored
    return seeks, shlex.split(left)


def _replayed(argv: list[str]) -> list[str]:
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return re.findall(r"^#\d{6} .*\tGTID (\d+-\d+-\d+)", r.stdout, re.M)


def test_point_in_time_restore_replays_exactly_the_range(demo):
    """The recipe's mariadb-binlog line, run over the demo binlogs (Debian's
    mariadb-binlog 10.11): the groups it prints are exactly those after the
    backup's position (per domain) and before the stop point `seek --time`
    gives, in binlog order; its files and stop offset are what the recipe's
    two `gtidx seek` answers say. Starting from a byte offset instead would
    replay groups the backup already has (the recipe says why it does not)."""
    if shutil.which("mariadb-binlog") is None:
        pytest.fail("mariadb-binlog is not installed: Debian's mariadb-client (tools/test installs it)", pytrace=False)
    import json

    from gtidx import api
    from gtidx.gtid import Position
    d, paths = demo
    seeks, argv = _pitr_recipe(paths)
    answers = {}
    for cmd in seeks:
        r = subprocess.run(gtidx_cmd(cmd) + ["--json"], capture_output=True, text=True, env=env())
        assert r.returncode == 0, r.stderr
        answers["time" if "--time" in cmd else "replica"] = json.loads(r.stdout)
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--"))
    files = [a for a in argv[1:] if not a.startswith("--")]
    series = api.list_binlogs(str(d))
    first, last = series.index(answers["replica"]["file"]), series.index(answers["time"]["file"])
    assert files == series[first:last + 1], files     # every binlog from the first to the last, in order
    assert int(opts["stop-position"]) == answers["time"]["offset"]
    backup = Position.parse(opts["start-position"])
    assert str(backup) == answers["replica"]["position"]

    # the oracle: every group from the first file to the stop point, less what the backup holds
    have = {g.domain: g.seq for g in backup}
    want = []
    for f in files:
        for g in api.scan(f)[1]:
            if f == files[-1] and g.start >= int(opts["stop-position"]):
                break
            if g.gtid.seq > have.get(g.gtid.domain, -1):
                want.append(str(g.gtid))
    got = _replayed(argv)
    assert got == want and len(got) > 100, (len(got), len(want))
    assert answers["replica"]["first"]["gtid"] == want[0] and answers["time"]["gtid"] not in got

    # a byte start (the first group sent) replays groups the backup holds: the skips are interleaved
    by_bytes = [a if not a.startswith("--start-position=") else f"--start-position={answers['replica']['first']['start']}"
                for a in argv]
    extra = [g for g in _replayed(by_bytes) if g not in want]
    assert extra and all(int(g.split("-")[2]) <= have[int(g.split("-")[0])] for g in extra), extra


def wait_for_line(p: subprocess.Popen, needle: str, cmd: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        ln = p.stderr.readline()
        if not ln and p.poll() is not None:
            break
        seen.append(ln)
        if needle in ln:
            return ln
    raise AssertionError(f"{cmd}: no {needle!r} line: {''.join(seen)[-2000:]}")


# -- docs/cli.md against each command's --help ----------------------------------------------------

def cli_commands():
    """(name path, --help text) of gtidx and every command under it, groups included."""
    import click
    from click.testing import CliRunner

    from gtidx.cli import cli
    out = []

    def walk(cmd, path):
        r = CliRunner().invoke(cli, [*path, "--help"])
        assert r.exit_code == 0, r.output
        out.append((path, r.output))
        if isinstance(cmd, click.Group):
            for name, sub in sorted(cmd.commands.items()):
                walk(sub, [*path, name])
    walk(cli, [])
    return out


def help_options(text: str) -> set[str]:
    """The long option names --help lists (its own --help left out)."""
    opts = re.split(r"\n(?:Commands|Examples):\n", text.split("\nOptions:\n", 1)[1])[0]
    return set(re.findall(r"^ {2}(?:-\w, )?(--[a-z][\w-]*)", opts, re.M)) - {"--help"}


def cli_doc_sections() -> dict[str, str]:
    """docs/cli.md's text under each "## `gtidx ...`" heading, by command."""
    parts = re.split(r"^## (.+)$", (DOCS / "cli.md").read_text(), flags=re.M)
    return {m.group(1): body for title, body in zip(parts[1::2], parts[2::2])
            if (m := re.fullmatch(r"`(gtidx(?: [a-z]+)*)`", title))}


def test_cli_doc_holds_every_option_of_every_command():
    """docs/cli.md cannot drift from the CLI: each command has its heading,
    every option its --help lists is named there (`--opt`), and every option
    a list item there names is one the command has."""
    sections = cli_doc_sections()
    seen = set()
    for path, text in cli_commands():
        name = " ".join(["gtidx", *path])
        opts = help_options(text)
        if "\nCommands:\n" in text and not opts and path:
            continue                                        # a group (catalog, spark): its commands have headings
        assert name in sections, f"docs/cli.md has no heading ## `{name}`"
        body = sections[name]
        seen.add(name)
        missing = {o for o in opts if not re.search(rf"`{re.escape(o)}(?![\w-])", body)}
        assert not missing, f"docs/cli.md, {name}: options not documented: {sorted(missing)}"
        listed = {o for item in re.findall(r"^- ((?:`[^`]+`(?:, )?)+)", body, re.M)
                  for o in re.findall(r"`(--[a-z][\w-]*)", item)}
        assert listed <= opts, f"docs/cli.md, {name}: options {name} does not have: {sorted(listed - opts)}"
    assert set(sections) == seen, f"docs/cli.md: headings of no command: {sorted(set(sections) - seen)}"


def test_service_recipe(demo, tmp_path):
    """The service recipe, as far as a test may go without root and a
    running systemd: the useradd and chmod lines are the layout the unit
    expects (its User= and Group=); the file copied is the unit; the
    instance is the directory as systemd-escape --path names it, and
    systemd's %f gives it back; then the unit's ExecStart runs as systemd
    would run it (its Environment= defaults, the port a free one), and the
    curl lines' requests are made, their output compared with the shown one."""
    d, paths = demo
    (where, body, _), = blocks("console", section="Run the sidecar as a service")
    cmds = [(substitute(c, paths), shown) for c, shown in console_commands(body)]
    assert [shlex.split(c)[:2] for c, _ in cmds] == [["sudo", "useradd"], ["sudo", "chmod"], ["sudo", "cp"],
                                                    ["sudo", "systemctl"], ["curl", "-s"], ["curl", "-s"]], where
    unit_src = ROOT / shlex.split(cmds[2][0])[2]
    unit = unit_src.read_text()
    assert "--gid mysql gtidx" in cmds[0][0] and "User=gtidx" in unit and "Group=mysql" in unit
    assert shlex.split(cmds[1][0])[2:] == ["g+w", str(d)]
    m = re.search(r'"gtidx-tail@\$\(systemd-escape --path (\S+)\)\.service"', cmds[3][0])
    escaped = subprocess.run(["systemd-escape", "--path", m.group(1)], capture_output=True, text=True,
                             check=True).stdout.strip()
    back = subprocess.run(["systemd-escape", "--unescape", "--path", escaped], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert back == str(d) and unit_src.name == "gtidx-tail@.service"
    environment = dict(kv.split("=", 1) for kv in re.search(r"^Environment=(.*)$", unit, re.M).group(1).split())
    port = int(environment["GTIDX_METRICS"].rsplit(":", 1)[1])
    environment["GTIDX_METRICS"] = "127.0.0.1:0"
    exec_start = re.search(r"^ExecStart=(\S+) (.*)$", unit, re.M).group(2).replace("%f", back)
    argv = [a for a in re.sub(r"\$\{(\w+)\}", lambda x: environment[x.group(1)], exec_start).split()]
    p = subprocess.Popen([sys.executable, "-m", "gtidx", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env(), cwd=tmp_path)
    try:
        listening = wait_for_line(p, "event=metrics", "the unit's ExecStart")
        served = re.search(r"listen=127\.0\.0\.1:(\d+)", listening).group(1)
        wait_for_line(p, "event=start", "the unit's ExecStart")
        deadline = time.monotonic() + 30                  # its first look indexes the five binlogs
        while len(list(d.glob("*.idx"))) < 5:
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.02)
        import urllib.request
        for cmd, shown in cmds[4:]:
            url, _, grep = cmd.partition(" | grep ")
            url = shlex.split(url)[2].replace(f":{port}/", f":{served}/")
            out = urllib.request.urlopen("http://" + url, timeout=10).read().decode().splitlines()
            if grep:
                pattern = shlex.split(grep)[0]
                out = [ln for ln in out if re.search(pattern, ln)]
            want = [substitute(s, paths) for s in shown]
            assert len(out) == len(want) and all(map(shown_matches, want, out)), f"{where}: {cmd}:\n" + "\n".join(out)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            assert p.wait(timeout=30) == 0
        finally:
            p.kill()


def test_sidecar_files_mode(demo):
    """What the sidecar recipe says of the files it writes: owned by the user
    gtidx runs as, mode 0644 less its umask (0640 under umask 027), and no
    temporary file left."""
    d, _ = demo
    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        for f in d.glob("*.idx"):
            f.unlink()
        r = subprocess.run(gtidx_cmd(f"gtidx tail --once {d}"), capture_output=True, text=True, env=env(),
                           preexec_fn=lambda u=umask: os.umask(u))
        assert r.returncode == 0, r.stderr
        made = sorted(d.glob("*.idx"))
        assert len(made) == 5 and not list(d.glob(".*.tmp"))
        for f in made:
            st = f.stat()
            assert (st.st_mode & 0o777, st.st_uid) == (mode, os.getuid()), (f, oct(st.st_mode))


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
    for p in (ROOT / "gtidx").rglob("*.py"):
        for n in ast.walk(ast.parse(p.read_text())):
            names = ([a.name for a in n.names] if isinstance(n, ast.Import)
                     else [n.module] if isinstance(n, ast.ImportFrom) and n.level == 0 else [])
            for top in {x.split(".")[0] for x in names} - set(sys.stdlib_module_names) - {"gtidx"}:
                imported.setdefault(top, set()).add(p.relative_to(ROOT / "gtidx").as_posix())
    # optional: the spark package's (its data sources) under the spark extra, storage.py's
    # (object stores, imported for URLs only) under s3, cli/changes.py's, rowbatch.py's and rowarrow.py's
    # (gtidx changes --parquet and row changes as Arrow batches: pyarrow) under parquet (the
    # spark extra has pyarrow too); a module imported by several is in each one's extra
    s3_extra = {module(r) for r in project["optional-dependencies"]["s3"]}
    parquet_extra = {module(r) for r in project["optional-dependencies"]["parquet"]}
    spark_files = {p.relative_to(ROOT / "gtidx").as_posix() for p in (ROOT / "gtidx" / "spark").rglob("*.py")}
    assert "spark/changes.py" in spark_files
    extra_of = {**{f: spark_extra for f in spark_files}, "storage.py": s3_extra, "cli/changes.py": parquet_extra,
                "rowbatch.py": parquet_extra, "rowarrow.py": parquet_extra}
    runtime = {m for m, where in imported.items() if not where <= set(extra_of)}
    assert runtime == declared, f"imported outside gtidx/spark, storage.py, cli/changes.py, rowbatch.py and " \
                                f"rowarrow.py: {runtime}; " \
                                f"declared: {declared}"
    for m, where in imported.items():
        if where <= set(extra_of):
            assert all(m in extra_of[f] for f in where), f"{m}, imported by {sorted(where)}: not in their extras"


# -- the restore through gtidx serve, from an archive on moto_server ---------------------------

def _source_history(source, db: str) -> dict:
    """The recipe's history on a fresh private source: a database and a
    table (0-1-1, 0-1-2, at 09:57:00), then one group every 5 s of binlog time from
    2026-11-22 09:58:00 UTC (SET TIMESTAMP): 0-1-3 at 09:58:00, ...,
    0-1-27 the first at 10:00:00. {"backup": the tables at 0-1-20,
    "checksum": CHECKSUM TABLE at 0-1-26}."""
    import datetime
    base = datetime.datetime(2026, 11, 22, 9, 58, tzinfo=datetime.timezone.utc).timestamp()
    conn = source.connect()
    out = {}
    try:
        with conn.cursor() as cur:
            cur.execute("SET TIMESTAMP = %s", (base - 60,))
            cur.execute(f"CREATE DATABASE {db}")
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(40), n INT) ENGINE=InnoDB")
            for i in range(40):
                cur.execute("SET TIMESTAMP = %s", (base + 5 * i,))
                if i % 4 == 3:
                    cur.execute(f"UPDATE {db}.t SET n = n + 1 WHERE id %% 3 = %s", (i % 3,))
                else:
                    cur.execute(f"INSERT INTO {db}.t VALUES (%s, %s, %s)", (i, f"row {i}", i * 7))
                seq = i + 3
                if seq == 20:
                    cur.execute(f"SHOW CREATE TABLE {db}.t")
                    create = cur.fetchone()[1]
                    cur.execute(f"SELECT * FROM {db}.t")
                    out["backup"] = (create, cur.fetchall())
                if seq == 26:
                    cur.execute(f"CHECKSUM TABLE {db}.t")
                    out["checksum"] = cur.fetchone()[1]
            cur.execute("SET TIMESTAMP = DEFAULT")
            cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
    return out


def test_serve_restore_recipe(tmp_path, replica):
    """The README's restore from the archive, its commands run by bash as
    written: the archive a private MariaDB 10.11 source's binlogs (its
    history: ``_source_history``) uploaded to moto_server under the
    recipe's URL (the AWS_* variables point there), the restored server a
    private 10.11 replica (servehelp's) holding the backup at 0-1-20, its
    `mariadb` client that replica's, `gtidx serve` on a free port.
    `seek --time` answers the recipe's position; the replica stops exactly
    there (gtid_slave_pos, CHECKSUM TABLE the source's at 0-1-26) and shows
    what the recipe says it shows."""
    from servehelp import restore_backup, slave_status
    from tools.mariadb import MariaDB, _free_port
    from tools.s3server import AWS_ENV, MotoServer
    (where, body, _), = [(s, b, ln) for s, lang, b, ln in readme_blocks() if s == "Restore to 10:00 from the archive"]
    db = "gtidxserve_readme"            # the replica replicates gtidxserve%.% only
    source = MariaDB(tmp_path / "source", {"server_id": "1"})
    source.start()
    moto = shell = None
    try:
        history = _source_history(source, db)
        moto = MotoServer(tmp_path)
        client = moto.bucket("backups")
        for f in sorted((source.binlog_dir).glob("master-bin.0*"))[:-1]:
            client.put_object(Bucket="backups", Key=f"db1/binlogs/{f.name}", Body=f.read_bytes())
        restore_backup(replica, db, {"tables": {"t": history["backup"]}})
        replica.sql("RESET SLAVE ALL")
        (tmp_path / "repl.pw").write_text("s3cret\n")
        port = _free_port()
        script = body.replace("MASTER_PORT=3307", f"MASTER_PORT={port}")
        script = script.replace("--password-file repl.pw &", f"--password-file repl.pw --port {port} > /dev/null "
                                f"2> serve.log & listening {port}")
        prelude = (f'gtidx() {{ "{sys.executable}" -m gtidx "$@"; }}\n'
                   f'mariadb() {{ command mariadb --socket={replica.socket} -uroot "$@"; }}\n'
                   "listening() { until (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null; do sleep 0.05; done; }\n"
                   "set -e\n")
        aws = {**{k: v for k, v in env().items() if k not in AWS_ENV}, "AWS_ENDPOINT_URL": moto.url,
               **{k: v for k, v in AWS_ENV.items() if v}}      # AWS_PROFILE, AWS_SESSION_TOKEN: unset
        # its own session: the background gtidx serve (a child of a subshell) is ended with it, below
        shell = subprocess.Popen(["bash", "-c", prelude + script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, cwd=tmp_path, env=aws, start_new_session=True)
        try:
            out, err = shell.communicate(timeout=60)
            r = subprocess.CompletedProcess(shell.args, shell.returncode, out, err)
        except subprocess.TimeoutExpired:
            status = slave_status(replica)
            pytest.fail(f"the replica did not reach 0-1-26: {status}, {replica.sql('SELECT @@gtid_slave_pos')}; "
                        f"gtidx serve said: {(tmp_path / 'serve.log').read_text()[-2000:]}", pytrace=False)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert " position 0-1-26 " in r.stdout.splitlines()[0] + " ", r.stdout
        assert r.stdout.splitlines()[-1].strip() == "0", r.stdout           # MASTER_GTID_WAIT: there
        assert replica.sql("SELECT @@gtid_slave_pos")[0][0] == "0-1-26"
        assert replica.sql(f"CHECKSUM TABLE {db}.t")[0][1] == history["checksum"]
        status = slave_status(replica)
        assert status["Until_Condition"] == "Gtid" and status["Slave_SQL_Running"] == "No", status
        assert status["Last_SQL_Errno"] == 0, status
    finally:
        if shell is not None:
            try:
                os.killpg(shell.pid, signal.SIGTERM)       # the session the test started: bash and gtidx serve
            except ProcessLookupError:
                pass
            shell.wait(30)
        replica.sql("STOP SLAVE")
        replica.sql("RESET SLAVE ALL")
        replica.sql(f"DROP DATABASE IF EXISTS {db}")
        if moto is not None:
            moto.stop()
        source.stop()
