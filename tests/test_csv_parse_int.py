"""The scanner's BIGINT parser (``parse_int`` in _scanner.c) against Python's int():
digits of any length, leading zeros, a sign, blanks around, and BIGINT's bounds. (Reading
its digits eight bytes at a time, as parse_double does, was tried for issue 39: no
faster on h2o's ints of 1-6 digits.)"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway_csv import _scanner
from gateway_csv.layout import INT


def _parsed(text: str) -> int | None:
    try:
        value = _scanner.parse_value(INT, text.encode("latin-1"))
    except ValueError:
        return None
    assert isinstance(value, int)
    return value


def _expected(text: str) -> int | None:
    body = text.strip(" \t")
    if not body or "_" in body or not body.lstrip("+-").isdigit() or len(body) - len(
            body.lstrip("+-")) > 1:
        return None
    value = int(body)
    return value if -(2**63) <= value < 2**63 else None


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(["", "-", "+"]), st.text("0", max_size=4),
       st.text("0123456789", min_size=1, max_size=22), st.sampled_from(["", " ", "\t"]))
@example("", "", "9223372036854775807", "")
@example("-", "", "9223372036854775808", "")
@example("", "", "9223372036854775808", "")
@example("", "", "123456789012345678", "")
@example("-", "", "999999999999999999", "")  # 18 digits: the loop without an overflow check
@example("", "0", "999999999999999999", "")  # 19 characters: the one with it
def test_an_integer_of_any_length_reads_as_int_does(sign, zeros, digits, pad):
    text = pad + sign + zeros + digits + pad
    assert _parsed(text) == _expected(text), text


@pytest.mark.parametrize("bad", ["12345/78", "1234567:", "12\xff45678", "123 45", "1.0", "-",
                                 "+-5", "0x10", "12345678\x00"])
def test_what_is_no_integer_does_not_read(bad):
    assert _parsed(bad) is None
