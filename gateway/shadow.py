"""Shadow mode: run a reference engine beside the primary and record whether they agree.

``gw.execute(sql, engine="a", shadow="b")`` runs the statement on ``a`` and,
concurrently, on ``b``; it returns ``a``'s answer with a :class:`ShadowRecord`
attached as ``result.shadow``. A ``[shadow]`` section in the configuration
shadows every query the gateway runs on its primary engine::

    [shadow]
    primary = "duck"       # the engine whose queries are shadowed (default: every engine)
    reference = "duck_old" # the engine that answers beside it
    sample = 0.1           # the share of queries shadowed
    timeout = 30           # seconds the caller waits for the reference once the primary is done
    background = false     # true: return the primary's answer at once, the verdict follows
    noise = true           # run the reference twice; what differs is nondeterministic
    shadow_writes = false  # true only when the reference is a separate copy of the data
    store = ".arrowgate/shadow"  # where records are appended (false: nowhere)
    rel_tol = 1e-9         # and any other gateway.compare.CompareOptions field

What is never shadowed (the record says why, ``status = "skipped"``):
statements that change data or schema, unless ``shadow_writes = true``
(shadowing an INSERT into a shared lake would write it twice); queries
carrying the comment ``-- arrowgate: shadow=off``; queries left out of the
sample (these are not stored).

A shadowed query's primary answer is read whole before it is returned: the
comparison needs it. A reference slower than ``timeout`` (counted from the
moment the primary's answer is ready) is cancelled and recorded as an
``error`` verdict with ``QueryTimeout``, so it never holds the caller longer.
With ``background = true`` the caller does not wait at all: the record comes
back ``pending`` and is completed (and stored) by a thread; ``record.wait()``
blocks until it is final.
Latencies measured while both engines run at once compete for the same
cores; ``arrowgate shadow`` runs them one after the other, and ``arrowgate
bench`` is the place for careful speed figures.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.compare import CompareOptions, Verdict, compare_with_noise
from gateway.engine import Option
from gateway.errors import ConfigError, GatewayError, QueryTimeout
from gateway.shadow_store import ShadowStore, summarize

__all__ = ["ShadowRecord", "ShadowSettings", "ShadowStore", "run_shadowed", "shadow_execute",
           "statement_kind", "summarize"]

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.config import GatewayConfig
    from gateway.core import Gateway
    from gateway.result import Result
    from gateway.session import Session

DEFAULT_STORE = os.path.join(".arrowgate", "shadow")
_OPT_OUT = re.compile(r"--\s*arrowgate:.*\bshadow\s*=\s*(off|false|no|0)\b", re.IGNORECASE)

_COMPARE_FIELDS = {f.name: f for f in dataclasses.fields(CompareOptions)}
_OPTION_TYPES: dict[str, tuple[type, ...]] = {"float": (float,), "bool": (bool,), "int": (int,),
                                              "str": (str,)}
SHADOW_OPTIONS: dict[str, Option] = {
    "primary": Option((str,), help="the engine whose queries are shadowed (default: all)"),
    "reference": Option((str,), required=True, help="the engine that answers beside it"),
    "sample": Option((float,), default=1.0, help="the share of queries shadowed, 0 to 1"),
    "timeout": Option((float,), default=30.0,
                      help="seconds to wait for the reference once the primary is done"),
    "noise": Option((bool,), default=False,
                    help="run the reference twice; what differs is nondeterministic"),
    "shadow_writes": Option((bool,), default=False,
                            help="shadow statements that change data (separate copies only)"),
    "background": Option((bool,), default=False,
                         help="return the primary's answer at once; the verdict follows"),
    "store": Option((str, bool), default=DEFAULT_STORE,
                    help="folder the records are appended to; false for none"),
    **{name: Option(_OPTION_TYPES[str(f.type)], default=f.default,
                    help="comparison option (see gateway.compare.CompareOptions)")
       for name, f in _COMPARE_FIELDS.items()},
}


@dataclass
class ShadowSettings:
    """A checked ``[shadow]`` section (or the settings one call asked for)."""

    reference: str
    primary: str | None = None
    sample: float = 1.0
    timeout: float = 30.0
    noise: bool = False
    shadow_writes: bool = False
    background: bool = False
    store: str | None = DEFAULT_STORE
    compare: CompareOptions = field(default_factory=CompareOptions)

    @classmethod
    def from_config(cls, config: GatewayConfig) -> ShadowSettings | None:
        """The settings of ``config``'s ``[shadow]`` section, or None when it has none.

        Raises:
            ConfigError: a wrong key or value, naming the file and the key.
        """
        if not config.shadow:
            return None
        from gateway.config import _check_options

        def fail(key: str, message: str, hint: str | None = None) -> ConfigError:
            return ConfigError(message, path=config.path, key=key, hint=hint)

        values, _ = _check_options("shadow", config.shadow, SHADOW_OPTIONS, fail)
        for key in ("primary", "reference"):
            name = values[key]
            if name is not None and name not in config.engines:
                raise fail(f"shadow.{key}", f"names no declared engine: {name!r}",
                           "declared engines: " + ", ".join(config.engines))
        if not 0.0 <= values["sample"] <= 1.0:
            raise fail("shadow.sample", f"must be between 0 and 1, not {values['sample']}",
                       "0.1 shadows one query in ten")
        if values["timeout"] <= 0:
            raise fail("shadow.timeout", "must be a positive number of seconds")
        store = values["store"]
        if store is True:
            store = DEFAULT_STORE
        if isinstance(store, str) and not os.path.isabs(store):
            store = str(config.base_dir / store)
        compare = CompareOptions(**{k: values[k] for k in _COMPARE_FIELDS})
        return cls(reference=values["reference"], primary=values["primary"],
                   sample=float(values["sample"]), timeout=float(values["timeout"]),
                   noise=values["noise"], shadow_writes=values["shadow_writes"],
                   background=values["background"],
                   store=store or None, compare=compare)


@dataclass
class ShadowRecord:
    """One shadowed (or deliberately skipped) query.

    ``status``: ``compared``, ``skipped`` (then ``skip_reason`` says why and
    ``category`` is None) or ``pending`` (``background = true``: the verdict
    is being computed; :meth:`wait` for it). ``ratio`` is primary time over reference time.
    Peak memory is filled when an engine reports it (``peak_memory_bytes``
    in its result notes); in-process engines sharing one process cannot be
    told apart, so it is often None here (``arrowgate bench`` measures it).
    """

    sql: str
    primary: str
    reference: str
    status: str = "compared"
    name: str | None = None
    category: str | None = None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    skip_reason: str | None = None
    primary_ms: float | None = None
    reference_ms: float | None = None
    primary_rows: int | None = None
    reference_rows: int | None = None
    primary_peak_mb: float | None = None
    reference_peak_mb: float | None = None
    noise_checked: bool = False
    #: the engine that actually answered for the primary, when it fell back to another
    answered_by: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    time: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def __post_init__(self) -> None:
        self._done = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the verdict is in (``background = true`` fills it in later).

        Returns:
            True when the record is final, False when ``timeout`` passed first.
        """
        return self._done.wait(timeout)

    @property
    def ratio(self) -> float | None:
        if not self.primary_ms or not self.reference_ms:
            return None
        return self.primary_ms / self.reference_ms

    @property
    def diverged(self) -> bool:
        """The answers disagree (nondeterministic queries and skipped ones do not count)."""
        return self.category not in (None, "match", "nondeterministic")

    @property
    def key(self) -> str:
        """The name the store groups repeated runs of one query under."""
        return self.name or " ".join(self.sql.split())[:80]

    def summary(self) -> str:
        """One line: verdict and latency ratio."""
        if self.status == "skipped":
            return f"shadow {self.reference}: skipped ({self.skip_reason})"
        if self.status == "pending":
            return f"shadow {self.reference}: pending (the verdict follows in the background)"
        ratio = f"; {self.primary} took {self.ratio:.2f}x {self.reference}'s time" \
            if self.ratio is not None else ""
        timing = (f" ({self.primary} {self.primary_ms:.1f} ms, {self.reference} "
                  f"{self.reference_ms:.1f} ms)") if self.ratio is not None else ""
        fallback = f" [{self.primary} fell back to {self.answered_by}]" if self.answered_by else ""
        return f"shadow {self.reference}: {self.category}: {self.message}{ratio}{timing}{fallback}"

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["ratio"] = None if self.ratio is None else round(self.ratio, 4)
        return out


