"""gateway.entry_points reads a group's entry points as importlib.metadata does, without it."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from importlib.metadata import entry_points as metadata_entry_points
from pathlib import Path

import pytest

from gateway.entry_points import entry_points
from tests.conftest import ROOT

#: prints [importlib.metadata's answer, ours] for each group, on a sys.path given in argv
COMPARE = """
import json, sys
groups = json.loads(sys.argv[1])
sys.path[:] = json.loads(sys.argv[2]) + [p for p in sys.path if p]  # and the stdlib (-S)
from gateway.entry_points import entry_points
ours = {g: [[e.name, e.value] for e in entry_points(g)] for g in groups}
loaded = 'importlib.metadata' in sys.modules
import importlib.metadata as m
theirs = {g: [[e.name, e.value] for e in m.entry_points(group=g)] for g in groups}
print(json.dumps([theirs, ours, loaded]))
"""


def compare(groups: list[str], path: list[str]) -> tuple[dict, dict, bool]:
    """(importlib.metadata's, ours, whether ours imported importlib.metadata) on ``path``."""
    done = subprocess.run([sys.executable, "-S", "-c", COMPARE, json.dumps(groups),
                           json.dumps([*path, str(ROOT)])],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    theirs, ours, loaded = json.loads(done.stdout)
    return theirs, ours, loaded


def dist(folder: Path, name: str, text: str | None) -> None:
    (folder / name).mkdir(parents=True)
    if text is not None:
        (folder / name / "entry_points.txt").write_text(text)


@pytest.mark.parametrize("group", ["arrowgate", "console_scripts", "pytest11", "no such group"])
def test_the_installed_entry_points_are_importlib_metadatas(group):
    ours = [(e.name, e.value, e.group) for e in entry_points(group)]
    assert ours == [(e.name, e.value, e.group) for e in metadata_entry_points(group=group)]


def test_folders_of_distributions_are_read_as_importlib_metadata_reads_them(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    dist(one, "Foo_Bar-1.0.dist-info", "[arrowgate]\nfoo = foo_mod:Thing.attr\n"
                                       "# a comment\n\n[other]\nx = y\n")
    dist(one, "zed-2.0.egg-info", "no section = ignored\n[arrowgate]\n  zed=zed_mod  \n"
                                  "; no comment = a name\n")
    dist(one, "none-1.0.dist-info", None)
    (one / "file.dist-info").write_text("not a folder")
    dist(one, "alpha.dist-info", "[arrowgate]\nalpha = a.b.c\n[arrowgate]\nagain = d\n")
    dist(two, "foo.bar-9.dist-info", "[arrowgate]\nshadowed = no\n")  # Foo_Bar came first
    dist(two, "beta-1.dist-info", "[arrowgate]\nfoo = beta\n")
    path = [str(one), str(tmp_path / "missing"), str(two)]
    theirs, ours, loaded = compare(["arrowgate", "other"], path)
    assert ours == theirs
    assert ["foo", "foo_mod:Thing.attr"] in ours["arrowgate"]
    assert ["shadowed", "no"] not in ours["arrowgate"] and ["foo", "beta"] in ours["arrowgate"]
    assert ["; no comment", "a name"] in ours["arrowgate"]
    assert not loaded


def test_a_line_without_a_value_fails_as_in_importlib_metadata(tmp_path):
    dist(tmp_path, "bad-1.dist-info", "[elsewhere]\nno value here\n")
    code = ("import sys\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "from gateway.entry_points import entry_points\n"
            "entry_points('arrowgate')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 1 and "TypeError" in done.stderr, done.stderr


def test_a_zip_on_the_path_is_left_to_importlib_metadata(tmp_path):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped-1.0.dist-info/entry_points.txt", "[arrowgate]\nzipped = zmod\n")
        zf.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
    theirs, ours, loaded = compare(["arrowgate"], [str(archive)])
    assert ours == theirs
    assert ours["arrowgate"][0] == ["zipped", "zmod"]
    assert loaded


def test_an_entry_point_loads_its_object():
    point = next(e for e in entry_points("arrowgate") if e.name == "csv")
    import gateway_csv

    assert point.load() is gateway_csv


def test_a_one_row_query_through_the_cli_leaves_importlib_metadata_unimported(tmp_path):
    """importlib.metadata (email, zipfile, csv, ...) cost a one-shot query 10-20 ms."""
    data = tmp_path / "one.csv"
    data.write_text("a,b\n1,x\n")
    config = tmp_path / "arrowgate.toml"
    config.write_text(f'default_engine = "csv"\n[engines.csv]\ntype = "csv"\n'
                      f'[sources.trips]\npath = "{data}"\n')
    code = ("import sys\nfrom gateway.cli.main import main\n"
            f"code = main(['--config', {str(config)!r}, 'query', 'SELECT a, b FROM trips'])\n"
            "print(code, 'importlib.metadata' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=tmp_path)
    assert done.stderr.split("\n")[-2] == "0 False", done.stderr
