"""Shipping the code a job needs to Spark's executors.

A machine travels to the executors pickled. Classes and functions defined in
``__main__``, a notebook cell or a function travel by value and need nothing more;
anything defined in a module travels by reference, so the executors must be able to
import that module. Before a job starts, :func:`ship_code` makes sure they can:

============================  ==================================================
what the job references       what is shipped
============================  ==================================================
this project's packages       one zip of them, on a cluster or Spark Connect
                              (a local master shares this interpreter's packages)
a user's module ``m.py``      the file, as a Python file of the job
a user's package ``p.m``      a zip of the package ``p``
installed packages, stdlib    nothing: install them on the nodes
============================  ==================================================

"Installed" means found under this interpreter's ``site-packages`` or standard
library. Classic sessions ship with ``SparkContext.addPyFile``, Spark Connect
sessions with ``SparkSession.addArtifacts(..., pyfile=True)``. Each file is shipped
once per session.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import site
import sys
import sysconfig
import tempfile
import zipfile
from typing import Any

from pyspark import cloudpickle

import statemachines
from statemachines import InvalidArgument

__all__ = [
    "PROJECT_PACKAGES",
    "carried",
    "code_files",
    "code_loader",
    "is_connect",
    "is_local",
    "modules_needed",
    "python_file",
    "self_contained",
    "ship_code",
    "ship_files",
]

PROJECT_PACKAGES = ("statemachines",)
# where each folder of the project installs (see pyproject.toml)
PROJECT_FOLDERS = {
    "statemachines": "statemachines",
    "library": "statemachines/library",
    "spark_runtime": "statemachines/spark",
}

_SHIPPED: dict[str, set[str]] = {}  # session or application id -> files shipped to it
_ZIPS: dict[str, str] = {}  # package root -> its zip, built once per process


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def is_local(spark: Any) -> bool:
    """True for a classic session whose master is ``local...`` (executors share this Python)."""
    return not is_connect(spark) and spark.sparkContext.master.startswith("local")


def modules_needed(*objects: Any) -> set[str]:
    """The modules an executor imports to unpickle ``objects`` (as Spark pickles them)."""

    modules: set[str] = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            modules.add(module)
            return super().find_class(module, name)

    Recorder(io.BytesIO(cloudpickle.dumps(objects))).load()
    return modules


def code_files(spark: Any, *objects: Any) -> list[str]:
    """The files an executor of ``spark`` needs to unpickle ``objects`` (see the module)."""
    files = [] if is_local(spark) else [_zip_of_project()]
    for module in sorted(modules_needed(*objects)):
        path = _user_code(module)
        if path is not None and path not in files:
            files.append(path)
    return files


def ship_code(spark: Any, *objects: Any) -> None:
    """Make the executors of ``spark`` able to import what ``objects`` reference.

    Call it before a job that pickles ``objects`` to the executors (``run_batch``,
    ``run_stream`` and ``apply_linear`` do). See the module documentation for what
    is shipped.
    """
    ship_files(spark, code_files(spark, *objects))


def code_loader(spark: Any, *objects: Any) -> Any:
    """A function that makes the code ``objects`` need importable where it is called.

    The function carries the files of :func:`code_files` themselves; calling it
    unpacks them into a temporary directory (once per process), puts them on
    ``sys.path`` and returns their paths. Unpickling it needs only the standard
    library. For the places Spark Connect runs Python without the session's
    artifacts (see :func:`carried` and :func:`self_contained`).
    """
    files = {}
    for path in code_files(spark, *objects):
        with open(path, "rb") as f:
            files[os.path.basename(path)] = f.read()
    digest = hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()[:16]

    def load() -> list[str]:
        folder = os.path.join(tempfile.gettempdir(), f"statemachines-code-{digest}")
        os.makedirs(folder, exist_ok=True)
        paths = []
        for name, data in files.items():
            target = os.path.join(folder, name)
            if not os.path.exists(target):
                with open(f"{target}.{os.getpid()}", "wb") as out:
                    out.write(data)
                os.replace(f"{target}.{os.getpid()}", target)
            entry = target if name.endswith((".zip", ".egg")) else folder
            if entry not in sys.path:
                sys.path.insert(0, entry)
            paths.append(target)
        return paths

    return load


def carried(spark: Any, function: Any) -> Any:
    """``function`` (a ``mapInArrow`` function, say) carrying the code it needs.

    With Spark Connect, the tasks of a streaming query do not see the session's
    artifacts (PySpark 4.3), so a function that uses this project's or the user's
    modules must bring them: it is pickled with :func:`code_loader` and unpickled
    after the loader ran. Elsewhere ``function`` is returned as it is.
    """
    if not is_connect(spark):
        return function
    return _carry(code_loader(spark, function), function)


def self_contained(spark: Any, function: Any) -> Any:
    """A ``foreachBatch`` function that carries the code it needs, with Spark Connect.

    Spark Connect runs a streaming query's ``foreachBatch`` function in a Python
    process on the server that does not see the session's artifacts, and hands it
    each micro-batch in a cloned session that has none of them either (PySpark 4.3).
    Like :func:`carried`, and every call also ships the code to the micro-batch's
    session (once per session), for the jobs ``function`` starts there. Elsewhere
    ``function`` is returned as it is.
    """
    if not is_connect(spark):
        return function
    load = code_loader(spark, function)
    call = _carry(load, function)

    def run(batch: Any, batch_id: int) -> Any:
        paths = load()  # the files are unpacked once; later calls only list them
        from statemachines.spark.shipping import ship_files

        ship_files(batch.sparkSession, paths)
        return call(batch, batch_id)

    return run


def _carry(load: Any, function: Any) -> Any:
    """``function`` pickled by value beside ``load``, unpickled after ``load`` ran."""

    body = cloudpickle.dumps(function)
    cache: list[Any] = []

    def run(*args: Any) -> Any:
        if not cache:
            load()  # before the function: unpickling it imports the code
            cache.append(pickle.loads(body))
        return cache[0](*args)

    return run


def python_file(path: str) -> str:
    """``path`` made absolute, if it names an existing ``.py``, ``.zip`` or ``.egg`` file.

    Raises:
        InvalidArgument: it does not exist, or is not such a file.
    """

    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise InvalidArgument(f"{path} does not exist")
    if not full.endswith((".py", ".zip", ".egg")):
        raise InvalidArgument(f"{path} is not a .py, .zip or .egg file")
    return full


def ship_files(spark: Any, paths: list[str]) -> None:
    """Add Python files (``.py``, ``.zip``, ``.egg``) to the session, each once.

    Raises:
        InvalidArgument: a path that is not an existing Python file or archive.
    """
    owner = spark.session_id if is_connect(spark) else spark.sparkContext.applicationId
    shipped = _SHIPPED.setdefault(owner, set())
    for path in map(python_file, paths):
        if path in shipped:
            continue
        if is_connect(spark):
            spark.addArtifacts(path, pyfile=True)
        else:
            spark.sparkContext.addPyFile(path)
        shipped.add(path)


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths}
    roots.update(site.getsitepackages())
    return tuple(os.path.realpath(r) + os.sep for r in roots)


def _user_code(module: str) -> str | None:
    """The file to ship for ``module``: itself, its top package zipped, or ``None``."""
    top = module.partition(".")[0]
    if top in PROJECT_PACKAGES or top == "__main__":
        return None
    found = sys.modules.get(module)
    source = getattr(found, "__file__", None)
    if source is None or os.path.realpath(source).startswith(_installed_roots()):
        return None  # built in, standard library, or installed: not ours to ship
    package = sys.modules.get(top)
    if top == module or getattr(package, "__path__", None) is None:
        return os.path.realpath(source) if source.endswith(".py") else None
    return _zip_of(os.path.realpath(next(iter(package.__path__))), top)


def _zip_of_project() -> str:
    root = os.path.dirname(os.path.dirname(os.path.realpath(statemachines.__file__)))
    return _zip_of(root, *PROJECT_FOLDERS, installs_as=PROJECT_FOLDERS)


def _zip_of(root_or_dir: str, *packages: str, installs_as: dict[str, str] | None = None) -> str:
    """A zip of ``packages`` found under ``root_or_dir`` (or of one package's directory).

    ``installs_as`` maps a folder to where its package installs (this project's own).

    The zip's name carries a digest of its contents, so changed code ships as a new
    file rather than colliding with the one already shipped.
    """
    if len(packages) == 1 and os.path.basename(root_or_dir) == packages[0]:
        root_or_dir = os.path.dirname(root_or_dir)
    cache_key = "\0".join((root_or_dir, *packages))
    if cache_key in _ZIPS and os.path.exists(_ZIPS[cache_key]):
        return _ZIPS[cache_key]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in packages:
            for folder, dirs, names in os.walk(os.path.join(root_or_dir, package)):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(names):
                    if name.endswith((".py", ".typed")):
                        full = os.path.join(folder, name)
                        inside = os.path.relpath(full, os.path.join(root_or_dir, package))
                        archive.write(full, os.path.join((installs_as or {}).get(package, package), inside))
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:12]
    target = os.path.join(tempfile.gettempdir(), f"{'-'.join(packages)}-{digest}.zip")
    if not os.path.exists(target):
        with open(target + ".tmp", "wb") as out:
            out.write(data)
        os.replace(target + ".tmp", target)
    _ZIPS[cache_key] = target
    return target
