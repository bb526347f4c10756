"""Running a shadowed query: the primary streams to the caller, teed to the comparison.

The reference starts in a thread of its own, beside the primary (or, with
``defer_reference``, when the caller asks for it: the console starts it once the
grid shows the primary's answer, so the two never share the cores). The
primary's batches reach the caller as the engine produces them; each is also
handed to the comparison (:mod:`gateway.shadow.answer`, bounded by
``max_compare_bytes``). When the primary's answer ends, the reference gets
``timeout`` more seconds; then the verdict is computed, in the caller's last
read (``background = false``) or in a thread (``background = true``), the
record is stored and delivered (``record.wait()``, done-callbacks, the hook
``arrowgate_shadow_finished``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gateway.errors import Cancelled, GatewayError, QueryTimeout
from gateway.result import Result
from gateway.shadow.answer import Answer, Budget, streamed_verdict
from gateway.shadow.record import ShadowRecord
from gateway.shadow.store import ShadowStore
from gateway.statement import Statement
from gateway.verify.compare import compare_outcomes, compare_with_noise
from gateway.verify.verdict import Verdict

if TYPE_CHECKING:
    import pyarrow as pa

    from gateway.session import Session
    from gateway.shadow.settings import ShadowSettings
    from gateway.statement import Pipeline


class _Reference(threading.Thread):
    """Runs the reference (once or twice) in a session of its own, streaming its answers
    into the comparison."""

    def __init__(self, pipeline: Pipeline, name: str, stmt: Statement,
                 first: Answer, second: Answer | None):
        super().__init__(name=f"shadow-{name}", daemon=True)
        self.pipeline, self.engine, self.stmt = pipeline, name, stmt
        self.sql, self.parameters = stmt.sql, stmt.parameters
        self.first, self.second = first, second
        self.seconds: float | None = None
        self.peak: int | None = None
        self._session: Session | None = None
        self._cancelled = False
        self._lock = threading.Lock()

    def _once(self, answer: Answer) -> float:
        from gateway.session import Session

        gw, principal = self.pipeline.gw, self.stmt.principal
        try:
            gw.engine(self.engine).warm()  # starting the engine is not timed, nor its imports
        except BaseException as exc:
            answer.finish(None, exc)
            return 0.0
        # timed as the primary's statement (and `arrowgate bench`'s) is: from opening its
        # session (one-shot unless its SETs must run first) and running those SETs to its
        # answer's last batch (a session opened before the clock made a 1 ms statement's
        # ratio twice bench's)
        opened = time.perf_counter()
        try:
            session = Session(gw, self.engine, one_shot=True, principal=principal) \
                if not self.stmt.prelude and principal.may_use(self.engine) else \
                gw.session(self.engine, principal=principal)
        except BaseException as exc:
            answer.finish(None, exc)
            return 0.0
        with self._lock:
            self._session = session
        schema = None
        try:
            self.pipeline.run_prelude(self.stmt, session)
        except BaseException as exc:
            answer.finish(None, exc)
            session.close()
            return 0.0
        fed = 0.0  # seconds spent handing batches to the comparison: not the engine's
        try:
            result = self.pipeline.run_plain(Statement(
                self.sql, self.engine, self.parameters, session=session,
                principal=self.stmt.principal, part_of="shadow"))
            if self._cancelled:  # cancelled while the query was starting
                result.cancel()
            schema = result.schema
            with result:
                for batch in result.reader():
                    fed -= time.perf_counter()
                    answer.add(batch)
                    fed += time.perf_counter()
            ended = time.perf_counter()
            self.peak = result.notes.get("peak_memory_bytes")
            answer.finish(schema)
        except BaseException as exc:
            ended = time.perf_counter()
            answer.finish(schema, exc)
        finally:
            session.close()
        return ended - opened - fed

    def run(self) -> None:
        self.seconds = self._once(self.first)
        if self.second is not None and not self._cancelled:
            self._once(self.second)

    def cancel(self) -> None:
        """Cancel the reference's query only; other queries on its engine keep running."""
        with self._lock:
            self._cancelled = True
            session = self._session
        if session is not None:
            session.cancel()
        # between its session opening and its query getting a handle, a cancel finds
        # nothing to stop, and the query then runs to its end (seen once in 3 CI runs):
        # ask again a few times while the reference still runs
        threading.Thread(target=self._cancel_again, name=f"shadow-cancel-{self.engine}",
                         daemon=True).start()

    def _cancel_again(self) -> None:
        if self.ident is None:  # never started: nothing runs
            return
        for delay in (0.05, 0.1, 0.25, 0.5, 1.0, 2.0):
            self.join(delay)
            if not self.is_alive():
                return
            with self._lock:
                session = self._session
            if session is not None:
                session.cancel()


