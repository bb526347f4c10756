"""The benchmark chart: per-query latency per engine, as PNG and SVG.

matplotlib is imported here only (``pip install 'arrowgate[chart]'``), through
its object API (``Figure``), so no global pyplot state and no display are used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gateway.errors import GatewayError, install_extra

if TYPE_CHECKING:
    from gateway.benchmark.runner import BenchReport


def latency_chart(report: BenchReport, stem: Path) -> list[Path]:
    """Draw ``STEM.png`` and ``STEM.svg``: horizontal bars, one group per query.

    Each bar is an engine's median; the whisker spans the min-max of the
    rounds. Queries whose answers differ are listed under the chart, with no bar.

    Raises:
        GatewayError: matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise no_matplotlib() from None

    timed = report.timed
    engines = report.engines
    height = max(2.5, 0.35 * len(timed) * len(engines) + 1.5)
    fig = Figure(figsize=(9, height), layout="constrained")
    ax = fig.add_subplot()
    bar = 0.8 / len(engines)
    for i, engine in enumerate(engines):
        ys = [q_index + i * bar for q_index in range(len(timed))]
        med = [q.timings[engine].median * 1000 for q in timed]
        lo = [m - q.timings[engine].low * 1000 for m, q in zip(med, timed, strict=True)]
        hi = [q.timings[engine].high * 1000 - m for m, q in zip(med, timed, strict=True)]
        ax.barh(ys, med, height=bar, xerr=[lo, hi], capsize=2, label=engine)
    ax.set_yticks([q + 0.4 - bar / 2 for q in range(len(timed))],
                  [q.query.name for q in timed])
    ax.invert_yaxis()
    ax.set_xscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("milliseconds (median; whiskers: min-max), log scale")
    ax.set_title(f"median of {report.rounds} rounds after {report.warmup} warm-up; "
                 f"ratios vs {report.baseline} in the table")
    ax.legend(loc="lower right")
    ax.grid(axis="x", which="both", alpha=0.3)
    if report.diverged:
        fig.supxlabel("answers differ, not timed: "
                      + ", ".join(q.query.name for q in report.diverged), fontsize=8)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.savefig(paths[0], dpi=120)
    fig.savefig(paths[1])
    return paths


def no_matplotlib() -> GatewayError:
    """The error when matplotlib, of the chart extra, cannot be imported."""
    return GatewayError("drawing the chart needs matplotlib",
                        hint=install_extra("chart") + ", or leave out --chart")
