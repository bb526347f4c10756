"""Commands from plugins: the ``arrowgate_register_commands`` hook and the commands moved to it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gateway
from gateway.cli.commands import EXIT_OK, add_action, add_command
from gateway.cli.main import COMMAND_NAMES, COMMANDS, build_parser, invoked_command
from tests.conftest import run_arrowgate


class Greeter:
    """An outside plugin adding a command of its own and an action to a core command."""

    @gateway.hookimpl
    def arrowgate_register_commands(self, subparsers):
        hello = add_command(subparsers, "hello", help="say hello",
                            description="Say hello to someone.", examples=["arrowgate hello you"])
        hello.add_argument("who")
        hello.set_defaults(run=lambda args: print(f"hello {args.who}") or EXIT_OK)
        # called after the core commands, so a plugin can extend one of them
        count = add_action(subparsers, "sources", "count", help="count the sources",
                           description="Print how many sources are configured.",
                           summary="`arrowgate sources count` prints how many there are.",
                           examples=["arrowgate sources count"])
        count.set_defaults(run=lambda args: print("many") or EXIT_OK)


def commands(parser):
    return next(a for a in parser._actions if a.dest == "command").choices


def test_arrowgate_register_commands(capsys):
    parser = build_parser(plugins=[Greeter()])
    args = parser.parse_args(["hello", "world"])
    assert args.run(args) == EXIT_OK
    args = parser.parse_args(["sources", "count"])
    assert args.run(args) == EXIT_OK
    assert capsys.readouterr().out == "hello world\nmany\n"
    sources = commands(parser)["sources"].format_help()
    assert "arrowgate sources count` prints" in sources
    assert "examples:\n  arrowgate --config examples/quickstart/arrowgate.toml sources\n" \
        "  arrowgate --config examples/quickstart/arrowgate.toml sources --check\n" \
        "  arrowgate sources count" in sources
    assert "example" in commands(parser)["hello"].format_help()


def test_the_built_in_plugins_register_their_commands_through_the_hook(monkeypatch):
    everything = commands(build_parser())
    assert {"lake", "lakebench"} <= set(everything)
    assert "engines install" in everything["engines"].format_help()
    monkeypatch.setenv("ARROWGATE_PLUGINS", "csv")
    core_only = commands(build_parser())
    assert "lake" not in core_only and "lakebench" not in core_only
    assert "engines install" not in core_only["engines"].format_help()
    assert {"query", "engines", "sources", "data", "shadow", "bench"} <= set(core_only)


def test_a_plugin_that_cannot_load_is_a_configuration_error_not_a_traceback():
    done = run_arrowgate("--help", env={"ARROWGATE_PLUGINS": "no_such_plugin"})
    assert done.returncode == 2
    assert done.stderr.startswith("configuration error:") and "no_such_plugin" in done.stderr


def test_help_imports_no_engine_driver_or_heavy_library():
    code = ("import sys, gateway.cli.main\n"
            "gateway.cli.main.build_parser().format_help()\n"
            "print(sorted(m for m in ('duckdb', 'pyarrow', 'sqlglot', 'adbc_driver_manager',"
            " 'gateway_ducklake.health', 'gateway_ducklake.bench', 'gateway_duckdb.install')"
            " if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_a_plugin_taking_a_command_name_already_taken_is_a_configuration_error():
    class Clash:
        @gateway.hookimpl
        def arrowgate_register_commands(self, subparsers):
            add_command(subparsers, "query", help="mine", description="Mine.", examples=["x"])

    class NoSuchCommand:
        @gateway.hookimpl
        def arrowgate_register_commands(self, subparsers):
            add_action(subparsers, "nothing", "x", help="", description="", summary="",
                       examples=[])

    for plugin, message in [(Clash(), "conflicting subparser: query"),
                            (NoSuchCommand(), "'nothing'")]:
        with pytest.raises(gateway.ConfigError, match=message):
            build_parser(plugins=[plugin])


@pytest.mark.parametrize("argv, module", [
    (["query", "SELECT 1"], "query"),
    (["--config", "c.toml", "query", "--config", "d.toml"], "query"),
    (["--config=c.toml", "sources", "--check"], "sources"),
    (["demo"], "init"),  # init's module adds demo too
    (["lake", "check", "x"], None),  # a plugin's command
    (["--help"], None),
    (["--version"], None),
    (["--conf", "c.toml", "query"], None),  # an abbreviation argparse reads as --config
    (["nothing"], None),
    ([], None),
])
def test_invoked_command(argv, module):
    assert invoked_command(argv) == module


@pytest.mark.parametrize("module", COMMANDS)
def test_a_parser_built_for_one_command_reads_it_as_the_whole_parser_does(module):
    # (an outside plugin adding commands: the others are stand-ins for it to find)
    whole = commands(build_parser(plugins=[Greeter()]))
    alone = commands(build_parser(plugins=[Greeter()], command=module))
    assert set(alone) == set(whole)
    for name in COMMAND_NAMES[module]:
        assert alone[name].format_help() == whole[name].format_help()
    core = {name for names in COMMAND_NAMES.values() for name in names}
    others = [c for c in whole if c not in core and c != "hello"]
    assert others == ["lake", "lakebench"]
    # the built-in plugins' commands are stand-ins (an outside plugin's are built whole:
    # test_a_plugin_meets_the_other_commands_stand_ins_as_it_would_the_commands)
    assert [alone[c].get_default("run") for c in others] == [None, None]
    assert all(whole[c].get_default("run") is not None for c in others)


@pytest.mark.parametrize("module", [m for m in COMMANDS if m != "engines"])  # duckdb extends it
def test_a_parser_for_one_command_makes_no_stand_ins_when_no_other_plugin_adds_commands(module):
    whole, alone = commands(build_parser()), commands(build_parser(command=module))
    names = set(COMMAND_NAMES[module])
    assert set(alone) == names
    assert [alone[name].format_help() for name in sorted(names)] == \
        [whole[name].format_help() for name in sorted(names)]


def test_the_built_in_plugins_commands_are_the_ones_declared():
    """BUILT_IN_COMMANDS names what each built-in plugin's hook adds or changes."""
    from gateway.cli.commands import Parser
    from gateway.plugins import BUILT_IN, BUILT_IN_COMMANDS

    touched = {}
    for name, module in BUILT_IN.items():
        register = getattr(__import__(module), "arrowgate_register_commands", None)
        parser = Parser(prog="arrowgate")
        sub = parser.add_subparsers(dest="command")
        for names in COMMAND_NAMES.values():
            for command in names:
                sub.add_parser(command, add_help=False)
        before = {c: p.format_help() for c, p in sub.choices.items()}
        if register is not None:
            register(subparsers=sub)
        found = tuple(c for c, p in sub.choices.items() if before.get(c) != p.format_help())
        if found:
            touched[name] = found
    assert touched == BUILT_IN_COMMANDS


