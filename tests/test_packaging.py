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
