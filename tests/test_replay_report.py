"""The replay report's statement shapes: readable names, every diverging parameter set,
a chart that reads (issue 37)."""

from __future__ import annotations

import pytest

from gateway.capture.replay_report import DIVERGING_SETS, chart, markdown, shapes
from gateway.shadow.record import ShadowRecord
from gateway.sql.corpus import Query

SQL = "SELECT round(price * ?, 2) AS total FROM trips WHERE id = ?"


def record(category: str, message: str) -> ShadowRecord:
    return ShadowRecord(sql=SQL, primary="new", reference="old", status="compared",
                        category=category, message=message, primary_ms=2.0, reference_ms=1.0)


def test_every_distinct_diverging_parameter_set_is_shown_up_to_ten():
    queries = [Query(name=f"q{i}", sql=SQL, parameters=(i % 13, i)) for i in range(30)]
    records = [record("values", f"row {i} differs") for i in range(30)]
    rows = shapes(queries, records)
    assert len(rows) == 1 and len(rows[0]["diverging"]) == DIVERGING_SETS
    text = "\n".join(markdown(rows))
    for i in range(DIVERGING_SETS):
        assert f"with parameters `[{i % 13}, {i}]`: values: row {i} differs" in text


def test_captured_statements_are_named_by_their_text(tmp_path):
    from gateway.capture.captured import (
        CapturedStatement,
        CaptureSettings,
        CaptureWriter,
        replay_queries,
    )

    writer = CaptureWriter(CaptureSettings(folder=tmp_path))
    writer.offer(CapturedStatement(sql="SELECT count(*) FROM trips   WHERE cab_type = 'green'",
                                   engine="duck", user="u", time="2026-12-07T00:00:00Z"))
    writer.close()
    [query] = replay_queries(tmp_path)
    assert query.name.startswith("SELECT count(*) FROM trips WHERE cab_type = 'green' [")


def test_the_chart_keeps_its_title_and_a_label_per_shape(tmp_path):
    pytest.importorskip("matplotlib")
    a = "SELECT name, count(*) FROM customers_of_the_month GROUP BY name HAVING count(*) > 1"
    b = "SELECT name, count(*) FROM customers_of_the_month GROUP BY name HAVING count(*) > 2 " \
        "AND name <> 'x'"
    rows = shapes([Query(name="a", sql=a), Query(name="b", sql=b + " ORDER BY 1")],
                  [record("match", ""), record("match", "")])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = []
    real_savefig = plt.Figure.savefig

    def keep(fig, path, *args, **kwargs):
        ax = fig.axes[0]
        extent = ax.title.get_window_extent(fig.canvas.get_renderer())
        inside = extent.x0 >= 0 and extent.x1 <= fig.bbox.x1  # the whole title is drawn
        shown.append(([t.get_text() for t in ax.get_yticklabels()], ax.get_title(), inside))
        return real_savefig(fig, path, *args, **kwargs)

    plt.Figure.savefig = keep
    try:
        chart(rows, str(tmp_path / "chart.png"))
    finally:
        plt.Figure.savefig = real_savefig
    labels, title, inside = shown[0]
    assert len(set(labels)) == 2
    assert title.endswith("red: diverged)") and inside