def test_a_core_command_alone_asks_no_built_in_plugin_that_does_not_extend_it():
    code = ("import sys\n"
            "from gateway.cli.main import build_parser\n"
            "build_parser(command='query')\n"
            "print(sorted(m for m in sys.modules if m.startswith('gateway_') and '.commands' in m))\n"
            "build_parser(command='engines')  # the duckdb plugin adds `engines install`\n"
            "print(sorted(m for m in sys.modules if m.startswith('gateway_') and '.commands' in m))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.splitlines() == ["[]", "['gateway_duckdb.commands']"]


def test_a_plugin_meets_the_other_commands_stand_ins_as_it_would_the_commands():
    parser = build_parser(plugins=[Greeter()], command="query")
    args = parser.parse_args(["hello", "world"])  # its own command is whole
    assert args.run(args) == EXIT_OK
    assert "arrowgate sources count` prints" in commands(build_parser(
        plugins=[Greeter()], command="sources"))["sources"].format_help()

    class Clash:
        @gateway.hookimpl
        def arrowgate_register_commands(self, subparsers):
            add_command(subparsers, "query", help="mine", description="Mine.", examples=["x"])

    with pytest.raises(gateway.ConfigError, match="conflicting subparser: query"):
        build_parser(plugins=[Clash()], command="engines")
