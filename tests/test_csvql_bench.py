"""bench/csvql_bench.py's measuring and answer checking (its timings are the lead's to run)."""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("csvql_bench")


def test_a_run_measures_the_child_not_the_benchmark(bench):
    """Peak RSS is the child's own (wait4's ru_maxrss counted this process's pages too)."""
    ballast = bytearray(200 * 2**20)  # this process holds 200 MB more than the child
    code = ("import sys, time; sys.stdout.write('a\\n'); sys.stdout.flush(); "
            "x = bytearray(50 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(0.05)")
    run = bench.run_once([sys.executable, "-c", code])
    assert run.code == 0 and run.output == b"a\n"
    assert 0 < run.first_byte < run.wall
    assert 50 * 2**20 < run.peak_rss < 150 * 2**20
    assert 50 * 2**20 < run.rss_anon <= run.peak_rss
    del ballast


def test_answers_compare_as_sorted_rows_with_numbers_normalised(bench):
    duckdb = b"passenger_count,y,\"count_star()\"\n2,2015,3\n1,2014,4.0\n"
    ours = b"passenger_count,y,count\n1,2014,4\n2,2015,3.000000000001\n"
    assert bench.answer(duckdb) == bench.answer(ours)
    assert bench.answer(duckdb) != bench.answer(b"h\n1,2014,5\n2,2015,3\n")