class _ShadowRun:
    """One shadowed query: the reference's thread, the primary's answer, the verdict."""

    def __init__(self, pipeline: Pipeline, record: ShadowRecord, settings: ShadowSettings,
                 stmt: Statement, store: bool, primary_shared: bool = False):
        self.pipeline, self.gw = pipeline, pipeline.gw
        self.record, self.settings, self.store = record, settings, store
        self.budget = Budget(settings.max_compare_bytes, record.sql, settings.compare)
        self.primary = Answer(self.budget, shared=primary_shared)
        self.reference = _Reference(
            pipeline, record.reference, stmt,
            Answer(self.budget, settings.keep_reference_bytes),
            Answer(self.budget) if settings.noise else None)
        self.background = settings.background
        self.cancelled = False
        self._finishing = threading.Lock()
        self._finished = False
        #: set once the reference was started, or will never be (the run was cancelled)
        self.reference_started = threading.Event()

    def start_reference(self) -> None:
        """Start the reference's thread, once; never after a cancel."""
        with self._finishing:
            if self.reference_started.is_set():
                return
            if not self.cancelled:
                self.reference.start()
            self.reference_started.set()

    @property
    def ended(self) -> bool:
        """The primary's answer was read to its end, failed, or was abandoned."""
        return self._finished

    def _claim_finish(self) -> bool:
        with self._finishing:
            if self._finished:
                return False
            self._finished = True
            return True

    def primary_ended(self, schema: pa.Schema | None, error: BaseException | None,
                      started: float, result: Result | None, seconds: float | None = None
                      ) -> None:
        """The primary's answer is complete (or failed): judge now, or in a thread.

        ``seconds``: the primary's time, when its caller measured it (else the time
        since ``started``).
        """
        record = self.record
        record.primary_ms = (time.perf_counter() - started if seconds is None else seconds) * 1000
        if result is not None:
            record.primary_rows = self.primary.rows if error is None else None
            record.primary_peak_mb = _mb(result.notes.get("peak_memory_bytes"))
        if isinstance(error, Cancelled):
            self.abandon(self.primary.rows, "cancelled the query")
            return
        if isinstance(error, QueryTimeout):  # stopped by its own limit: nothing whole either
            self.abandon(self.primary.rows, "saw the query stopped by its timeout")
            return
        self.primary.finish(schema, error)
        if error is not None:  # no caller waits for a screen of rows: the verdict needs it now
            self.start_reference()
        if not self._claim_finish():
            return
        if self.background:
            threading.Thread(target=self._finish, name=f"shadow-verdict-{record.reference}",
                             daemon=True).start()
        else:
            self._finish()

    def cancel(self) -> bool:
        """Stop the reference (the record is then skipped); False when the record was final."""
        if self.record.done():
            return False
        self.cancelled = True
        self.reference.cancel()
        self.reference_started.set()  # a deferred reference never starts now
        return True

    def abandon(self, rows: int, what: str = "closed the answer") -> None:
        """The caller stopped the primary before its end: nothing whole to compare."""
        if not self._claim_finish():
            return
        self.cancelled = True
        self.reference.cancel()
        self.reference_started.set()
        record = self.record
        record.status = "skipped"
        record.skip_reason = (f"the caller {what} after {rows} rows, before its end; "
                              "there was nothing whole to compare")
        self.primary.finish(None, GatewayError("closed before its end"))
        self.primary.release()
        self.budget.close()
        self._save_and_complete()

    def _finish(self) -> None:
        try:
            self._judge()
        finally:
            self.budget.close()
            self._save_and_complete()

    def _judge(self) -> None:
        """Wait for the reference (at most ``timeout``) and put the verdict in the record."""
        record, settings, ref = self.record, self.settings, self.reference
        self.reference_started.wait()
        if ref.ident is not None:
            ref.join(settings.timeout)
        sides = [self.primary, ref.first]
        if self.cancelled:
            record.status = "skipped"
            record.skip_reason = "the caller cancelled the query before the reference answered"
            for side in sides:
                side.release()
            return
        if ref.is_alive():
            ref.cancel()
            timeout = QueryTimeout(f"no answer within the shadow timeout of {settings.timeout:g} s",
                                   engine=record.reference)
            verdict = compare_outcomes(_outcome(self.primary), timeout, sql=record.sql,
                                       options=settings.compare)
            again = None
        else:
            record.reference_ms = (ref.seconds or 0.0) * 1000
            record.reference_peak_mb = _mb(ref.peak)
            if ref.first.error is None:
                record.reference_rows = ref.first.rows
            again = ref.second
            if again is not None:
                sides.append(again)
            try:
                verdict = self._compare(ref.first, again)
            except GatewayError as exc:  # the streamed comparison could not spill
                record.status, record.skip_reason = "skipped", f"the comparison failed: {exc}"
                for side in sides:
                    side.release()
                return
            if settings.uncut_rows and verdict.category == "nondeterministic" \
                    and self.primary.error is None and not self.primary.downgraded:
                from gateway.shadow.uncut import check_without_the_cut

                verdict = check_without_the_cut(self.pipeline, ref.stmt.principal,
                                                record.reference, record.sql, ref.parameters,
                                                self.primary.table(), verdict, settings)
            record._reference_answer = ref.first.kept()
        record.noise_checked = again is not None
        record.downgraded = any(side.downgraded for side in sides)
        record.category, record.message, record.evidence = \
            verdict.category, verdict.message, verdict.evidence
        record.status = "compared"
        for side in sides:
            side.release()

    def _compare(self, reference: Answer, again: Answer | None) -> Verdict:
        primary, sql = self.primary, self.record.sql
        sides = [primary, reference] + ([again] if again is not None else [])
        if not any(side.downgraded for side in sides):
            return compare_with_noise(_outcome(primary), _outcome(reference),
                                      None if again is None else _outcome(again),
                                      sql=sql, options=self.settings.compare)
        if primary.error is not None or reference.error is not None:
            # a verdict with an error never reads the other side's rows
            return compare_outcomes(_outcome(primary), _outcome(reference), sql=sql,
                                    options=self.settings.compare)
        opts = self.settings.compare.for_sql(sql)
        verdict = streamed_verdict(primary, reference, budget=self.budget)
        if again is None or verdict.ok:
            return verdict
        noise = compare_outcomes(again.error, _outcome(reference), sql=sql, options=opts) \
            if again.error is not None else \
            streamed_verdict(again, reference, budget=self.budget)
        if noise.ok:
            return verdict
        return Verdict("nondeterministic",
                       f"two runs of the reference disagree ({noise.category}), so the answer "
                       "is not determined by the data",
                       {"reference_vs_itself": noise.to_dict(),
                        "primary_vs_reference": verdict.to_dict()})

    def _save_and_complete(self) -> None:
        if self.store and self.settings.store:
            ShadowStore(self.settings.store).add(self.record)  # written with the next flush
        self.record._complete(
            lambda r: self.gw.notify("arrowgate_shadow_finished", record=r))


