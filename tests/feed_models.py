"""Independent models of a change feed: last write wins, SCD type 2, and which rows
are refused; and feeds for the tests to run.

Each model reads the whole feed sorted by its sequence columns, as a reader of the
database's log would, without the project's runtime.
"""

from __future__ import annotations

import random

from tests.delta_reader import delta_rs_rows

OPS = ("c", "u", "d")
NAMES = ("Ada", "Grace", "Edsger", None)
CITIES = ("London", "Paris", "Rome")


def refusal(row: dict) -> str | None:
    """Why a flat row (id, name, city, lsn, op) cannot be applied, or ``None``."""
    if row["op"] is None:
        return "missing_field"
    if row["id"] is None:
        return "null_key"
    if row["lsn"] is None:
        return "null_time"
    return None


def applied(rows: list[dict]) -> dict:
    """Per key, its rows that can be applied, in sequence order; at equal sequence the
    last of the feed wins (the tests give each key distinct sequences)."""
    by_key: dict = {}
    for row in rows:
        if refusal(row) is None:
            by_key.setdefault(row["id"], []).append(row)
    return {key: sorted(found, key=lambda r: r["lsn"]) for key, found in by_key.items()}


def last_write_wins(rows: list[dict]) -> dict:
    """``{id: (name, city)}`` after the whole feed."""
    final = {}
    for key, found in applied(rows).items():
        last = found[-1]
        if last["op"] != "d":
            final[key] = (last["name"], last["city"])
    return final


def scd2(rows: list[dict]) -> list[tuple]:
    """``(id, name, city, start, end)`` rows: each value a key held, over ``[start, end)``."""
    history = []
    for key, found in applied(rows).items():
        held, since = None, None
        for row in found:
            value = None if row["op"] == "d" else (row["name"], row["city"])
            if value == held:
                continue
            if held is not None:
                history.append((key, *held, since, row["lsn"]))
            held, since = value, row["lsn"]
        if held is not None:
            history.append((key, *held, since, None))
    return sorted(history, key=lambda r: (r[0], r[3]))


def flat_feed(seed: int, n: int = 60, keys: int = 6, bad: bool = True) -> list[dict]:
    """A shuffled feed: distinct lsns, creates, updates and deletes; with ``bad``, some
    rows without id, lsn or op."""
    rng = random.Random(seed)
    lsns = rng.sample(range(1000, 1000 + 10 * n), n)
    rows = []
    for lsn in lsns:
        row = {
            "id": rng.randrange(keys), "name": rng.choice(NAMES), "city": rng.choice(CITIES),
            "lsn": lsn, "op": rng.choice(OPS),
        }
        if bad and rng.random() < 0.1:
            row[rng.choice(("id", "lsn", "op"))] = None
        rows.append(row)
    return rows


def wrap(envelope: dict | None, wrapped: bool | str) -> dict | None:
    """``envelope`` as written: bare (``False``), in Kafka Connect's schema wrapper
    (``True``), or in a wrapper whose schema a consumer dropped (``"payload only"``)."""
    if wrapped == "payload only":
        return {"payload": envelope}
    return {"schema": {"type": "struct", "optional": envelope is None}, "payload": envelope} if wrapped else envelope


def debezium(row: dict, wrapped: bool | str = False) -> dict | None:
    """A flat row as the Debezium envelope Kafka Connect's JSON converter writes
    (``wrapped`` as :func:`wrap` takes it)."""
    image = {"id": row["id"], "name": row["name"], "city": row["city"]}
    envelope = {
        "before": {"id": row["id"], "name": None, "city": None} if row["op"] == "d" else None,
        "after": None if row["op"] == "d" else image,
        "op": row["op"],
        "source": {"connector": "postgresql", "lsn": row["lsn"]},
        "ts_ms": 1_700_000_000_000 + (row["lsn"] or 0),
    }
    return wrap(envelope, wrapped)


def debezium_envelope(op: str, lsn: int, before: dict | None, after: dict | None) -> dict:
    """A Debezium envelope written by hand: ``op``, the row images, ``source.lsn``."""
    return {"op": op, "before": before, "after": after, "source": {"lsn": lsn}}


def with_tombstones(rows: list[dict], envelopes: list[dict], wrapped: bool | str = False) -> list[dict | None]:
    """``envelopes`` with a Kafka tombstone after each delete, and one first, as a
    topic read into JSON holds them: ``None`` (a null message), or a null payload
    when ``wrapped`` (as :func:`wrap` takes it)."""
    tombstone = wrap(None, wrapped)
    out: list[dict | None] = [tombstone]
    for row, envelope in zip(rows, envelopes, strict=True):
        out.append(envelope)
        if row["op"] == "d":
            out.append(tombstone)
    return out


def delta_change_feed(path, seed: int, commits: int = 6) -> list[dict]:
    """A Delta table (``id`` unique, ``name``, ``city``) with its change data feed on,
    changed by ``commits`` random delta-rs operations (append of new ids, update of
    a city, update of an id to a new one, delete, merge upsert, overwrite); the
    table's contents at each version, keyed by id (the model the feed's reader must
    reproduce)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    rnd = random.Random(seed)
    ids = iter(range(1, 1000))

    def rows(keys):
        return pa.table({
            "id": pa.array(keys, pa.int64()),
            "name": pa.array([rnd.choice(NAMES) for _ in keys], pa.string()),
            "city": pa.array([rnd.choice(CITIES) for _ in keys], pa.string()),
        })

    write_deltalake(path, rows([next(ids) for _ in range(3)]), configuration={"delta.enableChangeDataFeed": "true"})
    table = DeltaTable(path)
    for _ in range(commits):
        present = sorted(pa.table(delta_rs_rows(table))["id"].to_pylist())
        some = rnd.sample(present, min(len(present), rnd.randint(1, 2)))
        operations = ["append", "update", "rekey", "delete", "merge", "overwrite"]
        operation = rnd.choice(operations if present else ["append"])
        if operation == "append":
            write_deltalake(path, rows([next(ids) for _ in range(rnd.randint(1, 2))]), mode="append")
        elif operation == "update":
            table.update({"city": f"'{rnd.choice(CITIES)}'"}, predicate=f"id IN ({', '.join(map(str, some))})")
        elif operation == "rekey":  # the preimage holds the old id, the postimage the new
            table.update({"id": str(next(ids))}, predicate=f"id = {some[0]}")
        elif operation == "delete":
            table.delete(f"id IN ({', '.join(map(str, some))})")
        elif operation == "merge":
            source = rows([*some, next(ids)])
            (table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
        else:  # overwrite: every row deleted, the new ones (some ids kept) inserted, in one commit
            write_deltalake(path, rows([*some, next(ids)]), mode="overwrite")
        table.update_incremental()
    versions = []
    for version in range(table.version() + 1):
        content = pa.table(delta_rs_rows(DeltaTable(path, version=version))).to_pylist()
        versions.append({r["id"]: (r["name"], r["city"]) for r in content})
    return versions


def delta_changes(path):
    """The change data feed of the Delta table at ``path``, from version 0, as a
    pyarrow table of plain types (delta-rs reads strings as views)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    changes = pa.table(DeltaTable(path).load_cdf(starting_version=0).read_all())
    plain = [pa.field(f.name, pa.string() if f.type == pa.string_view() else f.type) for f in changes.schema]
    return changes.cast(pa.schema(plain))
