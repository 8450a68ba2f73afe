"""CLI start-up (issue 16): a command imports only what it needs.

Timing is measured by `tools/bench startup`, not here; these tests guard the
cause instead: in a fresh interpreter, what a lookup, `gtidx --help` and a
library warning leave in ``sys.modules``, and that the lazily built parts
(``gtidx --help``, the warning line) say what the eager ones said."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES
from gtidx.index.build import build_index

MIXED = FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002"
GTID = "2-2-225"

# What a lookup in one indexed binlog never needs: logging (unless the library
# warns), the catalog of an archive, MySQL GTID sets, probing, the answers of
# other questions (series.answers), the records of a walk over events or
# groups (binlog.records: an index answers), decoding a group (show: mysql-replication,
# PyMySQL), the sidecar (its inotify and Prometheus packages), Spark, object stores.
NOT_FOR_A_LOOKUP = ["logging", "gtidx.catalog", "gtidx.mysqlgtid", "gtidx.binlog.probe", "gtidx.series.answers",
                    "gtidx.binlog.records",
                    "gtidx.show", "gtidx.tail", "inotify_simple", "prometheus_client", "http.server",
                    "gtidx.spark", "gtidx.spark.changes", "gtidx.changes", "gtidx.binlog.mysql", "pymysqlreplication",
                    "pymysql", "pyspark", "pyarrow", "pandas", "numpy", "fsspec", "s3fs", "dataclasses"]
# `gtidx --help` runs no command: none of the library (gtidx.gtid with
# gtidx.index.format, whose limits the options' help states).
# A lookup builds its own command only (cli.main.COMMANDS: the others' modules are
# not imported: a seek not pos's and probe's, cli.offsets, nor pos seek's,
# cli.lookup) and writes nothing (gtidx.index.writer).
# nor gtidx.safefile, the writers' module. Nor fcntl (filebuf: os.set_blocking),
# nor json: the fingerprint gtidx stores with an index is bytes in a struct
# layout (index.meta), and text output is not JSON.
NOT_FOR_A_TEXT_LOOKUP = NOT_FOR_A_LOOKUP + ["gtidx.cli.commands", "gtidx.cli.changes", "gtidx.cli.sidecar",
                                            "gtidx.cli.archive",
                                            "gtidx.index.writer", "gtidx.safefile", "fcntl", "json"]
NOT_FOR_HELP = NOT_FOR_A_LOOKUP + ["gtidx.api", "gtidx.binlog.mariadb", "gtidx.index.files", "gtidx.index.meta",
                                   "gtidx.index.reader", "gtidx.storage"]


def in_fresh_python(argv: list[str], first: str = "") -> tuple[subprocess.CompletedProcess, set]:
    """``gtidx.cli.main(argv)`` in a new interpreter, as the console script
    runs it (after the statement ``first``); its result, and the modules
    imported by the end."""
    code = ("import sys\n"
            f"{first}\n"
            "from gtidx.cli import main\n"
            "try:\n"
            f"    main({argv!r})\n"
            "except SystemExit as e:\n"
            "    code = e.code\n"
            "sys.stdout.flush()\n"
            "print('MODULES', ' '.join(sorted(sys.modules)), file=sys.stderr)\n"
            "sys.exit(code)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"})
    lines = p.stderr.splitlines()
    assert lines and lines[-1].startswith("MODULES "), p.stderr
    p.stderr = "\n".join(lines[:-1]) + ("\n" if lines[:-1] else "")
    return p, set(lines[-1].split()[1:])


@pytest.fixture
def indexed(tmp_path):
    binlog = tmp_path / MIXED.name
    shutil.copyfile(MIXED, binlog)
    build_index(binlog)
    return binlog


def test_a_lookup_imports_only_what_it_needs(indexed):
    p, modules = in_fresh_python(["seek", "--gtid", GTID, str(indexed)])
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout == f"{GTID} {indexed} start 922987 end 923294 resume 923294 (via index)\n"
    assert sorted(m for m in NOT_FOR_A_TEXT_LOOKUP + ["gtidx.cli.offsets"] if m in modules) == []
    p, modules = in_fresh_python(["pos", str(indexed), "923294"])
    assert p.returncode == 0 and p.stdout.startswith("0-1-"), p.stderr
    assert sorted(m for m in NOT_FOR_A_TEXT_LOOKUP + ["gtidx.cli.lookup"] if m in modules) == []
    p, modules = in_fresh_python(["pos", "--json", str(indexed), "923294"])
    assert p.returncode == 0 and json.loads(p.stdout)["via"] == "index", p.stderr
    assert sorted(m for m in NOT_FOR_A_LOOKUP if m in modules) == []


EVERYTHING = "import gtidx.api, gtidx.catalog, gtidx.binlog.probe, gtidx.tail, gtidx.index.files, gtidx.index.build"


def test_the_console_entry_freezes_what_is_alive_at_its_end_and_exits_as_before(indexed, tmp_path):
    # main() freezes the objects alive when the command ends (gc.freeze: the
    # interpreter's last collections skip them); the exit is otherwise the same:
    # atexit functions run, the exit code and the output are whole, and what a
    # command wrote is complete when the process is gone.
    first = ("import atexit, gc\n"
             "atexit.register(lambda: print('ATEXIT', gc.get_freeze_count() > 1000, file=sys.stderr))\n")
    for gtid, code, out in ((GTID, 0, "(via index)\n"), ("9-9-9", 1, "")):
        p = subprocess.run([sys.executable, "-c", f"import sys\n{first}from gtidx.cli import main\n"
                            f"main({['seek', '--gtid', gtid, str(indexed)]!r})\n"], capture_output=True, text=True)
        assert p.returncode == code and p.stdout.endswith(out), p.stdout + p.stderr
        assert p.stderr.splitlines()[-1] == "ATEXIT True", p.stderr
    binlog = tmp_path / "copy" / MIXED.name
    binlog.parent.mkdir()
    shutil.copyfile(MIXED, binlog)
    p = subprocess.run([sys.executable, "-c", f"import sys\nfrom gtidx.cli import main\n"
                        f"main({['build', '-q', '--json', str(binlog)]!r})\n"], capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)
    p = subprocess.run([sys.executable, "-m", "gtidx", "verify", str(binlog) + ".idx"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "copy" / (MIXED.name + ".idx")).read_bytes() == (indexed.parent / (MIXED.name + ".idx")).read_bytes()


def test_help_imports_none_of_the_library_and_lists_every_command():
    from gtidx.cli import COMMANDS, cli
    p, modules = in_fresh_python(["--help"])
    assert p.returncode == 0, p.stderr
    assert sorted(m for m in NOT_FOR_HELP if m in modules) == []
    # the same text as with the whole library imported first, every command listed with its help
    eager, _ = in_fresh_python(["--help"], first=EVERYTHING)
    assert p.stdout == eager.stdout
    listed = [line.split()[0] for line in p.stdout.split("Commands:\n")[1].splitlines()]
    assert listed == cli.list_commands(None) == sorted(COMMANDS) and len(listed) >= 13
    for name in listed:
        cmd = cli.get_command(None, name)
        assert f"  {name} " in p.stdout and cmd.get_short_help_str(limit=30)[:20] in p.stdout


def test_the_command_table_names_each_command_where_it_is():
    # cli.main.COMMANDS, the one table: each entry is the command of that name, built once;
    # an unknown name is still told the close one (click looks among them all)
    from click.testing import CliRunner

    from gtidx.cli import COMMANDS, cli
    for name, (module, attribute) in COMMANDS.items():
        cmd = cli.get_command(None, name)
        assert cmd.name == name and cmd is getattr(sys.modules[f"gtidx.cli.{module}"], attribute)
        assert cli.get_command(None, name) is cmd
    assert cli.get_command(None, "nonesuch") is None
    r = CliRunner().invoke(cli, ["sek"])
    assert r.exit_code == 2 and "No such command 'sek'. Did you mean 'seek'?" in r.output


def test_an_unknown_command_is_told_the_close_one_in_a_fresh_cli():
    p, _ = in_fresh_python(["bild"])
    assert p.returncode == 2 and "No such command 'bild'. Did you mean 'build'?" in p.stderr


@pytest.mark.parametrize("command", ["seek", "pos", "build", "tail", "catalog build", "spark locate", "show"])
def test_a_commands_help_is_what_it_was_with_the_library_imported(command):
    lazy, _ = in_fresh_python([*command.split(), "--help"])
    eager, _ = in_fresh_python([*command.split(), "--help"], first=EVERYTHING)
    assert lazy.returncode == 0 and lazy.stdout == eager.stdout and "Options:" in lazy.stdout, lazy.stderr


def test_a_library_warning_is_one_line_where_logging_comes_late(indexed):
    # The library's logger (gtidx.liblog) imports logging on its first warning:
    # the CLI's warning line is put on then, and said once.
    idx = indexed.with_name(indexed.name + ".idx")
    data = bytearray(idx.read_bytes())
    data[100] ^= 1
    idx.write_bytes(bytes(data))
    p, modules = in_fresh_python(["seek", "--gtid", GTID, str(indexed)])
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith("(via scan)\n")
    warnings = p.stderr.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith(f"gtidx: warning: {indexed}: no usable index ("), p.stderr
    assert "logging" in modules


# -- classes written out instead of @dataclass: what the dataclasses were -----------------------------

def test_index_meta_is_the_frozen_dataclass_it_was():
    import copy
    import dataclasses
    import pickle

    from gtidx.index.meta import IndexMeta, Progress

    @dataclasses.dataclass(frozen=True)
    class Was:                  # IndexMeta as a frozen dataclass (gtidx before issue 16)
        size: int
        head_crc32: int
        tail_crc32: int
        state: Progress = Progress.COMPLETE
        page_size: int | None = None
        span_min: int | None = None
        processed: int | None = None
        records: int | None = None
        updated: float | None = None
        ranges: tuple | None = None
        repeats: tuple | None = None
        head_adler32: int | None = None
        tail_adler32: int | None = None
        binlog_etag: str | None = None

    assert IndexMeta._FIELDS == tuple(f.name for f in dataclasses.fields(Was))
    kw = {"state": Progress.PARTIAL, "processed": 99, "updated": 1.5, "ranges": ((0, 1, 2, 5),), "repeats": ((0, 1),),
          "head_adler32": 3, "binlog_etag": '"e"'}
    for args, extra in (((7, 8, 9), {}), ((123, 4, 5), kw)):
        m, w = IndexMeta(*args, **extra), Was(*args, **extra)
        assert repr(m) == repr(w).replace("test_index_meta_is_the_frozen_dataclass_it_was.<locals>.Was", "IndexMeta")
        assert hash(m) == hash(w) and m == IndexMeta(*args, **extra) and m != w
        assert m.replace(size=1, records=2) == IndexMeta(1, *args[1:], **{**extra, "records": 2})
        assert m.replace(size=1) != m and m.replace() == m
        for name in ("size", "binlog_etag", "other"):
            with pytest.raises(AttributeError):
                setattr(m, name, 1)
            with pytest.raises(AttributeError):
                delattr(m, name)
        assert pickle.loads(pickle.dumps(m)) == m == copy.deepcopy(m) == copy.copy(m)
        assert IndexMeta.decode(m.encode()) == m
    with pytest.raises(TypeError):
        IndexMeta(1, 2)


def test_index_status_and_build_result_are_what_they_were(tmp_path):
    import dataclasses

    import gtidx
    from gtidx.index import build as indexbuild, files as indexfile
    from gtidx.index.files import IndexState, IndexStatus

    s = IndexStatus("x.idx", IndexState.OK, owner="gtidx", _file=object())
    assert repr(s) == ("IndexStatus(path='x.idx', state=<IndexState.OK: 'ok'>, reason='', reader=None, owner='gtidx', "
                       "partial=False, meta=None, index_etag=None, checked=None)")
    assert s == IndexStatus("x.idx", IndexState.OK, owner="gtidx", _file=s._file) != IndexStatus("x.idx", "ok")
    s.reason = "changed"
    assert s.reason == "changed" and IndexStatus.__hash__ is None
    # BuildResult: still a dataclass
    binlog = tmp_path / MIXED.name
    shutil.copyfile(MIXED, binlog)
    r = build_index(binlog)
    assert type(r) is indexbuild.BuildResult is gtidx.BuildResult and dataclasses.is_dataclass(r)
    assert repr(r).startswith(f"BuildResult(binlog='{binlog}', index='{binlog}.idx', action='built', reason=''")
    assert dataclasses.asdict(r)["records"] == r.records > 0 and r.ratio == r.size / r.binlog_size
    with pytest.raises(AttributeError):
        indexfile.NoSuchName


def test_the_librarys_records_are_named_tuples():
    import pickle

    from gtidx import api
    from gtidx.binlog import records as binlog_records
    from gtidx.gtid import Gtid

    # the library's: named, pickled and typed as before
    g = Gtid.parse("0-1-5")
    loc = api.Location(g, "f", 1, 2, 2, 0, "index")
    for v in (g, loc, binlog_records.Group(g, 1, 2, 0, 0)):
        assert pickle.loads(pickle.dumps(v)) == v and type(pickle.loads(pickle.dumps(v))) is type(v)
    assert repr(g) == "Gtid(domain=0, server=1, seq=5)" and api.Location.__qualname__ == "Location"
    assert loc.occurrences == () and loc.history is None and api.StateAt.position.__doc__
    for cls in (Gtid, api.Location, api.StateAt, binlog_records.Group, binlog_records.Event):
        assert cls.__bases__ == (tuple,) and cls._fields and hasattr(cls, "_replace")


def test_liblog_calls_what_waits_for_the_logger_once_and_undoes_it():
    code = """if True:
        import sys
        from gtidx import liblog
        seen = []

        def attach(logger):
            seen.append(("on", logger.name))
            return lambda: seen.append(("off", logger.name))
        undo_dropped = liblog.on_use(attach)
        undo_dropped()                      # never called: dropped
        undo = liblog.on_use(attach)
        assert seen == [] and "logging" not in sys.modules
        liblog.log.setLevel(30)             # the first use: logging imported, attach called
        liblog.log.warning("x")
        assert seen == [("on", "gtidx")], seen
        undo()
        assert seen == [("on", "gtidx"), ("off", "gtidx")], seen
        liblog.on_use(attach)()             # the logger in use: at once, and undone
        assert seen[2:] == [("on", "gtidx"), ("off", "gtidx")], seen
        import logging
        assert liblog.log.get() is logging.getLogger("gtidx")
        print("ok")
    """
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr


# -- index.meta: a fingerprint read back in a fresh interpreter is the one written ---------------------

def test_index_meta_reads_what_it_writes_in_a_fresh_python():
    from gtidx.index.meta import IndexMeta, Progress
    metas = [IndexMeta(7, 8, 9), IndexMeta(1013153, 2**32 - 1, 0, Progress.PARTIAL, 4096, 65536, 500, 3, 1763900000.125,
                                           ((0, 1, 5, 198), (2, 2**32 - 1, 1, 2**64 - 1)), ((0, 1),), 5, 6,
                                           "stat:2049:12:1013153:1763900000123456789:1763900000123456789")]
    code = ("import sys\nfrom gtidx.index.meta import IndexMeta\n"
            f"raws = {[m.encode() for m in metas]!r}\n"
            "print([repr(IndexMeta.decode(r)) for r in raws])\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == f"{[repr(m) for m in metas]!r}\n", p.stderr
