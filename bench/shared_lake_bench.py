#!/usr/bin/env python3
"""Gateways sharing one DuckLake under load: 1, 2, 3 ``arrowgate serve`` on one catalog.

    .venv/bin/python bench/shared_lake_bench.py --gateways 1,2,3 --clients 16 --seconds 60

Starts a throwaway PostgreSQL cluster (tests/pg.py; fsync on, as a catalog
server runs in use), and for each gateway count a fresh lake (a catalog
database and a data folder) served by that many ``arrowgate serve`` processes
(tests/serve_process.py), each with its own ``ducklake`` engine on the same
catalog and folder (examples/scale_out/shared_lake.py's setting). ``--clients``
threads, spread over the gateways, each an ADBC Flight SQL connection with the
session cookie, run for ``--seconds`` a random mix of:

- insert: ``INSERT INTO events`` of a row with a unique id;
- delete: ``DELETE FROM events`` of one row this client inserted earlier;
- transfer (updates of the same rows): in one transaction, move an amount
  between two of ``--accounts`` hot accounts (each UPDATE also adds 1 to the
  row's ``version``) and write the transfer's unique id to ``ledger``;
- read: ``SELECT`` the sum of balances, the sum of versions and the ledger's
  count in one statement, one snapshot.

A commit that conflicts with another writer's fails at the client (the gateway
says ``constraint``, "the commit conflicted with another writer"); the client
rolls back what is left of the transaction, waits a little (random, growing)
and runs the whole operation again, up to ``--retries`` times.

The end check: the events table holds exactly the ids whose insert committed
less those whose delete committed, each once; the ledger holds exactly the
committed transfers, each once; every account's balance and version are what
the ledger says; and every read saw the balances sum to their start and the
versions sum to twice the ledger's count (a state between commits shows as a
broken sum). A statement whose outcome the client cannot know (the connection
failed) is counted apart as unknown, and the check allows either outcome for it.

Prints a Markdown table: gateways, clients, committed operations per second,
operations by kind, conflicts retried, operations given up, unknown outcomes,
reads that saw a broken state, and the end check.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gateway  # noqa: E402
from gateway.drivers.error_kinds import trailer_kind  # noqa: E402
from tests.pg import PostgresCluster, find_bin_dir, start_cluster  # noqa: E402
from tests.serve_process import Served, served  # noqa: E402

START_BALANCE = 1000
#: the share of each operation in the mix
MIX = (("insert", 0.3), ("delete", 0.15), ("transfer", 0.3), ("read", 0.25))
COOKIE = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}


def lake_section(dsn: str, folder: Path) -> dict[str, Any]:
    return {"type": "ducklake", "catalog": f"postgres:{dsn}", "duckdb": "1.5.5",
            "data_path": f"{folder / 'data'}/"}


def serve_toml(section: dict[str, Any]) -> str:
    engine = "\n".join(f"{k} = {json.dumps(v)}" for k, v in section.items())
    return (f'default_engine = "lake"\n[serve]\nmax_queries_per_user = 64\n'
            f"[engines.lake]\n{engine}\n")


def create_lake(gw: gateway.Gateway, accounts: int) -> None:
    for sql in ("CREATE TABLE events (id BIGINT, client INTEGER, seq INTEGER)",
                "CREATE TABLE accounts (id INTEGER, balance BIGINT, version BIGINT)",
                "CREATE TABLE ledger (op BIGINT, src INTEGER, dst INTEGER, amount BIGINT)",
                f"INSERT INTO accounts SELECT range::INTEGER, {START_BALANCE}, 0 "
                f"FROM range({accounts})"):
        gw.execute(sql).to_arrow()


class Conflict(Exception):
    """A commit that lost to another writer's: nothing of it was committed."""


class Unknown(Exception):
    """A statement whose outcome the client cannot know."""


@dataclass
class ClientLog:
    """What one client did and saw."""

    number: int
    inserted: set[int] = field(default_factory=set)
    deleted: set[int] = field(default_factory=set)
    transfers: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    unknown_inserts: set[int] = field(default_factory=set)
    unknown_deletes: set[int] = field(default_factory=set)
    unknown_transfers: set[int] = field(default_factory=set)
    done: Counter[str] = field(default_factory=Counter)
    retried: Counter[str] = field(default_factory=Counter)
    gave_up: Counter[str] = field(default_factory=Counter)
    broken_reads: list[dict[str, int]] = field(default_factory=list)
    conflict_messages: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    #: ms from an operation's start to its commit (its retries included), by kind
    ms: dict[str, list[float]] = field(default_factory=dict)


