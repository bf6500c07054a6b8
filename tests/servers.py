"""Real Spark servers for the tests, started from the pip package on 127.0.0.1.

- :func:`standalone`: a standalone master and one worker (``bin/spark-class``).
- :func:`connect_server`: a Spark Connect server (``sbin/start-connect-server.sh``).
- :func:`s3_server`: an S3-compatible object store (moto's server), with a bucket.

Both run their Python workers through :func:`bare_python`, an interpreter that can
import pyspark and its dependencies but neither this project nor the tests, as a
cluster node on which nothing of the user's was installed. Every process is started
in its own process group and stopped by its pid (the group) in :func:`stop`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark

from tests import background

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT = 120  # seconds for a server to come up
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"
"""The Java options of every Spark JVM the tests start: C1 alone, and the parallel
collector. A JVM that lives seconds or minutes pays for C2's compiling and hardly runs
its code: C1 alone takes a third less CPU on the streaming contract cases, and
computes the same. On two cores G1's concurrent work costs more than it saves: with
the parallel collector the test session's JVM took 90 CPU seconds instead of 126 over
``test_spark_batch.py`` and ``test_spark_rules.py``. ``conftest.py``
puts it in ``SPARK_SUBMIT_OPTS``, which every driver ``spark-submit`` starts reads
(pyspark's included); the servers here get it for their daemons too."""

# What the archive's training run does: the classes Spark loads for a batch and a
# stream are those most JVMs of the tests load. The JVM writes the archive when it
# exits by itself, so the run ends it by closing its standard input (as pyspark's
# gateway JVM exits when its parent's pipe closes), not by a kill.
_TRAINING = """\
import tempfile
from pyspark import SparkContext
from statemachines.library import Upsert
from statemachines.spark import local_session, run_batch, run_stream

spark = local_session(master="local[2]", shuffle_partitions=2)
rows = [("k", "v", 1), ("k", "w", 2), ("j", "v", 3)]
run_batch(Upsert(), spark.createDataFrame(rows, "key string, symbol string, time long")).updates.collect()
with tempfile.TemporaryDirectory() as folder:
    spark.createDataFrame(rows, "key string, symbol string, time long").write.parquet(folder + "/in")
    stream = spark.readStream.schema("key string, symbol string, time long").parquet(folder + "/in")
    query = run_stream(Upsert(), stream, into=folder + "/out", checkpoint=folder + "/checkpoint")
    query.processAllAvailable()
    query.stop()
gateway = SparkContext._gateway.proc
spark.stop()
gateway.stdin.close()
gateway.wait(120)
"""


def class_archive(cache: Path) -> Path | None:
    """Where the class-data-sharing archive of Spark's classes for this Spark, Java
    and :data:`JVM_OPTIONS` lives in ``cache`` (``None`` without a ``java``)."""
    home = os.environ.get("JAVA_HOME")
    java = shutil.which("java", path=os.path.join(home, "bin") if home else None)
    if java is None:
        return None
    java = os.path.realpath(java)
    # the class path is the Spark home's: an archive made for another install is ignored
    made = hashlib.sha256(
        f"{pyspark.__version__} {SPARK_HOME} {java} {os.stat(java).st_mtime} {JVM_OPTIONS}".encode()
    ).hexdigest()
    return cache / f"spark-classes-{made[:16]}.jsa"


def jvm_options(cache: Path) -> str:
    """:data:`JVM_OPTIONS`, with the class archive in ``cache`` if it is made (a JVM
    then maps the classes it would parse and verify one by one: about 40% less CPU
    to start). A JVM given an archive that does not fit its class path ignores it,
    quietly."""
    archive = class_archive(cache)
    if archive is None or not archive.exists():
        return JVM_OPTIONS
    return f"{JVM_OPTIONS} -XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"


def make_class_archive(cache: Path) -> None:
    """Make the class archive in ``cache`` unless it is there (about a minute, one
    maker at a time); nothing is left behind if making it fails."""
    archive = class_archive(cache)
    if archive is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    with open(archive.with_suffix(".lock"), "w") as lock:  # one maker at a time (xdist's workers)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        env = dict(background.environment(), SPARK_SUBMIT_OPTS=f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={partial} -Xlog:cds=off")
        try:
            subprocess.run([sys.executable, "-c", _TRAINING], env=env, capture_output=True, timeout=600, check=True)
            os.replace(partial, archive)
        except (OSError, subprocess.SubprocessError):
            with contextlib.suppress(OSError):
                partial.unlink()


# Runs ``python -m module ...`` with the project's editable-install finder removed, so
# that the project is importable only from files Spark ships (see bare_python).
_BARE = """\
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path[:] = [p for p in sys.path if p and p != {root!r} and not p.startswith({tmp!r})]
args = sys.argv[1:]
while args and args[0] not in ("-m", "-c") and args[0].startswith("-"):
    args.pop(0)
if args[:1] == ["-c"]:
    sys.argv = ["-c", *args[2:]]
    exec(compile(args[1], "<string>", "exec"), {{"__name__": "__main__"}})
elif args[:1] == ["-m"]:
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
"""


def bare_python(directory: Path) -> str:
    """An executable that runs this interpreter unable to import the project or tests."""
    root = str(Path(__file__).resolve().parents[1])
    script = directory / "bare.py"
    script.write_text(_BARE.format(root=root, tmp=str(directory)))
    launcher = directory / "python"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(directory: Path) -> dict[str, str]:
    environment = background.environment()  # servers start in a background job
    java = environment.get("SPARK_SUBMIT_OPTS", JVM_OPTIONS)
    env = {k: v for k, v in environment.items() if not k.startswith(("PYSPARK", "SPARK", "PYTHONPATH"))}
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(directory / "logs"),
        SPARK_PID_DIR=str(directory),
        SPARK_WORKER_DIR=str(directory / "work"),
        PYSPARK_PYTHON=bare_python(directory),
        PYSPARK_DRIVER_PYTHON=bare_python(directory),
        SPARK_SUBMIT_OPTS=java,
        SPARK_DAEMON_JAVA_OPTS=java,
    )
    return env


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop(process: subprocess.Popen) -> None:
    """Stop a server by its pid: its process group, politely, then by force."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_until(ready, what: str, processes: list[subprocess.Popen], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            break
        with contextlib.suppress(OSError, ValueError):
            if ready():
                return
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"{what} did not start within {START_TIMEOUT}s; log:\n{tail}")


def _port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


@contextlib.contextmanager
def standalone(directory: Path, *, cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """A standalone master and one worker; yields the master URL."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "logs").mkdir(exist_ok=True)
    env = server_env(directory)
    port, ui, worker_ui = free_port(), free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    log = directory / "cluster.log"
    master = start(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)],
        env, log,
    )
    processes = [master]
    try:
        wait_until(lambda: _port_open(port), "the standalone master", processes, log)
        url = f"spark://127.0.0.1:{port}"
        processes.append(
            start(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                 "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui), url],
                env, log,
            )
        )

        def worker_alive() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as page:
                return json.load(page).get("aliveworkers", 0) >= 1

        wait_until(worker_alive, "the standalone worker", processes, log)
        yield url
    finally:
        for process in reversed(processes):
            stop(process)


