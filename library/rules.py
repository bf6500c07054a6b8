"""Rules that change while the job runs: many patterns, each valid over declared times.

A *rule book* is read from rows ``(rule_id, pattern_json, valid_from)``: from
``valid_from`` on, rule ``rule_id`` detects the pattern of ``pattern_json`` (a
:meth:`Pattern.to_json` document), until the rule's next row; a row whose
``pattern_json`` is null retires the rule. ``RuleDetector(book)`` runs every rule
in force on every key: an event at time ``t`` is matched by the rules valid at
``t``, and each finding carries its ``rule_id``. When a rule is replaced or
retired at time ``T``, its partial matches end at ``T`` with that reason (after
the windows closing at ``T`` have closed), and matches held back by a skip
strategy for one of them are reported then. Rule ``fraud`` replaced at 10 and
retired at 20::

    rule_id  pattern_json   valid_from      partial matches begun     end
    fraud    {3 fails, ok}  0               in [0, 10)                at 10: "replaced"
    fraud    {5 fails, ok}  10              in [10, 20)               at 20: "retired"
    fraud    null           20              (none)

So each rule version finds exactly what a :class:`Detector` of its pattern finds
over the events in its validity interval, its partial matches left at the end
ending with the reason.

Rows that cannot be read are set aside with a reason (:attr:`RuleBook.rejected`),
never dropped: a row that is not three fields, a ``rule_id`` that is not a non-empty string, a ``valid_from`` that is
not a time, a pattern the document does not describe (the reason's detail says
why), two different rows for one rule at one time, and a retirement of a rule
never in force before it. Rows repeated exactly are one row.

Rows may also arrive while the job runs (:meth:`RuleBook.extended` at the run's
frontier, then :meth:`~statemachines.LocalRuntime.reconfigure`; on Spark,
``run_stream(..., rules=stream)``); each takes effect at its ``valid_from`` as if
known from the start, or is set aside as ``late`` if that is below the frontier.

Values and findings are a :class:`Detector`'s with the rule id appended::

    value                                     updates
    ("partial", state, events, rule_id)       +1 when it appears, -1 when it moves on
    ("held", "", events, rule_id)             +1 while waiting, -1 when reported
    ("match", "", events, rule_id)            +1 when reported
    ("timeout", state, events, rule_id)       +1 when its window closes
    ("replaced" | "retired", state, events, rule_id)
                                              +1 when its rule's version ends
"""

from __future__ import annotations

import bisect
import datetime
import enum
import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import attrs

from statemachines import Emit, Machine
from statemachines.core import _order_by_value, advance_key
from statemachines.diagram import Diagram
from statemachines.errors import DefinitionError, InvalidArgument
from statemachines.events import Refused
from statemachines.library.cep import (
    HELD,
    MATCH,
    PARTIAL,
    TIMEOUT,
    Detector,
    Found,
    finding_order,
    found_in,
    value_fields,
)
from statemachines.library.lockstep import REPLACED, RETIRED
from statemachines.library.nfa import records_of
from statemachines.library.pattern import Pattern
from statemachines.times import decode_time, encode_time, time_after, time_kind
from statemachines.updates import require_hashable

__all__ = [
    "REPLACED", "RETIRED", "RejectedRule", "RuleBook", "RuleDetector", "RuleWhy", "Version", "ended", "row_as_json",
    "row_from_json",
]

_ENDINGS = frozenset({MATCH, TIMEOUT, RETIRED, REPLACED})


class RuleWhy(enum.StrEnum):
    """Why a rule row is set aside, or an event refused by a rule detector."""

    MALFORMED = "malformed"  # not a (rule_id, pattern_json, valid_from) row
    INVALID_RULE_ID = "invalid_rule_id"
    INVALID_TIME = "invalid_time"
    INVALID_PATTERN = "invalid_pattern"
    CONFLICTING = "conflicting"  # two different rows for one rule at one time
    NOT_IN_FORCE = "not_in_force"  # a retirement of a rule not in force
    TIME_KIND = "time_kind"  # an event's time cannot be compared with the rules' times
    LATE = "late"  # a row arriving with valid_from below the frontier (RuleBook.extended)