# -- deciding what to shadow -----------------------------------------------------
def skip_reason(sql: str, settings: ShadowSettings, dialect: str = "duckdb") -> str | None:
    """Why ``sql`` must not be shadowed, or None when it may be."""
    if _OPT_OUT.search(sql):
        return "opted out with -- arrowgate: shadow=off"
    if settings.shadow_writes:
        return None
    kind = statement_kind(sql, dialect)
    if kind != "read":
        return (f"{kind} statement: it would run twice on shared data "
                "(set shadow_writes = true when the reference is a separate copy)")
    return None


def statement_kind(sql: str, dialect: str = "duckdb") -> str:
    """``read`` for a query; otherwise what the statement is (``INSERT``, ``unrecognized``...)."""
    import sqlglot
    from sqlglot import exp

    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception:
        return "unrecognized"
    if not statements:
        return "empty"
    for stmt in statements:
        if isinstance(stmt, (exp.Query, exp.Describe)) and not _writes_inside(stmt, exp):
            continue
        if isinstance(stmt, exp.Command):
            return f"{stmt.name.upper()}"
        return stmt.key.upper()
    return "read"


def _writes_inside(stmt: Any, exp: Any) -> bool:
    """A query that writes anyway (``WITH x AS (INSERT ... RETURNING *) SELECT``, ``SELECT INTO``)."""
    writes = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Into)
    return any(True for _ in stmt.find_all(*writes))


