"""What a user sees: notebook displays, one-line summaries, progress bars."""

from __future__ import annotations

import html
import io
import shutil
from collections import Counter
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemachines import (
    Arrangement,
    InvalidArgument,
    LocalRuntime,
    PersistedArrangement,
    diagram,
    run_local,
)
from statemachines.display import SAMPLE_ROWS
from statemachines.library import Detector, Pattern, Upsert
from statemachines.library.diagrams import Drawing, show
from statemachines.library.progress import ProgressBar
from tests import strategies as sst
from tests.machines import Light, Tags


class Tables(HTMLParser):
    """The text of every table cell, table by table, row by row; and the paragraphs."""

    def __init__(self, text):
        super().__init__()
        self.tables, self.paragraphs, self._cell, self._in_p = [], [], None, False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "p":
            self._in_p = True
            self.paragraphs.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None
        elif tag == "p":
            self._in_p = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        elif self._in_p:
            self.paragraphs[-1] += data


def cells(*row):
    return [str(cell) for cell in row]


@given(sst.events(max_size=30), st.none() | sst.times)
def test_a_run_result_shows_its_summary_and_first_rows(events, frontier):
    result = run_local(Upsert(), [*events, (None, "x", 3), ("k",)], frontier=frontier)
    shown = Tables(result._repr_html_())
    updates = shown.tables[0]
    assert updates[0] == ["key", "value", "time", "diff"]
    assert updates[1:] == [cells(u.data[0], u.data[1], u.time, f"{u.diff:+d}") for u in result.updates[:SAMPLE_ROWS]]
    if len(result.updates) > SAMPLE_ROWS:
        assert f"first {SAMPLE_ROWS} of {len(result.updates):,} rows" in shown.paragraphs
    rejected = shown.tables[1]
    assert [row[4] for row in rejected[1:]] == [r.reason.value for r in result.rejected[:SAMPLE_ROWS]]
    summary = result.summary()
    assert shown.paragraphs[0] == f"RunResult: {summary}"
    assert summary.startswith(f"{len(result.updates):,} update")
    for reason, n in Counter(r.reason.value for r in result.rejected).items():
        assert f"{n:,} {reason}" in summary
    if result.pending:
        earliest = min(e.time for e in result.pending)
        assert f"{len(result.pending):,} event" in summary and f"for time {earliest:,}" in summary
        assert len(shown.tables) == 3 and len(shown.tables[2]) - 1 == min(len(result.pending), SAMPLE_ROWS)
    elif frontier is None:
        assert summary.endswith("the input is complete")


def test_a_run_result_prints_as_one_short_line():
    result = run_local(Upsert(), [(k, k + t, t) for k in range(300) for t in range(5)])
    assert len(result.updates) > 1000
    text = repr(result)
    assert "\n" not in text and "Update(" not in text and len(text) < 200
    assert f"{len(result.updates):,} updates out" in text


@given(sst.events(sst.tag_symbols, max_size=30), sst.times)
def test_a_runtime_says_what_waits_for_which_time(events, frontier):
    runtime = LocalRuntime(Tags())  # no same-time reduction: every event waits on its own
    runtime.feed(events)
    runtime.advance_to(frontier)
    waiting = [e for e in events if e.time >= frontier]
    assert runtime.waiting() == (len(waiting), min((e.time for e in waiting), default=None))
    summary = runtime.summary()
    if waiting:
        assert f"{len(waiting)} event" in summary and f"for time {min(e.time for e in waiting)}" in summary
    else:
        assert "no events wait" in summary
    shown = Tables(runtime._repr_html_())
    facts = dict(shown.tables[0][0:])  # rows of two cells
    assert facts["frontier"] == str(frontier) and facts["machine"] == "Tags"
    assert len(shown.tables[1]) - 1 == min(len(waiting), SAMPLE_ROWS)
    assert repr(runtime) == f"<LocalRuntime: {summary}>"


@given(sst.update_batches)
def test_an_arrangement_shows_its_frontiers_size_and_a_sample_of_its_snapshot(updates):
    arrangement = Arrangement()
    arrangement.append([u for u in updates], lower=None, upper=20)
    shown = Tables(arrangement._repr_html_())
    facts = dict(shown.tables[0])
    assert facts["upper"] == "20" and facts["since"] == "None"
    assert facts["stored updates"] == f"{arrangement.stored_updates():,}"
    snapshot = arrangement.snapshot()
    assert shown.tables[1][1:] == [cells(k, v, n) for (k, v), n in snapshot[:SAMPLE_ROWS]]