@attrs.frozen
class RejectedRule:
    """A rule row set aside, and why."""

    row: Any
    reason: RuleWhy
    detail: str


@attrs.frozen
class Version:
    """One rule's pattern over ``[valid_from, valid_until)`` (``None``: no end)."""

    rule_id: str
    pattern: Pattern
    valid_from: Any
    valid_until: Any
    ends_as: str | None  # REPLACED or RETIRED at valid_until
    detector: Detector = attrs.field(eq=False, repr=False)

    @detector.default
    def _detector(self) -> Detector:
        return Detector(self.pattern, tag=(self.rule_id,))


class RuleBook:
    """Rule versions by rule id, read from ``(rule_id, pattern_json, valid_from)`` rows.

    >>> fails = Pattern.begin("fail").where("kind = 'fail'").times(2).within(10)
    >>> book = RuleBook.from_rows([("r1", fails.to_json(), 0), ("r1", None, 5), ("r2", "{", 0)])
    >>> [(v.rule_id, v.valid_from, v.valid_until, v.ends_as) for v in book.versions]
    [('r1', 0, 5, 'retired')]
    >>> [(r.reason.value, r.row[0]) for r in book.rejected]
    [('invalid_pattern', 'r2')]
    """

    def __init__(self, versions: Iterable[Version], rejected: Iterable[RejectedRule] = ()) -> None:
        self.versions = tuple(sorted(versions, key=lambda v: (v.rule_id, v.valid_from)))
        self.rejected = tuple(rejected)
        kinds = {time_kind(v.valid_from) for v in self.versions}
        if len(kinds) > 1:
            raise InvalidArgument(f"rules are valid from times of several kinds ({', '.join(sorted(kinds))})")
        self.time_kind = kinds.pop() if kinds else None
        types = {type(t) for v in self.versions for t in (v.valid_from, v.valid_until) if t is not None}
        # the one type of the rules' times, if they have one (int, float, datetime, ...)
        self.time_type = types.pop() if len(types) == 1 else None
        # the times at which the rules in force change, and which are in force from each
        self._changes = sorted({v.valid_from for v in self.versions} | {
            v.valid_until for v in self.versions if v.valid_until is not None
        })
        self._in_force = [
            tuple(v for v in self.versions if v.valid_from <= t and (v.valid_until is None or t < v.valid_until))
            for t in self._changes
        ]
        self._by_rule: dict[str, list[Version]] = {}
        for v in self.versions:
            self._by_rule.setdefault(v.rule_id, []).append(v)

    @classmethod
    def from_rows(cls, rows: Iterable[Any]) -> RuleBook:
        """The rule book of ``rows``: tuples, mappings or Spark ``Row`` objects with
        ``rule_id``, ``pattern_json`` and ``valid_from``; rows it cannot use are set
        aside in :attr:`rejected` with a reason."""
        rejected: list[RejectedRule] = []
        read: dict[tuple[str, Any], tuple[Any, Pattern | None]] = {}
        conflicting: set[tuple[str, Any]] = set()
        for row, at, pattern in _readable(rows, rejected):
            if at in read and read[at][1] != pattern:
                conflicting.add(at)
                rejected.append(RejectedRule(row, RuleWhy.CONFLICTING, f"rule {at[0]!r} has another row at {at[1]!r}"))
            elif at not in read:
                read[at] = (row, pattern)
        for at in sorted(conflicting, key=repr):
            rejected.append(RejectedRule(read.pop(at)[0], RuleWhy.CONFLICTING, f"rule {at[0]!r} has another row at {at[1]!r}"))
        return cls(*_versions(read, rejected))

    def extended(self, rows: Iterable[Any], *, frontier: Any = None) -> RuleBook:
        """This book with ``rows`` that arrived while the job runs, read in turn.

        A row is set aside (in :attr:`rejected`, after this book's) for the reasons
        :meth:`from_rows` gives, and also when its ``valid_from`` is below
        ``frontier`` (``late``: the events below the frontier were matched by the
        rules then in force), when it differs from the book's row for the same rule
        and time (``conflicting``: the book's row stands), or when it would leave a
        row of the book without effect (a retirement before the rule's retirement)::

            book: r1 from 0, r1 retired at 50        frontier 20
            row (r1, p, 30)      replaces r1 at 30            (kept)
            row (r2, p, 10)      late                         (set aside)
            row (r1, None, 40)   would void the retirement at 50 (set aside)
        """
        read = {(row[0], row[2]): (row, row[1]) for row in self.rows()}  # as from_rows reads rows
        rejected = list(self.rejected)
        kind = self.time_kind
        for row, at, pattern in _readable(rows, rejected):
            if at in read and read[at][1] == pattern:  # a repeat: one row
                continue
            problem = _arrival_problem(at, read, kind, frontier) or _voiding(at, row, pattern, read)
            if problem is not None:
                rejected.append(RejectedRule(row, *problem))
                continue
            read[at] = (row, pattern)
            kind = kind or time_kind(at[1])
        return RuleBook(_versions(read, [])[0], rejected)

    def rows(self) -> list[tuple[str, Pattern | None, Any]]:
        """The rows this book holds, ``(rule_id, pattern, valid_from)`` (``None``: a
        retirement), by rule and time."""
        rows: list[tuple[str, Pattern | None, Any]] = []
        for v in self.versions:
            rows.append((v.rule_id, v.pattern, v.valid_from))
            if v.ends_as == RETIRED:
                rows.append((v.rule_id, None, v.valid_until))
        return rows

    def with_times(self, convert: Callable[[Any], Any]) -> RuleBook:
        """This book with every ``valid_from`` and ``valid_until`` converted."""
        versions = [
            attrs.evolve(v, valid_from=convert(v.valid_from),
                         valid_until=None if v.valid_until is None else convert(v.valid_until))
            for v in self.versions
        ]
        return RuleBook(versions, self.rejected)

    def in_force(self, time: Any) -> tuple[Version, ...]:
        """The rule versions valid at ``time``, by rule id."""
        at = bisect.bisect_right(self._changes, time) - 1
        return self._in_force[at] if at >= 0 else ()

    def version_at(self, rule_id: str, time: Any) -> Version | None:
        """Rule ``rule_id``'s version valid at ``time``, if any."""
        for v in self._by_rule.get(rule_id, ()):
            if v.valid_from <= time and (v.valid_until is None or time < v.valid_until):
                return v
        return None

    def __eq__(self, other: object) -> bool:
        return type(other) is RuleBook and other.versions == self.versions

    def __hash__(self) -> int:
        return hash(tuple((v.rule_id, v.valid_from) for v in self.versions))

    def __repr__(self) -> str:
        return f"RuleBook({len(self._by_rule)} rules, {len(self.versions)} versions)"


