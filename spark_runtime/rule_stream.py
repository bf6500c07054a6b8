"""Rules arriving as a stream while a :class:`~statemachines.library.RuleDetector` runs.

``run_stream(detector, events, rules=stream, ...)`` takes rule rows
``(rule_id, pattern_json, valid_from)`` from a second streaming DataFrame. Each row
is copied to every key bucket in the micro-batch that brings it, so every bucket
reads the same rows at the same watermark. A bucket keeps the rows it accepted in
its state's record and runs ``detector`` with its book extended by them
(:meth:`~statemachines.library.RuleBook.extended`), exactly as a
:class:`~statemachines.LocalRuntime` does when rows arrive at its frontier::

    micro-batch  frontier  rows arriving                 each bucket
    0            (none)    (fraud, v2, 40)               book: fraud v1, v2 from 40
    1            24        (burst, p, 30), (late, p, 10) book gains burst; late set aside
    2            49        (burst, null, 70)             burst ends at 70

After taking rows, a bucket arms every live key's deadline again: a rule retired
at 70 ends the partial matches of keys that get no more events. Rows set aside
(late: ``valid_from`` below the frontier; conflicting; unreadable) are reported
once, by bucket 0, and read with :func:`read_rejected_rules`; the rows accepted
are reported too, and kept with the book in the arrangement's settings note, so a
later run continuing the arrangement agrees with them
(:meth:`~statemachines.library.RuleDetector.resumed`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from statemachines import InvalidArgument, Machine
from statemachines.columns import python_rows
from statemachines.library.rules import (
    RejectedRule,
    RuleDetector,
    RuleWhy,
    row_as_json,
    row_from_json,
)
from statemachines.machine import SETTINGS_NOTE
from statemachines.persisted import read_state

__all__ = [
    "RULE_COLUMNS",
    "book_of",
    "check_rules",
    "kept_settings",
    "packed_rules",
    "read_rejected_rules",
    "rule_rows",
    "take_rules",
    "taken_rules",
]

RULE_COLUMNS = ("rule_id", "pattern_json", "valid_from")
REPORTING_BUCKET = 0  # the bucket that reports the rows taken and set aside (every bucket sees them)


def check_rules(machine: Machine, rules: Any) -> None:
    """Refuse a rules input ``run_stream`` cannot take, saying why."""
    if not isinstance(machine, RuleDetector):
        raise InvalidArgument(f"rules= needs a RuleDetector, whose rule book it extends; not {machine!r}")
    if not rules.isStreaming:
        raise InvalidArgument(
            "rules= takes a streaming DataFrame; rules known before the query starts are the "
            "detector's own: RuleDetector(spark.table(...).collect())"
        )
    missing = [c for c in RULE_COLUMNS if c not in rules.columns]
    if missing:
        raise InvalidArgument(f"the rules stream has no column {', '.join(missing)}; it needs {', '.join(RULE_COLUMNS)}")


def packed_rules(rules: Any, labels: Sequence[int], time_type: Any, schema: Any) -> Any:
    """The rule rows as packed rows of ``schema`` (``bucket, payload, clock, rules``):
    each micro-batch's rows, as Arrow IPC bytes, once for every bucket (of ``labels``).

    ``valid_from`` is cast to the events' time type; a value that does not cast
    travels as text, so that its row is set aside as ``invalid_time`` with the value
    it came with, as the local runtime sets it aside.
    """
    from statemachines.spark.bucket_state import split_by_bucket
    from statemachines.spark.shipping import carried

    document = rules.schema["pattern_json"].dataType
    text = F.to_json("pattern_json") if isinstance(document, T.StructType | T.MapType) else F.col("pattern_json").cast("string")
    given = valid_from = F.col("valid_from")
    uncast = F.lit(None).cast("string")
    if rules.schema["valid_from"].dataType != time_type:
        valid_from = given.try_cast(time_type)
        uncast = F.when(valid_from.isNull() & given.isNotNull(), given.cast("string"))
    rows = rules.select(
        F.explode(F.array(*(F.lit(label) for label in labels))).alias("bucket"),
        F.col("rule_id").cast("string").alias("rule_id"), text.alias("pattern_json"), valid_from.alias("valid_from"),
        uncast.alias("uncast"),
    )

    def pack(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            ids, payloads = split_by_bucket(batch)  # rule_id, pattern_json, valid_from, uncast
            n = len(ids)
            yield pa.RecordBatch.from_arrays(
                [pa.array(ids, pa.int32()), pa.nulls(n, pa.binary()), pa.nulls(n, schema.field("clock").type),
                 pa.array(payloads, pa.binary())],
                schema=schema,
            )

    return rows.mapInArrow(carried(rules.sparkSession, pack), from_arrow_schema(schema))


def take_rules(
    bucket: int, record: dict[str, Any], machine: RuleDetector, rows: list[tuple[Any, ...]], frontier: Any
) -> tuple[RuleDetector, str | None]:
    """A bucket takes rule rows arriving at ``frontier``: the rows accepted join its
    ``record``. Returns the detector with the extended book, and (bucket
    :data:`REPORTING_BUCKET` only) the rows accepted and set aside, as JSON."""
    book = machine.rules.extended(rows, frontier=frontier)
    set_aside = book.rejected[len(machine.rules.rejected) :]
    refused = {id(r.row) for r in set_aside}
    accepted = [row_as_json(*row) for row in rows if id(row) not in refused]
    record["rules"] = [*record.get("rules", []), *accepted]
    report = None
    if bucket == REPORTING_BUCKET:
        rejected = [[row_as_json(*r.row), r.reason.value, r.detail] for r in set_aside]
        report = json.dumps({"accepted": accepted, "rejected": rejected})
    return RuleDetector(book), report


def taken_rules(reports: list[str], stream: dict[str, Any]) -> dict[str, Any]:
    """The stream progress's rule rows accepted and set aside so far, with a
    micro-batch's ``reports`` (of :func:`take_rules`) added."""
    accepted, rejected = list(stream.get("rules_accepted", [])), list(stream.get("rejected_rules", []))
    for text in reports:
        report = json.loads(text)
        accepted += report["accepted"]
        rejected += report["rejected"]
    return {"rules_accepted": accepted, "rejected_rules": rejected} if accepted or rejected else {}


