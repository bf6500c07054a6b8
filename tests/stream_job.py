"""A streaming job that can kill its own driver at a chosen point (for restart tests).

    python -m tests.stream_job SOURCE ARRANGEMENT CHECKPOINT [POINT BATCH_ID]

POINT is where the driver process is killed (SIGKILL: no clean-up of any kind)
during micro-batch BATCH_ID: ``written`` (its files are written, nothing published),
``state`` (the new state file is written, the Delta commit not made) or ``published``
(committed, but Spark has not yet committed the micro-batch, so it will replay it).
"""

from __future__ import annotations

import os
import signal
import sys

from statemachines import delta
from statemachines.library import Upsert
from statemachines.spark import local_session, run_stream
from statemachines.spark import streaming as streaming_module

SCHEMA = "key string, symbol string, time long, order long"
DELAY = 3


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def arm(point: str, batch_id: int) -> None:
    publish, commit = streaming_module.publish_batch, delta.commit
    current = {}

    def publish_then_maybe_die(*args, stream=None, **kwargs):
        current["id"] = stream["batch_id"] if stream else None
        if point == "written" and current["id"] == batch_id:
            die()
        result = publish(*args, stream=stream, **kwargs)
        if point == "published" and current["id"] == batch_id:
            die()
        return result

    def commit_or_die(*args, **kwargs):
        if point == "state" and current.get("id") == batch_id:
            kwargs["before_commit"] = die
        return commit(*args, **kwargs)

    streaming_module.publish_batch = publish_then_maybe_die
    delta.commit = commit_or_die


def main(argv: list[str]) -> None:
    source, arrangement, checkpoint = argv[:3]
    if len(argv) > 3:
        arm(argv[3], int(argv[4]))
    spark = local_session(master="local[1]", shuffle_partitions=2)
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(source)
    run_stream(
        Upsert(), frame, into=arrangement, checkpoint=checkpoint, order="order", delay=DELAY,
        trigger={"availableNow": True},
    ).awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
