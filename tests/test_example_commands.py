"""Each example lists its commands once, in its README.md, with what each needs beyond the
base install; `arrowgate init` prints that list and `python3 dev.py wheel-check` runs it from
the wheel, so the documentation and the check cannot drift apart (issue 38)."""

from __future__ import annotations

import tomllib

import pytest

from gateway.cli.commands.init import example_names
from gateway.cli.example_commands import ExampleCommand, read_commands
from tests.conftest import ROOT

EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
             ["optional-dependencies"])


@pytest.mark.parametrize("name", example_names())
def test_every_example_lists_its_commands_and_what_they_need(name):
    commands = read_commands((ROOT / "examples" / name / "README.md").read_text())
    assert commands, f"examples/{name}/README.md lists no commands under '## Commands'"
    for command in commands:
        # they run in the folder `arrowgate init` writes, not in the repository
        assert "examples/" not in command.text and "--config" not in command.text, command
        for need in command.needs:
            if need.startswith("extra:"):
                assert need[6:] in EXTRAS, f"{command.text}: no extra {need[6:]!r}"
        if command.needs:
            assert command.why, f"{command.text}: say why it needs {command.needs}"


def test_the_block_reads_needs_exit_codes_continuations_and_services():
    readme = """# x

```sh
not this block
```

## Commands

Some words.

```sh
arrowgate query "SELECT 1"
# a plain comment
# needs network, the adbc extra: a service to talk to
# exits 1: divergences fail the gate
arrowgate shadow a.sql \\
    --markdown r.md
# needs a clone of the repository and network: tests/pg.py
arrowgate serve --port 1 &
kill %1   # stop it
```

## Later

```sh
not this one either
```
"""
    assert read_commands(readme) == [
        ExampleCommand('arrowgate query "SELECT 1"'),
        ExampleCommand("arrowgate shadow a.sql --markdown r.md", ("network", "extra:adbc"),
                       "a service to talk to", 1),
        ExampleCommand("arrowgate serve --port 1 &", ("a clone of the repository", "network"),
                       "tests/pg.py"),
        ExampleCommand("kill %1   # stop it"),
    ]
    serve, kill = read_commands(readme)[2:]
    assert serve.background and serve.stops_job is None
    assert kill.stops_job == 1 and not kill.background
    assert serve.missing({"network"}) == ["a clone of the repository"]


def test_init_prints_the_commands_of_the_example_with_what_they_need(cli, tmp_path):
    done = cli("init", "upgrade", str(tmp_path / "up"))
    assert done.code == 0, done.err
    lines = [line.strip() for line in done.err.splitlines()]
    assert "arrowgate serve --port 31338 &" in lines
    assert lines[lines.index("arrowgate serve --port 31338 &") - 1] == "# needs network"
    assert "# needs network and the adbc extra" in lines
    assert (tmp_path / "up" / "README.md").is_file()


@pytest.mark.parametrize("name", example_names())
def test_what_init_writes_keeps_its_files_inside_the_folder(cli, tmp_path, name):
    # examples/shadow kept its records in ../../.arrowgate/shadow: outside a folder `init` wrote
    assert cli("init", name, str(tmp_path / name)).code == 0
    config = tmp_path / name / "arrowgate.toml"
    if config.exists():
        assert "../" not in config.read_text()


def test_the_docs_show_the_upgrade_and_versions_examples_as_their_readmes_list_them():
    for doc, name in (("docs/shadow.md", "upgrade"), ("docs/duckdb-versions.md",
                                                      "duckdb-versions")):
        text = (ROOT / doc).read_text()
        assert f"arrowgate init {name} && cd {name}" in text
        listed = read_commands((ROOT / "examples" / name / "README.md").read_text())
        shown = [c for c in listed if c.text in text]
        assert shown, f"{doc} shows none of examples/{name}/README.md's commands"