# -- running ---------------------------------------------------------------------------
class _Reference(threading.Thread):
    """Runs the reference (once or twice) and keeps answers or errors with their timings."""

    def __init__(self, gw: Gateway, name: str, sql: str, parameters: Any, twice: bool):
        super().__init__(name=f"shadow-{name}", daemon=True)
        self.gw, self.engine, self.sql, self.parameters, self.twice = gw, name, sql, parameters, twice
        self.first: pa.Table | BaseException | None = None
        self.second: pa.Table | BaseException | None = None
        self.seconds: float | None = None
        self.peak: int | None = None
        self.session: Session | None = None

    def _once(self) -> tuple[pa.Table | BaseException, float, int | None]:
        try:
            # starting the engine is not part of its latency
            self.session = self.gw.session(self.engine)
        except BaseException as exc:
            return exc, 0.0, None
        started = time.perf_counter()
        try:
            result = self.session.execute(self.sql, self.parameters, shadow=False)
            table = result.to_arrow()
            return table, time.perf_counter() - started, result.notes.get("peak_memory_bytes")
        except BaseException as exc:
            return exc, time.perf_counter() - started, None
        finally:
            self.session.close()

    def run(self) -> None:
        self.first, self.seconds, self.peak = self._once()
        if self.twice:
            self.second = self._once()[0]

    def cancel(self) -> None:
        """Cancel the reference's query only; other queries on its engine keep running."""
        if self.session is not None:
            self.session.cancel()


def run_shadowed(
    gw: Gateway,
    sql: str,
    primary: str,
    reference: str,
    settings: ShadowSettings,
    *,
    parameters: Any = None,
    name: str | None = None,
    concurrent: bool = True,
    store: bool = True,
    session: Session | None = None,
) -> tuple[Result | None, BaseException | None, ShadowRecord]:
    """Run ``sql`` on ``primary`` and ``reference`` and judge the answers.

    Returns:
        the primary's result (read whole) or None, the primary's error or
        None, and the record (appended to the store when ``store``).
    """
    record = ShadowRecord(sql=sql, primary=primary, reference=reference, name=name)
    reason = skip_reason(sql, settings, gw.dialect(primary))
    if reason is not None:
        record.status, record.skip_reason = "skipped", reason
        result, error = _run_primary(gw, sql, primary, parameters, record, session)
        _save(record, settings, store)
        record._done.set()
        return result, error, record
    ref = _Reference(gw, reference, sql, parameters, settings.noise)
    if concurrent:
        ref.start()
    result, error = _run_primary(gw, sql, primary, parameters, record, session)
    if not concurrent:
        ref.start()
    primary_outcome: pa.Table | BaseException = error if error is not None else \
        result.to_arrow()  # type: ignore[union-attr]

    def finish() -> None:
        try:
            _judge(record, ref, primary_outcome, settings)
            _save(record, settings, store)
        finally:
            record._done.set()

    if concurrent and settings.background:
        record.status = "pending"
        threading.Thread(target=finish, name=f"shadow-verdict-{reference}", daemon=True).start()
    else:
        finish()
    return result, error, record


