"""Builds the C modules (the csv engine's scanner, the comparator's row matcher); everything
else is in pyproject.toml."""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

FLAGS = {
    # The scanner uses __int128 and __builtin_ctz: on Windows that takes clang-cl
    # (which setuptools drives as "msvc") or MinGW; cl.exe itself lacks both.
    "msvc": ["/O2"],
    # -ffp-contract=off: no multiply and add fused unless the code says so (fma()), so
    # the scanner's doubles are DuckDB's wherever it fuses (docs/csv.md) on every CPU
    "unix": ["-O3", "-std=gnu11", "-Wno-sign-compare", "-ffp-contract=off"],
    "mingw32": ["-O3", "-std=gnu11", "-Wno-sign-compare", "-ffp-contract=off"],
}


class BuildExt(build_ext):
    """Compiler flags for the compiler that builds, not the one that wrote setup.py."""

    def build_extensions(self) -> None:
        for ext in self.extensions:
            ext.extra_compile_args = FLAGS.get(self.compiler.compiler_type, [])
        try:
            super().build_extensions()
        except (CCompilerError, ExecError, PlatformError) as exc:
            sys.exit(f"arrowgate: the csv engine's scanner and the comparator's row matcher are "
                     f"C and could not be compiled "
                     f"({exc}): install a C compiler and Python's headers "
                     "(Debian/Ubuntu: apt-get install -y gcc python3-dev), then install again")


setup(
    ext_modules=[
        Extension(
            "gateway_csv._scanner",
            sources=["plugins/gateway_csv/_scanner.c"],
            depends=["plugins/gateway_csv/_mapfile.h", "plugins/gateway_csv/_rows.h"],
        ),
        Extension("gateway_csv._dialect", sources=["plugins/gateway_csv/_dialect.c"]),
        Extension("gateway.verify._row_match", sources=["gateway/verify/_row_match.c"]),
    ],
    cmdclass={"build_ext": BuildExt},
)
