"""The ``gtidx`` command line: parse arguments, call one api function, format.

Exit codes: 0 found/ok, 1 not found, 2 bad input or usage, 3 corrupt data or
I/O error. Errors are one line on stderr, never a traceback (set GTIDX_DEBUG=1
to see one). Imports of the library are lazy: ``gtidx --help`` and a lookup
should not pay for what they do not use.
"""
from __future__ import annotations

import json
import os
import sys

import click

from .errors import EXIT_CORRUPT, GtidxError


class Offset(click.ParamType):
    """A binlog offset: decimal or 0x-prefixed hex, >= 0."""

    name = "offset"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            n = int(value, 0)
        except ValueError:
            self.fail(f"{value!r} is not an offset (decimal, or hex like 0x11d)", param, ctx)
        if n < 0:
            self.fail(f"{value} is negative", param, ctx)
        return n


class _ReaderGone(Exception):
    """stdout's reader went away (`gtidx scan big | head`). Not an OSError on
    purpose: click turns EPIPE into exit code 1, which here means "not found"."""


class _Output:
    """stdout for streamed results; a closed pipe becomes _ReaderGone."""

    def __enter__(self):
        return sys.stdout

    def __exit__(self, etype, exc, tb):
        if etype is not None and issubclass(etype, BrokenPipeError):
            raise _ReaderGone() from None
        return False


def _emit_json(obj) -> None:
    with _Output() as out:
        out.write(json.dumps(obj) + "\n")


class GtidxGroup(click.Group):
    """Turns every failure into one line on stderr and an exit code, for the
    console script and click's CliRunner alike."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GtidxError as e:
            click.echo(f"gtidx: {e}", err=True)
            ctx.exit(e.exit_code)
        except _ReaderGone:
            # `gtidx scan big | head`: the reader left. Quiet, with the exit
            # code a shell reports for SIGPIPE; stdout is pointed at /dev/null
            # so the interpreter's final flush does not complain either.
            sys.stdout = open(os.devnull, "w")
            ctx.exit(141)
        except KeyboardInterrupt:
            click.echo("gtidx: interrupted", err=True)
            ctx.exit(130)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as e:  # a bug: still one line for the user
            if os.environ.get("GTIDX_DEBUG"):
                raise
            click.echo(f"gtidx: internal error: {type(e).__name__}: {e} "
                       "(set GTIDX_DEBUG=1 for a traceback, and please report it)", err=True)
            ctx.exit(EXIT_CORRUPT)


@click.group(cls=GtidxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gtidx")
def cli():
    """gtidx: find GTIDs and GTID states in MariaDB binlogs, fast, without a server."""


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object: {file, groups: [{gtid, start, end, ...}]}.")
def scan(file, as_json):
    """List the event groups of FILE: GTID, start offset, end offset."""
    from . import api
    info, groups = api.scan(file)
    with _Output() as out:
        _write_groups(out, info, groups, as_json)


def _write_groups(out, info, groups, as_json) -> None:
    if as_json:
        # Streamed: a 1 GiB binlog has millions of groups.
        head = {"file": info.file, "size": info.size, "server_version": info.server_version,
                "checksum": info.checksum, "growing": info.growing,
                "start_state": str(info.start_state)}
        out.write(json.dumps(head)[:-1] + ', "groups": [')
        sep = ""
        n = 0
        for g in groups:
            out.write(f'{sep}{{"gtid": "{g.gtid}", "start": {g.start}, "end": {g.end}, '
                      f'"timestamp": {g.timestamp}, "flags2": {g.flags2}}}')
            sep = ", "
            n += 1
        out.write(f'], "count": {n}}}\n')
        return
    out.write(f"# {info.file}: {info.server_version}, checksum {info.checksum}"
              f"{', still being written' if info.growing else ''}\n"
              f"# start state: {info.start_state or '(empty)'}\n")
    out.write(f"{'GTID':<24} {'START':>12} {'END':>12}\n")
    n = 0
    for g in groups:
        out.write(f"{str(g.gtid):<24} {g.start:>12} {g.end:>12}\n")
        n += 1
    out.write(f"# {n} groups\n")


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("offset", type=Offset())
@click.option("--json", "as_json", is_flag=True, help="One JSON object: {file, offset, position, state, via}.")
def pos(file, offset, as_json):
    """The GTID position at OFFSET of FILE, as BINLOG_GTID_POS(FILE, OFFSET) prints it."""
    from . import api
    r = api.state_at(file, offset)
    if as_json:
        _emit_json({"file": r.file, "offset": r.offset, "position": str(r.position),
                    "state": str(r.state), "via": r.via})
    else:
        with _Output() as out:
            out.write(f"{r.position}\n")


def main(argv=None) -> None:
    """Console entry point."""
    cli.main(args=argv, prog_name="gtidx")