_SHAPE = "a rule row is (rule_id, pattern_json, valid_from): a tuple, a mapping or a Spark Row"


def _fields(row: Any) -> tuple[Any, Any, Any] | None:
    """A row's three fields, or ``None`` if it has not that shape."""
    if hasattr(row, "asDict"):  # a Spark Row
        row = row.asDict()
    if isinstance(row, Mapping):
        return row.get("rule_id"), row.get("pattern_json"), row.get("valid_from")
    if isinstance(row, tuple | list) and len(row) == 3:
        return row[0], row[1], row[2]
    return None


def _read_row(row: Any) -> tuple[tuple[str, Any], Pattern | None] | RejectedRule:
    """A row's ``(rule_id, valid_from)`` and pattern (``None``: a retirement), or why
    it cannot be read."""
    fields = _fields(row)
    if fields is None:
        return RejectedRule(row, RuleWhy.MALFORMED, _SHAPE)
    rule_id, text, valid_from = fields
    if not isinstance(rule_id, str) or not rule_id:
        return RejectedRule(row, RuleWhy.INVALID_RULE_ID, f"a rule id is a non-empty string, not {rule_id!r}")
    if time_kind(valid_from) is None or (isinstance(valid_from, float) and not math.isfinite(valid_from)):
        return RejectedRule(row, RuleWhy.INVALID_TIME, f"valid_from {valid_from!r} is not a finite time")
    try:
        pattern = text if text is None or isinstance(text, Pattern) else Pattern.from_json(_document_text(text))
    except DefinitionError as error:
        return RejectedRule(row, RuleWhy.INVALID_PATTERN, str(error))
    if pattern is not None and pattern.raise_on_miss:
        return RejectedRule(
            row, RuleWhy.INVALID_PATTERN,
            "raise_on_miss is not for rules: one rule's miss would reject the event for every rule in force",
        )
    return (rule_id, valid_from), pattern