def test_a_persisted_arrangement_names_its_directory(tmp_path):
    arrangement = PersistedArrangement(tmp_path / "arr")
    assert str(tmp_path / "arr") in repr(arrangement)
    assert html.escape(str(tmp_path / "arr")) in arrangement._repr_html_()


def test_a_display_that_fails_shows_why_instead_of_raising():
    class Broken(Arrangement):
        def cursor(self, start=None):
            raise OSError("the disk went away")

    shown = Broken()._repr_html_()
    assert "cannot display" in shown and "the disk went away" in shown


def diagrams():
    from tests.test_diagrams import Door

    fraud = Pattern.begin("fail").where(lambda e: e == "f").times(2).followed_by("ok").where(lambda e: e == "s")
    return [diagram(Upsert()), diagram(Door()), diagram(Detector(fraud)), diagram(Light(), alphabet=["t"])]


@pytest.mark.parametrize("drawn", diagrams(), ids=lambda d: d.title)
def test_diagrams_show_mermaid_always_and_svg_where_graphviz_is(drawn, monkeypatch):
    machine = drawn
    bundle = show(machine)._repr_mimebundle_()
    assert bundle["text/markdown"] == f"```mermaid\n{drawn.to_mermaid()}```"
    assert drawn.title in bundle["text/plain"]
    if shutil.which("dot"):
        assert bundle["image/svg+xml"].lstrip().startswith("<?xml") and "<svg" in bundle["image/svg+xml"]
    monkeypatch.setenv("PATH", "")  # no dot: Mermaid only, and no exception
    bundle = Drawing(drawn)._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and bundle["text/markdown"].startswith("```mermaid")
    assert drawn._repr_mimebundle_() == {k: v for k, v in bundle.items() if k != "image/svg+xml"}


def test_show_without_a_diagram_or_alphabet_is_a_clear_error():
    with pytest.raises(InvalidArgument, match="alphabet"):
        show(Tags())
    assert "#123;'x'#125;" in show(Tags(), alphabet=[("add", "x")])._repr_mimebundle_()["text/markdown"]


def final_bar(text):
    """The last state a tqdm bar drew into ``text``."""
    return [part.strip() for part in text.split("\r") if part.strip()][-1]


@given(sst.events(max_size=40), st.none() | sst.times)
def test_progress_callbacks_count_forward_to_the_result(events, frontier):
    seen = []
    result = run_local(Upsert(), [*events, (None, 1, 1)], frontier=frontier, progress=seen.append)
    assert seen, "a run reports at least once"
    done = [p.events_done for p in seen]
    assert done == sorted(done) and all(p.events_in == len(events) + 1 for p in seen)
    last = seen[-1]
    assert (last.updates_out, last.rejected) == (len(result.updates), len(result.rejected))
    if frontier is None:
        assert last.waiting == 0
    else:  # the buffered slots (a reducing machine keeps one per key and time)
        assert last.waiting == len({(e.key, e.time) for e in result.pending})


def test_the_progress_bar_shows_the_counts_of_the_run():
    events = [(k % 3000, k, k % 11) for k in range(30_000)] + [(None, 0, 0)]
    out = io.StringIO()
    with ProgressBar("upsert", total=len(events), out=out, enabled=True) as bar:
        result = run_local(Upsert(), events, progress=bar)
    last = final_bar(out.getvalue())
    assert last.startswith("upsert: 100%") and "30.0k/30.0k" in last
    assert f"updates={len(result.updates):,}, rejected={len(result.rejected)}" in last
    assert "events/s" in last


def test_the_progress_bar_is_quiet_off_a_terminal_unless_told(monkeypatch):
    monkeypatch.delenv("STATEMACHINES_PROGRESS", raising=False)
    out = io.StringIO()  # not a terminal
    with ProgressBar("quiet", total=3, out=out) as bar:
        run_local(Upsert(), [("a", 1, 0)], progress=bar)
    assert out.getvalue() == "" and not bar.enabled
    monkeypatch.setenv("STATEMACHINES_PROGRESS", "always")
    with ProgressBar("loud", total=3, out=out) as bar:
        run_local(Upsert(), [("a", 1, 0)], progress=bar)
    assert "loud" in out.getvalue()
    monkeypatch.setenv("STATEMACHINES_PROGRESS", "sometimes")
    with pytest.raises(InvalidArgument, match="STATEMACHINES_PROGRESS"):
        ProgressBar("bad", out=out)


