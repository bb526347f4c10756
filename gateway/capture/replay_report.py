"""What a replayed capture adds to ``arrowgate shadow``'s report: statement shapes.

A capture (:mod:`gateway.capture.captured`) holds many runs of few statement shapes (the
same SQL with other literals or parameters). Per shape, the report shows how
often the workload ran it, the latency of each engine in the replay (p50 and
p95), their ratio, how many of its runs diverged, and, for a divergent shape
without parameters, the smallest statement that still diverges (the fuzzer's
reducer, :mod:`gateway.fuzz.reduction`). :func:`chart` draws the latency
ratio by shape, each point sized by how often the shape was seen.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.shadow.record import ShadowRecord
    from gateway.sql.corpus import Query

#: divergent shapes shrunk per report (each shrink reruns candidates on both engines)
SHRINK_SHAPES = 10
#: distinct diverging parameter sets shown per shape
DIVERGING_SETS = 10


def shapes(queries: Sequence[Query], records: Sequence[ShadowRecord]) -> list[dict[str, Any]]:
    """One row per statement shape, the most often seen first."""
    from gateway.sql.kinds import fingerprint

    rows: dict[str, dict[str, Any]] = {}
    for query, record in zip(queries, records, strict=True):
        shape = fingerprint(query.sql)
        row = rows.setdefault(shape, {"shape": shape, "sql": " ".join(query.sql.split())[:100],
                                      "seen": 0, "runs": 0, "diverged": 0, "categories": {},
                                      "primary_ms": [], "reference_ms": [], "example": None,
                                      "diverging": []})
        row["seen"] += query.weight
        row["runs"] += 1
        if record.status == "compared":
            row["categories"][record.category] = row["categories"].get(record.category, 0) + 1
            if record.primary_ms is not None and record.reference_ms is not None:
                row["primary_ms"].append(record.primary_ms)
                row["reference_ms"].append(record.reference_ms)
        if record.diverged:
            row["diverged"] += 1
            example = {"sql": query.sql, "parameters": query.parameters,
                       "category": record.category, "message": record.message}
            if row["example"] is None:
                row["example"] = example
                row["diverging"] = [example]
            elif len(row["diverging"]) < DIVERGING_SETS and query.parameters is not None \
                    and all(e["parameters"] != query.parameters for e in row["diverging"]):
                row["diverging"].append(example)
    out = []
    for row in rows.values():
        p, r = row.pop("primary_ms"), row.pop("reference_ms")
        row.update(primary_p50=_q(p, 0.5), primary_p95=_q(p, 0.95),
                   reference_p50=_q(r, 0.5), reference_p95=_q(r, 0.95))
        row["ratio"] = (round(row["primary_p50"] / row["reference_p50"], 3)
                        if row["primary_p50"] and row["reference_p50"] else None)
        out.append(row)
    return sorted(out, key=lambda row: (-row["seen"], row["shape"]))


def shrink_divergences(rows: list[dict[str, Any]], diverges: Callable[[str], bool],
                       dialect: str) -> None:
    """Give each divergent shape without parameters its smallest still-divergent statement
    (``example["shrunk"]``); ``diverges(sql)`` runs a candidate on both engines."""
    from gateway.fuzz.reduction import shrink
    from gateway.sql import Unparsed, parse

    done = 0
    for row in rows:
        example = row["example"]
        if example is None or example["parameters"] is not None or done >= SHRINK_SHAPES:
            continue
        try:
            trees = parse(example["sql"], dialect)
        except Unparsed:
            continue
        if len(trees) != 1:
            continue
        done += 1
        small = shrink(trees[0], lambda tree: diverges(tree.sql(dialect)), budget=60)
        example["shrunk"] = small.sql(dialect)


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The report's section on shapes: latency and divergences, the most seen first."""
    lines = ["", "**Statement shapes** (replayed capture; ms are this replay's)", "",
             "| shape | seen | primary p50 / p95 ms | reference p50 / p95 ms | ratio | diverged |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        lines.append(
            f"| `{row['sql']}` | {row['seen']} | {_ms(row['primary_p50'])} / "
            f"{_ms(row['primary_p95'])} | {_ms(row['reference_p50'])} / "
            f"{_ms(row['reference_p95'])} | {ratio} | {row['diverged']} of {row['runs']} |")
    divergent = [row for row in rows if row["example"] is not None]
    if divergent:
        lines += ["", "**Divergences by shape** (how often the workload ran it)", ""]
        for row in divergent:
            ex = row["example"]
            lines.append(f"- seen {row['seen']} times: `{row['sql']}`: **{ex['category']}**: "
                         f"{ex['message']}")
            for other in row.get("diverging") or [ex]:
                if other.get("parameters") is not None:
                    lines.append(f"  - with parameters `{list(other['parameters'])!r}`: "
                                 f"{other['category']}: {other['message']}")
            if ex.get("shrunk") and ex["shrunk"] != ex["sql"]:
                lines.append(f"  - smallest statement that still diverges: `{ex['shrunk']}`")
    return lines


def chart(rows: list[dict[str, Any]], path: str) -> None:
    """Latency ratio by shape, each point's area proportional to how often it was seen.

    Raises:
        GatewayError: matplotlib is not installed.
    """
    try:
        import matplotlib
    except ImportError:  # of pip install 'arrowgate[chart]'
        from gateway.benchmark.chart import no_matplotlib

        raise no_matplotlib() from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [row for row in rows if row["ratio"] is not None]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.4 * len(shown) + 1)))
    top = max((row["seen"] for row in shown), default=1)
    ys = range(len(shown))
    ax.scatter([row["ratio"] for row in shown], list(ys),
               s=[40 + 600 * row["seen"] / top for row in shown],
               c=["tab:red" if row["diverged"] else "tab:blue" for row in shown], alpha=0.6)
    ax.axvline(1.0, color="grey", linewidth=1)
    # numbered, so two shapes whose text starts alike keep labels of their own
    ax.set_yticks(list(ys), [f"{i + 1}. {_label(row['sql'])}" for i, row in enumerate(shown)],
                  fontsize=7)
    ax.set_xlabel("latency ratio, primary / reference (p50)")
    ax.set_title("Replayed workload by statement shape\n(area: how often seen; red: diverged)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _label(sql: str) -> str:
    return sql if len(sql) <= 48 else sql[:47] + "…"


def _q(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1], 3)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"
