"""The arrangement's table as delta-rs reads it: a reader independent of this project's."""

from __future__ import annotations

from deltalake import DeltaTable

from statemachines import consolidate
from statemachines.columns import column_to_python


def delta_rs_rows(table):
    """A ``DeltaTable``'s rows as delta-rs reads them (its pyarrow dataset, scanned on
    this thread: ``to_pyarrow_table()`` could make the process abort at exit)."""
    return table.to_pyarrow_dataset().to_table(use_threads=False)


def delta_rs_updates(path, version=None):
    """The table's rows at ``version`` (default: latest) as delta-rs reads them, consolidated."""
    table = delta_rs_rows(DeltaTable(str(path), version=version))
    keys, values = column_to_python(table["key"]), column_to_python(table["value"])
    rows = zip(keys, values, table["time"].to_pylist(), table["diff"].to_pylist(), strict=True)
    return consolidate(((k, v), t, d) for k, v, t, d in rows)


def delta_rs_change_feed(path, start=0, end=None):
    """The table's change data feed from version ``start`` (to ``end``) as delta-rs
    reads it: ``(change type, version, update)`` per row, unconsolidated."""
    import pyarrow as pa

    feed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=start, ending_version=end).read_all())
    keys, values = column_to_python(feed["key"]), column_to_python(feed["value"])
    columns = (feed[c].to_pylist() for c in ("_change_type", "_commit_version", "time", "diff"))
    return [(kind, version, ((k, v), t, d)) for k, v, kind, version, t, d in zip(keys, values, *columns, strict=True)]


def commit_times(path):
    """``{version: commit time in ms}`` as Delta dates a commit without in-commit
    timestamps (and delta-rs reads a time): its log file's modification time."""
    from pathlib import Path

    return {int(f.stem): f.stat().st_mtime_ns // 10**6 for f in (Path(path) / "_delta_log").glob("*.json")}


def statistics_problems(path):
    """What is wrong with the statistics of the table's data files, as delta-rs reads
    its add actions: each must give its file's row count and the true minimum and
    maximum of ``key``, ``time`` and ``diff`` (data skipping), and each row group of
    the file must keep its keys' minimum and maximum (a point read's index)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    columns = ["key", "time", "diff"]
    problems = []
    for add in pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist():
        data = pq.ParquetFile(f"{path}/{add['path']}")
        rows = data.read(columns=columns)
        if add["num_records"] != rows.num_rows:
            problems.append((add["path"], "num_records", add["num_records"], rows.num_rows))
        for column in columns:
            found = pc.min_max(rows[column]).as_py()
            given = {"min": add[f"min.{column}"], "max": add[f"max.{column}"]}
            if given != found:
                problems.append((add["path"], column, given, found))
        key = data.schema_arrow.get_field_index("key")
        for group in range(data.metadata.num_row_groups):
            stats = data.metadata.row_group(group).column(key).statistics
            if stats is None or not stats.has_min_max:
                problems.append((add["path"], f"row group {group}", "no key statistics"))
    return problems