def _outcome(answer: Answer) -> pa.Table | BaseException:
    """The answer's error, its table, or (downgraded) an empty table of its columns,
    for verdicts where the other side failed."""
    if answer.error is not None:
        return answer.error
    if answer.downgraded:
        assert answer.schema is not None
        return answer.schema.empty_table()
    return answer.table()


class ShadowedResult(Result):
    """The primary's answer, streaming to the caller while each batch feeds the comparison.

    Reading it to its end completes the record (with ``background = false``
    the last read waits for the verdict); closing it earlier records the
    query as skipped and cancels the reference.
    """

    def __init__(self, primary: Result, run: _ShadowRun, started: float):
        import pyarrow as pa

        from gateway.engine import EngineResult

        reader = pa.RecordBatchReader.from_batches(primary.schema, self._tee())
        super().__init__(primary.engine, EngineResult(reader, primary.notes), started)
        self.notes = primary.notes
        self.query_id = primary.query_id
        self._began = started
        self._primary = primary
        self._run = run
        self._claimed = False

    def _tee(self) -> Iterator[pa.RecordBatch]:
        run, primary = self._run, self._primary
        try:
            for batch in primary.reader():
                run.primary.add(batch)
                yield batch
        except GeneratorExit:  # the stream was dropped unfinished
            run.abandon(run.primary.rows)
            raise
        except BaseException as exc:
            run.primary_ended(primary.schema, exc, self._began, primary)
            raise
        run.primary_ended(primary.schema, None, self._began, primary)

    def reader(self) -> pa.RecordBatchReader:
        self._claimed = True
        return super().reader()

    def to_arrow(self) -> pa.Table:
        self._claimed = True
        return super().to_arrow()

    def cancel(self) -> bool:
        """Stop the primary's query and the reference's, also after the primary's answer
        was read whole while the verdict is pending (the record is then skipped).

        Returns:
            False when both had already finished.
        """
        stopped = self._primary.cancel()
        return self._run.cancel() or stopped

    def start_reference(self) -> None:
        """Start the deferred reference (``run_shadowed(defer_reference=True)``); once only,
        and never after a cancel. Without deferral it started with the primary."""
        self._run.start_reference()

    def _drain(self) -> None:
        """For :meth:`ShadowRecord.wait` on an answer nobody reads: read it whole, keep it."""
        if not self._claimed:
            self.to_arrow()

    def close(self) -> None:
        if not self._run.ended:
            self._run.abandon(self.rows)
        self._primary.close()
        super().close()


