#!/usr/bin/env python3
"""A model of the clients a service meets, run against a real ``arrowgate serve``.

    .venv/bin/python bench/client_model.py --minutes 30 --threads 4 | tee model.txt

Not a timing benchmark: a check of issue 36's "the service survives every
client". Threads act as clients, each through the ADBC Flight SQL driver (a
password user and a static-token user, returning the session cookie) and raw
``pyarrow.flight``, doing random sequences of what clients do: execute and
read whole, read ten rows and close, bind parameters, ``executemany``, cancel,
disconnect mid-stream, ``SET``, temp tables, ``BEGIN``/``ROLLBACK``, fail, and
on the raw side prepare and close without executing, leave a ticket unread,
cancel a DoGet after one batch. The engines are ``duckdb``, ``csv`` (with
``fallback = "duck"``) and, given a PostgreSQL server, ``ducklake`` on a
PostgreSQL catalog. Every answer read is checked; after every action the
service must be alive. At rest (every thread done, ``running-queries`` empty)
its RSS, open files and threads are compared with the figures after a warm-up.

A failing sequence is run again alone, on a fresh service, and shrunk (actions
removed while it still fails): the shortest sequence is printed, ready to
become a test.

``--probe FILE`` has the served process sample what it holds, component by
component, every ``--probe-every`` seconds and at rest (bench/served_probe.py;
``python bench/served_probe.py FILE`` prints the table).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import adbc_driver_flightsql.dbapi as dbapi  # noqa: E402
import pyarrow.flight as flight  # noqa: E402

from gateway.flight import protobuf as M  # noqa: E402
from gateway.flight.allocator import AtRest  # noqa: E402
from gateway.flight.serve_config import hash_password  # noqa: E402
from tests.serve_process import Served, served  # noqa: E402

ROWS = 200_000
TOKEN = "client-model-static-token"
PASSWORD = "client-model-pw"
BIG = "SELECT range AS id, 'row' || range AS s FROM range(1000000)"
#: what the service may grow by between the warm-up and rest (issue 36: 50 MB)
RSS_BOUND_MB = 50
COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}


def config_toml(folder: Path, lake: str | None) -> str:
    """The service's configuration: duck, csv over a source of the same rows, and a lake."""
    csv = folder / "nums.csv"
    with csv.open("w") as f:
        f.write("id,s\n" + "".join(f"{i},row{i}\n" for i in range(ROWS)))
    import hashlib

    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    text = f"""
default_engine = "duck"
[engines.duck]
type = "duckdb"
[engines.scan]
type = "csv"
fallback = "duck"
[sources.cnums]
path = "{csv}"
[serve]
ticket_idle = 2
max_queries_per_user = 64
[serve.users.alice]
password_hash = "{hash_password(PASSWORD)}"
[serve.users.tess]
token_sha256 = ["{digest}"]
"""
    return text + (lake or "")


def lake_toml(dsn: str, folder: Path) -> str:
    return f"""
[engines.lake]
type = "ducklake"
catalog = "postgres:{dsn}"
duckdb = "1.5.5"
data_path = "{folder / 'lake-data'}/"
"""


class ModelFailure(AssertionError):
    """An action whose answer was wrong, or after which the service was gone."""