def _judge(record: ShadowRecord, ref: _Reference, primary_outcome: pa.Table | BaseException,
           settings: ShadowSettings) -> None:
    """Wait for the reference (at most ``settings.timeout``) and put the verdict in ``record``."""
    ref.join(settings.timeout)
    if ref.is_alive():
        ref.cancel()
        reference_outcome: pa.Table | BaseException = QueryTimeout(
            f"no answer within the shadow timeout of {settings.timeout:g} s",
            engine=record.reference)
        again = None
    else:
        assert ref.first is not None
        reference_outcome, again = ref.first, ref.second
        record.reference_ms = (ref.seconds or 0.0) * 1000
        record.reference_peak_mb = _mb(ref.peak)
        if not isinstance(ref.first, BaseException):
            record.reference_rows = ref.first.num_rows
    record.noise_checked = again is not None
    verdict: Verdict = compare_with_noise(primary_outcome, reference_outcome, again,
                                          sql=record.sql, options=settings.compare)
    record.category, record.message, record.evidence = \
        verdict.category, verdict.message, verdict.evidence
    record.status = "compared"


def _run_primary(gw: Gateway, sql: str, engine: str, parameters: Any, record: ShadowRecord,
                 session: Session | None = None) -> tuple[Result | None, BaseException | None]:
    gw.engine(engine)  # starting the engine is not part of its latency
    started = time.perf_counter()
    try:
        result = session.execute(sql, parameters, shadow=False) if session is not None else \
            gw.execute(sql, engine=engine, parameters=parameters, shadow=False)
        table = result.to_arrow()
    except GatewayError as exc:
        record.primary_ms = (time.perf_counter() - started) * 1000
        return None, exc
    record.primary_ms = (time.perf_counter() - started) * 1000
    record.primary_rows = table.num_rows
    record.primary_peak_mb = _mb(result.notes.get("peak_memory_bytes"))
    if result.engine != engine:
        record.answered_by = result.engine
    return result, None


def _mb(nbytes: Any) -> float | None:
    return round(nbytes / 2**20, 1) if isinstance(nbytes, (int, float)) else None


def _save(record: ShadowRecord, settings: ShadowSettings, store: bool) -> None:
    if store and settings.store:
        ShadowStore(settings.store).append([record])


def shadow_execute(gw: Gateway, sql: str, engine: str | None, parameters: Any,
                   shadow: str | bool | None, session: Session | None = None) -> Result | None:
    """What :meth:`Gateway.execute` calls first: the shadowed result, or None to run plainly.

    ``shadow``: a reference engine name, False (never shadow), or None (the
    configuration's ``[shadow]`` section decides). ``session``: the primary
    runs in it (the reference always runs in a session of its own).
    """
    configured: ShadowSettings | None = getattr(gw, "shadow_settings", None)
    primary = gw.engine_config(engine).name
    if isinstance(shadow, str):
        gw.engine_config(shadow)
        settings = dataclasses.replace(configured, reference=shadow, sample=1.0) \
            if configured is not None else \
            ShadowSettings(reference=shadow, store=str(gw.config.base_dir / DEFAULT_STORE))
    elif shadow is None and configured is not None:
        if configured.primary not in (None, primary) or configured.reference == primary:
            return None
        if configured.sample < 1.0 and random.random() >= configured.sample:
            return None
        settings = configured
    else:
        return None
    result, error, record = run_shadowed(gw, sql, primary, settings.reference, settings,
                                         parameters=parameters, session=session)
    if error is not None:
        if isinstance(error, GatewayError):
            error.shadow = record  # type: ignore[attr-defined]
        raise error
    assert result is not None
    result.shadow = record
    return result


def settings_from_mapping(raw: Mapping[str, Any], config: GatewayConfig) -> ShadowSettings:
    """Check a ``[shadow]``-shaped mapping against ``config`` (the CLI builds one from flags)."""
    probe = dataclasses.replace(config, shadow=dict(raw))
    settings = ShadowSettings.from_config(probe)
    assert settings is not None
    return settings
