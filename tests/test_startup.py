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
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from gtidx.index.files import build_index

MIXED = FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002"
GTID = "2-2-225"

# What a lookup in one indexed binlog never needs: logging (unless the library
# warns), the catalog of an archive, MySQL GTID sets, probing, decoding a group
# (show: mysql-replication, PyMySQL), the sidecar, Spark, object stores.
NOT_FOR_A_LOOKUP = ["logging", "gtidx.catalog", "gtidx.mysqlgtid", "gtidx.binlog.probe", "gtidx.show", "gtidx.tail",
                    "gtidx.spark", "gtidx.spark.changes", "gtidx.binlog.mysql", "pymysqlreplication", "pymysql",
                    "pyspark", "pyarrow", "pandas", "numpy", "fsspec", "s3fs", "dataclasses"]
# `gtidx --help` runs no command: none of the library (json, which a lookup
# needs too for the index's fingerprint, comes with the CLI's output code;
# gtidx.gtid with gtidx.index.format, whose limits the options' help states).
# A lookup builds its own command only (cli.main.COMMANDS: the others' modules are
# not imported), reads the index's fingerprint without json (index.meta._loads)
# and writes nothing (gtidx.index.writer).
# Nor fcntl (filebuf: os.set_blocking).
NOT_FOR_A_TEXT_LOOKUP = NOT_FOR_A_LOOKUP + ["json", "gtidx.cli.commands", "gtidx.cli.sidecar", "gtidx.cli.archive",
                                            "gtidx.index.writer", "fcntl"]
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
    assert sorted(m for m in NOT_FOR_A_TEXT_LOOKUP if m in modules) == []
    p, modules = in_fresh_python(["pos", str(indexed), "923294"])
    assert p.returncode == 0 and p.stdout.startswith("0-1-"), p.stderr
    assert sorted(m for m in NOT_FOR_A_TEXT_LOOKUP if m in modules) == []
    p, modules = in_fresh_python(["pos", "--json", str(indexed), "923294"])
    assert p.returncode == 0 and json.loads(p.stdout)["via"] == "index", p.stderr
    assert sorted(m for m in NOT_FOR_A_LOOKUP if m in modules) == []


EVERYTHING = "import gtidx.api, gtidx.catalog, gtidx.binlog.probe, gtidx.tail, gtidx.index.files; gtidx.index.files.BuildResult"


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
        assert IndexMeta.from_json(m.to_json()) == m
    with pytest.raises(TypeError):
        IndexMeta(1, 2)


def test_index_status_and_build_result_are_what_they_were(tmp_path):
    import dataclasses

    import gtidx
    from gtidx.index import files as indexfile
    from gtidx.index.files import IndexState, IndexStatus

    s = IndexStatus("x.idx", IndexState.OK, owner="gtidx", _file=object())
    assert repr(s) == ("IndexStatus(path='x.idx', state=<IndexState.OK: 'ok'>, reason='', reader=None, owner='gtidx', "
                       "partial=False, meta=None, index_etag=None, checked=None)")
    assert s == IndexStatus("x.idx", IndexState.OK, owner="gtidx", _file=s._file) != IndexStatus("x.idx", "ok")
    s.reason = "changed"
    assert s.reason == "changed" and IndexStatus.__hash__ is None
    # BuildResult: still a dataclass, made on first use
    binlog = tmp_path / MIXED.name
    shutil.copyfile(MIXED, binlog)
    r = build_index(binlog)
    assert type(r) is indexfile.BuildResult is gtidx.BuildResult and dataclasses.is_dataclass(r)
    assert repr(r).startswith(f"BuildResult(binlog='{binlog}', index='{binlog}.idx', action='built', reason=''")
    assert dataclasses.asdict(r)["records"] == r.records > 0 and r.ratio == r.size / r.binlog_size
    with pytest.raises(AttributeError):
        indexfile.NoSuchName


def _span(named_tuple: bool) -> type:
    from typing import NamedTuple

    from gtidx.records import record

    def made(cls):
        return cls if named_tuple else record(cls)

    @made
    class Span(*([NamedTuple] if named_tuple else [])):
        """Where."""
        file: str
        start: int
        end: "int | None" = None

        @property
        def size(self) -> int:
            return (self.end or self.start) - self.start

        @classmethod
        def parse(cls, text: str) -> "Span":
            file, start, end = text.split()
            return cls(file, int(start), int(end))

        def __str__(self) -> str:
            return f"{self.file}:{self.start}"
    return Span


