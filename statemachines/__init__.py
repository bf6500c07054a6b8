"""Keyed state machines that emit differential updates: the pure core.

The core imports only the standard library, attrs and sortedcontainers; runtimes and
renderers with heavy dependencies live elsewhere (``statemachines.spark``) or are imported
lazily.
"""

from statemachines import cdc, linear
from statemachines.arrangement import Arrangement, Batch, HistoryRow, ReadHandle
from statemachines.core import UpdateColumns, advance_key, apply_transition, run_key
from statemachines.diagram import Diagram, diagram, explore
from statemachines.errors import (
    DefinitionError,
    InvalidArgument,
    MachineError,
    MissingDependency,
    StateMachinesError,
)
from statemachines.events import Event, Reason, Refused, Rejected, event_rank
from statemachines.finite import FiniteMachine, State, Transition
from statemachines.intake import Intake
from statemachines.linear import Linear, LinearView
from statemachines.local import LocalRuntime, run_local
from statemachines.machine import Emit, Machine, MachineSpec
from statemachines.persisted import PersistedArrangement
from statemachines.records import Record
from statemachines.results import RunProgress, RunResult
from statemachines.tables import format_table, parse_table
from statemachines.times import time_after, time_kind
from statemachines.updates import (
    Unreadable,
    Update,
    collection_at,
    consolidate,
    is_consolidated,
    sort_updates,
    sorted_any,
    total_order_key,
)

__all__ = [
    "Arrangement",
    "Batch",
    "HistoryRow",
    "PersistedArrangement",
    "ReadHandle",
    "DefinitionError",
    "Diagram",
    "Emit",
    "Event",
    "FiniteMachine",
    "Intake",
    "Linear",
    "LinearView",
    "InvalidArgument",
    "LocalRuntime",
    "Machine",
    "MachineError",
    "MachineSpec",
    "MissingDependency",
    "Reason",
    "Record",
    "Refused",
    "Rejected",
    "RunProgress",
    "RunResult",
    "State",
    "StateMachinesError",
    "Transition",
    "Unreadable",
    "Update",
    "UpdateColumns",
    "advance_key",
    "apply_transition",
    "cdc",
    "collection_at",
    "consolidate",
    "diagram",
    "event_rank",
    "explore",
    "format_table",
    "is_consolidated",
    "linear",
    "parse_table",
    "run_key",
    "run_local",
    "sort_updates",
    "sorted_any",
    "time_after",
    "time_kind",
    "total_order_key",
]
