"""A regular (non-editable) install ships every package in the tree.

The editable install that the test suite runs on imports straight from the
source folders, so a package missing from pyproject's list only shows up for a
user who installed a wheel: ``arrowgate`` then dies with ModuleNotFoundError.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_in_the_tree_is_listed_in_pyproject():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    package_dir = setuptools["package-dir"]
    in_tree = set()
    for top, folder in package_dir.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            in_tree.add(".".join((top, *rel.parts)))
    assert in_tree - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - in_tree == set(), "these listed packages have no folder"


def _built(tmp_path: Path) -> tuple[set[str], set[str]]:
    """The file names in a wheel and an sdist built from this tree."""
    import shutil
    import subprocess
    import sys
    import tarfile
    import zipfile

    # a copy, so no build/ folder left by an earlier build leaks into this one
    tree, out = tmp_path / "tree", tmp_path / "dist"
    shutil.copytree(ROOT, tree, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
        "*.so", "bench", ".arrowgate"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(tree)], check=True, capture_output=True, timeout=300)
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                    "b.build_sdist(sys.argv[1])", str(out)], check=True, capture_output=True,
                   cwd=tree, timeout=300)
    wheel = zipfile.ZipFile(next(out.glob("*.whl"))).namelist()
    with tarfile.open(next(out.glob("*.tar.gz"))) as sdist:
        members = [m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name]
    return set(wheel), set(members)


def test_the_wheel_and_the_sdist_carry_the_license_and_the_quickstart(tmp_path):
    wheel, sdist = _built(tmp_path)
    assert "arrowgate-0.1.0.dist-info/licenses/LICENSE" in wheel
    assert "LICENSE" in sdist
    for name in ("arrowgate.toml", "demo.sql", "queries.sql", "data/trips.csv", "data/zones.csv"):
        assert f"gateway/quickstart/{name}" in wheel
        assert f"gateway/quickstart/{name}" in sdist
    # the tests need the repository (fixtures, conftest.py, dev.py): none half-shipped
    assert not any(name.startswith("tests/") for name in sdist)
    assert "plugins/gateway_csv/_mapfile.h" in sdist


def test_the_license_is_the_one_pyproject_names():
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] \
        == "Apache-2.0"
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()


def test_init_writes_a_quickstart_that_runs_outside_the_repository(cli, tmp_path):
    folder = tmp_path / "qs"
    assert cli("init", str(folder)).code == 0
    assert "../" not in (folder / "arrowgate.toml").read_text()
    done = cli("--config", str(folder / "arrowgate.toml"), "query", "--format", "csv",
               "-f", str(folder / "demo.sql"))
    assert done.code == 0, done.err
    assert done.out.splitlines()[1] == '"yellow",254,13.61'
    again = cli("init", str(folder))
    assert again.code == 2
    assert again.err.startswith(f"arrowgate init: error: not overwriting {folder}")


def test_demo_runs_the_quickstart(cli):
    done = cli("demo")
    assert done.code == 0, done.err
    assert "shadow duck: match: 3 rows agree" in done.out
    assert "5 queries, scan vs duck: 5 match. OK" in done.out
