"""Verdicts: do two answers to the same SQL agree, and if not, how?

One comparator for shadow mode, replays, benchmarks, the fuzzer and the conformance
tests. :mod:`~gateway.verify.compare` decides (two Arrow tables, or an answer or an
error on each side) and :mod:`~gateway.verify.verdict` holds what it hands on;
:mod:`~gateway.verify.compare_types` brings both sides to the types they are compared
in; :mod:`~gateway.verify.row_pairing` pairs rows by value (Arrow, then DuckDB in
:mod:`~gateway.verify.workspace`), :mod:`~gateway.verify.row_hashes` orders rows
so Arrow can compare them and routes them to groups, and
:mod:`~gateway.verify.tied_rows` leaves out what window-function ties leave
undetermined. Answers larger than memory are compared streamed
(:mod:`~gateway.verify.compare_stream`: :mod:`~gateway.verify.spilled_answer`,
:mod:`~gateway.verify.row_match` with its C kernel, :mod:`~gateway.verify.pairing_groups`).
No hash ever decides that two rows are equal.

It uses the core and :mod:`gateway.sql` (what the SQL leaves undetermined, what its
outermost query says); nothing above it.
"""
