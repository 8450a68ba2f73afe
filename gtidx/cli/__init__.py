"""The ``gtidx`` command line: parse arguments, call one api function, format.

Exit codes: 0 found/ok, 1 not found, 2 bad input or usage, 3 corrupt data or
I/O error. Errors are one line on stderr, never a traceback (set GTIDX_DEBUG=1
to see one). With ``--json`` a failure also prints ``{"error": {"message",
"path", "offset", "hint", "exit_code"}}`` on stdout, so stdout is always one
JSON document; a streamed document (``scan --json``, ``dump``) that breaks
half-way is closed with the error inside it: ``{..., "groups": [...],
"error": {...}}``. A missing path is an I/O error (3) for every command, said
by the library, not by click. Imports of the library are lazy: ``gtidx --help``
and a lookup should not pay for what they do not use. So are the commands' own
modules: ``COMMANDS`` names where each is defined (``lookup``: seek, pos,
probe; ``commands``: the others), and a command is built, its options
made, only when it runs or a help text lists it.
"""
from __future__ import annotations

import errno
import gc
import os
import sys

import click

from ..index import format as fmt
from .. import liblog
from ..errors import EXIT_BAD_INPUT, EXIT_CORRUPT, BadInputError, GtidxError, GtidxIOError, quoted, redact


class Offset(click.ParamType):
    """A binlog offset: ASCII decimal or 0x-prefixed hex, >= 0 (api.parse_offset)."""

    name = "offset"

    def convert(self, value, param, ctx):
        from ..api import parse_offset
        return parse_offset(value)       # a BadInputError: one gtidx line, exit 2


# Paths are checked by the library, not by click: a missing or unreadable path
# is one "gtidx:" line and exit 3 for every command (click would print its usage
# text and exit 2). click.Path only for shell completion.
_PATH = click.Path(readable=False)


def examples(*lines: str) -> str:
    """A command's help epilog: "Examples:" and each invocation on its own
    line (click's ``\b`` keeps the lines as written)."""
    return "\b\nExamples:\n" + "\n".join("  " + x for x in lines)


# -- options shared by several commands: defaults and bounds from where they are defined ----

def _json_option(help_text: str = "One JSON object (a failure: {\"error\": {...}})."):
    return click.option("--json", "as_json", is_flag=True, help=help_text)


class _Count(click.IntRange):
    """A whole number option: ASCII digits only (int() would take "4_096" and
    "４０９６", and fails on 5,000 digits)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not (value.isascii() and value.isdigit()):
            self.fail(f"{quoted(value)} is not a whole number (ASCII digits)", param, ctx)
        if isinstance(value, str) and len(value.lstrip("0")) > 20:
            self.fail(f"{quoted(value)} is too large", param, ctx)
        return super().convert(value, param, ctx)


class _Number(click.FloatRange):
    """A number option in a range: ASCII text of a number (float() would take
    "１.５"), and not NaN (which every range comparison lets through)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{quoted(value)} is not a number (ASCII)", param, ctx)
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{quoted(str(value))} is not a number", param, ctx)
        return number


def _page_size_option(f):
    return click.option(
        "--page-size", type=_Count(fmt.MIN_PAGE_SIZE, fmt.MAX_PAGE_SIZE),
        default=fmt.DEFAULT_PAGE_SIZE, show_default=True,
        help=f"Index page size in bytes (the server accepts {fmt.MIN_PAGE_SIZE} .. "
             f"{fmt.MAX_PAGE_SIZE >> 20} MiB).")(f)


def _span_min_option(f):
    return click.option(
        "--span-min", type=_Count(1), default=fmt.DEFAULT_SPAN_MIN, show_default=True,
        help="At most one record per this many binlog bytes (the server's binlog_gtid_index_span_min).")(f)


def _max_ratio_option(help_text: str):
    return click.option("--max-ratio", type=_Number(0, 1, min_open=True), default=fmt.DEFAULT_MAX_RATIO,
                        show_default=True, help=help_text)


