"""Benchmarking: engines timed on the same queries, answers checked first.

:mod:`~gateway.benchmark.runner` runs a corpus on each contender (answers compared with
:mod:`gateway.verify` before any timing, engines alternated, the median of rounds
with their spread, peak memory); :mod:`~gateway.benchmark.contenders` gives each engine a
process of its own; :mod:`~gateway.benchmark.chart` draws the latencies. It uses the
core, :mod:`gateway.sql` (query corpora) and the verdicts; nothing above them.
"""
