"""Shadow mode: run a reference engine beside the primary and record whether they agree.

``gw.execute(sql, engine="a", shadow="b")`` runs the statement on ``a`` and,
concurrently, on ``b``; it returns ``a``'s answer with a :class:`ShadowRecord`
attached as ``result.shadow``. A ``[shadow]`` section in the configuration
shadows every query the gateway runs on its primary engine::

    [shadow]
    primary = "duck"       # the engine whose queries are shadowed (default: every engine)
    reference = "duck_old" # the engine that answers beside it
    sample = 0.1           # the share of queries shadowed
    timeout = 30           # seconds the caller waits for the reference once the primary is done
    background = false     # true: the answer's end never waits; the verdict follows
    noise = true           # run the reference twice; what differs is nondeterministic
    shadow_writes = false  # true only when the reference is a separate copy of the data
    store = ".arrowgate/shadow"  # where records are appended (false: nowhere)
    max_compare_bytes = 268435456     # both answers kept whole up to this; streamed above it
    keep_reference_bytes = 67108864   # record.reference_answer() up to this size
    uncut_rows = 0         # > 0: a LIMIT's rows checked against the reference's answer without it
    rel_tol = 1e-9         # and any other gateway.verify.verdict.CompareOptions field

What is never shadowed (the record says why, ``status = "skipped"``):
statements that change data or schema, unless ``shadow_writes = true``
(shadowing an INSERT into a shared lake would write it twice); queries
carrying the comment ``-- arrowgate: shadow=off``; queries left out of the
sample (these are not stored).

The primary's answer streams to the caller: each batch is handed on as the
engine produces it and teed to the comparison, while the reference runs in a
thread of its own (:mod:`gateway.shadow.run`). The comparison keeps both
answers up to ``max_compare_bytes`` (default 256 MiB); above it they are
compared in full by the streaming comparison (:mod:`gateway.verify.compare_stream`:
spilled to disk, compared slice by slice by value, unequal rows paired by
value), and the verdict says so
(:mod:`gateway.shadow.answer`). ``result.shadow`` is ``pending`` until the
answer has been read to its end; then the reference gets ``timeout`` more
seconds (it is cancelled after that and the verdict is ``error`` with
``QueryTimeout``) and the record is judged, stored and delivered: in the
caller's last read, or, with ``background = true``, by a thread.
``record.done()``, ``record.wait()``, ``record.add_done_callback(fn)`` and
the hook ``arrowgate_shadow_finished`` deliver it, and
``record.reference_answer()`` holds the reference's answer when it is at
most ``keep_reference_bytes`` (default 64 MiB).
Latencies measured while both engines run at once compete for the same
cores; ``arrowgate shadow`` runs them one after the other, and ``arrowgate
bench`` is the place for careful speed figures.
"""
# The package, by the order a shadowed statement meets it:
# - plugin.py: the pipeline's shadow step, reached through the hooks
#   ``arrowgate_shadow_settings`` and ``arrowgate_shadowed`` (gateway/hookspecs.py), so
#   the core never imports this package; registered through the entry point ``shadow``;
# - settings.py: the checked ``[shadow]`` section and what is never shadowed;
# - run.py: both engines run, the primary's answer teed to the comparison;
# - uncut.py: a LIMIT's rows checked against the reference's answer without it;
# - answer.py: each side's answer kept, or spilled and compared streamed;
# - record.py: the verdict and timings, delivered when final;
# - store.py: where records are appended, and what ``shadow report`` reads.
#
# It uses the core (gateway/*.py, gateway.sql) and the verdicts (gateway.verify); no
# front end, and not the capture, fuzz or bench packages.