@pytest.mark.spark
def test_a_spark_batch_result_shows_its_summary_and_rows(spark):
    from statemachines.spark import run_batch

    rows = [(f"k{i}", i, i % 4, None) for i in range(25)] + [(None, 1, 1, None)]
    result = run_batch(Upsert(), spark.createDataFrame(rows, "key string, symbol long, time long, order long"))
    shown = Tables(result._repr_html_())
    assert shown.paragraphs[0] == f"BatchResult: {result.summary()}"
    updates = {tuple(cells(*r)) for r in result.updates.collect()}
    assert shown.tables[0][0] == ["key", "value", "time", "diff"]
    assert len(shown.tables[0]) - 1 == SAMPLE_ROWS and {tuple(r) for r in shown.tables[0][1:]} <= updates
    assert f"first {SAMPLE_ROWS} of {len(updates)} rows" in shown.paragraphs
    assert [row[4] for row in shown.tables[1][1:]] == ["null_key"]


@pytest.mark.spark
@pytest.mark.parametrize("native", [True, False], ids=["native", "generic"])
def test_spark_batch_progress_counts_match_the_result(spark, capsys, monkeypatch, native):
    from statemachines.spark import StageProgress, run_batch

    monkeypatch.setenv("STATEMACHINES_PROGRESS", "always")
    rows = [(f"k{i % 50}", i, i % 7, None) for i in range(400)] + [(None, 1, 1, None)]
    frame = spark.createDataFrame(rows, "key string, symbol long, time long, order long")
    result = run_batch(Upsert(), frame, progress=True, native=native)
    err = capsys.readouterr().err
    updates, reasons = result.counts()
    assert err.strip().endswith(result.summary((updates, reasons)))
    last = final_bar(err.split("\n")[-3] if err.count("\n") > 1 else err)
    assert f"{len(rows)}/{len(rows)}" in last and f"updates={updates}, rejected={sum(reasons.values())}" in last
    if not native:  # the generic path counts the events its partitions handed the machine
        with StageProgress(spark, out=io.StringIO()) as shown:
            run_batch(Upsert(), frame, progress=shown, native=False).updates.count()
        assert shown.counter.value == len(rows)  # every event, the null-key one too (rejected there)


@pytest.mark.spark
def test_a_stream_drawn_as_a_bar_ends_with_the_published_totals_and_what_waits(spark, tmp_path):
    from statemachines.spark import run_stream
    from tests.test_spark_streaming import DELAY, SCHEMA, local_reference, make_files

    source = tmp_path / "in"
    source.mkdir()
    files = make_files(source, n_files=3)
    out = io.StringIO()
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    with ProgressBar("stream", out=out, enabled=True) as bar:
        run_stream(
            Upsert(), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ck", order="order", delay=DELAY,
            trigger={"availableNow": True}, progress=bar.micro_batch,
        ).awaitTermination()
    reference = LocalRuntime(Upsert())  # one command per key and time waits, as in the buckets
    _, rejected = local_reference(files, runtime=reference)
    published = len(PersistedArrangement(tmp_path / "arr").updates())
    last = final_bar(out.getvalue())
    events = sum(len(f) for f in files)
    assert last.startswith(f"stream: {events}") and f"updates={published}, rejected={len(rejected)}" in last
    waiting, earliest = reference.waiting()
    assert f"{waiting} events wait for time {earliest}, frontier {reference.frontier}" in last


@pytest.mark.spark
def test_a_stage_bar_keeps_its_final_counts_while_its_poller_would_run(spark):
    import time

    from statemachines.spark import StageProgress

    out = io.StringIO()
    with StageProgress(spark, total=10, every=0.001, out=out, enabled=True) as shown:
        shown.finish(10, updates=3)  # nothing counted the events (as on a native path)
        time.sleep(0.05)  # fifty polls' time
    assert "10/10" in final_bar(out.getvalue()) and "updates=3" in final_bar(out.getvalue())