@contextlib.contextmanager
def connect_server(directory: Path, *, master: str = "local[2]") -> Iterator[str]:
    """A Spark Connect server over ``master``; yields its ``sc://`` URL."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "logs").mkdir(exist_ok=True)
    env = server_env(directory)
    port = free_port()
    log = directory / "connect.log"
    server = start(
        [str(SPARK_HOME / "sbin" / "start-connect-server.sh"), "--wait", "--master", master,
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2"],
        env, log,
    )
    try:
        wait_until(lambda: _port_open(port), "the Spark Connect server", [server], log)
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop(server)


@contextlib.contextmanager
def s3_server(directory: Path, bucket: str = "lake") -> Iterator[dict[str, str]]:
    """An S3-compatible server (moto's, from the pip package) holding an empty
    ``bucket``; yields the storage options that reach it, as delta-rs names them."""
    from pyarrow import fs

    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = directory / "s3.log"
    server = start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], dict(os.environ), log)
    try:
        wait_until(lambda: _port_open(port), "the S3 server", [server], log)
        options = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "tester", "AWS_SECRET_ACCESS_KEY": "secret",
        }
        fs.S3FileSystem(
            access_key=options["AWS_ACCESS_KEY_ID"], secret_key=options["AWS_SECRET_ACCESS_KEY"],
            region=options["AWS_REGION"], endpoint_override=f"127.0.0.1:{port}", scheme="http",
            allow_bucket_creation=True,
        ).create_dir(bucket)
        yield options
    finally:
        stop(server)
