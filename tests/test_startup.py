"""gateway.startup: the start-up tricks of a short-lived process, in one place.

(The exit without teardown is tested through the console script in
test_cli.py, the lazy pyarrow.compute through a csv query in
test_csv_startup.py.)
"""

from __future__ import annotations

import subprocess
import sys


def test_a_lazy_module_is_imported_on_first_use_only():
    code = ("import sys\n"
            "from gateway.startup import LazyModule\n"
            "tool = LazyModule('json.tool')\n"
            "before = 'json.tool' in sys.modules\n"
            "print(before, callable(tool.main), 'json.tool' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["False", "True", "True"]


def test_the_console_script_raises_the_collectors_first_threshold():
    code = ("import gc, sys, gateway.cli\n"
            "gateway.cli.main = lambda: print(gc.get_threshold()[0]) or 0\n"
            "gateway.cli.entry()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert int(done.stdout) == 100_000
