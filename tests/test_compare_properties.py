"""Properties of the comparator on generated answers (hypothesis)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.verify.compare import compare_tables

ROWS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(-10**9, 10**9)),
        st.one_of(st.none(), st.text(max_size=4)),
        st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=False, width=64)),
    ),
    min_size=1, max_size=25,
)
INT64, STRING = pa.int64(), pa.string()
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def table(rows, int_type=INT64, str_type=STRING):
    ints, strs, floats = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table({"i": pa.array(ints, int_type), "s": pa.array(strs, str_type),
                     "f": pa.array(floats, pa.float64())})


@FAST
@given(rows=ROWS, data=st.data())
def test_a_shuffled_answer_in_other_types_matches(rows, data):
    order = data.draw(st.permutations(range(len(rows))))
    shuffled = [rows[i] for i in order]
    primary = table(shuffled, int_type=pa.float64(), str_type=pa.large_string())
    verdict = compare_tables(primary, table(rows), sql="SELECT i, s, f FROM t")
    assert verdict.ok, verdict.message


@FAST
@given(rows=ROWS, data=st.data())
def test_one_changed_integer_is_always_found(rows, data):
    at = data.draw(st.integers(0, len(rows) - 1))
    i, s, f = rows[at]
    changed = list(rows)
    changed[at] = ((i or 0) + 1, s, f)
    verdict = compare_tables(table(changed), table(rows))
    assert not verdict.ok
    assert verdict.category in ("values", "row_count")


@FAST
@given(rows=ROWS, data=st.data())
def test_one_dropped_row_is_missing(rows, data):
    at = data.draw(st.integers(0, len(rows) - 1))
    verdict = compare_tables(table(rows[:at] + rows[at + 1:]), table(rows))
    assert verdict.category == "missing_rows", verdict.message
    assert verdict.evidence["missing_count"] == 1