def _readable(rows: Iterable[Any], rejected: list[RejectedRule]) -> Iterator[tuple[Any, tuple[str, Any], Pattern | None]]:
    """Each row that can be read, with its ``(rule_id, valid_from)`` and pattern; the
    others join ``rejected``."""
    for row in rows:
        item = _read_row(row)
        if isinstance(item, RejectedRule):
            rejected.append(item)
        else:
            yield row, *item


def _arrival_problem(
    at: tuple[str, Any], read: dict[tuple[str, Any], Any], kind: str | None, frontier: Any
) -> tuple[RuleWhy, str] | None:
    """Why a row for rule and time ``at``, arriving while the job runs, cannot join the
    book's rows ``read`` at ``frontier``."""
    valid_from = at[1]
    if kind is not None and time_kind(valid_from) != kind:
        return RuleWhy.INVALID_TIME, f"valid_from {valid_from!r} is not a time of kind {kind}, as the rules' are"
    try:
        late = frontier is not None and valid_from < frontier
    except TypeError:
        return RuleWhy.INVALID_TIME, f"valid_from {valid_from!r} cannot be compared with the frontier {frontier!r}"
    if late:
        return RuleWhy.LATE, f"valid_from {valid_from!r} is below the frontier {frontier!r}: those events were matched"
    if at in read:
        return RuleWhy.CONFLICTING, f"rule {at[0]!r} has another row at {valid_from!r}; the book's row stands"
    return None


def _voiding(
    at: tuple[str, Any], row: Any, pattern: Pattern | None, read: dict[tuple[str, Any], Any]
) -> tuple[RuleWhy, str] | None:
    """Why the book's rows ``read`` with this row would set aside one of them, or it."""
    _, voided = _versions({**read, at: (row, pattern)}, [])
    for r in voided:
        if r.row is row:
            return r.reason, r.detail
    if voided:
        other = _fields(voided[0].row)
        return RuleWhy.CONFLICTING, f"it would leave rule {at[0]!r}'s row at {other[2]!r} without effect"
    return None


def row_as_json(rule_id: Any, pattern_json: Any, valid_from: Any) -> list[Any]:
    """A rule row as JSON, its time tagged as :func:`~statemachines.times.encode_time` tags it."""
    return [rule_id, pattern_json, encode_time(valid_from)]


def row_from_json(row: list[Any]) -> tuple[Any, Any, Any]:
    """The rule row :func:`row_as_json` wrote."""
    rule_id, pattern_json, valid_from = row
    return rule_id, pattern_json, decode_time(valid_from)


def _compact(document: str) -> str:
    return json.dumps(json.loads(document), separators=(",", ":"))


def _as_text(row: tuple[str, Pattern | None, Any]) -> tuple[str, str | None, Any]:
    """A book row with its pattern as JSON text (``repr`` for one that has none)."""
    rule_id, pattern, valid_from = row
    try:
        text = None if pattern is None else pattern.to_json()
    except DefinitionError:
        text = repr(pattern)
    return rule_id, text, valid_from


