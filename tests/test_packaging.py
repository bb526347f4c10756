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
    # the examples are data (package data under gateway/examples, a link to examples/)
    data = {name for name in listed if name.startswith("gateway.examples")
            and (ROOT / "examples" / "/".join(name.split(".")[2:])).is_dir()}
    assert listed - in_tree - data == set(), "these listed packages have no folder"


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


def _example_files() -> list[str]:
    """Every file of examples/ that git tracks (the quickstart's data/ is a link to ../data)."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "examples"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    return [name for name in listed if not (ROOT / name).is_symlink()]


def test_the_wheel_and_the_sdist_carry_the_license_and_every_example(tmp_path):
    wheel, sdist = _built(tmp_path)
    assert "arrowgate-0.1.0.dist-info/licenses/LICENSE" in wheel
    assert "LICENSE" in sdist
    examples = _example_files()
    assert "examples/upgrade/app.py" in examples
    for name in examples:
        assert f"gateway/{name}" in wheel, name
        assert f"gateway/{name}" in sdist, name
    # the tests need the repository (fixtures, conftest.py, dev.py): none half-shipped
    assert not any(name.startswith("tests/") for name in sdist)
    assert "plugins/gateway_csv/_mapfile.h" in sdist
    assert "plugins/gateway_csv/_rows.h" in sdist


def test_the_license_is_the_one_pyproject_names():
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] \
        == "Apache-2.0"
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()


def test_init_writes_a_quickstart_that_runs_outside_the_repository(cli, tmp_path):
    folder = tmp_path / "qs"
    assert cli("init", "quickstart", str(folder)).code == 0
    assert "../" not in (folder / "arrowgate.toml").read_text()
    done = cli("--config", str(folder / "arrowgate.toml"), "query", "--format", "csv",
               "-f", str(folder / "demo.sql"))
    assert done.code == 0, done.err
    assert done.out.splitlines()[1] == 'yellow,254,13.61'
    again = cli("init", "quickstart", str(folder))
    assert again.code == 2
    assert again.err.startswith(f"arrowgate init: error: not overwriting {folder}")


def test_demo_runs_the_quickstart(cli):
    done = cli("demo")
    assert done.code == 0, done.err
    assert "shadow duck: match: 3 rows agree" in done.out
    assert "5 queries, scan vs duck: 5 match. OK" in done.out


def test_init_writes_each_example_its_own_files(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("init", "upgrade").code == 0  # into a folder named after it
    written = sorted(str(p.relative_to(tmp_path / "upgrade"))
                     for p in (tmp_path / "upgrade").rglob("*") if p.is_file())
    assert written == ["README.md", "app.py", "arrowgate.toml", "data/trips.csv"]
    assert "duck201" in (tmp_path / "upgrade" / "arrowgate.toml").read_text()
    for name in sorted({n.split("/")[1] for n in _example_files()} - {"data"}):
        assert cli("init", name, str(tmp_path / "all" / name)).code == 0, name
        for path in _example_files():
            if path.startswith(f"examples/{name}/"):
                assert (tmp_path / "all" / name / path.split("/", 2)[2]).is_file(), path


def test_init_of_an_unknown_example_lists_them(cli, tmp_path):
    done = cli("init", "nope", str(tmp_path / "x"))
    assert done.code == 2
    assert "no example named 'nope'" in done.err and "upgrade" in done.err
    assert not (tmp_path / "x").exists()
