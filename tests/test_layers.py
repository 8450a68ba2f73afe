"""The house's rules, checked statically over gtidx/ and tools/ (every .py
parsed with ``ast``; nothing imported):

- no import circle among gtidx's modules, nor among tools' (every import
  counts: module-level, function-level and under TYPE_CHECKING; relative
  imports resolved);
- no module of gtidx reaches for a private name (``_name``, not
  ``__dunder__``) of another gtidx module, by ``from X import _name`` or
  ``X._name``: a helper used across modules is public in the module that owns
  its rule (``gtidx._skip`` and ``gtidx._rows``, the C extension modules, are imported as modules);
- no gtidx module over 600 lines;
- no comment or docstring says which issue asked for something ("issue 16"):
  they say what and why;
- gtidx/records.py is gone;
- the flavor of binlogs is decided in one place: only gtidx/series/listing.py
  and the façade gtidx/api.py call ``file_flavor`` / ``flavor_of_files``,
  compare with a flavor string (``== "mysql"``) or branch on a ``.mysql`` flag.

Each checker is a function of (root, package) returning the violations as
lines naming the file, the line and the offending text, so that a failure
says what to fix; the checkers are tested on small fake packages first.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
FLAVOR_DECIDERS = ("gtidx/series/listing.py", "gtidx/api.py")
FLAVOR_CALLS = ("file_flavor", "flavor_of_files")
FLAVOR_STRINGS = ("mysql", "mariadb")
FLAVOR_TESTS = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)   # not ``in``: "mariadb" in a version string reads bytes
ISSUE = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
ALLOWED_PRIVATE_MODULES = {"gtidx._skip", "gtidx._rows"}


class Import(NamedTuple):
    """One import statement's edge: from ``module`` (dotted) at ``line`` to
    ``target`` (a module of the scanned package), with the names taken from it."""
    module: str
    line: int
    target: str
    names: tuple[str, ...]
    text: str


def modules(root: Path, package: str) -> dict[str, Path]:
    """{dotted module name: its file} of every .py under root/package."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _base(module: str, path: Path, level: int) -> str:
    """The package a relative import of ``level`` dots in ``module`` starts from."""
    parts = module.split(".")
    if path.name != "__init__.py":
        parts = parts[:-1]
    if level > 1:
        parts = parts[:len(parts) - (level - 1)]
    return ".".join(parts)


