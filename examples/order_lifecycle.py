"""A machine of your own, declared by subclassing, run, and drawn.

Orders move through placed -> paid -> shipped -> delivered; they can be cancelled
before shipping, and refunded after delivery unless marked final. Run:

    python examples/order_lifecycle.py

It prints the orders' differential updates (each order's current state as a
changing collection) and the machine's diagram as Mermaid text.
"""

from __future__ import annotations

from statemachines import FiniteMachine, State, diagram, format_table, run_local


def refundable(key, symbol, time):
    """Orders whose id ends in "f" were sold as final: no refunds."""
    return not key.endswith("f")


class OrderLifecycle(FiniteMachine):
    placed = State(initial=True)
    paid = State()
    shipped = State()
    delivered = State(final=True)
    cancelled = State(final=True)
    refunded = State(final=True)

    pay = placed.to(paid, on="pay")
    ship = paid.to(shipped, on="ship")
    deliver = shipped.to(delivered, on="deliver")
    cancel_placed = placed.to(cancelled, on="cancel")
    cancel_paid = paid.to(cancelled, on="cancel")
    refund = delivered.to(refunded, on="refund", guard=refundable)


# (order id, event, time)
EVENTS = [
    ("o1", "pay", 1), ("o2", "pay", 1), ("o3f", "pay", 2),
    ("o1", "ship", 3), ("o2", "cancel", 3), ("o3f", "ship", 4),
    ("o1", "deliver", 5), ("o3f", "deliver", 6),
    ("o1", "refund", 7), ("o3f", "refund", 7),  # o3f is final: stays delivered
]


def main() -> None:
    result = run_local(OrderLifecycle(), EVENTS)
    print("Orders' states as differential updates:")
    print(format_table(result.updates))
    print("\nThe machine, as Mermaid (paste into GitHub Markdown):")
    print(diagram(OrderLifecycle()).to_mermaid())


if __name__ == "__main__":
    main()
