"""The ``gtidx`` command group, its command table and the console entry point.

Exit codes: 0 found/ok, 1 not found, 2 bad input or usage, 3 corrupt data or
I/O error. Errors are one line on stderr, never a traceback (set GTIDX_DEBUG=1
to see one). With ``--json`` a failure also prints ``{"error": {"message",
"path", "offset", "hint", "exit_code"}}`` on stdout (``output``). A missing
path is an I/O error (3) for every command, said by the library, not by
click. The commands' modules are imported lazily: ``COMMANDS`` names where
each is defined (``lookup``: seek; ``offsets``: pos, probe; ``commands``: scan,
show, build, verify, info, dump; ``changes``: changes; ``sidecar``: tail, status;
``archive``: catalog, spark; ``serve``: serve), and a command is built, its options made, only
when it runs or a help text lists it, so that ``gtidx --help`` and a lookup do
not pay for the rest.
"""
from __future__ import annotations

import gc
import os

import click

from .. import liblog
from ..errors import EXIT_CORRUPT, GtidxError
from .output import (JSON, STDOUT_DONE, OutputFailed, ReaderGone, emit_json, error_json, json_usage_error, say,
                     say_gathered_warnings, silence_stdout, wants_json, warning_lines)

# The command table, its one owner: {name: (module in gtidx.cli, its attribute)}.
# The module is imported when the command runs or a help text lists it
# (click's LazyGroup pattern).
COMMANDS = {
    "build": ("commands", "build"), "catalog": ("archive", "catalog"), "changes": ("changes", "changes"),
    "dump": ("commands", "dump"), "info": ("commands", "info"), "pos": ("offsets", "pos"),
    "probe": ("offsets", "probe"), "scan": ("commands", "scan"), "seek": ("lookup", "seek"),
    "serve": ("serve", "serve"),
    "show": ("commands", "show_group"), "spark": ("archive", "spark"),
    "status": ("sidecar", "status"), "tail": ("sidecar", "tail"), "verify": ("commands", "verify"),
}


class GtidxGroup(click.Group):
    """Turns every failure into one line on stderr and an exit code, for the
    console script and click's CliRunner alike; with --json, also into a JSON
    error object on stdout (click's usage errors too). Its commands are
    ``COMMANDS``, each imported on first use."""

    def list_commands(self, ctx) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name]
            module = __import__(f"{__package__}.{module}", fromlist=[attribute])
            self.add_command(getattr(module, attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in COMMANDS:
            for name in COMMANDS:       # an unknown name: click's "Did you mean" looks among them all
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def make_context(self, info_name, args, parent=None, **extra):
        as_json = wants_json(args)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except click.UsageError as e:
            if as_json:
                json_usage_error(e)
            raise
        ctx.meta[JSON] = as_json
        return ctx

    def invoke(self, ctx):
        # Library warnings become "gtidx: warning: ..." lines for this command
        # only: the logger is process-wide state (tests run many commands). The
        # handler goes on when the library first uses its logger (liblog: a
        # command with nothing to warn about never imports logging).
        undo_warning_lines = liblog.on_use(warning_lines)
        try:
            return super().invoke(ctx)
        except OutputFailed as e:
            # `> /dev/full`, a closed stdout: say so on stderr, nothing more on stdout.
            silence_stdout()
            say(f"gtidx: {e}")
            ctx.exit(e.exit_code)
        except ReaderGone:
            # `gtidx scan big | head`: the reader left. Quiet, with the exit
            # code a shell reports for SIGPIPE; stdout is pointed at /dev/null
            # so the interpreter's final flush does not complain either.
            silence_stdout()
            ctx.exit(141)
        except GtidxError as e:
            self._fail(ctx, e, f"gtidx: {e}", e.exit_code)
        except KeyboardInterrupt as e:
            self._fail(ctx, e, "gtidx: interrupted", 130)
        except click.UsageError as e:       # a subcommand's arguments
            if ctx.meta.get(JSON):
                json_usage_error(e)
            raise
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as e:  # a bug: still one line for the user
            if os.environ.get("GTIDX_DEBUG"):
                raise
            self._fail(ctx, e, f"gtidx: internal error: {type(e).__name__}: {e} "
                               "(set GTIDX_DEBUG=1 for a traceback, and please report it)", EXIT_CORRUPT)
        finally:
            undo_warning_lines()

    @staticmethod
    def _fail(ctx, err: BaseException, line: str, code: int) -> None:
        say_gathered_warnings()
        say(line)
        if ctx.meta.get(JSON) and not ctx.meta.get(STDOUT_DONE):
            try:
                emit_json({"error": error_json(err)})
            except (OutputFailed, ReaderGone):
                silence_stdout()
        ctx.exit(code)


@click.group(cls=GtidxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gtidx")
def cli():
    """gtidx: find GTIDs, GTID states, replica starts and points in time in
    MariaDB and MySQL binlogs (a file, a server's binlog directory or an
    archive in object storage), fast, without a server."""


def main(argv=None) -> None:
    """Console entry point. The process ends after it: the objects alive then
    are frozen (``gc.freeze``), so that the interpreter's last garbage
    collections at exit skip them: that walk of every object costs as much as
    a lookup's own work (docs/benchmarks.md). Exit is otherwise unchanged:
    atexit functions run, stdout and stderr are flushed, modules are cleared.
    Only finalizers of objects left in reference cycles are not run, which
    Python does not promise at exit anyway; gtidx closes what it writes
    before a command returns."""
    try:
        cli.main(args=argv, prog_name="gtidx")
    finally:
        gc.freeze()
