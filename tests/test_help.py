"""The help texts: every command says what it is for, shows 1-3 real
invocations under "Examples:", and describes every option."""
from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from gtidx.cli import COMMANDS, cli


def commands():
    """(path, command) for every command and subcommand, built as --help builds them."""
    ctx = click.Context(cli)
    out = []
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        out.append(((name,), cmd))
        if isinstance(cmd, click.Group):
            out += [((name, sub), cmd.commands[sub]) for sub in cmd.commands]
    return out


def test_the_group_help_names_both_flavors():
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0 and "MariaDB" in r.output and "MySQL" in r.output


@pytest.mark.parametrize("path,cmd", commands(), ids=lambda x: " ".join(x) if isinstance(x, tuple) else "cmd")
def test_every_command_shows_examples_that_parse(path, cmd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, [*path, "--help"])
    assert r.exit_code == 0, r.output
    assert "Examples:" in r.output, path
    lines = [x.strip() for x in cmd.epilog.split("Examples:")[1].splitlines() if x.strip()]
    assert 1 <= len(lines) <= 3, lines
    for line in lines:
        words = shlex.split(line.split("  (")[0])       # "  (a note)" after an example
        words = [w for w in words[:words.index("|")]] if "|" in words else words
        assert words[0] == "gtidx" and tuple(words[1:1 + len(path)]) == path, line
        for w in words:          # an input file an option opens (pos --from FILE)
            if w.endswith(".txt") and "/" not in w:
                (tmp_path / w).write_text("")
        # click parses the example's arguments as the command would (options, counts, offsets)
        cmd.make_context(" ".join(path), words[1 + len(path):], resilient_parsing=False)


@pytest.mark.parametrize("path,cmd", commands(), ids=lambda x: " ".join(x) if isinstance(x, tuple) else "cmd")
def test_every_option_is_described(path, cmd):
    for p in cmd.params:
        if isinstance(p, click.Option) and p.name != "help":
            assert p.help, f"gtidx {' '.join(path)} {p.opts[0]} has no description"


def test_spark_locate_help_lists_every_output_column():
    pytest.importorskip("pyspark", reason="the spark extra: pip install -e '.[spark]'")
    from gtidx.spark import LOCATE_SCHEMA
    ctx = click.Context(cli)
    doc = " ".join(cli.get_command(ctx, "spark").commands["locate"].help.split())
    listed = doc.split("write ", 1)[1].split(" to --out")[0]
    assert [x.strip() for x in listed.split(",")] == LOCATE_SCHEMA.names
