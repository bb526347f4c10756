"""One owner per connection: an answer read in one thread while another closes it, or
closes its session, or starts the session's next statement (gateway.session).

DuckDB crashes the process when a connection, or the stream being read from
it, is closed or reused while another thread reads: the Flight service's
read-ahead thread did exactly that (issue 36). Each race here is run many
times; a crash takes the test process down.
"""

from __future__ import annotations

import random
import threading

import pytest

import gateway
from gateway.errors import GatewayError

BIG = "SELECT range AS id, 'row' || range AS s FROM range(3000000)"
#: seconds a reader thread gets to end once its answer is closed (a hang guard: it ends in
#: milliseconds)
HANG_GUARD = 30


@pytest.fixture(scope="module")
def gw():
    with gateway.connect({"engines": {"duck": {"type": "duckdb"}}}) as gw:
        yield gw


def read_in_thread(result) -> tuple[threading.Thread, list[object]]:
    """Read ``result`` to its end in a thread of its own; what ended it lands in the list."""
    ended: list[object] = []

    def read() -> None:
        try:
            for _ in result.reader():
                pass
            ended.append("end")
        except GatewayError as exc:
            ended.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    return reader, ended


@pytest.mark.parametrize("close", ["result", "session", "next statement"])
def test_an_answer_being_read_is_closed_from_another_thread(gw, close):
    rng = random.Random(36)
    for _ in range(40):
        session = gw.session("duck")
        result = session.execute(BIG)
        reader, ended = read_in_thread(result)
        threading.Event().wait(rng.uniform(0, 0.02))
        if close == "result":
            result.close()
        elif close == "session":
            session.close()
        else:
            assert session.execute("SELECT 7 AS x").to_arrow().column(0).to_pylist() == [7]
        reader.join(HANG_GUARD)
        assert not reader.is_alive()
        assert ended and (ended[0] == "end" or isinstance(ended[0], GatewayError))
        session.close()
    assert gw.running() == []


def test_one_shot_answers_closed_mid_read_leave_their_cursor_fit_for_the_next(gw):
    """A one-shot statement's cursor goes back to the engine's idle cursors when its
    answer is closed: the next statement must not get it while the last is still read."""
    rng = random.Random(37)
    for _ in range(40):
        result = gw.execute(BIG, engine="duck")
        reader, _ = read_in_thread(result)
        threading.Event().wait(rng.uniform(0, 0.02))
        result.close()
        assert gw.execute("SELECT 7 AS x", engine="duck").to_arrow().num_rows == 1
        reader.join(HANG_GUARD)
        assert not reader.is_alive()
    assert gw.running() == []
