"""``python -m gateway.cli``: the ``arrowgate`` command."""

from gateway.cli.main import entry

entry()