def _document_text(document: Any) -> str | bytes:
    """A pattern document as text: text as it is, a parsed document (a mapping, or a
    Spark ``Row`` of a struct column) as JSON."""
    if isinstance(document, str | bytes):
        return document
    if hasattr(document, "asDict"):
        document = document.asDict(recursive=True)
    if isinstance(document, Mapping):
        return json.dumps(document)
    raise DefinitionError(f"pattern_json must be a JSON document (text or a mapping), not {document!r}")


def _versions(
    read: dict[tuple[str, Any], tuple[Any, Pattern | None]], rejected: list[RejectedRule]
) -> tuple[list[Version], list[RejectedRule]]:
    """Each rule's rows in time order, as versions; retirements of nothing set aside."""
    by_rule: dict[str, list[tuple[Any, Any, Pattern | None]]] = {}
    for (rule_id, valid_from), (row, pattern) in read.items():
        by_rule.setdefault(rule_id, []).append((valid_from, row, pattern))
    versions = []
    for rule_id, rows in sorted(by_rule.items()):
        try:
            rows.sort(key=lambda r: r[0])
        except TypeError:
            kinds = sorted({str(time_kind(r[0])) for r in rows})
            rejected.extend(
                RejectedRule(row, RuleWhy.INVALID_TIME, f"rule {rule_id!r} mixes times of kinds {kinds}")
                for _, row, _ in rows
            )
            continue
        in_force = False
        for i, (valid_from, row, pattern) in enumerate(rows):
            if pattern is None:
                if not in_force:
                    rejected.append(RejectedRule(row, RuleWhy.NOT_IN_FORCE, f"rule {rule_id!r} is not in force at {valid_from!r}"))
                in_force = False
                continue
            in_force = True
            following = rows[i + 1] if i + 1 < len(rows) else None
            until = following[0] if following else None
            ends_as = None if following is None else RETIRED if following[2] is None else REPLACED
            versions.append(Version(rule_id, pattern, valid_from, until, ends_as))
    return versions, rejected


