"""A detector whose conditions read only the event, run over a partition's
columns, keys in rounds.

The generic batch path makes every event a Python object and steps it alone. For a
:class:`~statemachines.library.Detector` whose conditions are SQL or functions of
the event (see :mod:`statemachines.library.lockstep`) a chunk of whole keys goes
from Arrow to Arrow instead: the SQL conditions are evaluated over the chunk's
symbol column, the functions called once per distinct symbol, the keys step
together in numpy rounds, and the updates are built as columns, a match's events
gathered from the chunk's own symbol and time columns::

    chunk rows (key, symbol, time)  ->  answers (bits)  ->  rounds  ->  update columns

A :class:`~statemachines.library.RuleDetector` whose versions are all such
detectors (and whose rules' times are whole numbers) runs the same way, one round
set per rule version over the events of its validity interval, the partial matches
left at a version's end ending there as ``replaced`` or ``retired``; SQL texts
shared by several rules are evaluated once per chunk::

    version         its events        stepped up to     then
    fraud from 0    time in [0, 10)   10                left partial matches end "replaced"
    fraud from 10   time >= 10        the frontier      (in force)

A key goes the generic way instead (the same rows out) when one of its rows is
anything but a plain event: values from an earlier run, a null key, time or
symbol, a time below the frontier, a symbol a function or SQL condition raises on
(of any rule: a rule that cannot read an event rejects it for all; see
:func:`~statemachines.library.nfa.answer_rows`), or two
events at one time whose order Spark's sort does not settle and the symbol's
fields cannot (a field that is not text, an integer or a boolean). A chunk goes the
generic way whole when its columns are not plain (see
:mod:`statemachines.spark.tabulated`) or its SQL conditions cannot read its
symbols' types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statemachines import Machine
from statemachines.library.cep import Detector
from statemachines.library.lockstep import (
    KINDS,
    MATCH_KIND,
    Rounds,
    always_bits,
    event_lists,
    function_conditions,
)
from statemachines.library.nfa import EVALUATION_ERRORS, answer_rows
from statemachines.library.rules import RuleDetector
from statemachines.spark.output import update_rows
from statemachines.spark.tabulated import (
    _plain_columns,
    distinct_symbols,
    key_groups,
    plain_events,
    tied_with_previous,
    whole_key_chunks,
)

__all__ = ["lockstep_runner", "runs_in_rounds"]

_PLAIN_FIELDS = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_boolean)


@attrs.frozen
class _Plan:
    """One detector's part of a machine's rounds: its events are those at times in
    ``[valid_from, valid_until)`` (``None``: no bound), stepped up to ``upto``; at
    ``ending = (time, kind)`` its partial matches left end (a rule version's end);
    its values end with ``tag``."""

    detector: Detector
    valid_from: Any
    valid_until: Any
    upto: Any
    ending: tuple[Any, int] | None
    tag: tuple[Any, ...]


def runs_in_rounds(machine: Machine) -> bool:
    """Whether the batch path runs ``machine`` in rounds: a plain detector (no tag)
    whose table covers its pattern, or a rule detector whose versions' detectors all
    do, with whole-number windows, gaps and rule times."""
    if type(machine) is RuleDetector:
        book = machine.rules
        return book.time_type is int and all(_covered(v.detector) for v in book.versions)
    return type(machine) is Detector and not machine.tag and _covered(machine)


def _covered(detector: Detector) -> bool:
    spans = [detector.pattern.window, *detector._nfa.gaps.values()]
    return all(s is None or type(s) is int for s in spans) and detector.rounds_table() is not None


def _plans(machine: Detector | RuleDetector, upto: Any) -> list[_Plan]:
    """The detectors a machine's rounds run, each over its events."""
    if type(machine) is Detector:
        return [_Plan(machine, None, None, upto, None, ())]
    plans = []
    for v in machine.rules.versions:
        cut = v.valid_until is not None and (upto is None or v.valid_until < upto)
        plans.append(_Plan(
            v.detector, v.valid_from, v.valid_until, v.valid_until if cut else upto,
            (v.valid_until, KINDS.index(v.ends_as)) if cut else None, v.detector.tag,
        ))
    return plans


def lockstep_runner(
    machine: Detector | RuleDetector, lower: Any, upto: Any, arrow_schema: Any,
    generic: Callable[[Iterator[Any]], Iterator[Any]], counter: Any = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The partition function: whole keys in chunks; ``generic`` (the per-event
    partition function, counting nothing) takes the rows of the keys that are not
    plain. ``counter``, an accumulator, is given the number of events the partition
    held."""
    plans = _plans(machine, upto)

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        for chunk in whole_key_chunks(batches, counter):
            yield from _chunk(plans, chunk, lower, upto, arrow_schema, generic)

    return run


def _chunk(
    plans: list[_Plan], chunk: Any, lower: Any, upto: Any, arrow_schema: Any,
    generic: Callable[[Iterator[Any]], Iterator[Any]],
) -> Iterator[Any]:
    """The output batches of a chunk of whole keys."""
    if (
        not _plain_columns(chunk, lower)
        or (upto is not None and type(upto) is not int)
        # SQL conditions read fields by name: over symbols that are not records each
        # event they are asked about is rejected, event by event as locally
        or (
            not pa.types.is_struct(chunk.schema.field("symbol").type)
            and any(p.detector._nfa.expression_mask for p in plans)
        )
    ):
        yield from generic(iter(chunk.to_batches()))
        return
    new_key, group, is_event, times = key_groups(chunk)
    symbols = chunk.column("symbol").combine_chunks()
    plain = is_event & plain_events(chunk, lower) & symbols.is_valid().to_numpy(zero_copy_only=False)
    if upto is not None:
        plain &= times < upto
    try:
        answers = _answers([plan.detector for plan in plans], symbols)
    except EVALUATION_ERRORS:  # conditions that cannot read these symbols: each refuses, event by event
        yield from generic(iter(chunk.to_batches()))
        return
    irregular = np.zeros(int(group[-1]) + 1 if len(group) else 0, bool)
    irregular[group[~plain]] = True
    for _, raised in answers:  # a rule that cannot read an event rejects it for all
        irregular[group[raised]] = True
    order = _applied_order(chunk, symbols, new_key, group, is_event, times, irregular)
    if order is None:  # ties that only Python can rank
        yield from generic(iter(chunk.to_batches()))
        return
    rows = order[~irregular[group[order]]]  # the stepped events, in the order each key applies them
    key_of = group[rows]
    time = times[rows].astype(np.int64)
    same_time = np.r_[False, (key_of[1:] == key_of[:-1]) & (time[1:] == time[:-1])]
    run_start = np.maximum.accumulate(np.where(same_time, 0, np.arange(len(rows))))
    seq = np.arange(len(rows)) - run_start  # the event's place among its key's events at its time
    key_rows = np.flatnonzero(new_key)
    parts = []
    for plan, (bits, _) in zip(plans, answers, strict=True):
        inside = np.ones(len(rows), bool)
        if plan.valid_from is not None:
            inside &= time >= plan.valid_from
        if plan.valid_until is not None:
            inside &= time < plan.valid_until
        own = np.flatnonzero(inside)
        if not len(own):
            continue
        own_key = key_of[own]
        starts = np.flatnonzero(np.r_[True, own_key[1:] != own_key[:-1]])
        counts = np.diff(np.r_[starts, len(own)]).astype(np.int64)
        given = {name: np.zeros(0, np.int64) for name in ("key", "state", "chain", "start", "last")}
        rounds = Rounds(
            plan.detector.rounds_table(), plan.detector.pattern.window, counts, time[own], bits[rows[own]], given, 0, plan.upto,
            ending=plan.ending,
        )
        parts.append(_Stepped(rounds, plan.tag, rows[own], key_rows[own_key[starts]], seq[own]))
    out = [_update_batch(parts, chunk, arrow_schema)]
    if not irregular.any():
        yield out[0]
        return
    # the keys stepped event by event join the others in key order (a file's row
    # groups then hold key ranges)
    others = np.flatnonzero(irregular[group])
    out.extend(generic(iter(chunk.take(pa.array(others)).to_batches())))
    both = pa.Table.from_batches(out, arrow_schema)
    yield from both.take(pc.sort_indices(both, [("key", "ascending")])).to_batches()


def _answers(detectors: list[Detector], symbols: Any) -> list[tuple[Any, Any]]:
    """For each detector, each row's answers to its conditions, as bits (numpy),
    and whether a function condition raised on its symbol (its key then goes the
    generic way, which asks only what a step needs). Detectors share the answers
    of one SQL text."""
    fields = None
    if any(detector._nfa.expression_mask for detector in detectors):
        fields = pa.Table.from_arrays(symbols.flatten(), names=[f.name for f in symbols.type])
    shared: dict[str, Any] = {}
    return [_detector_answers(detector, symbols, fields, shared) for detector in detectors]


def _detector_answers(detector: Detector, symbols: Any, fields: Any, shared: dict[str, Any]) -> tuple[Any, Any]:
    nfa = detector._nfa
    bits = np.full(len(symbols), always_bits(nfa), np.int64)
    raised = np.zeros(len(symbols), bool)
    if nfa.expression_mask:  # rows the SQL conditions raise on send their keys the generic way
        answered, failed = answer_rows(nfa, fields, shared)
        bits |= np.asarray(answered.to_numpy(zero_copy_only=False), np.int64)
        if failed is not None:
            raised |= failed.to_numpy(zero_copy_only=False)
    functions = function_conditions(nfa)
    if functions:
        distinct, inverse = distinct_symbols(symbols)
        yes, failed = np.zeros(len(distinct), np.int64), np.zeros(len(distinct), bool)
        for i, symbol in enumerate(distinct):
            if symbol is None:  # a null symbol's key goes the generic way
                continue
            try:
                yes[i] = sum(bit for bit, condition in functions if condition(symbol, None))
            except Exception:  # noqa: BLE001 - the generic way raises it only if a step asks
                failed[i] = True
        bits |= yes[inverse]
        raised |= failed[inverse]
    return bits, raised


def _applied_order(
    chunk: Any, symbols: Any, new_key: Any, group: Any, is_event: Any, times: Any, irregular: Any
) -> Any:
    """The chunk's rows in the order the intake applies each key's events: Spark's
    sort settles all but events at one time with equal orders (or none), which
    rank by their symbols (``event_rank``: no order first, then by order, then by
    the symbol's fields, nulls first). ``None`` if a field cannot be ranked here."""
    same = tied_with_previous(chunk, new_key, is_event, times)
    tied = same | np.r_[same[1:], False]
    if not (tied & ~irregular[group]).any():
        return np.arange(chunk.num_rows)
    fields = symbols.flatten() if pa.types.is_struct(symbols.type) else [symbols]
    if not all(any(test(f.type) for test in _PLAIN_FIELDS) for f in fields):
        return None
    orders = chunk.column("order").combine_chunks()
    columns = {"group": pa.array(group), "time": pa.array(times), "ordered": orders.is_valid(),
               "order": orders.fill_null(0)}
    for i, field in enumerate(fields):  # a null field first: its validity, then its value
        columns[f"valid{i}"] = field.is_valid()
        columns[f"field{i}"] = field
    return pc.sort_indices(pa.table(columns), [(name, "ascending") for name in columns]).to_numpy()


@attrs.frozen
class _Stepped:
    """One detector's rounds over a chunk: its events are the chunk's ``rows``
    (``seq``: each one's place among its key's events at its time), its keys those
    of rows ``key_rows``, its values ending with ``tag``."""

    rounds: Rounds
    tag: tuple[Any, ...]
    rows: Any
    key_rows: Any
    seq: Any


def _update_batch(parts: list[_Stepped], chunk: Any, arrow_schema: Any) -> Any:
    """The rounds' updates as one record batch of the output schema, in key order."""
    key_row, kinds, states, times, diffs, part_of, lengths = [], [], [], [], [], [], []
    event_rows, event_steps, event_seqs = [], [], []
    texts: list[str] = []
    names: list[str] = []
    for n, part in enumerate(parts):
        kind, key, state, chain, time, diff = part.rounds.logged(by_time=False)  # a table has no order within a key
        offsets, events, steps = event_lists(part.rounds, chain)
        table = part.rounds.table
        key_row.append(part.key_rows[key])
        kinds.append(kind)
        states.append(len(texts) + np.where(kind == MATCH_KIND, 0, state))  # a match's state: "" (the start's)
        times.append(time)
        diffs.append(diff)
        part_of.append(np.full(len(kind), n, np.int64))
        lengths.append(np.diff(offsets))
        event_rows.append(part.rows[events])
        event_steps.append(len(names) + steps)
        event_seqs.append(part.seq[events])
        texts += ["" if t is None else t for t in table.texts]
        names += table.names
    key_row, kind, state, time, diff, part, length = (
        np.concatenate(c) if c else np.zeros(0, np.int64) for c in (key_row, kinds, states, times, diffs, part_of, lengths)
    )
    rows, steps, seqs = (np.concatenate(c) if c else np.zeros(0, np.int64) for c in (event_rows, event_steps, event_seqs))
    if len(parts) > 1:  # the parts' rows in key order, and their events with them
        order = np.argsort(key_row, kind="stable")
        key_row, kind, state, time, diff, part = (c[order] for c in (key_row, kind, state, time, diff, part))
        first = (np.cumsum(length) - length)[order]
        length = length[order]
        start = np.cumsum(length) - length
        taken = np.repeat(first - start, length) + np.arange(int(length.sum()))
        rows, steps, seqs = rows[taken], steps[taken], seqs[taken]
    value_type = arrow_schema.field("value").type
    event_type = value_type.field("events").type.value_type
    at = pa.array(rows)
    taken_events = pa.StructArray.from_arrays(
        [
            pa.array(names, pa.string()).take(pa.array(steps)),
            chunk.column("time").take(at).combine_chunks().cast(event_type.field("time").type),
            pa.array(seqs, pa.int64()),
            chunk.column("symbol").take(at).combine_chunks().cast(event_type.field("symbol").type),
        ],
        fields=list(event_type),
    )
    offsets = np.concatenate([[0], np.cumsum(length)])
    tags = [pa.array([p.tag[i] for p in parts], value_type[3 + i].type).take(pa.array(part)) for i in range(len(value_type) - 3)]
    value = pa.StructArray.from_arrays(
        [
            pa.array(KINDS, pa.string()).take(pa.array(kind)),
            pa.array(texts, pa.string()).take(pa.array(state)),
            pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), taken_events),
            *tags,
        ],
        fields=list(value_type),
    )
    columns = {
        "key": chunk.column("key").take(pa.array(key_row)).combine_chunks(),
        "value": value,
        "time": pa.array(time).cast(arrow_schema.field("time").type),
        "diff": pa.array(diff, pa.int64()),
    }
    return update_rows(columns, arrow_schema)