def run_shadowed(
    pipeline: Pipeline,
    stmt: Statement,
    settings: ShadowSettings,
    *,
    name: str | None = None,
    concurrent: bool = True,
    store: bool = True,
    defer_reference: bool = False,
    primary_shared: bool = False,
) -> tuple[Result | None, BaseException | None, ShadowRecord]:
    """Run ``stmt`` on its engine and on ``settings.reference``, and judge the answers.

    The primary runs as ``stmt`` says (in its session, with its parameters, its
    timeout, its prepared execution); the reference runs ``stmt.sql`` with the
    same parameters, for the same principal, in a session of its own, with the
    shadow timeout. Both go through every step of the statement pipeline but
    this one.

    Args:
        concurrent: True: the reference starts with the primary, and the
            primary's answer streams back to the caller (a
            :class:`ShadowedResult`, the record final once it is read to its
            end). False: the primary is read to its end, then the reference
            runs, and the record is final on return.
        store: append the record to the store when it is final.
        defer_reference: with ``concurrent`` and ``settings.background``: the
            reference starts only when the caller calls
            :meth:`ShadowedResult.start_reference` (or when the primary fails),
            and the verdict waits for that; a cancel or close lets it go.
            The console defers it until the primary's answer is on screen.
        primary_shared: the caller keeps the primary's whole answer anyway (the
            console's grid): the comparison shares its batches without counting
            them as held, and the caller's read never waits for the spill
            (:class:`gateway.shadow.answer.Answer`'s ``shared``).

    Returns:
        the primary's result or None, the primary's error or None, and the record.
    """
    from gateway.shadow.settings import skip_reason

    gw = pipeline.gw
    primary = stmt.engine = gw.engine_config(stmt.engine).name
    record = ShadowRecord(sql=stmt.sql, primary=primary, reference=settings.reference,
                          name=name)
    reason = skip_reason(stmt.sql, settings, gw.dialect(primary))

    def run_primary() -> Result:
        return pipeline.run_plain(stmt)

    if reason is not None:
        record.status, record.skip_reason = "skipped", reason
        started = time.perf_counter()
        result: Result | None = None
        error: GatewayError | None = None
        try:
            result = run_primary()
            record.query_id = result.query_id
        except GatewayError as exc:
            error = exc
        record.primary_ms = (time.perf_counter() - started) * 1000
        run = _ShadowRun(pipeline, record, settings, stmt, store)
        run._claim_finish()
        run._save_and_complete()
        return result, error, record
    if defer_reference and not (concurrent and settings.background):
        raise ValueError("defer_reference needs concurrent and settings.background")
    run = _ShadowRun(pipeline, record, settings, stmt, store, primary_shared)
    run.background = settings.background and concurrent
    if concurrent and not defer_reference:
        run.start_reference()
    gw.engine(primary).warm()  # starting the engine is not part of its latency, nor its imports
    started = time.perf_counter()
    try:
        result = run_primary()
    except GatewayError as exc:
        seconds = time.perf_counter() - started
        run.start_reference()
        run.primary_ended(None, exc, started, None, seconds)
        return None, exc, record
    record.query_id = result.query_id
    if result.engine != primary:
        record.answered_by = result.engine
    if concurrent:
        shadowed = ShadowedResult(result, run, started)
        record._drain = shadowed._drain
        return shadowed, None, record
    # timed as `arrowgate bench` times an engine: the statement run and its answer read,
    # not the batches handed to the comparison, nor the reference's thread starting
    # (which held the interpreter for up to a switch interval, 5 ms, before the clock
    # stopped: small statements looked 2-3 times slower than in `arrowgate bench`)
    fed = 0.0
    try:
        for batch in result.reader():
            fed -= time.perf_counter()
            run.primary.add(batch)
            fed += time.perf_counter()
    except GatewayError as exc:
        seconds = time.perf_counter() - started - fed
        run.start_reference()
        run.primary_ended(result.schema, exc, started, result, seconds)
        return None, exc, record
    seconds = time.perf_counter() - started - fed
    run.start_reference()
    run.primary_ended(result.schema, None, started, result, seconds)
    return result, None, record


def _mb(nbytes: Any) -> float | None:
    return round(nbytes / 2**20, 1) if isinstance(nbytes, (int, float)) else None
