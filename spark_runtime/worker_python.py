"""The interpreter a local session's Python workers run: this one, importing its own pyspark.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the Python path of every
Python process it starts (the daemon, its workers, a streaming query's
``transformWithState`` driver worker). Python caches no bytecode for modules in a
zip, so each such process compiles pyspark's sources anew: about 1.2 s of CPU (here)
before it does any work, paid at every streaming query start and by every new worker.

With pyspark installed by pip, ``$SPARK_HOME`` is the installed package itself, and
the zip is a copy of the code this interpreter imports from it, compiled once. Then a
local session's workers run a launcher that removes that one entry from
``PYTHONPATH`` and starts this interpreter::

    PYTHONPATH Spark gives                        PYTHONPATH the worker sees
    $SPARK_HOME/python/lib/pyspark.zip:py4j.zip   py4j.zip
    pyspark.zip:/user/code.zip                    /user/code.zip

Anything else (a Spark home of its own, another pyspark version in the zip, no POSIX
shell, a temporary folder whose files cannot run) leaves the interpreter as it is.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile

__all__ = ["bundled_zip", "worker_python"]

_LAUNCHER = """\
#!/bin/sh
# this interpreter, without Spark's zip of the pyspark it has installed
# on its path (written by statemachines.spark.worker_python)
set -f
kept=
IFS=:
for entry in $PYTHONPATH; do
    if [ -n "$entry" ] && [ "$entry" != {bundled} ]; then
        kept="${{kept:+$kept:}}$entry"
    fi
done
unset IFS
if [ -n "$kept" ]; then
    export PYTHONPATH="$kept"
else
    unset PYTHONPATH
fi
exec {python} "$@"
"""
_made: dict[tuple[str, str], str] = {}  # (interpreter, zip) -> its launcher, once per process


def bundled_zip() -> str | None:
    """The zip of pyspark that Spark puts on its workers' path, if it holds the very
    pyspark this interpreter imports (a pip install); ``None`` otherwise."""
    import pyspark
    from pyspark.find_spark_home import _find_spark_home

    package = os.path.dirname(os.path.abspath(pyspark.__file__))
    home = os.path.abspath(_find_spark_home())
    bundled = os.path.join(home, "python", "lib", "pyspark.zip")
    if home != package or not os.path.isfile(bundled):
        return None
    try:
        with zipfile.ZipFile(bundled) as archive:
            version = archive.read("pyspark/version.py").decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return bundled if repr(pyspark.__version__) in version else None


def worker_python(executable: str = sys.executable) -> str:
    """What a local session's ``PYSPARK_PYTHON`` should be: a launcher of ``executable``
    without the bundled pyspark zip on its path (module documentation), or
    ``executable`` itself where that does not apply."""
    bundled = bundled_zip() if os.path.exists("/bin/sh") else None
    if bundled is None:
        return executable
    made = _made.get((executable, bundled))
    if made is None or not os.path.exists(made):
        folder = tempfile.mkdtemp(prefix="statemachines-python-")
        atexit.register(_remove, folder, os.getpid())
        made = os.path.join(folder, "python")
        with open(made, "w") as out:
            out.write(_LAUNCHER.format(bundled=shlex.quote(bundled), python=shlex.quote(executable)))
        os.chmod(made, 0o755)
        if not _runs(made):  # e.g. a temporary folder mounted noexec
            return executable
        _made[(executable, bundled)] = made
    return made


def _remove(folder: str, creator: int) -> None:
    """At exit, the launcher's folder goes, unless this is a forked child exiting."""
    if os.getpid() == creator:
        shutil.rmtree(folder, ignore_errors=True)


def _runs(launcher: str) -> bool:
    try:
        return subprocess.run([launcher, "--version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
