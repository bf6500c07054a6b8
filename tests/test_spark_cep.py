"""One detector, three runtimes: run_local, Spark batch and Spark streaming agree."""

from __future__ import annotations

import random

import pytest

from statemachines import consolidate, run_local
from statemachines.library import Detector, Pattern, matches, timeouts
from tests.contract import Case
from tests.test_contract import stream_runner

pytestmark = pytest.mark.spark

SCHEMA = "key string, symbol string, time long, order long"


def fraud():
    """Three failed logins, then a success, within 10."""
    return (
        Pattern.begin("fail").where(lambda s: s == "fail").times(3)
        .followed_by("ok").where(lambda s: s == "ok")
        .within(10)
    )


def logins(seed=3, users=12, n=240):
    rnd = random.Random(seed)
    return [
        (f"u{rnd.randrange(users)}", rnd.choice(["fail", "fail", "ok", "view"]), t // 4, t % 3)
        for t in range(n)
    ]


def plain(value):
    if isinstance(value, list | tuple):
        return tuple(plain(v) for v in value)
    return value


def test_batch_and_streaming_find_what_the_local_runtime_finds(spark, tmp_path):
    from statemachines.spark import run_batch

    detector = Detector(fraud())
    events = logins()
    local = run_local(detector, events).updates
    assert matches(local) and timeouts(local)  # the data exercises both

    batch = run_batch(detector, spark.createDataFrame(events, SCHEMA), order="order")
    batch_updates = consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in batch.updates.collect())
    assert batch_updates == local
    assert batch.rejected.count() == 0

    streamed, rejected = stream_runner(Case("fraud", detector, events, []), tmp_path, spark)
    assert matches(streamed) == matches(local)
    assert timeouts(streamed) == timeouts(local)
    assert streamed == local and rejected == []
    print(f"{len(matches(local))} matches, {len(timeouts(local))} timeouts, alike on 3 runtimes")
