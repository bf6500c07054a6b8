"""Draw the machines: upsert, upsert with lateness, a fraud pattern, a machine of your own.

Prints each as Mermaid; with ``--out DIR`` writes Mermaid (.mmd) and Graphviz DOT
(.dot) text for each into DIR, and SVG images when Graphviz's ``dot`` program is
installed. Run:

    python examples/diagrams.py [--out DIR]
"""

from __future__ import annotations

import argparse
import pathlib
from operator import itemgetter

from login_fraud import fraud_pattern
from order_lifecycle import OrderLifecycle

from statemachines import diagram
from statemachines.library import Detector, Upsert, UpsertWithLateness
from statemachines.library.diagrams import GraphvizMissing, render

MACHINES = {
    "upsert": Upsert(),
    "upsert_with_lateness": UpsertWithLateness(5, value_time=itemgetter(0)),
    "login_fraud": Detector(fraud_pattern()),
    "order_lifecycle": OrderLifecycle(),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="directory to write the files to (default: none; Mermaid is printed)")
    args = parser.parse_args()
    if args.out is None:
        for name, machine in MACHINES.items():
            print(f"{name}:\n{diagram(machine).to_mermaid()}")
        return
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, machine in MACHINES.items():
        written = [render(machine, out / f"{name}.mmd"), render(machine, out / f"{name}.dot")]
        try:
            written.append(render(machine, out / f"{name}.svg"))
        except GraphvizMissing as missing:
            print(f"(no SVG for {name}: {missing})")
        print(f"{name}: {', '.join(str(p) for p in written)}")

if __name__ == "__main__":
    main()
