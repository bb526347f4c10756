"""How long a test waits before a hang becomes a failure.

No test bounds a time more tightly than this: a loaded or slower machine takes
several times longer than the one a test was written on, and a speed claim is a
benchmark's (bench/, docs/benchmarks.md), never a test's. Each wait guarded by
:data:`HANG_GUARD` takes a few seconds at most here: the guard is at least ten
times that, and only turns a hang into a failure.
"""

#: seconds
HANG_GUARD = 60.0
