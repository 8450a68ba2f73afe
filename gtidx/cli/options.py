"""The ``gtidx`` command line's shared click options and parameter types.

Each option shared by several commands is made here once, its default and
bounds taken from where they are defined (``index.format`` for an index's
page size, span and ratio). Library modules are imported only when a value
is converted, so that ``gtidx --help`` does not load them.
"""
from __future__ import annotations

import os
import stat

import click

from ..index import format as fmt
from ..errors import BadInputError, GtidxError, GtidxIOError, quoted


class Offset(click.ParamType):
    """A binlog offset: ASCII decimal or 0x-prefixed hex, >= 0 (api.parse_offset)."""

    name = "offset"

    def convert(self, value, param, ctx):
        from ..api import parse_offset
        return parse_offset(value)       # a BadInputError: one gtidx line, exit 2


# Paths are checked by the library, not by click: a missing or unreadable path
# is one "gtidx:" line and exit 3 for every command (click would print its usage
# text and exit 2). click.Path only for shell completion.
PATH = click.Path(readable=False)
"""The type of every path argument: any text, checked by the library (exit 3), not by click."""


def examples(*lines: str) -> str:
    """A command's help epilog: "Examples:" and each invocation on its own
    line (click's ``\b`` keeps the lines as written)."""
    return "\b\nExamples:\n" + "\n".join("  " + x for x in lines)


def json_option(help_text: str = "One JSON object (a failure: {\"error\": {...}})."):
    """``--json`` (the parameter ``as_json``), its help text saying the command's JSON shape."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def from_option(what: str):
    """``--from FILE|-`` (the parameter ``batch``): many lookups, ``what`` per
    line, answered as ``output.write_batch`` answers them."""
    # bytes that are not UTF-8 are kept (surrogateescape), to be echoed as \xNN (errors.shown)
    return click.option("--from", "batch", type=click.File("r", encoding="utf-8", errors="surrogateescape"),
                        metavar="FILE|-", help=f"Many lookups: {what} per line (blank lines and # comments "
                        "skipped), answered in input order, one result per line (--json: JSON Lines; a bad "
                        "line gives its error object and the batch goes on). Exit status: the worst line's.")


class Count(click.IntRange):
    """A whole number option: ASCII digits only (int() would take "4_096" and
    "４０９６", and fails on 5,000 digits)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not (value.isascii() and value.isdigit()):
            self.fail(f"{quoted(value)} is not a whole number (ASCII digits)", param, ctx)
        if isinstance(value, str) and len(value.lstrip("0")) > 20:
            self.fail(f"{quoted(value)} is too large", param, ctx)
        return super().convert(value, param, ctx)


class Number(click.FloatRange):
    """A number option in a range: ASCII text of a number (float() would take
    "１.５"), and not NaN (which every range comparison lets through)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{quoted(value)} is not a number (ASCII)", param, ctx)
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{quoted(str(value))} is not a number", param, ctx)
        return number


def page_size_option(f):
    """``--page-size``: an index's page size, within the server's bounds."""
    return click.option(
        "--page-size", type=Count(fmt.MIN_PAGE_SIZE, fmt.MAX_PAGE_SIZE),
        default=fmt.DEFAULT_PAGE_SIZE, show_default=True,
        help=f"Index page size in bytes (the server accepts {fmt.MIN_PAGE_SIZE} .. "
             f"{fmt.MAX_PAGE_SIZE >> 20} MiB).")(f)


def span_min_option(f):
    """``--span-min``: at most one index record per this many binlog bytes."""
    return click.option(
        "--span-min", type=Count(1), default=fmt.DEFAULT_SPAN_MIN, show_default=True,
        help="At most one record per this many binlog bytes (the server's binlog_gtid_index_span_min).")(f)


def max_ratio_option(help_text: str):
    """``--max-ratio``: a ratio in (0, 1], its meaning said by the command's ``help_text``."""
    return click.option("--max-ratio", type=Number(0, 1, min_open=True), default=fmt.DEFAULT_MAX_RATIO,
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


def storage_option(f):
    """``--storage-option KEY=VALUE`` (repeatable; the parameter ``storage_options``: a dict or None)."""
    return click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                        callback=_storage_options,
                        help="For URLs (s3://bucket/prefix/): an fsspec/s3fs option, e.g. endpoint_url=URL, "
                             "key=ID, secret=KEY, anon=true; repeatable. Default: the AWS_* variables.")(f)


def index_dir_option(f):
    """``--index-dir`` (the parameter ``index_root``): where indexes kept apart from the binlogs are."""
    return click.option("--index-dir", "index_root", metavar="DIR|URL",
                        help="Indexes kept apart from the binlogs: a directory or URL mirroring where each "
                             "binlog is (DIR/bucket/prefix/NAME.idx, DIR/var/lib/mysql/NAME.idx); "
                             "looked up there first, then beside the binlog.")(f)


def history_option(where: str, when: str = "When"):
    """``--history N``: which history of the catalog of ``where`` to answer within."""
    return click.option("--history", type=Count(1), metavar="N",
                        help=f"{when} the catalog of {where} shows binlogs of several histories (servers, a "
                             "reused name): answer within history N (gtidx catalog show lists them).")


def quiet_option(f):
    """``--quiet``/``-q``: no progress display."""
    return click.option("--quiet", "-q", is_flag=True,
                        help="No progress display (drawn on stderr only when stdout and stderr are "
                             "terminals).")(f)


# -- paths a command checks itself (before handing them to code that reports their absence its own way) --

def existing_directory(path: str, command: str) -> str:
    """A directory ``command`` watches: missing is an I/O error (3), like every
    missing path; an existing non-directory is bad input (2), and so is an
    object-store URL (a ``file://`` one is its local path, returned)."""
    from ..storage import local_path
    path = local_path(path, command)
    if not stat.S_ISDIR(existing_path(path).st_mode):
        raise BadInputError("not a directory", path=path)
    return path


def existing_path(path: str) -> os.stat_result:
    """A path handed to code that reports a missing file its own way (Spark)."""
    try:
        return os.stat(path)
    except OSError as e:
        raise GtidxIOError.from_os(e, path) from None
    except ValueError:
        raise BadInputError(f"path {quoted(path)} contains a NUL character") from None