class Client:
    def __init__(self, location: str, log: ClientLog, accounts: int, retries: int, seed: int):
        import adbc_driver_flightsql.dbapi as dbapi

        self.conn = dbapi.connect(location, db_kwargs=COOKIE, autocommit=True)
        self.cur = self.conn.cursor()
        self.log = log
        self.accounts = accounts
        self.retries = retries
        self.rng = random.Random(seed)
        self.seq = 0

    def close(self) -> None:
        self.cur.close()
        self.conn.close()

    def run(self, sql: str) -> list[tuple[Any, ...]]:
        import adbc_driver_manager

        try:
            self.cur.execute(sql)
            return self.cur.fetchall() if self.cur.description else []
        except adbc_driver_manager.Error as exc:
            kind = trailer_kind(getattr(exc, "details", None) or [])
            message = str(exc)
            if kind == "constraint" and "conflict" in message.lower():
                self.log.conflict_messages[f"{type(exc).__name__}, kind {kind}: "
                                           f"{_conflict_line(message)}"] += 1
                raise Conflict(message) from None
            if isinstance(exc, adbc_driver_manager.OperationalError):
                raise Unknown(message) from None
            raise

    def in_transaction(self, statements: list[str]) -> None:
        self.run("BEGIN")
        try:
            for sql in statements:
                self.run(sql)
        except BaseException:
            self._rollback()
            raise
        self.run("COMMIT")  # a failed COMMIT has ended the transaction already

    def _rollback(self) -> None:
        try:
            self.run("ROLLBACK")
        except Exception:
            pass

    def step(self) -> None:
        """One operation, run again from its start after each conflict."""
        log = self.log
        kind = self.rng.choices([k for k, _ in MIX], [w for _, w in MIX])[0]
        if kind == "delete" and not log.inserted - log.deleted:
            kind = "insert"
        self.seq += 1
        op = log.number * 1_000_000_000 + self.seq
        target = self.rng.choice(sorted(log.inserted - log.deleted)) if kind == "delete" else 0
        src, dst = self.rng.sample(range(self.accounts), 2)
        amount = self.rng.randint(1, 50)
        started = time.perf_counter()
        for attempt in range(self.retries + 1):
            try:
                if kind == "insert":
                    self.run(f"INSERT INTO events VALUES ({op}, {log.number}, {self.seq})")
                    log.inserted.add(op)
                elif kind == "delete":
                    self.run(f"DELETE FROM events WHERE id = {target}")
                    log.deleted.add(target)
                elif kind == "transfer":
                    self.in_transaction([
                        f"UPDATE accounts SET balance = balance - {amount}, "
                        f"version = version + 1 WHERE id = {src}",
                        f"UPDATE accounts SET balance = balance + {amount}, "
                        f"version = version + 1 WHERE id = {dst}",
                        f"INSERT INTO ledger VALUES ({op}, {src}, {dst}, {amount})"])
                    log.transfers[op] = (src, dst, amount)
                else:
                    self.read()
                log.done[kind] += 1
                log.ms.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
                return
            except Conflict:
                if attempt == self.retries:
                    log.gave_up[kind] += 1
                    return
                log.retried[kind] += 1
                time.sleep(self.rng.uniform(0.005, 0.02) * (attempt + 1))
            except Unknown as exc:
                log.errors.append(str(exc)[:300])
                {"insert": log.unknown_inserts, "delete": log.unknown_deletes,
                 "transfer": log.unknown_transfers, "read": set()}[kind].add(
                    {"insert": op, "delete": target, "transfer": op}.get(kind, 0))
                return

    def read(self) -> None:
        """One snapshot's balances, versions and ledger count: they must agree."""
        (total, versions, transfers), = self.run(
            "SELECT (SELECT sum(balance) FROM accounts) AS total, "
            "(SELECT sum(version) FROM accounts) AS versions, "
            "(SELECT count(*) FROM ledger) AS transfers")
        if total != START_BALANCE * self.accounts or versions != 2 * transfers:
            self.log.broken_reads.append({"total": total, "versions": versions,
                                          "transfers": transfers})


def _conflict_line(message: str) -> str:
    for line in message.splitlines():
        if "conflict" in line.lower() and "arrowgate" not in line.lower():
            return line.split(". Detail:")[0].strip()[:200]
    return message.splitlines()[0][:200]


