"""What the ``gtidx`` command line writes: results on stdout (text or JSON),
error lines and warnings on stderr.

stdout: a closed pipe (``gtidx scan big | head``) is quiet, a full disk or a
closed stdout is one error line; results are flushed at the end of a command
so that a failure to write them is reported as ours. With ``--json`` stdout
is always one JSON document (``changes --json``: one per line): a streamed
one (``scan --json``, ``dump``) that breaks half-way is closed with the error
inside it. stderr: one ``gtidx:`` line per failure (URLs ``redact``-ed), the
library's warnings as ``gtidx: warning:`` lines, a warning about one file
gathered and said once per command, and the progress line of long work
(``Progress``).
"""
from __future__ import annotations

import errno
import os
import sys
import time

import click

from .. import liblog
from ..errors import EXIT_BAD_INPUT, EXIT_CORRUPT, BadInputError, GtidxError, GtidxIOError, redact, shown

JSON = "gtidx.json"                 # ctx.meta: --json was given
STDOUT_DONE = "gtidx.stdout_done"   # ctx.meta: the error is already in stdout's document


# -- stdout: a closed pipe is quiet, a full disk or a closed stdout is one error line -------

class ReaderGone(Exception):
    """stdout's reader went away (`gtidx scan big | head`). Not an OSError on
    purpose: click turns EPIPE into exit code 1, which here means "not found"."""


class OutputFailed(GtidxIOError):
    """stdout cannot be written: a full disk (`> /dev/full`), a closed stdout."""


def _output_error(err: OSError | None) -> Exception:
    if err is not None and err.errno == errno.EPIPE:
        return ReaderGone()
    why = "stdout is closed" if err is None else (err.strerror or str(err))
    return OutputFailed(f"cannot write the output: {why}", path="<stdout>")


class Stdout:
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


class Output:
    """stdout for results, flushed at the end so that its failure is ours to report."""

    def __enter__(self) -> Stdout:
        if sys.stdout is None:              # started with stdout closed (`>&-`)
            raise _output_error(None)
        self._out = Stdout(sys.stdout)
        return self._out

    def __exit__(self, etype, exc, tb):
        if etype is not None and issubclass(etype, BrokenPipeError):
            raise ReaderGone() from None
        if etype is None:
            self._out.flush()
        return False


def silence_stdout() -> None:
    """After stdout failed: point it at /dev/null, so that the interpreter's
    final flush (of what is still buffered) neither fails nor complains."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (AttributeError, OSError, ValueError):   # no stdout, or not a real file (CliRunner)
        sys.stdout = open(os.devnull, "w")


def say(line: str) -> None:
    """The one error line on stderr (URLs ``redact``-ed); a stderr that cannot
    take it (closed, full) must not turn the failure into another one."""
    try:
        click.echo(redact(line), err=True)
    except OSError:
        pass


def one_line(x) -> str:
    """A position, state or MySQL GTID set as JSON holds it: a MySQL set on
    one line (``GtidSet.one_line``: ``,`` between UUIDs, not the server's
    ``,\\n``); a MariaDB state prints on one line already."""
    method = getattr(x, "one_line", None)
    return method() if method is not None else str(x)


# -- JSON ---------------------------------------------------------------------------------

def emit_json(obj) -> None:
    """``obj`` as one JSON document on stdout."""
    import json
    with Output() as out:
        out.write(json.dumps(obj) + "\n")


def error_json(err: BaseException) -> dict:
    """Any failure as --json prints it (GtidxError.as_dict, or its like)."""
    if isinstance(err, GtidxError):
        return err.as_dict()
    if isinstance(err, KeyboardInterrupt):
        message, code = "interrupted", 130
    else:
        message, code = redact(f"internal error: {type(err).__name__}: {err}"), EXIT_CORRUPT
    return {"message": message, "path": None, "offset": None, "page": None, "hint": None, "exit_code": code}


def write_items(out: Stdout, items) -> tuple[int, BaseException | None]:
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


def close_stream(out: Stdout, err: BaseException | None, tail: str = "") -> None:
    """End a streamed JSON document (with the error inside, if any); re-raise
    the error for its stderr line and exit code, stdout being done."""
    if err is None:
        out.write(f"{tail}}}\n")
        return
    import json
    out.write(f'{tail}, "error": {json.dumps(error_json(err))}}}\n')
    out.flush()
    click.get_current_context().meta[STDOUT_DONE] = True
    raise err


def _lines(stream):
    """(line text) of a --from input, read as it is answered: stripped, blank
    lines and # comments skipped."""
    for line in stream:
        text = line.strip()
        if text and not text.startswith("#"):
            yield text


