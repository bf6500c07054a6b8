"""A machine class is checked once, when it is created."""

from __future__ import annotations

import pytest

from statemachines import DefinitionError, InvalidArgument, LocalRuntime, Machine


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