def _storage_options(ctx, param, values) -> dict | None:
    """``--storage-option KEY=VALUE`` (repeatable) as fsspec storage_options."""
    if not values:
        return None
    from ..storage import parse_option
    try:
        return dict(parse_option(v) for v in values)
    except GtidxError as e:
        raise click.BadParameter(e.message, ctx=ctx, param=param) from None


def _storage_option(f):
    return click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                        callback=_storage_options,
                        help="For URLs (s3://bucket/prefix/): an fsspec/s3fs option, e.g. endpoint_url=URL, "
                             "key=ID, secret=KEY, anon=true; repeatable. Default: the AWS_* variables.")(f)


def _index_dir_option(f):
    return click.option("--index-dir", "index_root", metavar="DIR|URL",
                        help="Indexes kept apart from the binlogs: a directory or URL mirroring where each "
                             "binlog is (DIR/bucket/prefix/NAME.idx, DIR/var/lib/mysql/NAME.idx); "
                             "looked up there first, then beside the binlog.")(f)


def _history_option(where: str, when: str = "When"):
    return click.option("--history", type=_Count(1), metavar="N",
                        help=f"{when} the catalog of {where} shows binlogs of several histories (servers, a "
                             "reused name): answer within history N (gtidx catalog show lists them).")


def _quiet_option(f):
    return click.option("--quiet", "-q", is_flag=True,
                        help="No progress display (drawn on stderr only when stdout and stderr are "
                             "terminals).")(f)


# -- stdout: a closed pipe is quiet, a full disk or a closed stdout is one error line -------

class _ReaderGone(Exception):
    """stdout's reader went away (`gtidx scan big | head`). Not an OSError on
    purpose: click turns EPIPE into exit code 1, which here means "not found"."""


class _OutputFailed(GtidxIOError):
    """stdout cannot be written: a full disk (`> /dev/full`), a closed stdout."""


def _output_error(err: OSError | None) -> Exception:
    if err is not None and err.errno == errno.EPIPE:
        return _ReaderGone()
    why = "stdout is closed" if err is None else (err.strerror or str(err))
    return _OutputFailed(f"cannot write the output: {why}", path="<stdout>")


class _Stdout:
    """sys.stdout whose write errors say they are stdout's (not a binlog's)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> None:
        try:
            self._stream.write(text)
        except OSError as e:
            raise _output_error(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise _output_error(e) from None


class _Output:
    """stdout for results, flushed at the end so that its failure is ours to report."""

    def __enter__(self) -> _Stdout:
        if sys.stdout is None:              # started with stdout closed (`>&-`)
            raise _output_error(None)
        self._out = _Stdout(sys.stdout)
        return self._out

    def __exit__(self, etype, exc, tb):
        if etype is not None and issubclass(etype, BrokenPipeError):
            raise _ReaderGone() from None
        if etype is None:
            self._out.flush()
        return False


def _silence_stdout() -> None:
    """After stdout failed: point it at /dev/null, so that the interpreter's
    final flush (of what is still buffered) neither fails nor complains."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (AttributeError, OSError, ValueError):   # no stdout, or not a real file (CliRunner)
        sys.stdout = open(os.devnull, "w")


def _say(line: str) -> None:
    """The one error line on stderr (URLs ``redact``-ed); a stderr that cannot
    take it (closed, full) must not turn the failure into another one."""
    try:
        click.echo(redact(line), err=True)
    except OSError:
        pass


def _emit_json(obj) -> None:
    import json
    with _Output() as out:
        out.write(json.dumps(obj) + "\n")


def _error_json(err: BaseException) -> dict:
    """Any failure as --json prints it (GtidxError.as_dict, or its like)."""
    if isinstance(err, GtidxError):
        return err.as_dict()
    if isinstance(err, KeyboardInterrupt):
        message, code = "interrupted", 130
    else:
        message, code = redact(f"internal error: {type(err).__name__}: {err}"), EXIT_CORRUPT
    return {"message": message, "path": None, "offset": None, "page": None, "hint": None, "exit_code": code}