def run_load(locations: list[str], clients: int, seconds: float, accounts: int,
             retries: int, seed: int) -> tuple[list[ClientLog], float]:
    """``clients`` threads, client i on ``locations[i % len]``, for ``seconds``."""
    logs = [ClientLog(i + 1) for i in range(clients)]
    ready = threading.Barrier(clients + 1)
    stop = threading.Event()
    failures: list[BaseException] = []

    def work(log: ClientLog) -> None:
        client = None
        try:
            client = Client(locations[(log.number - 1) % len(locations)], log, accounts,
                            retries, seed * 1000 + log.number)
            client.run("SELECT 1")
        except BaseException as exc:
            failures.append(exc)
        ready.wait()
        try:
            while client is not None and not stop.is_set():
                client.step()
        except BaseException as exc:
            failures.append(exc)
        finally:
            if client is not None:
                client.close()

    threads = [threading.Thread(target=work, args=(log,), daemon=True) for log in logs]
    for t in threads:
        t.start()
    ready.wait()
    started = time.monotonic()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    if failures:
        raise RuntimeError(f"{len(failures)} clients failed; the first: {failures[0]!r}")
    return logs, elapsed


def end_check(gw: gateway.Gateway, logs: list[ClientLog], accounts: int) -> list[str]:
    """What the lake holds against what the clients saw committed: the problems found."""
    problems: list[str] = []

    def rows(sql: str) -> list[dict[str, Any]]:
        return gw.execute(sql).to_arrow().to_pylist()

    events = [r["id"] for r in rows("SELECT id FROM events")]
    ledger = {r["op"]: (r["src"], r["dst"], r["amount"])
              for r in rows("SELECT op, src, dst, amount FROM ledger")}
    ledger_count = rows("SELECT count(*) AS n FROM ledger")[0]["n"]
    state = {r["id"]: (r["balance"], r["version"])
             for r in rows("SELECT id, balance, version FROM accounts")}
    if len(events) != len(set(events)):
        problems.append(f"{len(events) - len(set(events))} events stored twice")
    inserted = set().union(*(log.inserted for log in logs))
    deleted = set().union(*(log.deleted for log in logs))
    maybe_in = set().union(*(log.unknown_inserts for log in logs))
    maybe_out = set().union(*(log.unknown_deletes for log in logs))
    have = set(events)
    lost = (inserted - deleted) - have - maybe_out
    extra = have - (inserted - deleted) - maybe_in
    if lost:
        problems.append(f"{len(lost)} committed inserts missing, e.g. {sorted(lost)[:3]}")
    if extra:
        problems.append(f"{len(extra)} events that should not be there, e.g. {sorted(extra)[:3]}")
    committed = {op: t for log in logs for op, t in log.transfers.items()}
    if ledger_count != len(ledger):
        problems.append(f"{ledger_count - len(ledger)} transfers in the ledger twice")
    if set(committed) - set(ledger):
        problems.append(f"{len(set(committed) - set(ledger))} committed transfers not in "
                        "the ledger")
    maybe_transfers = set().union(*(log.unknown_transfers for log in logs))
    if set(ledger) - set(committed) - maybe_transfers:
        problems.append(f"{len(set(ledger) - set(committed) - maybe_transfers)} ledger rows "
                        "of transfers no "
                        "client saw commit")
    balance = dict.fromkeys(range(accounts), START_BALANCE)
    version = dict.fromkeys(range(accounts), 0)
    for src, dst, amount in ledger.values():
        balance[src] -= amount
        balance[dst] += amount
        version[src] += 1
        version[dst] += 1
    for account in range(accounts):
        if state.get(account) != (balance[account], version[account]):
            problems.append(f"account {account} holds {state.get(account)}, the ledger says "
                            f"{(balance[account], version[account])}")
    broken = sum(len(log.broken_reads) for log in logs)
    if broken:
        problems.append(f"{broken} reads saw a state between commits, e.g. "
                        f"{next(r for log in logs for r in log.broken_reads)}")
    return problems


def start_services(stack: ExitStack, folder: Path, toml: str, count: int) -> list[Served]:
    """``count`` services started at once, each stopped when ``stack`` closes."""
    starting = [served(folder / f"gateway{g}", toml) for g in range(count)]
    for g in range(count):
        (folder / f"gateway{g}").mkdir()
    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(s.__enter__) for s in starting]
    services = []
    for context, future in zip(starting, futures, strict=True):
        if future.exception() is None:
            stack.push(context.__exit__)
            services.append(future.result())
    for future in futures:
        future.result()  # the first failure to start, raised once the others are pushed
    return services


