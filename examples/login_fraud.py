"""Complex event detection on Spark: three failed logins, then a success, within 10 minutes.

Generates a day of login events for a few hundred users (a handful of them
attackers), runs the pattern detector on a local Spark session, and prints the
matches (the suspicious successes) and how many partial matches timed out. Run:

    python examples/login_fraud.py [--users N] [--master URL | --remote sc://HOST:PORT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random

from statemachines.library import Detector, Pattern, matches, timeouts
from statemachines.spark import run_batch, session

START = dt.datetime(2026, 11, 22, 0, 0)


def fraud_pattern() -> Pattern:
    """Per user: three failed logins, then a success, all within 10 minutes."""
    return (
        Pattern.begin("failed", skip="skip_past_last_event").where(lambda e: e[0] == "fail")
        .times(3)
        .followed_by("success").where(lambda e: e[0] == "ok")
        .within(dt.timedelta(minutes=10))
    )


def login_events(users: int, seed: int = 1) -> list[tuple[str, tuple[str, str], dt.datetime]]:
    """(user, (outcome, ip), time): most users fail now and then; attackers fail in bursts."""
    rnd = random.Random(seed)
    events = []
    for u in range(users):
        user = f"user{u:04d}"
        attacker = u % 50 == 7
        t = START + dt.timedelta(minutes=rnd.randrange(600))
        for _ in range(rnd.randrange(3, 12)):
            if attacker and rnd.random() < 0.5:
                burst = [("fail", "203.0.113.9")] * rnd.randrange(3, 6) + [("ok", "203.0.113.9")]
            else:
                burst = [("fail" if rnd.random() < 0.2 else "ok", f"10.0.{u % 256}.1")]
            for outcome in burst:
                t += dt.timedelta(seconds=rnd.randrange(5, 90))
                events.append((user, outcome, t))
            t += dt.timedelta(minutes=rnd.randrange(20, 200))
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=300)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", help="Spark master URL (default: local[*])")
    where.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002")
    args = parser.parse_args()

    spark = session(master=args.master, remote=args.remote, app_name="login-fraud")
    schema = "user string, login struct<outcome: string, ip: string>, at timestamp"
    frame = spark.createDataFrame(login_events(args.users), schema)
    result = run_batch(Detector(fraud_pattern()), frame, key="user", symbol="login", time="at")

    found = matches(result.updates)  # read from the output DataFrame
    print(f"{frame.count():,} login events, {args.users} users: {len(found)} suspicious successes")
    print(f"{'user':<10} {'success at':<20} {'ips':<14} failures at")
    for match in found:
        steps = match.by_step()
        failures = [e[1].strftime("%H:%M:%S") for e in match.events if e[0] == "failed"]
        ips = ",".join(sorted({ip for _, ip in steps["success"]}))
        print(f"{match.key:<10} {match.time:%Y-%m-%d %H:%M:%S}  {ips:<14} {' '.join(failures)}")
    print(f"{len(timeouts(result.updates))} partial matches timed out (failures without a success in time)")
    print(result.summary())


if __name__ == "__main__":
    main()