def _resolve(name: str, known: dict) -> str | None:
    """The longest prefix of the dotted ``name`` that is a known module."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in known:
            return candidate
    return None


def imports(root: Path, package: str) -> tuple[dict[str, Path], list[Import]]:
    """Every import (at any depth of the tree) of the package's modules that
    names one of its own modules."""
    known = modules(root, package)
    edges = []
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _resolve(alias.name, known)
                    if target:
                        edges.append(Import(mod, node.lineno, target, (), f"import {alias.name}"))
            elif isinstance(node, ast.ImportFrom):
                src = node.module or ""
                if node.level:
                    src = _base(mod, path, node.level) + ("." + src if src else "")
                text = f"from {'.' * node.level}{node.module or ''} import " + \
                    ", ".join(a.name for a in node.names)
                for alias in node.names:
                    sub = f"{src}.{alias.name}"
                    if sub in known:                 # from package import module: runs both
                        edges.append(Import(mod, node.lineno, sub, (), text))
                        if src in known:             # and the package's __init__ with it
                            edges.append(Import(mod, node.lineno, src, (), text))
                    else:
                        target = _resolve(src, known)
                        if target:
                            edges.append(Import(mod, node.lineno, target, (alias.name,), text))
    return known, edges


def circles(root: Path, package: str) -> list[str]:
    """One line per import circle (a strongly connected set of modules): a
    path around it, each step with the importing line."""
    known, edges = imports(root, package)
    graph: dict[str, dict[str, Import]] = {m: {} for m in known}
    for e in edges:
        if e.target != e.module:                 # a module naming itself is no circle
            graph[e.module].setdefault(e.target, e)
    index, low, stack, on, comps = {}, {}, [], set(), []

    def strong(v):                               # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                comps.append(set(comp))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    out = []
    for comp in comps:
        start = min(comp)
        path, seen, v = [start], {start}, start
        while True:                              # walk inside the set until a module repeats
            w = min(w for w in graph[v] if w in comp)
            path.append(w)
            if w in seen:
                break
            seen.add(w)
            v = w
        cut = path.index(path[-1])
        steps = [f"{a} (line {graph[a][b].line}: {graph[a][b].text}) -> " for a, b in zip(path[cut:], path[cut + 1:])]
        out.append("circle: " + "".join(steps) + path[-1] + f"   [all in the circle: {', '.join(sorted(comp))}]")
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _rel(root: Path, path: Path) -> str:
    return str(path.relative_to(root))


def private_reaches(root: Path, package: str) -> list[str]:
    """``from X import _name`` and ``X._name`` where X is another module of the package."""
    known, edges = imports(root, package)
    out = []
    taken: dict = {}                             # (module, line, target) -> the private names, in order
    for e in edges:
        for name in e.names:
            if _private(name) and e.target != e.module and f"{e.target}.{name}" not in ALLOWED_PRIVATE_MODULES:
                taken.setdefault((e.module, e.line, e.target), []).append(name)
    for (mod, line, target), names in taken.items():
        out.append(f"{_rel(root, known[mod])}:{line}: from {target} import {', '.join(names)}  "
                   f"(private to {target})")
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        bound: dict[str, str] = {}               # local name -> the module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if _resolve(a.name, known):
                        bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                src = node.module or ""
                if node.level:
                    src = _base(mod, path, node.level) + ("." + src if src else "")
                for a in node.names:
                    if f"{src}.{a.name}" in known:
                        bound[a.asname or a.name] = f"{src}.{a.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                chain, v = [], node.value
                while isinstance(v, ast.Attribute):
                    chain.append(v.attr)
                    v = v.value
                if not isinstance(v, ast.Name) or v.id not in bound:
                    continue
                dotted = ".".join([bound[v.id], *reversed(chain)])
                if dotted in known and dotted != mod and f"{dotted}.{node.attr}" not in ALLOWED_PRIVATE_MODULES:
                    out.append(f"{_rel(root, path)}:{node.lineno}: {ast.unparse(node)}  (private to {dotted})")
    return out


def long_modules(root: Path, package: str, limit: int = MAX_LINES) -> list[str]:
    out = []
    for path in modules(root, package).values():
        n = len(path.read_text().splitlines())
        if n > limit:
            out.append(f"{_rel(root, path)}: {n} lines (at most {limit})")
    return out


def issue_mentions(root: Path, package: str) -> list[str]:
    """Comments and docstrings that name an issue ("issue 16", "issues 3")."""
    out = []
    for path in modules(root, package).values():
        text = path.read_text()
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT and ISSUE.search(tok.string):
                out.append(f"{_rel(root, path)}:{tok.start[0]}: comment {tok.string.strip()!r}")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc and ISSUE.search(doc):
                    line = node.body[0].lineno + doc[:ISSUE.search(doc).start()].count("\n")
                    out.append(f"{_rel(root, path)}:{line}: docstring: ...{ISSUE.search(doc).group(0)}...")
    return out


def flavor_decisions(root: Path, package: str, deciders=FLAVOR_DECIDERS) -> list[str]:
    """Places outside ``deciders`` that decide a flavor: calls of
    file_flavor / flavor_of_files, comparisons with "mysql" / "mariadb", and
    branches on a ``.mysql`` attribute (if, while, ``x if c else y``, and / or,
    not). Defining the functions, or a class stating its own flavor
    (``flavor = "mysql"``), is no decision."""
    out = []
    for path in modules(root, package).values():
        rel = _rel(root, path)
        found = []
        if rel in deciders:
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in FLAVOR_CALLS:
                    found.append(f"{rel}:{node.lineno}: calls {ast.unparse(node)}")
            elif isinstance(node, ast.Compare) and all(isinstance(op, FLAVOR_TESTS) for op in node.ops):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Constant) and s.value in FLAVOR_STRINGS for s in sides):
                    found.append(f"{rel}:{node.lineno}: compares with a flavor: {ast.unparse(node)}")
            tests = []
            if isinstance(node, (ast.If, ast.While, ast.IfExp)):
                tests = [node.test]
            elif isinstance(node, ast.BoolOp):
                tests = node.values
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                tests = [node.operand]
            for t in tests:
                if isinstance(t, ast.Attribute) and t.attr == "mysql":
                    found.append(f"{rel}:{t.lineno}: branches on the flavor: {ast.unparse(t)}")
        out += sorted(found, key=lambda f: (int(f.split(":")[1]), f))
    return out


def _fail_if(found: list[str], what: str) -> None:
    if found:
        pytest.fail(f"{len(found)} {what}:\n  " + "\n  ".join(found), pytrace=False)


# -- the rules, over the real tree --------------------------------------------------------------------

def test_no_import_circle_in_gtidx():
    _fail_if(circles(ROOT, "gtidx"), "import circle(s) among gtidx's modules")


def test_no_import_circle_in_tools():
    _fail_if(circles(ROOT, "tools"), "import circle(s) among tools' modules")


def test_no_private_name_of_another_gtidx_module():
    _fail_if(private_reaches(ROOT, "gtidx"), "use(s) of another gtidx module's private name (make it public "
                                            "in the module that owns the rule)")


def test_no_gtidx_module_over_600_lines():
    _fail_if(long_modules(ROOT, "gtidx"), "gtidx module(s) over 600 lines")


@pytest.mark.parametrize("package", ["gtidx", "tools"])
def test_no_comment_names_an_issue(package):
    _fail_if(issue_mentions(ROOT, package), "comment(s)/docstring(s) naming an issue (say what and why)")


def test_records_module_is_gone():
    assert not (ROOT / "gtidx" / "records.py").exists(), "gtidx/records.py still exists"


def test_the_facade_decides_the_flavor():
    _fail_if(flavor_decisions(ROOT, "gtidx"), "flavor decision(s) outside gtidx/series/listing.py and gtidx/api.py")


# -- the checkers, on small fake packages ---------------------------------------------------------------

def fake(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_checker_finds_circles_through_any_import(tmp_path):
    root = fake(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .sub import b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "import os\n\ndef f():\n    from ..c import g\n",       # function-level, relative
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\ng = 1\n",
        "pkg/d.py": "from pkg.a import x\n"})                                    # into the circle, not in it
    found = circles(root, "pkg")
    assert len(found) == 1, found
    assert found[0] == ("circle: pkg.a (line 1: from .sub import b) -> pkg.sub.b (line 4: from ..c import g) -> "
                        "pkg.c (line 3: from pkg import a) -> pkg.a   [all in the circle: pkg.a, pkg.c, pkg.sub.b]")
    (root / "pkg" / "c.py").write_text("g = 1\n")
    assert circles(root, "pkg") == []


def test_checker_finds_two_module_circle_and_self_import_is_none(tmp_path):
    root = fake(tmp_path, {"t/__init__.py": "", "t/x.py": "import t.y\n", "t/y.py": "from t import x\n",
                           "t/z.py": "from . import z\n"})     # z naming itself: a module, no circle of two
    found = circles(root, "t")
    assert [f.split("   [")[0] for f in found] == [
        "circle: t.x (line 1: import t.y) -> t.y (line 1: from t import x) -> t.x"]


def test_checker_finds_a_circle_through_a_package_init(tmp_path):
    """``from . import wire`` runs the package's __init__ too: where that
    __init__ imports the importer, it is a circle."""
    root = fake(tmp_path, {"s/__init__.py": "from .server import Server\n", "s/server.py": "from .session import S\n",
                           "s/session.py": "from . import wire\n", "s/wire.py": ""})
    found = circles(root, "s")
    assert [f.split("   [")[0] for f in found] == [
        "circle: s (line 1: from .server import Server) -> s.server (line 1: from .session import S) -> "
        "s.session (line 1: from . import wire) -> s"]
    (root / "s" / "session.py").write_text("from .wire import x\n")
    assert circles(root, "s") == []


def test_checker_finds_private_names_of_other_modules(tmp_path):
    root = fake(tmp_path, {
        "gtidx/__init__.py": "",
        "gtidx/own.py": "_helper = 1\n__all__ = []\nx = _helper\n",
        "gtidx/user.py": ("from .own import _helper, __all__\nfrom gtidx import own\nimport gtidx.own as o\n"
                          "from gtidx import _skip\nimport gtidx._skip\n"
                          "def f(self):\n    return own._helper, o._helper, self._x, gtidx.own._helper\n"
                          "import gtidx\n"),
        "gtidx/sub/__init__.py": "",
        "gtidx/sub/inner.py": "from .. import own\nfrom ..own import public\nown.__doc__\nown._y\n"})
    found = private_reaches(root, "gtidx")
    assert sorted(found) == sorted([
        "gtidx/user.py:1: from gtidx.own import _helper  (private to gtidx.own)",
        "gtidx/sub/inner.py:4: own._y  (private to gtidx.own)",
        "gtidx/user.py:7: own._helper  (private to gtidx.own)",
        "gtidx/user.py:7: o._helper  (private to gtidx.own)",
        "gtidx/user.py:7: gtidx.own._helper  (private to gtidx.own)"]), found


def test_checker_finds_long_modules(tmp_path):
    root = fake(tmp_path, {"gtidx/__init__.py": "", "gtidx/short.py": "x = 1\n" * 600,
                           "gtidx/deep/long.py": "x = 1\n" * 601})
    assert long_modules(root, "gtidx") == ["gtidx/deep/long.py: 601 lines (at most 600)"]


def test_checker_finds_issue_mentions(tmp_path):
    root = fake(tmp_path, {"gtidx/__init__.py": '"""The package."""\n',
                           "gtidx/m.py": ('"""A module.\n\nAs issue 16 asked."""\n'
                                          'x = "issue 3"   # a string is no comment\n'
                                          'y = 1  # see Issue #12\n'
                                          'def f():\n    """Not an issue, an issuer 4."""\n'
                                          'class C:\n    """Fixes issues 7."""\n')})
    assert sorted(issue_mentions(root, "gtidx")) == sorted([
        "gtidx/m.py:5: comment '# see Issue #12'",
        "gtidx/m.py:3: docstring: ...issue 16...",
        "gtidx/m.py:9: docstring: ...issues 7..."])


def test_checker_finds_flavor_decisions(tmp_path):
    root = fake(tmp_path, {
        "gtidx/__init__.py": "",
        "gtidx/api.py": "def f(p):\n    return flavor_of_files(p) == 'mysql'\n",
        "gtidx/series/listing.py": "def g(p):\n    return file_flavor(p)\n",
        "gtidx/binlog/mysql.py": "class B:\n    flavor = 'mysql'\n\ndef file_flavor(p):\n    return 'mysql'\n",
        "gtidx/show.py": "def ok(u):\n    return u.scheme not in ('mysql', 'mariadb')\n",
        "gtidx/binlog/mariadb.py": "def is_mariadb(v):\n    return 'mariadb' in v.lower()\n",
        "gtidx/spark/x.py": ("from gtidx import api\n"
                             "def h(p, w, b):\n"
                             "    if api.flavor_of_files(p) == 'mysql':\n"
                             "        pass\n"
                             "    if w.mysql:\n"
                             "        pass\n"
                             "    return b.flavor != \"mariadb\"\n")})
    assert flavor_decisions(root, "gtidx") == [
        "gtidx/spark/x.py:3: calls api.flavor_of_files(p)",
        "gtidx/spark/x.py:3: compares with a flavor: api.flavor_of_files(p) == 'mysql'",
        "gtidx/spark/x.py:5: branches on the flavor: w.mysql",
        "gtidx/spark/x.py:7: compares with a flavor: b.flavor != 'mariadb'"]
