"""Plumbing shared by engine plugins: ADBC connections, ODBC connection strings, SQL text,
error kinds, read-only checks, and Arrow values built without pandas
(:mod:`gateway.drivers.arrow_values`, which the command line's writers use too).

It belongs to the core's layer: it uses the core (errors, the engine contract,
:mod:`gateway.sql`) and nothing above it.

Nothing here imports a driver at module level; each function imports what it
uses, so an engine module that imports these stays cheap to list.
"""
