"""The local runtime: the exact reference for what every runtime must produce.

Feed events, advance the frontier, collect the updates that are now final, repeat::

    runtime = LocalRuntime(Upsert())
    runtime.feed(events)                 # any order; buffered until final
    step = runtime.advance_to(100)       # times < 100 are complete
    step.updates, step.rejected          # what became final, and what was refused
    runtime.finish()                     # the input is complete: flush the rest

or in one call: ``run_local(machine, events)``.

The output never depends on arrival order or on how the frontier advanced, provided
no event arrives after the frontier has passed its time; such an event is *late* and
is rejected with reason ``late`` (never silently dropped).
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

import attrs

from statemachines._gc import gc_paused
from statemachines.arrangement import Arrangement
from statemachines.columns import column_to_python, storage_problem
from statemachines.core import OwnTypeCheck, ValueCheck, advance_key, call_deadline, held_values
from statemachines.deadlines import Deadlines
from statemachines.display import SAMPLE_ROWS, html_table, never_raises, pending_note, show_time
from statemachines.errors import InvalidArgument
from statemachines.events import Event, Reason, Rejected
from statemachines.intake import Intake
from statemachines.machine import Machine, resume_machine, settings_note
from statemachines.pending import PendingEvents
from statemachines.results import RunProgress, RunResult, event_cells
from statemachines.times import is_time, time_after, time_kind
from statemachines.updates import Update, canonical, hashable, sort_key_runs
from statemachines.waterline import (
    NOTE,
    Mark,
    Waterline,
    arrangement_high,
    guessed_marks,
    mark_note,
    marks_by_time,
    settle,
)

__all__ = ["LocalRuntime", "RunProgress", "RunResult", "run_local"]


Progress = Callable[[RunProgress], None]
CHECKPOINT_FORMAT = 2  # LocalRuntime.checkpoint(); restore() reads formats 1 and 2
PROGRESS_EVERY_KEYS = 2_000  # keys processed between calls to a progress callback


class LocalRuntime:
    """Run one machine over a stream of events, frontier step by frontier step.

    With ``into=arrangement`` the machine's state is the arrangement (feedback): each
    key's values are read back from it, the run starts at its ``upper`` (earlier
    events are late), and every frontier step appends one batch to it. A restarted
    run over the same arrangement continues exactly where the last step ended.
    ``into`` may also be the path or URI of a persisted arrangement (created if
    missing).

    ``progress``, if given, is called with a :class:`RunProgress` after each
    :meth:`feed`, every few thousand keys of a step, and at the end of each step.
    ``symbol_type``, set by a caller that knows the symbols' Arrow type (a Spark
    runner; :meth:`feed` of a pyarrow table sets its symbol column's), is handed to
    a machine that prepares symbols in bulk.

    Memory: O(live keys + buffered events) (without ``into``; with it, the live
    values are the arrangement's); with a machine that reduces same-time events and
    an in-memory output, buffered events are O(distinct (key, time) pairs).
    """

    symbol_type: Any = None  # runtimes pickled before it existed read as None
    _key_check: Any = None  # likewise

    def __init__(
        self,
        machine: Machine,
        *,
        into: Arrangement | str | os.PathLike[str] | None = None,
        value_check: ValueCheck | None = None,
        progress: Progress | None = None,
    ) -> None:
        if not isinstance(machine, Machine):
            raise InvalidArgument(
                f"LocalRuntime needs a Machine instance, got {machine!r}; "
                f"pass an instance such as Upsert(), not the class"
            )
        into = output_arrangement(into)
        if into is not None:  # what earlier runs into it used up to its upper
            machine = resume_machine(machine, into.notes, into.upper)
        self.machine = machine
        self._values: dict[Any, frozenset[Any]] = {}
        self._rejected: list[Rejected] = []
        self._frontier: Any = None
        self._finished = False
        # an output that cannot store every value says so (PersistedArrangement, a
        # typed Spark column)
        self._check = value_check or getattr(into, "value_check", None)
        self._own_check = value_check is None and self._check is not None  # the output's, not one given
        self._key_check = getattr(into, "key_check", None)  # an output that cannot store every key says so
        # an output typed by its first value takes the type the machine declares
        # instead, once the first event tells the symbols' and times' types
        self._expect_type = getattr(into, "expect_value_type", None) if machine.spec.declares_value_type else None
        self._intake = Intake(machine, value_check=self._check)
        # Reducing same-time events would hide an earlier event behind a later one
        # that the value check then rejects; with a check, every event is kept.
        reduces = machine.spec.reduces_same_time and self._check is None
        self._pending = PendingEvents(machine.reduce_same_time if reduces else None)
        self._deadlines = Deadlines(partial(call_deadline, machine))
        self._into = into
        self._progress = progress
        # for progress: events fed, updates produced and events refused, so far
        self._fed = self._updates_out = self._rejected_out = 0
        self._evicted = 0
        self._evicted_at: Mark | None = None  # the high mark of the last eviction pass
        self._high: Mark | None = None  # waterline machines: the high mark so far
        if machine.spec.has_waterline:
            if machine.spec.has_deadlines:
                raise InvalidArgument(
                    f"{machine.spec.name} has both waterlines and deadlines; the runtimes "
                    f"do not support the two together yet"
                )
            if into is not None:
                self._high = arrangement_high(machine, into)
        if into is not None and into.upper is not None:
            self._frontier = into.upper
            self._intake.kind = time_kind(into.upper)
            self._arm_every_key()

    # -- reading --------------------------------------------------------------------

    @property
    def frontier(self) -> Any:
        """Times below this are complete and processed (``None`` before the first step)."""
        return self._frontier

    @property
    def finished(self) -> bool:
        """True once :meth:`finish` was called."""
        return self._finished

    def values(self, key: Any) -> frozenset[Any]:
        """The values of ``key`` as of the frontier (empty if it has none)."""
        if self._into is not None:
            return self._into.values(key)
        return self._values.get(key, frozenset())

    def pending_events(self) -> list[Event]:
        """The buffered events whose time is not final yet, in (key, time, rank) order."""
        return self._pending.events()

    def stats(self) -> dict[str, int]:
        """Sizes of the working state: live keys, buffered slots and armed deadlines.

        ``live_keys`` counts the keys this runtime holds values for; with ``into``,
        the arrangement holds them instead and this is 0; ``live_values`` counts
        their values (for a pattern detector: live partial matches). ``evicted_keys`` counts
        keys a machine declared forgettable (key lateness): their values stay in the
        output, only the runtime's copy is dropped.
        """
        return {
            "live_keys": len(self._values),
            "buffered_key_times": self._pending.key_times(),
            "armed_deadlines": len(self._deadlines),
            "evicted_keys": self._evicted,
            "live_values": sum(len(values) for values in self._values.values()),
        }

    def earliest_waiting(self) -> Any:
        """The earliest time at which a buffered event or an armed deadline waits.

        The next step that moves the frontier past this time has work to do; a step
        that stays at or below it produces nothing new. ``None`` if nothing waits.
        """
        times = [self._pending.earliest(), self._deadlines.earliest()]
        return min((t for t in times if t is not None), default=None)

    def summary(self) -> str:
        """One line: the frontier, what waits, the working state's size."""
        stats = self.stats()
        pending, earliest = self.waiting()
        state = "finished" if self._finished else f"frontier {show_time(self._frontier)}"
        return (
            f"{self.machine.spec.name}, {state}; {pending_note(pending, earliest)}; "
            f"{stats['live_keys']:,} live keys, {stats['armed_deadlines']:,} armed deadlines, "
            f"{len(self._rejected):,} rejected not yet reported"
        )

    def __repr__(self) -> str:
        return f"<LocalRuntime: {self.summary()}>"

    @never_raises
    def _repr_html_(self) -> str:
        facts = [("machine", self.machine.spec.name), ("frontier", show_time(self._frontier))]
        facts += [(name.replace("_", " "), f"{n:,}") for name, n in self.stats().items()]
        facts.append(("rejected not yet reported", f"{len(self._rejected):,}"))
        facts.append(("output", repr(self._into) if self._into is not None else "in memory"))
        waiting = self.pending_events()
        return (
            f"<p><b>LocalRuntime</b>: {html.escape(self.summary())}</p>"
            + html_table((), facts)
            + "\n<p>Pending events</p>"
            + html_table(
                ["key", "symbol", "time", "order"],
                [event_cells(e) for e in waiting[:SAMPLE_ROWS]],
                total=len(waiting),
            )
        )

    def waiting(self) -> tuple[int, Any]:
        """How many events are buffered, not yet final, and the earliest of their times.

        ``(0, None)`` when nothing waits. O(keys with buffered events).
        """
        return self._pending.waiting()

    def take_rejected(self) -> list[Rejected]:
        """The events refused since the last step, now rather than with the next step.

        They are not reported again by the next :meth:`advance_to` or :meth:`finish`.
        """
        rejected, self._rejected = self._rejected, []
        return rejected

    # -- saving and resuming ----------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """The working state as plain, picklable data (the machine is not included).

        :meth:`restore` continues from it exactly: what the restored runtime produces
        equals what this one would have produced. Refused events not yet reported
        are part of it. Not available with ``into`` (the arrangement is the state).

        Format :data:`CHECKPOINT_FORMAT` (2), a dict:

        ============  ==========================================================
        field         holds
        ============  ==========================================================
        format        2
        values        key -> frozenset of its values
        pending       key -> time -> buffered events (one ``Event``, or a list)
        rejected      ``Rejected`` events not yet reported
        frontier      times below it are processed (``None``: none yet)
        finished      whether the input was declared complete
        kind          the run's time kind (``times.time_kind``), or ``None``
        order_kind    the run's order kind (``intake.order_kind``), or ``None``
        due           key -> the time its armed deadline wakes it
        evicted       how many keys were forgotten (key lateness)
        evicted_at    the high mark of the last eviction pass
        high          the waterline high mark so far (waterline machines)
        ============  ==========================================================

        Format 1, the same without ``format`` and ``order_kind``, is still read.
        """
        if self._into is not None:
            raise InvalidArgument("a runtime writing into an arrangement is resumed from it")
        return {
            "format": CHECKPOINT_FORMAT,
            "values": self._values,
            "pending": self._pending.by_key,
            "rejected": self._rejected,
            "frontier": self._frontier,
            "finished": self._finished,
            "kind": self._intake.kind,
            "order_kind": self._intake.order_kind,
            "due": self._deadlines.due,
            "evicted": self._evicted,
            "evicted_at": self._evicted_at,
            "high": self._high,
        }

    @classmethod
    def restore(
        cls, machine: Machine, state: dict[str, Any], *, value_check: ValueCheck | None = None
    ) -> LocalRuntime:
        """A runtime continuing from a :meth:`checkpoint` of one running ``machine``.

        A NaN in a key, value or buffered symbol (unpickled, a NaN of its own) is made
        ``math.nan`` again: NaN is one value (:func:`~statemachines.updates.canonical`).

        Raises:
            InvalidArgument: the checkpoint has a format this version does not read.
        """
        found = state.get("format", 1) if isinstance(state, dict) else None
        if found not in (1, CHECKPOINT_FORMAT):
            raise InvalidArgument(
                f"a checkpoint of format {found!r} cannot be read by this version, which reads "
                f"formats 1 to {CHECKPOINT_FORMAT}; run the version that wrote it, or start "
                f"again from the output (a streaming query: a new checkpoint directory "
                f"continues from the arrangement's values)"
            )
        runtime = cls(machine, value_check=value_check)
        runtime._values = {canonical(key): frozenset(map(canonical, values)) for key, values in state["values"].items()}
        runtime._pending.by_key = {
            canonical(key): {time: _canonical_events(slot) for time, slot in by_time.items()}
            for key, by_time in state["pending"].items()
        }
        runtime._rejected = state["rejected"]
        runtime._frontier = state["frontier"]
        runtime._finished = state["finished"]
        runtime._intake.kind = state["kind"]
        runtime._intake.order_kind = state.get("order_kind")  # absent from format 1
        runtime._deadlines = Deadlines(partial(call_deadline, machine), state["due"])
        runtime._evicted = state["evicted"]
        runtime._evicted_at = state["evicted_at"]
        runtime._high = state["high"]
        return runtime

    def seed(self, values: Iterable[tuple[Any, Any]], frontier: Any) -> None:
        """Start from known values as of ``frontier`` (e.g. read from an arrangement).

        ``values`` are ``(key, value)`` pairs; events below ``frontier`` will be late.
        Only a fresh runtime (nothing fed, no step taken) can be seeded.
        """
        if self._into is not None or self._pending or self._frontier is not None or self._values:
            raise InvalidArgument("only a fresh runtime without an arrangement can be seeded")
        by_key: dict[Any, set[Any]] = {}
        for key, value in values:
            by_key.setdefault(key, set()).add(value)
        self._values = {key: frozenset(vs) for key, vs in by_key.items()}
        if frontier is not None:
            self._frontier = frontier
            self._intake.kind = time_kind(frontier)
        self._arm_every_key()

    def reconfigure(self, machine: Machine) -> None:
        """Run ``machine`` in place of the current one from the frontier on.

        ``machine`` is of the same class and agrees with the current one below the
        frontier (e.g. a :class:`~statemachines.library.RuleDetector` whose rule book
        gained rows valid from the frontier or later: :meth:`RuleBook.extended`). The
        keys keep their values; buffered events not yet final are applied by
        ``machine``; every live key's deadline is asked of ``machine`` again::

            frontier 10, key a armed at 15        reconfigure: a rule of a ends at 12
            advance_to(20): a wakes at 12, where the old machine woke it at 15
        """
        if type(machine) is not type(self.machine):
            raise InvalidArgument(f"a runtime of {self.machine.spec.name} can take another one, not {machine!r}")
        self.machine = machine
        self._intake.use(machine)
        if machine.spec.reduces_same_time and self._check is None:
            self._pending = PendingEvents(machine.reduce_same_time, self._pending.by_key)
        self._deadlines = Deadlines(partial(call_deadline, machine))
        self._arm_every_key()

    def _arm_every_key(self) -> None:
        """Arm each live key for the deadline its values ask the machine for."""
        if self.machine.spec.has_deadlines:
            keys = self._into.keys() if self._into is not None else list(self._values)
            for key in keys:
                self._deadlines.arm(key, held_values(self.machine, self.values(key)))

    # -- writing --------------------------------------------------------------------

    def feed(self, events: Iterable[Any]) -> None:
        """Buffer events ``(key, symbol, time[, order])``; refuse those that cannot be.

        ``events`` may also be a table: a pyarrow ``Table`` or ``RecordBatch``, or a
        pandas ``DataFrame``, with columns ``key``, ``symbol``, ``time`` and optionally
        ``order`` (other columns are not read), as Spark's runtime reads a DataFrame.
        Refused events (late, malformed, null key or time, wrong time type, a symbol
        the machine rejects) are reported by the next :meth:`advance_to` or
        :meth:`finish`.

        Raises:
            InvalidArgument: a table lacks one of the columns.
        """
        schema: Any = getattr(events, "schema", None)
        if self.symbol_type is None and "symbol" in getattr(schema, "names", ()):
            self.symbol_type = schema.field("symbol").type  # a pyarrow table's, as Spark's runner gives it
        events = table_events(events)
        if self._finished:
            fed = self._refuse_all(events)
        else:
            if self._expect_type is not None:
                events = self._typing(events, self._expect_type)
            with gc_paused():
                fed = self._pending.feed(events, self._intake, self._frontier, self._rejected.append)
        self._fed += fed
        if self._progress is not None:
            self._report(self.waiting()[0], 0, len(self._rejected))

    def _typing(self, events: Iterable[Any], expect: Callable[[Any], None]) -> Iterator[Any]:
        """``events``, telling the output the machine's value type (``expect``) at the
        first one whose symbol and time have a type."""
        from statemachines.columns import type_fixed_by

        events = iter(events)
        for event in events:
            yield event
            try:
                types = [type_fixed_by(event[1]), type_fixed_by(event[2])]
            except Exception:  # noqa: BLE001 - a malformed event: the intake refuses it
                continue
            if None in types:
                continue
            declared = self.machine.value_type(*types)
            if declared is not None:  # a machine may declare no type for these
                expect(declared)
                self._check_by_event(declared, *types)
            self._expect_type = None
            yield from events
            return

    def _check_by_event(self, declared: Any, symbol_type: Any, time_type: Any) -> None:
        """Check an event's symbol and time instead of each value it makes, where that
        is the same (:class:`~statemachines.core.OwnTypeCheck`): the machine's values
        fit its own type, and the output's value column has that type."""
        column = getattr(self._into, "value_column_type", None)
        if not self._own_check or not self.machine.spec.values_fit_own_type or column is None or column() != declared:
            return
        assert self._check is not None
        self._check = OwnTypeCheck(
            self._check, partial(storage_problem, arrow_type=symbol_type), partial(storage_problem, arrow_type=time_type)
        )
        self._intake.value_check = self._check

    def advance_to(self, frontier: Any) -> RunResult:
        """Declare every time below ``frontier`` complete; return what became final.

        Raises:
            InvalidArgument: ``frontier`` is not a time of the run's kind, or is below
                the current frontier.
        """
        if self._finished:
            raise InvalidArgument("the run is finished; start a new LocalRuntime")
        frontier = canonical(frontier)  # a zoned one: its instant in UTC, as the events' times
        kind = time_kind(frontier)
        if not is_time(frontier, self._intake.kind):
            raise InvalidArgument(
                f"frontier {frontier!r} is not a time of this run's kind "
                f"({self._intake.kind or 'any'})"
            )
        if self._frontier is not None and frontier < self._frontier:
            raise InvalidArgument(
                f"frontier {frontier!r} is below the current frontier {self._frontier!r}; "
                f"frontiers only advance"
            )
        self._intake.kind = kind
        result = self._process(frontier)
        if self._into is not None and frontier != self._frontier:
            notes = {NOTE: mark_note(self._high)} if self.machine.spec.has_waterline else {}
            notes.update(settings_note(self.machine))
            self._into.append(result.updates, lower=self._frontier, upper=frontier, notes=notes or None)
        self._frontier = frontier
        return result

    def finish(self) -> RunResult:
        """Declare the input complete: process everything and fire every deadline."""
        if self._finished:
            raise InvalidArgument("the run is already finished")
        if self._into is None:
            result = self._process(None)
        else:
            # The arrangement needs a batch upper: just past the last buffered time.
            # Deadlines after it stay armed in the stored values for a later run.
            last = self._pending.last_time()
            if last is not None:
                result = self.advance_to(time_after(last))
            else:
                result = RunResult([], self._rejected, self._frontier)
                self._rejected_out += len(self._rejected)
                self._rejected = []
        self._finished = True
        return result

    # -- insides --------------------------------------------------------------------

    def _refuse_all(self, events: Iterable[Any]) -> int:
        """Events fed after :meth:`finish`: each is late, or rejected for its own fault."""
        fed = 0
        for raw in events:
            fed += 1
            checked = self._intake.check(raw, self._frontier)
            if type(checked) is not Rejected:
                checked = Rejected(checked, Reason.LATE, "the input was already declared complete")
            self._rejected.append(checked)
        return fed

    def _process(self, upto: Any) -> RunResult:
        with gc_paused():
            return self._step(upto)

    def _step(self, upto: Any) -> RunResult:
        ready = self._pending.take(upto)
        rejected, self._rejected = self._rejected, []
        if self._key_check is not None:
            self._refuse_unstorable_keys(ready, rejected)
        if self.machine.spec.prepares_symbols and ready:
            self.machine.prepare_symbols(_Symbols(ready), self.symbol_type)
        updates: dict[Any, list[Update]] = {}  # key -> its updates, in (time, value) order
        ordered = self._pending.ordered
        work: Iterable[tuple[Any, frozenset[Any], list[Event]]] = (
            (key, self.values(key), ordered(by_time)) for key, by_time in ready.items()
        )
        if self._progress is not None:
            work = self._reporting(work, updates, rejected)
        for key, values, outcome in self._run(work, upto):
            self._commit(key, values, outcome, updates, rejected)
        self._wake_due_keys(upto, updates, rejected)
        self._evict()
        ordered_updates = sort_key_runs(updates)
        self._updates_out += len(ordered_updates)
        self._rejected_out += len(rejected)
        if self._progress is not None:
            self._report(self.waiting()[0], 0, 0)
        return RunResult(ordered_updates, rejected, upto)

    def _refuse_unstorable_keys(self, ready: dict[Any, dict[Any, Any]], rejected: list[Rejected]) -> None:
        """Take the keys the output cannot store out of ``ready``: their events are
        rejected as ``bad_key``, with the output's reason."""
        assert self._key_check is not None
        for key in list(ready):
            problem = self._key_check(key)
            if problem is not None:
                rejected.extend(Rejected(e, Reason.BAD_KEY, problem) for e in self._pending.ordered(ready.pop(key)))

    def _report(self, waiting: int, updates: int, rejected: int) -> None:
        """Call the progress callback; ``updates`` and ``rejected``: this step's so far."""
        assert self._progress is not None
        self._progress(
            RunProgress(self._fed, waiting, self._updates_out + updates, self._rejected_out + rejected)
        )

    def _reporting(
        self,
        work: Iterable[tuple[Any, frozenset[Any], list[Event]]],
        updates: dict[Any, list[Update]],
        rejected: list[Rejected],
    ) -> Iterable[tuple[Any, frozenset[Any], list[Event]]]:
        """``work`` as it is, calling the progress callback every few thousand keys."""
        items = list(work)
        waiting = self.waiting()[0] + sum(len(events) for _, _, events in items)
        for n, item in enumerate(items, 1):
            waiting -= len(item[2])
            if n % PROGRESS_EVERY_KEYS == 0:
                self._report(waiting, sum(map(len, updates.values())), len(rejected))
            yield item

    def _run(self, work: Iterable[tuple[Any, frozenset[Any], list[Event]]], upto: Any) -> Iterable[Any]:
        """``(key, values before, advance_key's outcome)`` for each key's final events.

        A machine with waterlines is run by :func:`~statemachines.waterline.settle`:
        its rules read what every key inserted at earlier times.
        """

        if not self.machine.spec.has_waterline:
            machine, check = self.machine, self._check
            if machine.spec.advances_keys:
                return machine.advance_keys(work, upto, check)
            return ((key, values, advance_key(machine, key, values, events, upto, check)) for key, values, events in work)
        work = list(work)

        check = self._check
        last: tuple[Waterline, list[Any]] | None = None  # the previous run's waterline and outcomes

        def run(machine: Machine, line: Waterline) -> list[Any]:
            nonlocal last
            if last is None:
                outcomes = [(key, values, advance_key(machine, key, values, events, upto, check)) for key, values, events in work]
            else:  # a key whose events all see the high marks they saw last time runs as it ran
                seen, before = last
                outcomes = [
                    ran if all(line.high_before(e[2]) == seen.high_before(e[2]) for e in events)
                    else (key, values, advance_key(machine, key, values, events, upto, check))
                    for (key, values, events), ran in zip(work, before, strict=True)
                ]
            last = (line, outcomes)
            return outcomes

        times = {e[2] for _, _, events in work for e in events}
        guess = None
        if self.machine.spec.guesses_marks:
            guess = guessed_marks(self.machine, ((key, e[1], e[2]) for key, _, events in work for e in events))
        outcomes, waterline = settle(
            self.machine,
            self._high,
            run,
            lambda outcomes: marks_by_time(
                self.machine,
                (u for _, _, (_, key_updates, _) in outcomes for u in key_updates),
            ),
            max_rounds=len(times) + 2,
            guess=guess,
        )
        self._high = waterline.high
        return outcomes

    def _evict(self) -> None:
        """Drop the keys the machine will never look up again (key lateness)."""
        if not self.machine.spec.forgets_keys or self._high is None or self._high == self._evicted_at:
            return
        self._evicted_at = self._high
        forgets = self.machine.forgets
        gone = [key for key in self._values if forgets(key, self._high)]
        for key in gone:
            del self._values[key]
        self._evicted += len(gone)

    def _advance(
        self,
        key: Any,
        values: frozenset[Any],
        events: list[Event],
        upto: Any,
        updates: dict[Any, list[Update]],
        rejected: list[Rejected],
    ) -> None:
        outcome = advance_key(self.machine, key, values, events, upto, self._check)
        self._commit(key, values, outcome, updates, rejected)

    def _commit(
        self,
        key: Any,
        values: frozenset[Any],
        outcome: tuple[frozenset[Any], list[Update], list[Rejected]],
        updates: dict[Any, list[Update]],
        rejected: list[Rejected],
    ) -> None:
        after, key_updates, key_rejected = outcome
        if self._into is None:  # with an arrangement, the step's batch carries the change
            if after:
                self._values[key] = after
            elif values:
                del self._values[key]
        if key_updates:
            assert key not in updates, "a key is advanced once per step"
            updates[key] = key_updates
        if key_rejected:
            rejected.extend(key_rejected)
        if self.machine.spec.has_deadlines:
            self._deadlines.arm(key, after)

    def _wake_due_keys(self, upto: Any, updates: dict[Any, list[Update]], rejected: list[Rejected]) -> None:
        """Run the keys that had no events but whose deadline is before ``upto``.

        A key that had events was already run up to ``upto``, deadlines included, so
        its entries here are stale (its armed deadline moved on) and are skipped.
        """
        for key in self._deadlines.pop_due(upto):
            self._advance(key, self.values(key), [], upto, updates, rejected)


def run_local(
    machine: Machine,
    events: Iterable[Any],
    *,
    frontier: Any = None,
    into: Arrangement | str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run ``machine`` over ``events`` in one call.

    Args:
        machine: the machine instance.
        events: ``(key, symbol, time[, order])`` tuples, in any order, or a table
            of such columns (pyarrow or pandas; see :meth:`LocalRuntime.feed`).
        frontier: if given, only times below it are treated as complete; events at
            later times are returned in ``pending``. If omitted, the input is
            complete: everything is processed and every deadline fires (with
            ``into``: up to just past the last event time).
        into: an arrangement to read prior values from and append the output to
            (see :class:`LocalRuntime`), or the path or URI of a persisted one
            (created if missing), as ``run_batch`` takes it.
        progress: called with a :class:`RunProgress` as the run goes (after the
            events are fed, then every few thousand keys); for a progress bar,
            ``statemachines.library.progress.ProgressBar``.

    Returns:
        A :class:`RunResult` with the consolidated updates sorted by
        ``(time, data)`` and the rejected events.
    """
    runtime = LocalRuntime(machine, into=into, progress=progress)
    runtime.feed(events)
    if frontier is None:
        return runtime.finish()
    step = runtime.advance_to(frontier)
    return attrs.evolve(step, pending=runtime.pending_events())


def output_arrangement(into: Any) -> Arrangement | None:
    """``into`` as an arrangement: one given as it is, a path or URI opened as a
    :class:`~statemachines.persisted.PersistedArrangement` (created if missing)."""
    if into is None or isinstance(into, Arrangement):
        return into
    if isinstance(into, str | os.PathLike):
        from statemachines.persisted import PersistedArrangement

        return PersistedArrangement(into)
    raise InvalidArgument(
        f"into is an Arrangement or the path of a persisted one, not {type(into).__name__} {into!r:.80}"
    )


EVENT_COLUMNS = ("key", "symbol", "time", "order")


def table_events(events: Any) -> Iterable[Any]:
    """The rows of a pyarrow table or batch, or of a pandas DataFrame, as event tuples
    (``order`` only if the table has it); any other ``events`` as they are."""
    is_arrow = hasattr(events, "column_names") and hasattr(events, "to_pylist")
    is_pandas = hasattr(events, "itertuples") and hasattr(events, "columns")
    if not (is_arrow or is_pandas):
        return events
    names = [str(name) for name in (events.column_names if is_arrow else events.columns)]
    missing = [name for name in EVENT_COLUMNS[:3] if name not in names]
    if missing:
        raise InvalidArgument(
            f"a table of events has columns key, symbol, time and optionally order; this one lacks "
            f"{', '.join(missing)} (it has {', '.join(names) or 'none'})"
        )
    read = [name for name in EVENT_COLUMNS if name in names]
    if is_arrow:  # as the Spark runtime reads them (a date beyond Python's years: an Unreadable)
        return zip(*(column_to_python(events.column(name)) for name in read), strict=True)
    columns = [_pandas_cells(events[name]) for name in read]
    for i, name in enumerate(read):  # structs (dicts) as records and lists as tuples, as from Spark
        if events[name].dtype == object and name != "time":
            columns[i] = [hashable(cell) for cell in columns[i]]
    return zip(*columns, strict=True)


def _pandas_cells(column: Any) -> list[Any]:
    """A pandas column's cells; in a column of objects or categories, where a
    missing cell is NaN (``read_csv``'s empty text), ``None``, as Arrow and Spark
    read it. A float column's NaN is a reading, kept."""
    cells = column.tolist()
    if column.dtype == object or str(column.dtype) == "category":
        missing = column.isna().tolist()
        if any(missing):
            cells = [None if gone else cell for cell, gone in zip(cells, missing, strict=True)]
    return cells


def _canonical_events(slot: Event | list[Event]) -> Event | list[Event]:
    """A buffered slot's events with every NaN in their keys and symbols ``math.nan``."""
    if isinstance(slot, list):
        return [_canonical_event(event) for event in slot]
    return _canonical_event(slot)


def _canonical_event(event: Event) -> Event:
    return event._replace(key=canonical(event.key), symbol=canonical(event.symbol))


class _Symbols(Sequence[Any]):
    """The symbols of the events :meth:`PendingEvents.take` returned, gathered when
    first read: a machine that needs none of them (a detector without expression
    conditions) costs nothing for them."""

    def __init__(self, ready: dict[Any, dict[Any, Any]]) -> None:
        self._ready = ready
        self._symbols: list[Any] | None = None

    def _gathered(self) -> list[Any]:
        if self._symbols is None:
            symbols: list[Any] = []
            for by_time in self._ready.values():
                for slot in by_time.values():
                    if isinstance(slot, list):
                        symbols.extend(event.symbol for event in slot)
                    else:
                        symbols.append(slot.symbol)
            self._symbols = symbols
        return self._symbols

    def __len__(self) -> int:
        return len(self._gathered())

    def __getitem__(self, index: Any) -> Any:
        return self._gathered()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._gathered())
