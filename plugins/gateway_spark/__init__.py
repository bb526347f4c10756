"""The ``spark`` engine plugin: Apache Spark through Spark Connect, Arrow end to end.

This module is the entry point (group ``arrowgate``, name ``spark``); it stays
light so that listing engine types does not import pyspark.
"""

from __future__ import annotations

from gateway import hookimpl


@hookimpl
def arrowgate_engine_types() -> list[type]:
    from gateway_spark.engine import SparkEngine

    return [SparkEngine]