def _write_items(out: _Stdout, items) -> tuple[int, BaseException | None]:
    """Write the JSON array items ``items`` yields, comma-separated; a failure
    of ``items`` (not of the output) ends the array and is returned."""
    n, sep, it = 0, "", iter(items)
    while True:
        try:
            item = next(it)
        except StopIteration:
            return n, None
        except (Exception, KeyboardInterrupt) as e:
            return n, e
        out.write(sep + item)
        sep, n = ", ", n + 1


def _close_stream(out: _Stdout, err: BaseException | None, tail: str = "") -> None:
    """End a streamed JSON document (with the error inside, if any); re-raise
    the error for its stderr line and exit code, stdout being done."""
    if err is None:
        out.write(f"{tail}}}\n")
        return
    import json
    out.write(f'{tail}, "error": {json.dumps(_error_json(err))}}}\n')
    out.flush()
    click.get_current_context().meta[_STDOUT_DONE] = True
    raise err


_JSON = "gtidx.json"                # ctx.meta: --json was given
_STDOUT_DONE = "gtidx.stdout_done"  # ctx.meta: the error is already in stdout's document


def _wants_json(args) -> bool:
    args = list(args)
    return "--json" in (args[:args.index("--")] if "--" in args else args)


def _warning_lines(logger):
    """Library warnings as ``gtidx: warning:`` lines on stderr: a handler on
    the library's logger ``logger``, and what takes it off. A warning about
    one file (``liblog.about_a_file``) is said once per command, when it
    ends: one line per distinct ``what`` with the files it concerns counted (``5 binlogs, master-bin.000018 .. master-bin.000022
    in DIR: no usable index ...``); other warnings at once. ``gtidx tail``,
    which does not end, says each at once."""
    import logging

    gathered: dict[str, list[str]] = {}        # what -> the files, in the order warned

    class _WarningLine(logging.Handler):
        def emit(self, record):
            running = click.get_current_context(silent=True)
            about = liblog.about_a_file(record) if running is None or running.info_name != "tail" else None
            if about is not None:
                path, what = about
                files = gathered.setdefault(what, [])
                if path not in files:
                    files.append(path)
                return
            click.echo(f"gtidx: warning: {redact(record.getMessage())}", err=True)

    def say_gathered() -> None:
        for what, files in gathered.items():
            click.echo(redact(f"gtidx: warning: {_files_said(sorted(files))}: {what}"), err=True)
        gathered.clear()

    handler = _WarningLine()
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    _SAY_GATHERED.append(say_gathered)

    def undo() -> None:
        logger.removeHandler(handler)
        logger.propagate = propagate
        _SAY_GATHERED.remove(say_gathered)
        say_gathered()
    return undo


# The gathered warnings of the command running (``_warning_lines``), said
# before its error line, which stays the last line of a failed command.
_SAY_GATHERED: list = []


def _files_said(files: list[str]) -> str:
    """One file as it is; several as their count, the first and last name,
    and their directory where they share one."""
    if len(files) == 1:
        return files[0]
    dirs = {os.path.dirname(f) for f in files}
    if len(dirs) == 1:
        return (f"{len(files)} binlogs, {os.path.basename(files[0])} .. {os.path.basename(files[-1])} "
                f"in {dirs.pop() or '.'}")
    return f"{len(files)} binlogs, {files[0]} .. {files[-1]}"


