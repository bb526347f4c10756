"""The scanner's DOUBLE parser (``parse_double`` in _scanner.c) against Python's float(),
which rounds correctly, as DuckDB's parser does.

Its fast paths: a decimal whose digits make less than 2**53, with up to 22 places, is
one division of two exact doubles (Clinger's); one of up to 19 significant digits (a
double's shortest form often has 17: 42.199999999999996) and up to 27 places is rounded
by Eisel and Lemire's algorithm, as fast_float computes it (two 64-bit products, no
fallback); the rest goes to strtod. A wrong last bit would change a sum's last digit.
"""

from __future__ import annotations

import random
from decimal import Decimal, localcontext

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway_csv import _scanner
from gateway_csv.layout import FLOAT
from tests.csv_support import assert_same, gateway_for


def parsed(text: str) -> float:
    value = _scanner.parse_value(FLOAT, text.encode())
    assert isinstance(value, float)
    return value


def _same(text: str) -> None:
    got, expected = parsed(text), float(text)
    assert got == expected and repr(got) == repr(expected), (text, got, expected)


@st.composite
def decimals(draw) -> str:
    """A decimal of 15-19 significant digits, the point anywhere up to 27 places in."""
    digits = str(draw(st.integers(min_value=10**14, max_value=10**19 - 1)))
    places = draw(st.integers(min_value=0, max_value=min(len(digits), 27)))
    whole, fraction = digits[:len(digits) - places], digits[len(digits) - places:]
    text = (whole or "0") + ("." + fraction if places else "")
    return ("-" if draw(st.booleans()) else "") + text


@settings(max_examples=3000, deadline=None)
@given(decimals())
@example("42.199999999999996")
@example("15.870000000000001")
@example("18446744073709551615")
@example("0.000000000000000000000000001")
def test_a_decimal_of_up_to_19_digits_rounds_as_float_does(text):
    _same(text)


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_doubles_shortest_form_reads_back_as_that_double(value):
    _same(repr(value))


#: 19-digit decimals just off a point halfway between two doubles, whose quotient in a
#: 64-bit significand rounds onto that point (the x87 division the parser used before):
#: rounded again to a double, ties-to-even went the wrong way for the first three
#: (found with fractions.Fraction)
DOUBLY_ROUNDED = ["1.365520361773170932", "1.035885903791729068", "1.415197151939286635",
                  "1.191744074183429869", "1.235951905651450633", "1.437445927702774795"]


def test_a_decimal_just_off_a_halfway_point_rounds_as_float_does():
    for text in DOUBLY_ROUNDED:
        _same(text)
        _same("-" + text)


def test_quotients_exactly_halfway_between_two_doubles_round_to_even():
    """2**53 + 1 lies halfway between 2**53 and 2**53 + 2; written with the point moved
    it is that midpoint over a power of ten (exactly halfway only up to 4 places, where
    Eisel-Lemire checks for it)."""
    for base in (2**53 + 1, 2**54 + 2, 2**60 + 2**7, 3 * 2**52 + 1, 2**63 + 2**10):
        text = str(base)
        for places in range(0, 12):
            _same(text[:len(text) - places] + ("." + text[len(text) - places:] if places else ""))
            _same(text + "." + "0" * places if places else text)


def test_midpoints_of_doubles_and_their_neighbours_round_as_float_does():
    """In every binade from 2**44 to 2**64: a double, the point halfway to the next one and
    a hair past it, each written out exactly wherever that takes at most 19 digits and 27
    places: the ties and near-ties where a last bit is decided."""
    rng = random.Random(7)
    checked = 0
    with localcontext() as ctx:
        ctx.prec = 80
        for e in range(44, 64):
            for _ in range(150):
                b = rng.randrange(2**52) | 1 << 52
                x, y = Decimal(b) * Decimal(2) ** (e - 52), Decimal(b + 1) * Decimal(2) ** (e - 52)
                mid = (x + y) / 2
                for value in (x, mid, mid + Decimal(2) ** (e - 60), mid - Decimal(2) ** (e - 60)):
                    text = format(value, "f")
                    text = text.rstrip("0").rstrip(".") if "." in text else text
                    places = len(text.partition(".")[2])
                    if len(text.replace(".", "").lstrip("0")) <= 19 and places <= 27:
                        _same(text)
                        checked += 1
    assert checked > 4000


@st.composite
def digit_runs(draw) -> str:
    """Decimals whose digit runs end anywhere in an 8-byte word (digits8's SWAR): 0-24
    digits before the point and after it, leading zeros, a sign, blanks around."""
    whole = draw(st.text("0123456789", max_size=24))
    fraction = draw(st.text("0123456789", max_size=24))
    if not whole and not fraction:
        whole = "0"
    text = draw(st.sampled_from(["", "-", "+"])) + draw(st.sampled_from(["", "0", "000"])) + whole
    if fraction or draw(st.booleans()):
        text += "." + fraction
    return draw(st.sampled_from(["", " "])) + text + draw(st.sampled_from(["", " ", "\t"]))


@settings(max_examples=3000, deadline=None)
@given(digit_runs())
@example("64.14684")
@example("12345678.12345678")
@example("1234567.")
@example("-.5")
@example("00000000.00000000")
def test_digit_runs_of_any_length_read_as_float_does(text):
    _same(text)


@pytest.mark.parametrize("bad", ["12345/78", "1234567:", "12\xff45678", "1.2345678\xfa9",
                                 "98765432 1", "1234567.123456\x00", "0x12345678"])
def test_a_digit_run_read_eight_bytes_at_a_time_stops_at_a_non_digit(bad):
    """Bytes beside digits in a word (below '0', above '9', those that adding 6 carries
    out of) end the run: the number does not read, as float() refuses it."""
    with pytest.raises(ValueError, match="not a value"):
        _scanner.parse_value(FLOAT, bad.encode("latin-1"))


@pytest.mark.parametrize("quoted", [False, True])
def test_short_decimals_in_a_file_read_as_float_does_up_to_its_last_byte(tmp_path, quoted):
    """A field shorter than 8 bytes is read 8 bytes at a time where the file goes on past
    it (the bytes past the field made zero): lineitem's 0.04 and 17. Each value read back
    exactly, the last one ending the file at a page's end, where no byte past it may be
    read."""
    rng = random.Random(3)
    texts = []
    for _ in range(5000):
        whole = str(rng.randrange(10 ** rng.randrange(0, 5)))
        places = rng.randrange(0, 4)
        text = rng.choice(["", "-"]) + whole + ("." + str(rng.randrange(10**places)).zfill(places)
                                                if places else "")
        texts.append(text[:7])
    quote = '"' if quoted else ""
    body = "k,pad,f\n" + "".join(f"{i},,{quote}{t}{quote}\n" for i, t in enumerate(texts))
    last = f"{len(texts)},,{quote}0.04{quote}"
    texts.append("0.04")
    body += last.replace(",,", "," + "x" * (-(len(body) + len(last)) % 4096) + ",")
    path = tmp_path / "short.csv"
    path.write_text(body)
    assert path.stat().st_size % 4096 == 0
    with gateway_for(path, chunk_bytes=1 << 12) as gw:
        got = gw.execute("SELECT k, f FROM t ORDER BY k", engine="csv").to_arrow()
        assert got.column("f").to_pylist() == [float(t) for t in texts]
        assert_same(gw, "SELECT sum(f) AS s, min(f) AS lo, max(f) AS hi, count(f) AS n FROM t")
