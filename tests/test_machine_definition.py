"""A machine class is checked once, when it is created."""

from __future__ import annotations

import enum

import pytest

from statemachines import (
    DefinitionError,
    Emit,
    InvalidArgument,
    LocalRuntime,
    Machine,
    Reason,
    Refused,
    run_local,
)


def test_a_machine_without_transition_is_refused_at_class_creation():
    with pytest.raises(DefinitionError, match="does not define transition"):

        class Nothing(Machine):
            pass


def test_an_abstract_base_may_omit_transition():
    class Base(Machine, abstract=True):
        def initial_values(self, key):
            return frozenset({0})

    class Concrete(Base):
        def transition(self, key, values, symbol, time):
            return values

    assert Concrete.spec.has_initial_values
    assert not hasattr(Base, "spec") or Base.spec is not Concrete.spec


@pytest.mark.parametrize(
    "body",
    [
        "def transition(self, key, symbol): return set()",
        "def transition(self, key, values, symbol, time, extra): return set()",
        "transition = 3",
    ],
)
def test_a_transition_with_the_wrong_shape_is_refused(body):
    namespace = {}
    with pytest.raises(DefinitionError, match="transition"):
        exec(f"class Bad(Machine):\n    {body}\n", {"Machine": Machine}, namespace)


def test_deadline_hooks_come_in_pairs():
    with pytest.raises(DefinitionError, match="defines deadline but not on_deadline"):

        class HalfTimer(Machine):
            def transition(self, key, values, symbol, time):
                return values

            def deadline(self, key, values):
                return 1


def test_settings_hooks_come_in_pairs():
    with pytest.raises(DefinitionError, match="defines settings but not resumed"):

        class Forgetting(Machine):
            def transition(self, key, values, symbol, time):
                return values

            def settings(self):
                return {"threshold": 3}


def test_values_fit_own_type_needs_a_declared_value_type():
    with pytest.raises(DefinitionError, match="sets values_fit_own_type but does not define value_type"):

        class Boastful(Machine):
            values_fit_own_type = True

            def transition(self, key, values, symbol, time):
                return values


def test_waterline_hooks_come_in_pairs_and_forgets_needs_them():
    with pytest.raises(DefinitionError, match="defines insert_marks but not with_waterline"):

        class HalfWaterline(Machine):
            def transition(self, key, values, symbol, time):
                return values

            def insert_marks(self, key, value):
                return (value,)

    with pytest.raises(DefinitionError, match="defines forgets but no waterline"):

        class Forgetful(Machine):
            def transition(self, key, values, symbol, time):
                return values

            def forgets(self, key, high):
                return True

    with pytest.raises(DefinitionError, match="defines guess_marks but no waterline"):

        class Guessing(Machine):
            def transition(self, key, values, symbol, time):
                return values

            def guess_marks(self, key, symbol):
                return (symbol,)


def test_the_spec_records_each_declared_hook():
    class Plain(Machine):
        def transition(self, key, values, symbol, time):
            return values

    class Counting(Machine):
        def transition(self, key, values, symbol, time, position=0):
            return values

        def is_finding(self, value):
            return False

        def value_type(self, symbol_type, time_type):
            return symbol_type

    plain, counting = Plain.spec, Counting.spec
    assert not (plain.takes_position or plain.emits_findings or plain.declares_value_type)
    assert counting.takes_position and counting.emits_findings and counting.declares_value_type
    assert not counting.has_waterline and not counting.has_diagram


class Why(enum.StrEnum):
    TOO_BIG = "too_big"


class Capped(Machine):
    """Keeps the last symbol; refuses symbols above 10 for a reason of its own."""

    def transition(self, key, values, symbol, time):
        if symbol > 10:
            raise Refused(Why.TOO_BIG, f"{symbol} > 10")
        return {symbol}


def test_a_machine_refuses_events_with_its_own_reason_and_keeps_its_values():
    result = run_local(Capped(), [("k", 1, 1), ("k", 99, 2), ("k", 3, 3)])
    assert [(r.event[1], r.reason, r.detail) for r in result.rejected] == [(99, Why.TOO_BIG, "99 > 10")]
    assert [r.reason.value for r in result.rejected] == ["too_big"]
    assert [(u[0][1], u[1], u[2]) for u in result.updates] == [(1, 1, 1), (1, 3, -1), (3, 3, 1)]


def test_a_refusal_needs_a_strenum_reason_and_emit_needs_is_finding():
    class Sloppy(Machine):
        def transition(self, key, values, symbol, time):
            if symbol == "refuse":
                raise Refused("not an enum", "x")
            return Emit({symbol}, ["found"])

    result = run_local(Sloppy(), [("k", "refuse", 1), ("k", "emit", 2)])
    assert [r.reason for r in result.rejected] == [Reason.TRANSITION_FAILED] * 2
    assert "StrEnum" in result.rejected[0].detail
    assert "is_finding" in result.rejected[1].detail
    assert result.updates == []


def test_a_hook_with_the_wrong_signature_names_the_expected_one():
    with pytest.raises(DefinitionError, match=r"reduce_same_time\(self, first, second\)"):

        class BadReduce(Machine):
            def transition(self, key, values, symbol, time):
                return values

            def reduce_same_time(self, only):
                return only


def test_definition_errors_are_type_errors_too():
    assert issubclass(DefinitionError, TypeError)
    assert issubclass(InvalidArgument, ValueError)


def test_runtime_refuses_a_class_in_place_of_an_instance():
    class Keep(Machine):
        def transition(self, key, values, symbol, time):
            return values

    with pytest.raises(InvalidArgument, match="instance"):
        LocalRuntime(Keep)


def test_a_class_rebuilt_by_value_by_cloudpickle_is_not_checked_again():
    """Spark ships classes from __main__, notebooks and functions by value: cloudpickle
    first builds an empty class, then sets its methods. The empty class must pass."""
    import pickle

    from pyspark import cloudpickle

    class Tags(Machine):
        def transition(self, key, values, symbol, time):
            op, tag = symbol
            return values | {tag} if op == "add" else values - {tag}

    data = cloudpickle.dumps(Tags())
    del Tags  # the rebuilt class is a new one, as in a worker
    rebuilt = pickle.loads(data)
    assert type(rebuilt).spec.name.endswith("Tags")
    events = [("k", ("add", "x"), 1), ("k", ("add", "y"), 2), ("k", ("del", "x"), 3)]
    from statemachines import run_local

    assert run_local(rebuilt, events).updates == [
        (("k", "x"), 1, 1), (("k", "y"), 2, 1), (("k", "x"), 3, -1)
    ]
