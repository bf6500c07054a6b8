"""A local session starts quietly: no chatter a user cannot act on, real warnings still shown."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests import background

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = textwrap.dedent(
    """
    import os, sys, tempfile
    import pyarrow as pa, pyarrow.parquet as pq
    from statemachines.library import Upsert
    from statemachines.spark import local_session, run_batch, run_stream

    spark = local_session(master="local[2]", shuffle_partitions=2)
    frame = spark.createDataFrame([("a", "x", 1), ("b", "y", 2)], "key string, symbol string, time long")
    run_batch(Upsert(), frame).updates.collect()
    work = tempfile.mkdtemp()
    os.makedirs(f"{work}/in")
    pq.write_table(pa.table({"key": ["a"], "symbol": ["x"], "time": [1]}), f"{work}/in/p.parquet")
    stream = spark.readStream.schema("key string, symbol string, time long").parquet(f"{work}/in")
    run_stream(Upsert(), stream, into=f"{work}/arr", checkpoint=f"{work}/ck",
               trigger={"availableNow": True}, progress=None).awaitTermination()
    logger = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getLogger("org.apache.spark.Job")
    logger.warn("a real warning")
    spark.stop()
    """
)

NOISE = [
    "log4j profile",
    "Setting default log level",
    "To adjust logging level",
    "NativeCodeLoader",
    "resolves to a loopback address",
    "SPARK_LOCAL_IP",
    "AQE",
    "finish init stage",
    "Starting execution of UDF",
    "Completed execution of UDF",
    "Failed to delete timer",
]


@background.job("quiet_start")
def quiet_start(work):
    env = {k: v for k, v in background.environment().items() if k != "SPARK_LOCAL_IP"}  # the session sets it
    env["TMPDIR"] = str(work)  # the job's files go with the job's directory
    return subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.background("quiet_start")
def test_a_local_session_prints_no_chatter_but_real_warnings():
    done = background.result("quiet_start")
    assert done.returncode == 0, done.stderr[-3000:]
    heard = [line for line in done.stderr.splitlines() if line.strip()]
    assert [line for line in heard if any(noise in line for noise in NOISE)] == []
    assert any("WARN Job: a real warning" in line for line in heard), heard
    # what remains: the JVM's incubator notice and PySpark's first driver-worker line
    others = [line for line in heard if "a real warning" not in line]
    assert len(others) <= 2, others