def test_record_makes_what_typing_named_tuple_makes():
    import pickle

    from gtidx import api
    from gtidx.binlog import mariadb as binlog
    from gtidx.gtid import Gtid
    from gtidx.records import record

    for cls in (_span(True), _span(False)):
        s = cls("f", 4, 10)
        assert (repr(s), str(s), s.size, cls("f", 4).end, s._asdict(), s._replace(end=5).size, cls._fields,
                cls._field_defaults, cls.__doc__, cls.__name__, cls.__bases__, cls.parse("f 4 10")) == \
            ("Span(file='f', start=4, end=10)", "f:4", 6, None, {"file": "f", "start": 4, "end": 10}, 1,
             ("file", "start", "end"), {"end": None}, "Where.", "Span", (tuple,), s)
        assert type(cls.parse("f 4 10")) is cls and s == ("f", 4, 10) and cls.__qualname__.endswith(".Span")
        with pytest.raises(TypeError):
            cls("f")

    class Bare:
        a: int
    assert record(Bare).__doc__ == "Bare(a,)"

    class Bad:
        a: int = 0
        b: int
    with pytest.raises(TypeError):
        record(Bad)

    class Bad2:
        a: int

        def _asdict(self):
            return {}
    with pytest.raises(AttributeError):
        record(Bad2)
    # the library's: named, pickled and typed as before
    g = Gtid.parse("0-1-5")
    loc = api.Location(g, "f", 1, 2, 2, 0, "index")
    for v in (g, loc, binlog.Group(g, 1, 2, 0, 0)):
        assert pickle.loads(pickle.dumps(v)) == v and type(pickle.loads(pickle.dumps(v))) is type(v)
    assert repr(g) == "Gtid(domain=0, server=1, seq=5)" and api.Location.__qualname__ == "Location"
    assert loc.occurrences == () and loc.history is None and api.StateAt.position.__doc__


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


# -- index.meta._loads: json.loads, without json for what IndexMeta.to_json writes --------------------

def _same_as_json(raw) -> None:
    from gtidx.index.meta import _loads

    def outcome(loads):
        try:
            return "ok", repr(loads(raw))         # repr: 1 and 1.0 differ, and the keys' order
        except Exception as e:
            return "error", type(e)
    assert outcome(_loads) == outcome(json.loads), raw


_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                            lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids), max_leaves=20)


@settings(max_examples=1500, deadline=None)
@given(_JSON_VALUES, st.booleans(), st.booleans())
def test_loads_is_json_loads_on_json(value, compact, ascii):
    text = json.dumps(value, separators=(",", ":") if compact else None, ensure_ascii=ascii)
    _same_as_json(text.encode())
    _same_as_json(text)


@settings(max_examples=1500, deadline=None)
@given(_JSON_VALUES, st.lists(st.tuples(st.integers(0, 300), st.sampled_from(list(
    '{}[]:,"-+.eE0123456789 \\tnulx\x00\x1f\x7f\u00e9')), st.integers(0, 2))))
def test_loads_is_json_loads_on_damaged_json(value, edits):
    text = json.dumps(value if isinstance(value, dict) else {"v": value}, separators=(",", ":"))
    for at, char, how in edits:           # insert, replace or delete a character
        at %= len(text) + 1
        text = text[:at] + char + text[at + (how == 1):] if how < 2 else text[:at] + text[at + 1:]
    _same_as_json(text.encode())
    _same_as_json(text)


@settings(max_examples=500, deadline=None)
@given(st.binary())
def test_loads_is_json_loads_on_any_bytes(raw):
    _same_as_json(raw)


