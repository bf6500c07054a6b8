"""The arrangement's table as delta-rs reads it: a reader independent of this project's."""

from __future__ import annotations

from deltalake import DeltaTable

from statemachines import consolidate
from statemachines.columns import column_to_python


def delta_rs_updates(path, version=None):
    """The table's rows at ``version`` (default: latest) as delta-rs reads them, consolidated."""
    table = DeltaTable(str(path), version=version).to_pyarrow_table()
    keys, values = column_to_python(table["key"]), column_to_python(table["value"])
    rows = zip(keys, values, table["time"].to_pylist(), table["diff"].to_pylist(), strict=True)
    return consolidate(((k, v), t, d) for k, v, t, d in rows)
