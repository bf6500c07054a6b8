"""The bucketed streaming runtime's time mapping: Spark's watermark <-> frontiers and timers."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from statemachines.spark.clock import CLOCK_SHIFT_MS, DAY_MS, frontier_of, timer_ms

UTC = dt.UTC
kinds = {
    "number": st.integers(-(10**12), 10**12) | st.floats(-1e12, 1e12, allow_nan=False),
    "datetime_tz": st.datetimes(dt.datetime(1910, 1, 1), dt.datetime(2200, 1, 1), timezones=st.just(UTC)),
    "datetime": st.datetimes(dt.datetime(1910, 1, 1), dt.datetime(2200, 1, 1)),
    "date": st.dates(dt.date(1910, 1, 1), dt.date(2200, 1, 1)),
}
watermarks = st.integers(1, 2 * CLOCK_SHIFT_MS)


@given(st.data())
def test_a_time_is_below_the_frontier_exactly_when_its_timer_has_expired(data):
    """Spark fires a timer once the watermark reaches it: exactly when the frontier passes."""
    kind = data.draw(st.sampled_from(sorted(kinds)))
    time = data.draw(kinds[kind])
    near = st.integers(-2 * DAY_MS, 2 * DAY_MS).map(lambda d: timer_ms(time) + d)
    watermark = data.draw(near | watermarks)
    assert (time < frontier_of(watermark, kind)) == (timer_ms(time) <= watermark)


@given(st.sampled_from(sorted(kinds)), watermarks, watermarks)
def test_frontiers_rise_with_the_watermark(kind, a, b):
    low, high = sorted((a, b))
    assert frontier_of(low, kind) <= frontier_of(high, kind)


def test_no_watermark_yet_is_no_frontier():
    assert frontier_of(0, "number") is None