def measure(cluster: PostgresCluster, work: Path, gateways: int, clients: int, seconds: float,
            accounts: int, retries: int, seed: int) -> dict[str, Any]:
    """One run: a fresh lake, ``gateways`` services on it, the load, the end check."""
    dsn = cluster.create_database(f"lake_{gateways}_{seed}_{int(time.time() * 1000)}")
    folder = Path(tempfile.mkdtemp(prefix=f"lake{gateways}-", dir=work))
    section = lake_section(dsn, folder)
    with ExitStack() as stack:
        gw = stack.enter_context(gateway.connect({"engines": {"lake": section}}))
        create_lake(gw, accounts)
        services = start_services(stack, folder, serve_toml(section), gateways)
        logs, elapsed = run_load([s.location for s in services], clients, seconds, accounts,
                                 retries, seed)
        alive = all(s.alive for s in services)
        problems = end_check(gw, logs, accounts)
    done: Counter[str] = sum((log.done for log in logs), Counter())
    retried: Counter[str] = sum((log.retried for log in logs), Counter())
    gave_up: Counter[str] = sum((log.gave_up for log in logs), Counter())
    messages: Counter[str] = sum((log.conflict_messages for log in logs), Counter())
    unknown = sum(len(log.unknown_inserts) + len(log.unknown_deletes) +
                  len(log.unknown_transfers) for log in logs)
    return {"gateways": gateways, "clients": clients, "seconds": round(elapsed, 1),
            "ops": sum(done.values()), "ops_per_s": round(sum(done.values()) / elapsed, 1),
            "done": dict(done), "retried": dict(retried), "gave_up": dict(gave_up),
            "unknown": unknown, "errors": [e for log in logs for e in log.errors][:3],
            "conflict_messages": dict(messages.most_common(5)),
            "median_ms": {k: round(statistics.median(v), 1) for k in ("insert", "delete",
                                                                       "transfer", "read")
                          if (v := [x for log in logs for x in log.ms.get(k, [])])},
            "broken_reads": sum(len(log.broken_reads) for log in logs),
            "services_alive": alive, "problems": problems}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateways", default="1,2,3", help="gateway counts to run, e.g. 1,2,3")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--accounts", type=int, default=8, help="hot rows the transfers update")
    parser.add_argument("--retries", type=int, default=20, help="per operation, on a conflict")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL server binaries not found: apt-get install -y postgresql")
    load = os.getloadavg()
    cluster = start_cluster(bin_dir, durable=True)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="arrowgate-shared-lake-bench-") as work:
            for gateways in [int(g) for g in args.gateways.split(",")]:
                result = measure(cluster, Path(work), gateways, args.clients, args.seconds,
                                 args.accounts, args.retries, args.seed)
                print(json.dumps(result), file=sys.stderr)
                results.append(result)
    finally:
        cluster.stop()
    print("| gateways | clients | s | committed ops/s | insert / delete / transfer / read "
          "| conflicts retried (insert / delete / transfer) | given up | unknown "
          "| median ms (insert / delete / transfer / read) | reads between commits "
          "| end check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        done, retried = r["done"], r["retried"]
        print(f"| {r['gateways']} | {r['clients']} | {r['seconds']} | {r['ops_per_s']} | "
              + " / ".join(str(done.get(k, 0)) for k in ("insert", "delete", "transfer", "read"))
              + " | " + " / ".join(str(retried.get(k, 0))
                                   for k in ("insert", "delete", "transfer"))
              + f" | {sum(r['gave_up'].values())} | {r['unknown']} | "
              + " / ".join(str(r["median_ms"].get(k, "-"))
                           for k in ("insert", "delete", "transfer", "read"))
              + f" | {r['broken_reads']} | "
              + ("ok" if not r["problems"] and r["services_alive"] else
                 "; ".join(r["problems"]) or "a service died") + " |")
    print(f"\nload average at start: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    for r in results:
        if r["conflict_messages"]:
            print(f"{r['gateways']} gateway(s), conflicts as the client saw them: "
                  f"{r['conflict_messages']}")
    if args.json:
        args.json.write_text(json.dumps({"load": load, "results": results}, indent=1))


if __name__ == "__main__":
    main()