def kept_settings(settings: dict[str, Any], accepted: list[Any]) -> dict[str, Any]:
    """The settings note of a rule detector's stream: the book it started with
    (``settings``, :func:`~statemachines.machine.settings_note`), then the rows
    accepted from the stream."""
    if SETTINGS_NOTE not in settings:
        return settings
    return {SETTINGS_NOTE: [*settings[SETTINGS_NOTE], *accepted]}


def book_of(initial: RuleDetector, record: dict[str, Any], cache: dict[str, RuleDetector]) -> RuleDetector:
    """The detector a bucket runs: ``initial`` with the rows its record accepted."""
    stored = record.get("rules")
    if not stored:
        return initial
    text = json.dumps(stored)
    if text not in cache:
        cache.clear()  # one book is current; the one before it is not needed again
        cache[text] = RuleDetector(initial.rules.extended([row_from_json(row) for row in stored]))
    return cache[text]


def rule_rows(payloads: list[bytes]) -> list[tuple[Any, ...]]:
    """The rule rows ``(rule_id, pattern_json, valid_from)`` of packed payloads; a
    ``valid_from`` that did not cast to the events' time type is the text it came as."""
    from statemachines.spark.bucket_state import decode_table

    return [
        (rule_id, pattern, valid_from if uncast is None else uncast)
        for payload in payloads
        for rule_id, pattern, valid_from, uncast in python_rows(decode_table(payload))
    ]


def read_rejected_rules(path: Any) -> list[RejectedRule]:
    """The rule rows a stream's ``rules`` input set aside, each with its reason, in
    the order they arrived."""
    stream = read_state(path).get("stream") or {}
    return [RejectedRule(row_from_json(row), RuleWhy(reason), detail) for row, reason, detail in stream.get("rejected_rules", [])]