# The command table, its one owner: {name: (module in gtidx, its attribute)}.
# The module is imported when the command runs or a help text lists it
# (click's LazyGroup pattern).
COMMANDS = {
    "build": ("commands", "build"), "catalog": ("commands", "catalog"),
    "dump": ("commands", "dump"), "info": ("commands", "info"), "pos": ("lookup", "pos"),
    "probe": ("lookup", "probe"), "scan": ("commands", "scan"), "seek": ("lookup", "seek"),
    "show": ("commands", "show_group"), "spark": ("commands", "spark"),
    "status": ("commands", "status"), "tail": ("commands", "tail"), "verify": ("commands", "verify"),
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
        as_json = _wants_json(args)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except click.UsageError as e:
            if as_json:
                _json_usage_error(e)
            raise
        ctx.meta[_JSON] = as_json
        return ctx

    def invoke(self, ctx):
        # Library warnings become "gtidx: warning: ..." lines for this command
        # only: the logger is process-wide state (tests run many commands). The
        # handler goes on when the library first uses its logger (liblog: a
        # command with nothing to warn about never imports logging).
        undo_warning_lines = liblog.on_use(_warning_lines)
        try:
            return super().invoke(ctx)
        except _OutputFailed as e:
            # `> /dev/full`, a closed stdout: say so on stderr, nothing more on stdout.
            _silence_stdout()
            _say(f"gtidx: {e}")
            ctx.exit(e.exit_code)
        except _ReaderGone:
            # `gtidx scan big | head`: the reader left. Quiet, with the exit
            # code a shell reports for SIGPIPE; stdout is pointed at /dev/null
            # so the interpreter's final flush does not complain either.
            _silence_stdout()
            ctx.exit(141)
        except GtidxError as e:
            self._fail(ctx, e, f"gtidx: {e}", e.exit_code)
        except KeyboardInterrupt as e:
            self._fail(ctx, e, "gtidx: interrupted", 130)
        except click.UsageError as e:       # a subcommand's arguments
            if ctx.meta.get(_JSON):
                _json_usage_error(e)
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
        for say_gathered in _SAY_GATHERED:
            say_gathered()
        _say(line)
        if ctx.meta.get(_JSON) and not ctx.meta.get(_STDOUT_DONE):
            try:
                _emit_json({"error": _error_json(err)})
            except (_OutputFailed, _ReaderGone):
                _silence_stdout()
        ctx.exit(code)


def _json_usage_error(e: click.UsageError) -> None:
    """A usage error under --json: the JSON error object, one stderr line, exit 2."""
    cmd = e.ctx.command_path if e.ctx is not None else "gtidx"
    err = BadInputError(e.format_message(), hint=f"see '{cmd} --help'")
    _say(f"gtidx: {err}")
    try:
        _emit_json({"error": err.as_dict()})
    except (_OutputFailed, _ReaderGone):
        _silence_stdout()
    raise click.exceptions.Exit(EXIT_BAD_INPUT)


@click.group(cls=GtidxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gtidx")
def cli():
    """gtidx: find GTIDs, GTID states, replica starts and points in time in
    MariaDB and MySQL binlogs (a file, a server's binlog directory or an
    archive in object storage), fast, without a server."""


def _one_line(x) -> str:
    """A position, state or MySQL GTID set as JSON holds it: a MySQL set on
    one line (``GtidSet.one_line``: ``,`` between UUIDs, not the server's ``,\\n``)."""
    one_line = getattr(x, "one_line", None)
    return one_line() if one_line is not None else str(x)


def main(argv=None) -> None:
    """Console entry point. The process ends after it: the objects alive then
    are frozen (``gc.freeze``), so that the interpreter's last garbage
    collections at exit skip them. That walk of every object costs 5-8 ms,
    as much as a lookup's own work (issue 16: the CLI's start-up). Exit is
    otherwise unchanged: atexit functions run, stdout and stderr are flushed,
    modules are cleared. Only finalizers of objects left in reference cycles
    are not run, which Python does not promise at exit anyway; gtidx closes
    what it writes before a command returns."""
    try:
        cli.main(args=argv, prog_name="gtidx")
    finally:
        gc.freeze()