def write_batch(stream, answers, as_json: bool, to_json, to_text) -> None:
    """Answer the lines of a --from input ``stream`` (``options.from_option``):
    ``answers(texts)`` yields one result per text, in order, reading
    ``texts`` as it goes; each result is written as it comes (JSON Lines, or
    text), so that memory does not grow with the input. An error is its line's error object (or a text line,
    the line echoed ``shown``: escaped, cut), and the batch goes on; then
    exit with the worst line's status."""
    import json
    from collections import deque
    pending = deque()                   # the texts read, not answered yet

    def texts():
        for text in _lines(stream):
            pending.append(text)
            yield text
    worst = 0
    with Output() as out:
        for r in answers(texts()):
            text = pending.popleft()
            if isinstance(r, GtidxError):
                worst = max(worst, r.exit_code)
                out.write(json.dumps({"input": shown(text), "error": error_json(r)}) + "\n" if as_json
                          else f"{shown(text)}: {r}\n")
            else:
                out.write(json.dumps(to_json(r)) + "\n" if as_json else to_text(r))
    if worst:
        click.get_current_context().exit(worst)


def wants_json(args) -> bool:
    """Whether the command line ``args`` asks for --json (before a ``--``)."""
    args = list(args)
    return "--json" in (args[:args.index("--")] if "--" in args else args)


def json_usage_error(e: click.UsageError) -> None:
    """A usage error under --json: the JSON error object, one stderr line, exit 2."""
    cmd = e.ctx.command_path if e.ctx is not None else "gtidx"
    err = BadInputError(e.format_message(), hint=f"see '{cmd} --help'")
    say(f"gtidx: {err}")
    try:
        emit_json({"error": err.as_dict()})
    except (OutputFailed, ReaderGone):
        silence_stdout()
    raise click.exceptions.Exit(EXIT_BAD_INPUT)


# -- the library's warnings ---------------------------------------------------------------

# The gathered warnings of the command running (``warning_lines``), said
# before its error line, which stays the last line of a failed command.
_SAY_GATHERED: list = []


def say_gathered_warnings() -> None:
    """Say the warnings gathered so far by the command running (before its error line)."""
    for say_gathered in _SAY_GATHERED:
        say_gathered()


def warning_lines(logger):
    """Library warnings as ``gtidx: warning:`` lines on stderr: a handler on
    the library's logger ``logger``, and what takes it off. A warning about
    one file (``liblog.about_a_file``) is said once per command, when it
    ends: one line per distinct ``what`` with the files it concerns counted
    (``5 binlogs, master-bin.000018 .. master-bin.000022 in DIR: no usable
    index ...``); other warnings at once. ``gtidx tail``, which does not end,
    says each at once."""
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
            click.echo(redact(f"gtidx: warning: {files_said(sorted(files))}: {what}"), err=True)
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


def files_said(files: list[str]) -> str:
    """One file as it is; several as their count, the first and last name,
    and their directory where they share one."""
    if len(files) == 1:
        return files[0]
    dirs = {os.path.dirname(f) for f in files}
    if len(dirs) == 1:
        return (f"{len(files)} binlogs, {os.path.basename(files[0])} .. {os.path.basename(files[-1])} "
                f"in {dirs.pop() or '.'}")
    return f"{len(files)} binlogs, {files[0]} .. {files[-1]}"


# -- a progress line on stderr -------------------------------------------------------------

def percent(done: int, total: int) -> str:
    """``done`` of ``total`` as a progress line shows it: a whole percentage, 3 wide."""
    return f"{100 * done / total:3.0f}%" if total else "100%"


def clock(seconds: float) -> str:
    """A duration as a progress line shows it: [H:]MM:SS."""
    seconds = int(seconds + 0.5)
    return (f"{seconds // 3600}:" if seconds >= 3600 else "") + f"{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _is_terminal(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):     # no isatty, or closed
        return False


class Progress:
    """A one-line progress display on stderr, for long work. Drawn only when
    stdout and stderr are both terminals and not --quiet (a pipe, a file, a
    log or CliRunner sees nothing); redrawn at most 10 times a second; erased
    before any other output line (clear, then redraw) and at the end, so the
    lines the command prints are what they are without it."""

    INTERVAL = 0.1      # seconds between redraws

    def __init__(self, quiet: bool):
        self.enabled = not quiet and _is_terminal(sys.stdout) and _is_terminal(sys.stderr)
        self._text = self._on_screen = ""
        self._drawn = False
        self._last = 0.0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> bool:
        self.clear()
        return False

    def show(self, text: str) -> None:
        """The current state; drawn now unless drawn less than INTERVAL ago."""
        self._text = text
        if not self.enabled or (self._drawn and text == self._on_screen):
            return
        now = time.monotonic()
        if not self._drawn or now - self._last >= self.INTERVAL:
            self._last = now
            self._write(text)

    def redraw(self) -> None:
        """Draw the last state again (after clear() and a line of output)."""
        if self.enabled and self._text and not self._drawn:
            self._write(self._text)

    def clear(self) -> None:
        if self._drawn:
            self._drawn = False
            self._put("\r\x1b[K")

    def _write(self, text: str) -> None:
        import shutil
        width = shutil.get_terminal_size().columns - 1
        self._drawn, self._on_screen = True, text
        self._put("\r" + text[:width] + "\x1b[K")

    def _put(self, chars: str) -> None:
        try:
            sys.stderr.write(chars)
            sys.stderr.flush()
        except (OSError, ValueError):
            self.enabled = self._drawn = False      # stderr went away: the work goes on