class Client:
    """One client: an ADBC connection (a user's, with the cookie) and a raw Flight client."""

    def __init__(self, service: Served, number: int, engines: list[str]):
        self.service = service
        self.number = number
        self.engines = engines
        user = ("alice", {"username": "alice", "password": PASSWORD}) if number % 2 == 0 \
            else ("tess", {"adbc.flight.sql.authorization_header": f"Bearer {TOKEN}"})
        self.user, self.credentials = user
        self.conn = self._connect()
        self.raw = flight.connect(service.location)
        self.raw_options = flight.FlightCallOptions(headers=[self._raw_header()])
        self.sql(f"CREATE TABLE IF NOT EXISTS ledger_{number} (a INTEGER)")

    def _connect(self) -> Any:
        return dbapi.connect(self.service.location, autocommit=True,
                             db_kwargs={**COOKIES, **self.credentials})

    def _raw_header(self) -> tuple[bytes, bytes]:
        if self.user == "tess":
            return b"authorization", f"Bearer {TOKEN}".encode()
        probe = flight.connect(self.service.location)
        try:
            return probe.authenticate_basic_token("alice", PASSWORD)
        finally:
            probe.close()

    def close(self) -> None:
        for thing in (self.conn, self.raw):
            try:
                thing.close()
            except Exception:  # a connection the service already dropped
                pass

    def sql(self, statement: str, parameters: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(statement, parameters)
            return cur.fetchall() if cur.description else []

    # -- the actions: each does what a client does and checks what it read ---------------
    def full_read(self, rng: random.Random) -> None:
        engine = rng.choice(self.engines)
        table = {"duck": "nums", "scan": "cnums", "lake": "lnums"}[engine]
        self._use(engine)
        try:
            rows = self.sql(f"SELECT count(*) AS n, sum(id) AS total FROM {table}")
        finally:
            self._use("duck")
        expected = ROWS if engine != "lake" else ROWS // 10
        check(rows == [(expected, expected * (expected - 1) // 2)], f"{engine}: {rows}")

    def _use(self, engine: str) -> None:
        self.conn.adbc_connection.set_options(
            **{"adbc.flight.sql.session.option.engine": engine})

    def ten_rows_and_close(self, rng: random.Random) -> None:
        cur = self.conn.cursor()
        try:
            cur.execute(BIG)
            n = rng.randint(1, 20)
            rows = cur.fetchmany(n)
            check(rows == [(i, f"row{i}") for i in range(len(rows))] and len(rows) == n,
                  f"first {n} rows: {rows[:3]}")
        finally:
            cur.close()

    def bind(self, rng: random.Random) -> None:
        key = rng.randrange(ROWS)
        rows = self.sql("SELECT s FROM nums WHERE id = ?", (key,))
        check(rows == [(f"row{key}",)], f"id {key}: {rows}")

    def many(self, rng: random.Random) -> None:
        n = rng.randint(1, 2000)
        with self.conn.cursor() as cur:
            cur.execute(f"DELETE FROM ledger_{self.number}")
            cur.executemany(f"INSERT INTO ledger_{self.number} VALUES (?)", [(i,) for i in range(n)])
        rows = self.sql(f"SELECT count(*), sum(a) FROM ledger_{self.number}")
        check(rows == [(n, n * (n - 1) // 2)], f"{n} rows: {rows}")

    def settings(self, rng: random.Random) -> None:
        zone = rng.choice(["Asia/Tokyo", "Europe/Paris", "America/Lima", "UTC"])
        self.sql(f"SET TimeZone = '{zone}'")
        rows = self.sql("SELECT current_setting('TimeZone')")
        check(rows == [(zone,)], f"SET TimeZone = {zone}: {rows}")

    def temp_table(self, rng: random.Random) -> None:
        value = rng.randrange(1000)
        self.sql(f"CREATE OR REPLACE TEMP TABLE mine AS SELECT {value} AS v")
        rows = self.sql("SELECT v FROM mine")
        check(rows == [(value,)], f"temp table: {rows}")

    def rollback(self, rng: random.Random) -> None:
        before = self.sql(f"SELECT count(*) FROM ledger_{self.number}")
        self.sql("BEGIN")
        self.sql(f"INSERT INTO ledger_{self.number} VALUES (-1)")
        self.sql("ROLLBACK")
        after = self.sql(f"SELECT count(*) FROM ledger_{self.number}")
        check(before == after, f"ROLLBACK kept a row: {before} then {after}")

    def cancel(self, rng: random.Random) -> None:
        cur = self.conn.cursor()
        try:
            cur.execute(BIG)
            cur.fetchmany(rng.randint(1, 5))
            cur.adbc_cancel()
        finally:
            cur.close()

    def fail(self, rng: random.Random) -> None:
        statement = rng.choice(["SELECT * FROM no_such_table", "SELEC 1", "SELECT 1/'x'"])
        try:
            self.sql(statement)
        except dbapi.Error:
            pass
        else:
            raise ModelFailure(f"{statement!r} answered")
        check(self.sql("SELECT 41 + 1") == [(42,)], "the connection after an error")

    def disconnect_mid_stream(self, rng: random.Random) -> None:
        conn = self._connect()
        cur = conn.cursor()
        cur.execute(BIG)
        cur.fetchmany(rng.randint(1, 5))
        conn.close()

    def raw_partial(self, rng: random.Random) -> None:
        reader = self.raw.do_get(self._raw_info(BIG).endpoints[0].ticket, self.raw_options)
        first = reader.read_chunk().data
        check(first.column(0)[0].as_py() == 0, "first raw batch")
        reader.cancel()

    def raw_full(self, rng: random.Random) -> None:
        info = self._raw_info("SELECT count(*) AS n FROM nums")
        table = self.raw.do_get(info.endpoints[0].ticket, self.raw_options).read_all()
        check(table.column(0).to_pylist() == [ROWS], f"raw count: {table}")

    def raw_unread_ticket(self, rng: random.Random) -> None:
        self._raw_info(BIG)  # never redeemed: the service drops it after ticket_idle

    def raw_prepare_close(self, rng: random.Random) -> None:
        body = M.pack(M.ActionCreatePreparedStatementRequest(query=BIG))
        answer = next(iter(self.raw.do_action(flight.Action("CreatePreparedStatement", body),
                                              self.raw_options)))
        handle = M.unpack(M.ActionCreatePreparedStatementResult,
                          answer.body.to_pybytes()).prepared_statement_handle
        if rng.random() < 0.5:
            command = M.pack(M.CommandPreparedStatementQuery(prepared_statement_handle=handle))
            info = self.raw.get_flight_info(flight.FlightDescriptor.for_command(command),
                                            self.raw_options)
            reader = self.raw.do_get(info.endpoints[0].ticket, self.raw_options)
            reader.read_chunk()
            reader.cancel()
        close = M.pack(M.ActionClosePreparedStatementRequest(prepared_statement_handle=handle))
        list(self.raw.do_action(flight.Action("ClosePreparedStatement", close), self.raw_options))

    def _raw_info(self, sql: str) -> Any:
        command = M.pack(M.CommandStatementQuery(query=sql))
        return self.raw.get_flight_info(flight.FlightDescriptor.for_command(command),
                                        self.raw_options)


ACTIONS: dict[str, Callable[[Client, random.Random], None]] = {
    name: getattr(Client, name) for name in (
        "full_read", "ten_rows_and_close", "bind", "many", "settings", "temp_table", "rollback",
        "cancel", "fail", "disconnect_mid_stream", "raw_partial", "raw_full",
        "raw_unread_ticket", "raw_prepare_close")}


def check(ok: bool, what: str) -> None:
    if not ok:
        raise ModelFailure(f"wrong answer: {what}")


Step = tuple[str, int]  # an action's name and the seed of its random choices


def run_sequence(service: Served, number: int, engines: list[str], steps: list[Step]) -> None:
    """Run ``steps`` as client ``number``; raises ModelFailure (or the client's error)."""
    client = Client(service, number, engines)
    try:
        for name, seed in steps:
            ACTIONS[name](client, random.Random(seed))
            if not service.alive:
                raise ModelFailure(f"the service died after {name} "
                                   f"(exit {service.proc.returncode})")
    finally:
        client.close()


def random_steps(rng: random.Random, n: int) -> list[Step]:
    return [(rng.choice(list(ACTIONS)), rng.randrange(2**31)) for _ in range(n)]


def shrink(start: Callable[[], Any], engines: list[str], steps: list[Step]) -> list[Step]:
    """The shortest part of ``steps`` found that still fails, each try on a fresh service."""
    def fails(candidate: list[Step]) -> bool:
        with start() as service:
            try:
                run_sequence(service, 0, engines, candidate)
            except Exception:
                return True
        return False

    if not fails(steps):
        return steps  # it failed only beside other clients
    chunk = max(1, len(steps) // 2)
    while chunk >= 1:
        i = 0
        while i < len(steps):
            candidate = steps[:i] + steps[i + chunk:]
            if candidate and fails(candidate):
                steps = candidate
            else:
                i += chunk
        chunk //= 2
    return steps


class Report:
    def __init__(self) -> None:
        self.sequences = 0
        self.actions = 0
        self.failures: list[tuple[int, list[Step], str]] = []
        self.lock = threading.Lock()


def rest_figures(service: Served, sampled: Path | None = None) -> dict[str, float]:
    """RSS, open files and threads once nothing runs (``running-queries`` empty); the
    served process's probe (``sampled``), if any, is asked for a sample then."""
    with flight.connect(service.location) as probe:
        options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
        for _ in range(300):  # a hang guard: the service drops the last tickets in seconds
            running = json.loads(next(iter(probe.do_action(flight.Action(
                "running-queries", b""), options))).body.to_pybytes())
            if not running:
                break
            time.sleep(0.1)
        else:
            raise ModelFailure(f"still running at rest: {running}")
        time.sleep(AtRest().quiet + 2)  # the service gives free memory back once at rest
        health = json.loads(next(iter(probe.do_action(flight.Action("health", b""),
                                                      options))).body.to_pybytes())
    if sampled is not None:
        from bench.served_probe import asked

        asked(sampled).touch()
        for _ in range(600):  # a hang guard: a sample takes a second or two
            if not asked(sampled).exists():
                break
            time.sleep(0.1)
    # open tickets: answers issued and not yet ended (a never-redeemed one lasts
    # ticket_idle); one that stays is a query, its answer and its cursor kept for good
    return {"rss_mb": round(service.rss_mb(), 1), "fds": service.fds(),
            "threads": service.threads(), "open_tickets": health.get("open_tickets"),
            "sessions": health.get("sessions")}


def last_words(service: Served) -> str:
    """What a dead service left in its log: from faulthandler's "Fatal Python error" on
    (every thread's stack: ``arrowgate serve`` enables it), else its last 20 lines."""
    log = service.log
    fatal = next((i for i, line in enumerate(log) if line.startswith("Fatal Python error")),
                 max(0, len(log) - 20))
    return (f"the service died (exit {service.proc.returncode}); its last lines:\n"
            + "".join(log[fatal:fatal + 200]))


def probe_env(folder: Path, probe: Path | None, every: float) -> dict[str, str]:
    """The environment that has the served process sample itself into ``probe``
    (bench/served_probe.py, through a ``sitecustomize`` on its path); none without one."""
    if probe is None:
        return {}
    site = folder / "probe-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("from bench.served_probe import start\nstart()\n")
    return {"PYTHONPATH": f"{ROOT}:{site}", "ARROWGATE_PROBE": str(probe.resolve()),
            "ARROWGATE_PROBE_EVERY": str(every)}


@contextmanager
def service_for(folder: Path, lake: str | None, probe: Path | None = None,
                probe_every: float = 60.0) -> Iterator[Served]:
    with served(folder, config_toml(folder, lake), probe_env(folder, probe, probe_every)) \
            as service:
        with dbapi.connect(service.location, autocommit=True, db_kwargs={
                "username": "alice", "password": PASSWORD}) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE OR REPLACE TABLE nums AS SELECT range AS id, 'row' || range AS s "
                        f"FROM range({ROWS})")
        if lake:
            with dbapi.connect(service.location, autocommit=True, db_kwargs={
                    **COOKIES, "username": "alice", "password": PASSWORD}) as conn:
                conn.adbc_connection.set_options(
                    **{"adbc.flight.sql.session.option.engine": "lake"})
                with conn.cursor() as cur:
                    cur.execute(f"CREATE OR REPLACE TABLE lnums AS SELECT range AS id "
                                f"FROM range({ROWS // 10})")
        yield service


def run_model(folder: Path, seconds: float, threads: int, seed: int, lake: str | None = None,
              steps_per_sequence: int = 12, out: Any = sys.stdout, probe: Path | None = None,
              probe_every: float = 60.0) -> Report:
    """Drive a fresh service with ``threads`` clients for ``seconds``; the report."""
    engines = ["duck", "scan"] + (["lake"] if lake else [])
    report = Report()
    with service_for(folder, lake, probe, probe_every) as service:
        deadline = 0.0

        def client(number: int) -> None:
            rng = random.Random(seed * 1000 + number)
            while time.monotonic() < deadline and not report.failures:
                steps = random_steps(rng, steps_per_sequence)
                try:
                    run_sequence(service, number, engines, steps)
                except Exception:
                    with report.lock:
                        report.failures.append((number, steps, traceback.format_exc()))
                    return
                with report.lock:
                    report.sequences += 1
                    report.actions += len(steps)

        # the warm-up does every action a few times, and reads every engine, so what a
        # first use keeps (DuckDB's caches, an extension, the allocator's arenas) is in
        # the figures it leaves
        warm = random.Random(seed)
        steps = [(name, warm.randrange(2**31)) for name in ACTIONS for _ in range(3)]
        warm.shuffle(steps)
        run_sequence(service, 999, engines, steps + [("full_read", n) for n in range(12)])
        # then the clients themselves, for a tenth of the run: what as many clients at once
        # hold (answers read ahead, the allocator's arenas, which glibc keeps up to 64 MiB
        # of: gateway.flight.allocator) is in the figures the rest is measured against
        deadline = time.monotonic() + max(20.0, seconds / 10)
        warm_up = [threading.Thread(target=client, args=(n + 100,)) for n in range(threads)]
        for worker in warm_up:
            worker.start()
        for worker in warm_up:
            worker.join()
        if not service.alive:
            raise ModelFailure(last_words(service))
        before = rest_figures(service, probe)
        print(f"after the warm-up: {before}", file=out, flush=True)
        deadline = time.monotonic() + seconds

        workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        # the RSS along the run, so a slow leak can be told from caches filling up
        samples: list[float] = []
        step = max(1.0, min(60.0, seconds / 10))
        while any(w.is_alive() for w in workers):
            time.sleep(step)
            if service.alive:
                samples.append(round(service.rss_mb()))
        for worker in workers:
            worker.join()
        print(f"RSS along the run (MB): {samples}", file=out, flush=True)
        report.samples = samples  # type: ignore[attr-defined]
        after = rest_figures(service, probe) if service.alive else {}
        print(f"at rest: {after}", file=out, flush=True)
        report.before, report.after = before, after  # type: ignore[attr-defined]
        report.alive = service.alive  # type: ignore[attr-defined]
        if not service.alive:
            print(last_words(service), file=out, flush=True)
        if service.alive and after["rss_mb"] - before["rss_mb"] > RSS_BOUND_MB:
            report.failures.append((-1, [], f"RSS grew {after['rss_mb'] - before['rss_mb']:.0f}"
                                            f" MB at rest (bound {RSS_BOUND_MB} MB)"))
    for number, steps, error in report.failures[:1]:
        print(f"client {number} failed:\n{error}", file=out, flush=True)
        if steps:
            shrunk = shrink(lambda: service_for(folder, lake), engines, steps)
            print(f"shrunk to {len(shrunk)} of {len(steps)} steps (a test: "
                  f"run_sequence(service, 0, {engines!r}, {shrunk!r}))", file=out, flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--no-lake", action="store_true", help="leave the ducklake engine out")
    parser.add_argument("--probe", type=Path, help="the served process appends what it holds, "
                        "component by component, to this file (bench/served_probe.py)")
    parser.add_argument("--probe-every", type=float, default=60.0, help="seconds between samples")
    args = parser.parse_args()
    import tempfile

    from tests.pg import find_bin_dir, start_cluster

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cluster = None
        bin_dir = None if args.no_lake else find_bin_dir()
        if bin_dir is not None:
            cluster = start_cluster(bin_dir)
        try:
            lake = lake_toml(cluster.create_database("model_lake"), folder) if cluster else None
            started = time.monotonic()
            report = run_model(folder, args.minutes * 60, args.threads, args.seed, lake,
                               probe=args.probe, probe_every=args.probe_every)
            took = time.monotonic() - started
        finally:
            if cluster is not None:
                cluster.stop()
    print("| minutes | threads | engines | sequences | actions | failures | alive | "
          "RSS after warm-up -> at rest (MB) | fds | threads |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    before, after = report.before, report.after  # type: ignore[attr-defined]
    print(f"| {took / 60:.1f} | {args.threads} | duck, scan{', lake' if lake else ''} | "
          f"{report.sequences} | {report.actions} | {len(report.failures)} | "
          f"{report.alive} | {before['rss_mb']} -> {after.get('rss_mb')} | "  # type: ignore[attr-defined]
          f"{before['fds']} -> {after.get('fds')} | {before['threads']} -> {after.get('threads')} |")
    sys.exit(1 if report.failures else 0)


if __name__ == "__main__":
    main()
