"""What the installed package imports is what pyproject.toml declares.

The suite's venv holds every extra (and what they bring: numpy, pandas...), so a module
that imports an undeclared package passes every other test and fails in a user's
clean venv ("No module named 'numpy'" on a shadowed query, issue #38). Two checks:
every import in gateway/ and plugins/ names a declared distribution, and a shadowed
query and the demo run with everything outside the base install's dependency tree
made unimportable.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(requirements: list[str]) -> set[str]:
    return {_normal(Requirement(r).name) for r in requirements}


BASE = _declared(PYPROJECT["dependencies"])
EXTRAS = {name: _declared(reqs) for name, reqs in PYPROJECT["optional-dependencies"].items()
          if name not in ("dev", "all")}


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:`` (never run)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for part in node.body for n in ast.walk(part)}
    return skipped


def _third_party_imports() -> dict[str, set[Path]]:
    """Each outside top-level module imported by the package, with the files importing it."""
    found: dict[str, set[Path]] = {}
    files = [*(ROOT / "gateway").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top in sys.stdlib_module_names or top == "gateway" \
                        or top.startswith("gateway_"):
                    continue
                found.setdefault(top, set()).add(path)
    return found


def _names_extra(text: str, extra: str) -> bool:
    """Whether ``text`` tells how to install ``extra`` (gateway.errors.install_extra)."""
    return any(said in text for said in (f"arrowgate[{extra}]", f'install_extra("{extra}")',
                                         f"arrowgate's {extra} extra"))


def test_every_import_of_the_package_is_a_declared_dependency() -> None:
    distributions = md.packages_distributions()
    wrong = []
    for module, files in sorted(_third_party_imports().items()):
        names = {_normal(d) for d in distributions.get(module, [])}
        where = ", ".join(sorted(str(f.relative_to(ROOT)) for f in files))
        if names & BASE:
            continue
        extras = sorted(extra for extra, declared in EXTRAS.items() if names & declared)
        if not extras:
            wrong.append(f"{module} (imported by {where}) is in no dependency nor extra")
            continue
        # an optional import says, where it is made (or its package does), which extra
        # brings it
        for path in files:
            said = [path, *(p / "__init__.py" for p in path.parents if ROOT in p.parents)]
            if not any(_names_extra(f.read_text(), extra) for f in said if f.exists()
                       for extra in extras):
                wrong.append(f"{path.relative_to(ROOT)} imports {module} (extra "
                             f"{' or '.join(extras)}) without naming the extra to install")
    assert not wrong, "\n".join(wrong)


def test_all_holds_every_extra() -> None:
    named = set()
    for requirement in map(Requirement, PYPROJECT["optional-dependencies"]["all"]):
        assert requirement.name == "arrowgate", "all names extras, not packages"
        named |= requirement.extras
    assert named == set(EXTRAS)


def _base_closure() -> set[str]:
    """The distributions a plain install of arrowgate brings: its dependencies, theirs..."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in PYPROJECT["dependencies"]]
    while todo:
        req = todo.pop()
        name = _normal(req.name)
        if name in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        try:
            todo += [Requirement(r) for r in md.requires(req.name) or []]
        except md.PackageNotFoundError:
            continue
    return seen


#: run in a subprocess before arrowgate: what a clean venv lacks cannot be imported
_BLOCKER = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Absent())
for name in list(sys.modules):
    if name.partition(".")[0] in BLOCKED:
        del sys.modules[name]
sys.argv = ["arrowgate", *{argv!r}]
from gateway.cli import console
console()
"""


def _run_base_only(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # the example plugin is installed beside arrowgate here, and loaded at start
    allowed = _base_closure() | {"arrowgate", "arrowgate-plugin-minimal"}
    blocked = sorted(module for module, dists in md.packages_distributions().items()
                     if not {_normal(d) for d in dists} & allowed
                     and module not in sys.stdlib_module_names
                     and module != "gateway" and not module.startswith("gateway_"))
    assert "numpy" in blocked  # what pyarrow no longer brings
    script = textwrap.dedent(_BLOCKER).format(blocked=blocked, argv=list(argv))
    return subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)  # a hang guard, 10x and more a normal run


def test_a_shadowed_query_runs_on_the_base_install_alone(tmp_path: Path) -> None:
    (tmp_path / "arrowgate.toml").write_text(
        'default_engine = "duck"\n[engines.duck]\ntype = "duckdb"\n'
        '[engines.d2]\ntype = "duckdb"\n')
    done = _run_base_only(tmp_path, "query", "-e", "duck", "--shadow", "d2",
                          "SELECT 42 AS a, [1, 2] AS l, INTERVAL 3 DAY AS i, "
                          "'12345678-1234-5678-1234-567812345678'::UUID AS u")
    assert done.returncode == 0, done.stderr
    assert "42" in done.stdout
    assert "match" in done.stdout


def test_the_demo_runs_on_the_base_install_alone(tmp_path: Path) -> None:
    done = _run_base_only(tmp_path, "demo")
    assert done.returncode == 0, done.stderr
    assert "match" in done.stdout
