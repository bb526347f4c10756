"""The commands an example documents: the ``## Commands`` block of its README.md.

One list per example, read by ``arrowgate init`` (which prints it) and by
``python3 dev.py wheel-check`` (which runs it from the wheel in the folder ``init``
wrote), so what the documentation says and what is checked cannot drift apart.

The block is shell, one command a line (a trailing backslash continues it), run in the
example's folder. Comment lines just above a command say what it needs beyond the base
install, and how it ends when that is not success; wheel-check skips a command whose
needs it has not at hand, printing why::

    # needs network: DuckDB 1.5.5 is downloaded on first use
    # needs the adbc extra: the ADBC Flight SQL driver
    # needs network, the chart extra: ...
    # exits 1: the replay finds the divergences, as a CI gate should

A command ending in ``&`` is a service left running in the background; ``kill %N``
stops the N-th of them. This module uses only the standard library: dev.py loads it
from the source tree with any Python 3.11.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the heading of the block, in an example's README.md
HEADING = "## Commands"
NETWORK = "network"
_EXTRA = re.compile(r"\Athe ([a-z0-9_-]+) extra\Z")
_NEEDS = re.compile(r"\A#\s*needs (?P<what>[^:]+):\s*(?P<why>.*)\Z")
_EXITS = re.compile(r"\A#\s*exits (?P<code>\d+):")
_KILL = re.compile(r"\Akill %(?P<job>\d+)\b")


@dataclass(frozen=True)
class ExampleCommand:
    """One documented command.

    Attributes:
        text: the command as a shell runs it (continuation lines joined).
        needs: what it needs beyond the base install: ``network``, ``extra:NAME``, or
            the words of anything else (which nothing provides, so it is always skipped).
        why: the reasons given with the needs, joined.
        exit_code: the exit status it ends with when it works.
    """

    text: str
    needs: tuple[str, ...] = ()
    why: str = ""
    exit_code: int = 0

    @property
    def background(self) -> bool:
        """A service: it runs on while the commands after it talk to it."""
        return self.text.endswith("&") and not self.text.endswith("&&")

    @property
    def stops_job(self) -> int | None:
        """N for ``kill %N`` (stop the N-th background command), else None."""
        found = _KILL.match(self.text)
        return int(found.group("job")) if found else None

    def missing(self, at_hand: set[str]) -> list[str]:
        """What of its needs is not in ``at_hand`` (``network``, ``extra:NAME``)."""
        return [need for need in self.needs if need not in at_hand]


def _needs(what: str) -> tuple[str, ...]:
    found = []
    for part in re.split(r",\s*|\s+and\s+", what.strip()):
        part = part.strip()
        extra = _EXTRA.match(part)
        found.append(f"extra:{extra.group(1)}" if extra else part)
    return tuple(p for p in found if p)


def block(readme: str) -> list[str]:
    """The lines of the first ``sh`` block under the ``## Commands`` heading."""
    lines = readme.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == HEADING)
    except StopIteration:
        return []
    inside = False
    found: list[str] = []
    for line in lines[start + 1:]:
        if not inside and line.startswith("## "):
            break
        if line.strip().startswith("```"):
            if inside:
                return found
            inside = line.strip() in ("```sh", "```shell", "```console")
            continue
        if inside:
            found.append(line)
    return found


def read_commands(readme: str) -> list[ExampleCommand]:
    """The commands of an example's README.md, in order (see the module's docstring)."""
    commands: list[ExampleCommand] = []
    needs: list[str] = []
    why: list[str] = []
    code = 0
    pending = ""
    for raw in block(readme):
        line = raw.strip()
        if pending:
            line, pending = pending + " " + line, ""
        if not line:
            continue
        if line.startswith("#"):
            if (n := _NEEDS.match(line)) is not None:
                needs += _needs(n.group("what"))
                why.append(n.group("why").strip())
            elif (e := _EXITS.match(line)) is not None:
                code = int(e.group("code"))
            continue
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        commands.append(ExampleCommand(line, tuple(needs), "; ".join(w for w in why if w),
                                       code))
        needs, why, code = [], [], 0
    return commands


def describe_needs(command: ExampleCommand) -> str:
    """``network and the adbc extra``: the needs as the README says them."""
    words = [f"the {n.split(':', 1)[1]} extra" if n.startswith("extra:") else n
             for n in command.needs]
    return " and ".join(words)
