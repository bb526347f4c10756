"""Fuzzing: random queries run on two engines, divergences shrunk to a minimal query.

:mod:`~gateway.fuzz.generator` writes queries from a seed over the tables an engine
has; :mod:`~gateway.fuzz.fuzzer` runs each on both engines and judges them with
:mod:`gateway.verify`; :mod:`~gateway.fuzz.reduction` shrinks a failing query by
tree reduction. It uses the core and the verdicts; nothing above them.
"""
