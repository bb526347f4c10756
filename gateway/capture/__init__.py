"""Capture and replay: what clients really sent, run again on other engines.

:mod:`~gateway.capture.captured` writes the statements a served gateway runs (with
their parameters, outcome and timings; secrets masked) into rotated files that a
crash cannot make unreadable, and reads them back as a replay's queries;
:mod:`~gateway.capture.replay_report` turns a replay's shadow records into the
report a person acts on.

It sits above the other subsystems: the report draws the benchmark chart
(:mod:`gateway.benchmark.chart`) and shrinks a divergence with the fuzzer's reducer
(:mod:`gateway.fuzz.reduction`). The replay itself runs through the shadow layer,
driven by the command line (``arrowgate shadow``).
"""