class RuleDetector(Machine):
    """Runs every rule of a :class:`RuleBook` in force on every key; see the module.

    >>> from statemachines import run_local
    >>> from statemachines.library.cep import matches
    >>> from typing import NamedTuple
    >>> class Login(NamedTuple):
    ...     kind: str
    >>> two = Pattern.begin("fail").where("kind = 'fail'").times(2)
    >>> three = Pattern.begin("fail").where("kind = 'fail'").times(3)
    >>> rules = [("fails", two.to_json(), 0), ("fails", three.to_json(), 3)]
    >>> events = [("u", Login("fail"), t) for t in range(6)]
    >>> [(m.rule, [e[1] for e in m.events]) for m in matches(run_local(RuleDetector(rules), events).updates)]
    [('fails', [0, 1]), ('fails', [1, 2]), ('fails', [3, 4, 5])]
    """

    values_fit_own_type = True

    def __init__(self, rules: RuleBook | Iterable[Any]) -> None:
        if not isinstance(rules, RuleBook):
            rules = RuleBook.from_rows(rules)
            if rules.rejected:
                raise DefinitionError(
                    "rule rows set aside: "
                    + "; ".join(f"{r.reason.value}: {r.detail}" for r in rules.rejected)
                    + " (RuleBook.from_rows(rows).rejected lists them; pass the book to run without them)"
                )
        self.rules = rules
        self._symbol_type: Any = None  # the symbols' Arrow type, once a runtime gave it

    def __repr__(self) -> str:
        return f"RuleDetector({self.rules!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is RuleDetector and other.rules == self.rules

    def __hash__(self) -> int:
        return hash((RuleDetector, self.rules))

    @property
    def subtypes(self) -> list[tuple[type, ...]]:
        """The classes of each ``subtype(...)`` in the book's patterns."""
        return [classes for version in self.rules.versions for classes in version.detector.subtypes]

    def for_time_kind(self, kind: str | None) -> RuleDetector:
        """This detector for events whose times are of ``kind``: a book of naive
        datetimes, read as local times (as PySpark's ``collect()`` gives a timestamp
        column), is made time-zone aware for events with time-zone aware times (a
        Spark ``timestamp`` column); otherwise the detector itself."""
        if kind == "datetime_tz" and self.rules.time_kind == "datetime":
            return RuleDetector(self.rules.with_times(lambda t: t.astimezone(datetime.UTC)))
        return self

    def settings(self) -> Any:
        """The book's rows as JSON ``[rule_id, pattern_json, valid_from]`` (``None`` if a
        pattern has function conditions, which have no JSON)."""
        try:
            return [
                row_as_json(rule_id, None if pattern is None else _compact(pattern.to_json()), valid_from)
                for rule_id, pattern, valid_from in self.rules.rows()
            ]
        except DefinitionError:
            return None

    def resumed(self, settings: Any, frontier: Any) -> RuleDetector:
        """This detector continuing output that the rows ``settings`` made up to
        ``frontier``: the earlier rows below the frontier, then this book's rows from it.

        Raises:
            DefinitionError: this book has a row below the frontier that the earlier
                runs did not have (those events were matched without it).
        """
        kept = RuleBook.from_rows(row_from_json(row) for row in settings).rows()
        # this book's rows, with its retirements of rules it holds no earlier row of
        # (set aside alone, they may retire a rule the kept rows hold)
        mine = self.rules.rows() + [
            (rule_id, None, valid_from)
            for r in self.rules.rejected if r.reason == RuleWhy.NOT_IN_FORCE
            for (rule_id, valid_from), _ in [_read_row(r.row)]
        ]
        try:
            past = [row for row in kept if row[2] < frontier]
            known = {_as_text(row) for row in past}
            late = [row for row in mine if row[2] < frontier and _as_text(row) not in known]
        except TypeError:
            raise DefinitionError(
                f"the rules' times cannot be compared with the output's frontier {frontier!r}"
            ) from None
        if late:
            shown = ", ".join(f"({r[0]!r}, {'retired' if r[1] is None else 'a pattern'}, {r[2]!r})" for r in late)
            raise DefinitionError(
                f"rule rows below the output's frontier {frontier!r}, where earlier runs matched "
                f"without them: {shown}; give them a valid_from at or after {frontier!r}"
            )
        return RuleDetector([*past, *(row for row in mine if not row[2] < frontier)])

    def value_type(self, symbol_type: Any, time_type: Any) -> Any:
        """A detector's value type with the rule id appended."""
        import pyarrow as pa

        return pa.struct([*value_fields(symbol_type, time_type), pa.field("rule", pa.string())])

    def is_finding(self, value: Any) -> bool:
        return value[0] in _ENDINGS

    def validate_symbol(self, symbol: Any) -> None:
        require_hashable(symbol)

    def prepare_symbols(self, symbols: Sequence[Any], symbol_type: Any) -> None:
        """Every rule's expression conditions, answered for a batch of events at once
        over one table of the batch's records."""
        detectors = [v.detector for v in self.rules.versions if v.detector.reads_expressions]
        if not detectors or not symbols:
            return
        if symbol_type is not None:
            self._symbol_type = symbol_type
        records = records_of(symbols, self._symbol_type)
        for detector in detectors:
            detector.prepare_records(records, symbol_type)

    def diagram(self) -> Diagram:
        """Every rule version's NFA side by side, its states named after its rule and
        the time it is valid from, its validity and its own notes (its window, its
        skip strategy) among the notes."""
        nodes, edges, notes = [], [], []
        for n, version in enumerate(self.rules.versions):
            own = version.detector.diagram()
            name = f"{version.rule_id} from {version.valid_from}"
            nodes += [attrs.evolve(node, id=f"v{n}_{node.id}", label=f"{name}: {node.label}") for node in own.nodes]
            edges += [attrs.evolve(e, source=f"v{n}_{e.source}", target=f"v{n}_{e.target}") for e in own.edges]
            until = "on" if version.valid_until is None else f"until {version.valid_until} ({version.ends_as})"
            notes.append(f"{name} {until}: {own.title}")
            notes += [f"{name}: {note}" for note in own.notes]
        return Diagram(f"RuleDetector({len(self.rules.versions)} rule versions)", tuple(nodes), tuple(edges), tuple(notes))

    def transition(
        self, key: Any, values: frozenset[Any], symbol: Any, time: Any, position: int = 0
    ) -> Emit | frozenset[Any]:
        """Every rule in force at ``time`` takes the event; each rule's values are its own."""
        try:
            versions = self.rules.in_force(time)
        except TypeError:
            raise Refused(
                RuleWhy.TIME_KIND,
                f"the rules are valid from times of kind {self.rules.time_kind}; this event's time is {time!r}",
            ) from None
        groups = _by_rule(values)
        after: list[Any] = []
        found: list[Any] = []
        for version in versions:
            misfit = version.detector.time_misfit(time)
            if misfit:
                raise Refused(RuleWhy.TIME_KIND, f"rule {version.rule_id!r}: {misfit}")
        for version in versions:
            group = groups.pop(version.rule_id, None)
            detector = version.detector
            if group is None and not detector.may_begin(symbol):
                continue
            kept, completed = detector.advance_partials(group or (), symbol, time, position)
            after.extend(kept)
            found.extend(completed)
        for group in groups.values():  # rules not in force: none has values (they ended)
            after.extend(group)
        return Emit(after, found) if found else frozenset(after)

    def deadline(self, key: Any, values: frozenset[Any]) -> Any:
        """The earliest of: a partial match's window closing, its rule version ending."""
        due = None
        for rule, group in _by_rule(values).items():
            version = self.rules.version_at(rule, _start(group))
            if version is None:
                continue
            for t in (version.valid_until, version.detector.deadline(key, group)):
                if t is not None and (due is None or t < due):
                    due = t
        return due

    def on_deadline(self, key: Any, values: frozenset[Any], time: Any) -> Emit:
        """Close the windows ending by ``time``, then end the rule versions ending by it."""
        after: list[Any] = []
        found: list[Any] = []
        for group in _by_rule(values).values():
            version = self.rules.version_at(group[0][3], _start(group))
            if version is None:  # cannot be: values end with their version
                after.extend(group)
                continue
            detector = version.detector
            left, released = detector.expire(group, time) if detector.times_out else (group, [])
            found.extend(released)
            if version.valid_until is not None and version.valid_until <= time:
                # the partial matches end; the matches they held back are reported
                ending = [(version.ends_as, v[1], v[2], v[3]) for v in left if v[0] == PARTIAL]
                found.extend(detector.release({v for v in left if v[0] == HELD}, [])[1])
                found.extend(sorted(ending, key=finding_order))
            else:
                after.extend(left)
        return Emit(after, found)

    def advance_keys(
        self, work: Iterable[tuple[Any, frozenset[Any], list[Any]]], upto: Any, check: Any
    ) -> Iterable[tuple[Any, frozenset[Any], tuple[frozenset[Any], list[Any], list[Any]]]]:
        """Many keys at once, one rule version at a time: each version's detector runs
        every key's events of its validity interval (in rounds where it can, see
        :meth:`Detector.advance_keys`) up to its end, where what is left ends as the
        version does; each key's updates are then merged in time and value order::

            version         events        run to      then at its end
            fraud from 0    t in [0, 10)  upto 10     partial matches end "replaced"
            fraud from 10   t >= 10       upto        (none: in force)

        A key one of whose events a version rejects (every rule in force must read
        an event, or it is rejected for all) runs whole, event by event, as do keys
        with values of no version or times of another type than the rules' times.
        """
        by_version: dict[Version, list[tuple[Any, frozenset[Any], list[Any]]]] = {}
        split: dict[Any, tuple[frozenset[Any], list[Any]]] = {}
        for key, values, events in work:
            parts = self._split(values, events, upto)
            if parts is None:
                yield key, values, advance_key(self, key, values, events, upto, check)
                continue
            split[key] = (values, events)
            for version, (own_values, own_events) in parts.items():
                by_version.setdefault(version, []).append((key, own_values, own_events))
        outcomes: dict[Any, list[tuple[frozenset[Any], list[Any], list[Any]]]] = {}
        for version, version_work in by_version.items():
            until = version.valid_until
            cut = until is not None and (upto is None or until < upto)
            version_upto = until if cut else upto
            for key, _, (after, updates, rejected) in version.detector.advance_keys(version_work, version_upto, check):
                if cut and after and not rejected:  # the version's end: its deadline, alone
                    after, ended, _ = advance_key(self, key, after, [], time_after(until), check)
                    updates = updates + ended
                outcomes.setdefault(key, []).append((after, updates, rejected))
        for key, (values, events) in split.items():
            parts = outcomes.get(key, [])  # none: no rule in force at its events
            if any(rejected for _, _, rejected in parts):  # rejected by one rule: by all
                yield key, values, advance_key(self, key, values, events, upto, check)
                continue
            after = frozenset().union(*(after for after, _, _ in parts))
            yield key, values, (after, _merged([updates for _, updates, _ in parts]), [])

    def _split(
        self, values: frozenset[Any], events: list[Any], upto: Any
    ) -> dict[Version, tuple[frozenset[Any], list[Any]]] | None:
        """A key's values and events by the rule version they belong to (events to
        every version in force at their time), or ``None`` if the key must run whole."""
        book = self.rules
        if upto is not None and events and not events[-1][2] < upto:
            return None  # advance_key says why
        if any(type(e[2]) is not book.time_type for e in events):
            # an event at a rule's time of another type (5.0 at 5) takes that time's
            # type event by event, as a deadline at it fires first
            return None
        parts: dict[Version, tuple[set[Any], list[Any]]] = {}
        for rule, group in _by_rule(v for v in values if not self.is_finding(v)).items():
            start = _start(group)
            if type(start) is not book.time_type:  # held values of events as above
                return None
            version = book.version_at(rule, start)
            if version is None:
                return None
            parts[version] = (set(group), [])
        for time, same in itertools.groupby(events, key=_TIME):
            same_time = list(same)
            for version in book.in_force(time):
                parts.setdefault(version, (set(), []))[1].extend(same_time)
        return {version: (frozenset(own), own_events) for version, (own, own_events) in parts.items()}