def test_loads_reads_what_index_meta_writes_without_json():
    from gtidx.index.meta import IndexMeta, Progress
    metas = [IndexMeta(7, 8, 9), IndexMeta(1013153, 2**32 - 1, 0, Progress.PARTIAL, 4096, 65536, 500, 3, 1763900000.125,
                                           ((0, 1, 5, 198), (2, 2**32 - 1, 1, 2**64 - 1)), ((0, 1),), 5, 6,
                                           "stat:2049:12:1013153:1763900000123456789:1763900000123456789")]
    code = ("import sys\nfrom gtidx.index.meta import IndexMeta\n"
            f"raws = {[m.to_json() for m in metas]!r}\n"
            "print([repr(IndexMeta.from_json(r)) for r in raws], 'json' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == f"{[repr(m) for m in metas]!r} False\n", p.stderr


# Class statements made both ways, `record` and typing.NamedTuple, and compared in
# every behaviour a named tuple has (test_record_behaves_as_typing_named_tuple).
# `{deco}` is where `@record` goes, `{base}` where `(NamedTuple)` goes; the class is `C`,
# at the top of a module or in class `Outer`, so that both pickle.
RECORD_SHAPES = {
    "no fields": ("class C{base}:\n    pass\n", "()"),
    "one field, docstring": ('class C{base}:\n    """One."""\n    low: int\n', "x.low"),
    "defaults": ("class C{base}:\n    low: int\n    high: str = 'b'\n    items: list = None\n", "(x.high, x.items)"),
    "all defaults": ("class C{base}:\n    low: int = 1\n    high: int = 2\n", "C()"),
    "methods": ('class C{base}:\n    """Doc."""\n    low: int\n    high: int = 2\n    K = 7\n\n'
                "    @property\n    def total(self):\n        'The sum.'\n        return self.low + self.high\n\n"
                "    @classmethod\n    def of(cls, text):\n        return cls(*map(int, text.split()))\n\n"
                "    @staticmethod\n    def twice(v):\n        return 2 * v\n\n"
                "    def __str__(self):\n        return f'{{self.low}}/{{self.high}}'\n\n"
                "    def __add__(self, other):\n"
                "        return type(self)(self.low + other.low, self.high + other.high)\n",
                "(x.total, C.of('3 4'), C.twice(x.low), str(x), x + x, C.K, C.total.__doc__)"),
    "nested": ("class Outer:\n    {deco}\n    class C{base}:\n        low: int\n        high: 'int | None' = None\n",
               "Outer.C.__qualname__"),
}
_NAMED_TUPLE_OWN = ("_make", "_replace", "__repr__", "_asdict", "__getnewargs__")


def _both_ways(source: str, monkeypatch, tag: str) -> tuple:
    """The class `C` of ``source`` (a RECORD_SHAPES template) made by ``record`` and by
    typing.NamedTuple, each in a module of its own (in sys.modules, so that it pickles)."""
    import types
    from typing import NamedTuple

    from gtidx.records import record
    made = []
    for way, deco, base in (("record", "@record", ""), ("typing", "", "(NamedTuple)")):
        module = types.ModuleType(f"_record_shape_{way}_{tag}")
        module.record, module.NamedTuple = record, NamedTuple
        monkeypatch.setitem(sys.modules, module.__name__, module)
        text = source.replace("{deco}", deco).replace("{base}", base).replace("{{", "{").replace("}}", "}")
        exec(compile((deco + "\n" if not source.startswith("class Outer") else "") + text, module.__name__, "exec"),
             module.__dict__)
        made.append((module, getattr(module, "Outer", module).C))
    return tuple(made)


def _outcome(call):
    try:
        return "ok", repr(call())
    except Exception as e:              # the type and the message, compared between the two ways
        return type(e).__name__, str(e)


def _named_tuple_behaviour(module, cls, probe: str = "()") -> dict:
    """What a user can see of named tuple class ``cls`` (made in ``module``), as comparable values."""
    import copy
    import inspect
    import pickle
    import re
    from typing import ForwardRef

    fields = cls._fields
    own = vars(cls)
    seen = {"names": (cls.__name__, cls.__qualname__, cls.__module__ == module.__name__, cls.__doc__),
            "bases": (cls.__bases__, [c.__name__ for c in cls.__mro__]),
            "named tuple": (fields, cls._field_defaults, cls.__match_args__, cls.__slots__),
            "annotations": {k: v.__forward_arg__ if isinstance(v, ForwardRef) else v
                            for k, v in cls.__annotations__.items()},
            # less __orig_bases__, (typing.NamedTuple,): what a class statement with that base leaves
            "attributes": sorted(set(own) - {"__orig_bases__"}),
            "signature": re.sub(r"ForwardRef\(('[^']*')\)", r"\1", str(inspect.signature(cls))),
            "__new__": (cls.__new__.__name__, cls.__new__.__qualname__, cls.__new__.__doc__,
                        cls.__new__.__defaults__, cls.__new__.__kwdefaults__, sorted(cls.__new__.__annotations__)),
            "own methods": [(m, type(own[m]).__name__, getattr(cls, m).__qualname__, getattr(cls, m).__doc__)
                            for m in _NAMED_TUPLE_OWN],
            "fields": [(f, type(own[f]).__name__, own[f].__doc__) for f in fields],
            "class statement's": [(k, type(v).__name__, v if isinstance(v, (int, str, tuple, type(None))) else
                                   v.__doc__)
                                  for k, v in sorted(own.items()) if k not in fields and k not in _NAMED_TUPLE_OWN
                                  and k not in ("__module__", "__new__", "__annotations__", "_field_defaults",
                                                "__orig_bases__")]}
    values = list(range(10, 10 + len(fields)))
    required = len(fields) - len(cls._field_defaults)
    x = cls(*values)
    kw = cls(**dict(zip(fields, values)))
    seen["instance"] = (repr(x), str(x), x == tuple(values), hash(x) == hash(tuple(values)), kw == x,
                        repr(cls(*values[:required])), x._asdict(), repr(cls._make(values)), repr(x._replace()),
                        [getattr(x, f) for f in fields], type(x._make(values)) is cls, eval(probe, vars(module), {
                            "C": cls, "x": x}))
    if fields:
        seen["_replace"] = repr(x._replace(**{fields[-1]: "new"}))
    seen["copies"] = [(repr(y), type(y) is cls) for y in (copy.copy(x), copy.deepcopy(x), *(
        pickle.loads(pickle.dumps(x, protocol)) for protocol in range(pickle.HIGHEST_PROTOCOL + 1)))]
    seen["errors"] = [_outcome(call) for call in (
        lambda: cls(*values, 99), lambda: cls(*values[:max(required - 1, 0)]), lambda: cls(nosuch=1),
        lambda: cls(*values, **{f: 1 for f in fields[:1]}), lambda: x._replace(nosuch=1),
        lambda: cls._make([*values, 1]), lambda: cls._make(values[:-1]), lambda: cls(*values[:1], *values))]
    return seen


@pytest.mark.parametrize("shape", sorted(RECORD_SHAPES))
def test_record_behaves_as_typing_named_tuple(shape, monkeypatch):
    source, probe = RECORD_SHAPES[shape]
    (rec_module, rec), (typ_module, typ) = _both_ways(source, monkeypatch, shape.replace(" ", "_").replace(",", ""))
    assert typ.__bases__ == (tuple,) and rec is not typ
    got, want = _named_tuple_behaviour(rec_module, rec, probe), _named_tuple_behaviour(typ_module, typ, probe)
    for key in want:
        assert got[key] == want[key], key
    assert got.keys() == want.keys()


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 15).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_record_of_any_width_behaves_as_typing_named_tuple(shape):
    """Field counts past those whose ``__new__`` comes precompiled (``records._NEW``) too."""
    count, with_defaults = shape
    lines = [f"    f{i}: int" + (f" = {-i}" if i >= count - with_defaults else "") for i in range(count)]
    source = "class C{base}:\n" + ("\n".join(lines) or "    pass") + "\n"
    with pytest.MonkeyPatch.context() as monkeypatch:
        (rec_module, rec), (typ_module, typ) = _both_ways(source, monkeypatch, f"{count}_{with_defaults}")
        assert _named_tuple_behaviour(rec_module, rec) == _named_tuple_behaviour(typ_module, typ)


@pytest.mark.parametrize("body", ["a: int = 0\n    b: int", "_a: int", "_a: int = 0\n    b: int",
                                  "a: int\n    def _replace(self):\n        pass", "a: int\n    __slots__ = ()",
                                  "_a: int\n    def _make(self):\n        pass"])
def test_record_refuses_what_typing_named_tuple_refuses(body, monkeypatch):
    from typing import NamedTuple

    from gtidx.records import record
    errors = []
    for make in (record, lambda cls: NamedTuple(cls.__name__, [])):
        scope = {}
        try:
            if make is record:
                exec(f"class C:\n    {body}\n", scope)
                record(scope["C"])
            else:
                exec(f"class C(NamedTuple):\n    {body}\n", {"NamedTuple": NamedTuple})
        except Exception as e:
            errors.append((type(e), str(e)))
    assert len(errors) == 2 and errors[0] == errors[1], errors


def test_records_docstring_examples_run():
    import doctest

    import gtidx.records
    result = doctest.testmod(gtidx.records)
    assert result.attempted > 0 and result.failed == 0
