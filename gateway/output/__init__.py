"""Answers written out: the formats of ``arrowgate query -o`` and of the console's export.

:mod:`gateway.output.writers` streams a result as a table, CSV, JSON lines, an Arrow
file or stream, or Parquet, into a file written whole or not at all. It is shared by
two front ends (the command line and the console), so it sits below both; it uses
the core only.
"""