def _by_rule(values: Iterable[Any]) -> dict[str, list[Any]]:
    """A key's values by rule id."""
    groups: dict[str, list[Any]] = {}
    for value in values:
        groups.setdefault(value[3], []).append(value)
    return groups


_TIME = itemgetter(2)


def _merged(parts: list[list[Any]]) -> list[Any]:
    """One key's updates from several lists, each in time and value order, as one."""
    if len(parts) == 1:
        return parts[0]
    merged: list[Any] = []
    for _, same in itertools.groupby(sorted(itertools.chain(*parts), key=_UPDATE_TIME), key=_UPDATE_TIME):
        start = len(merged)
        merged.extend(same)
        if len(merged) - start > 1:
            _order_by_value(merged, start)
    return merged


_UPDATE_TIME = itemgetter(1)


def _start(group: list[Any]) -> Any:
    """When the rule version a group of values belongs to was in force: the time of
    its earliest event (they all began under one version)."""
    return min(v[2][0][1] for v in group)


def ended(updates: Any) -> list[Found]:
    """The partial matches ended because their rule was replaced or retired (in
    updates as :func:`~statemachines.library.cep.found_in` takes them), by time;
    each :class:`Found`'s ``reason`` says which."""
    return found_in(updates, (REPLACED, RETIRED))
