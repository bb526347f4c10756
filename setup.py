"""Builds the csv engine's compiled scanner; everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gateway_csv._scanner",
            sources=["plugins/gateway_csv/_scanner.c"],
            extra_compile_args=["-O3", "-std=gnu11", "-Wno-sign-compare"],
        )
    ],
)
