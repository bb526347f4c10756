"""``arrowgate tui``: a Textual SQL console on the core (``pip install 'arrowgate[tui]'``).

The app runs one statement on an engine, optionally shadowed on a reference, and
shows the answer, the verdict and both latencies side by side. It is a front end:
every query goes through :mod:`gateway.tui.console`, which is the only module that
touches the core, and every call there runs in a worker thread.
"""
