"""One entry-point group's entry points, read as ``importlib.metadata`` reads them, without it.

Every ``arrowgate`` command finds its plugins this way, and importing
``importlib.metadata`` (email, zipfile, csv and more) cost a one-row
``arrowgate query`` 10-20 ms (docs/benchmarks.md, "Start-up (issue 23)").
:func:`entry_points` reads the ``entry_points.txt`` of every ``*.dist-info``
and ``*.egg-info`` folder on ``sys.path`` in the order ``importlib.metadata``
does, the first distribution of a name winning. Where its answer could differ
(a zip or an egg on the path, a finder of distributions other than Python's
own, a folder named unusually) it asks ``importlib.metadata`` itself.
tests/test_entry_points.py holds the two to the same answers.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from functools import reduce
from typing import Any, Final

from gateway.records import FrozenRecord

_INFO = (".dist-info", ".egg-info")


class EntryPoint(FrozenRecord):
    """``name = value`` of a group; :meth:`load` imports ``module[:attr.attr]``."""

    __slots__ = ("name", "value", "group")
    name: Final[str]
    value: Final[str]
    group: Final[str]

    def __init__(self, name: str, value: str, group: str) -> None:
        self.name, self.value, self.group = name, value, group

    def load(self) -> Any:
        module, _, attrs = self.value.partition(":")
        found = importlib.import_module(module.strip())
        return reduce(getattr, [a for a in attrs.strip().split(".") if a], found)


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group``, of every distribution on ``sys.path``.

    Raises:
        ValueError: an ``entry_points.txt`` has a line in the group that is no
            ``name = value`` (importlib.metadata's error).
    """
    found = _read(group, list(sys.path))
    if found is None:
        from importlib.metadata import entry_points as read

        return list(read(group=group))
    return found


def _read(group: str, paths: list[str]) -> list[Any] | None:
    """As :func:`entry_points`; None where importlib.metadata might read otherwise."""
    from importlib.machinery import PathFinder

    if any(hasattr(finder, "find_distributions") and finder is not PathFinder
           for finder in sys.meta_path):
        return None
    seen: set[str] = set()
    answer: list[Any] = []
    for root in paths:
        folder = root or "."
        if os.path.basename(folder).lower().endswith(".egg"):
            return None
        try:
            children = os.listdir(folder)
        except FileNotFoundError:
            continue
        except OSError:  # a zip, or a folder it cannot list: importlib.metadata's to read
            return None
        infos: dict[str, list[str]] = {}
        for child in children:
            if not child.lower().endswith(_INFO):
                continue
            if not child.endswith(_INFO):  # its name would come from its METADATA
                return None
            stem = child.rpartition(".")[0]
            infos.setdefault(_normalize(stem.lower().partition("-")[0]), []).append(child)
        for children_of_name in infos.values():
            for child in children_of_name:
                name = _normalize(child.rpartition(".")[0].partition("-")[0])
                if name in seen:
                    continue
                seen.add(name)
                points = _group(os.path.join(folder, child), group)
                if points is None:
                    return None
                answer.extend(points)
    return answer


def _group(info: str, group: str) -> list[EntryPoint] | None:
    try:
        with open(os.path.join(info, "entry_points.txt"), encoding="utf-8") as fh:
            text = fh.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return []
    section = None
    answer = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue
        if "=" not in line:  # importlib.metadata fails on it, in whichever group it is
            return None
        if section == group:
            name, _, value = line.partition("=")
            answer.append(EntryPoint(name.strip(), value.strip(), group))
    return answer


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")
