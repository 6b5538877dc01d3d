"""NA values and clock-event decoding (NVML bit values from nvml.h)."""

from __future__ import annotations

import decimal
import math

from sparktop.model import (
    NA,
    NodeSample,
    NodeState,
    decode_clock_events,
    fmt_num,
    is_num,
    recheck_text,
    slowdown_reasons,
    sort_key,
)


def test_na_is_falsy_and_formats_as_na() -> None:
    value = NA("[Not Supported]")
    assert not value
    assert f"{value:,.0f}" == "n/a"
    assert fmt_num(value, unit="W") == "n/a"
    assert value.reason == "[Not Supported]"


def test_is_num_rejects_nan_inf_and_bool() -> None:
    assert is_num(0.0) and is_num(3)
    assert not is_num(float("nan")) and not is_num(float("inf")) and not is_num(True)
    assert not is_num(NA())


def test_is_num_fast_path_agrees_with_its_definition() -> None:
    """The exact-type fast path says what the plain definition says, subclasses included."""

    class Reading(float):
        pass

    cases: list[object] = [0, -7, 2**70, 1.5, -0.0, float("nan"), float("inf"), -float("inf"),
                           True, False, NA("x"), None, "1", Reading(2.0), Reading("nan"),
                           complex(1, 0), decimal.Decimal("1.0")]  # fmt: skip
    for value in cases:
        plain = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(float(value))
        )
        assert is_num(value) is plain, value


def test_sort_key_puts_missing_first() -> None:
    values = [5.0, NA(), 1.0]
    assert sorted(values, key=sort_key)[1:] == [1.0, 5.0]


def test_decode_thermal_and_unknown_bits() -> None:
    assert decode_clock_events(0x20) == ("sw_thermal_slowdown",)
    assert decode_clock_events(0x1 | 0x4) == ("gpu_idle", "sw_power_cap")
    assert decode_clock_events(0x1000) == ("other(0x1000)",)
    assert slowdown_reasons(0x1 | 0x2 | 0x100) == ()
    assert slowdown_reasons(0x80) == ("hw_power_brake_slowdown",)


def test_recheck_text_is_relative_to_the_poll() -> None:
    failed = NodeSample("n", 100.0, NodeState.UNREACHABLE, "refused", retry_s=109.4)
    assert recheck_text(failed) == "next try in 9 s"
    assert recheck_text(NodeSample("n", 100.0, NodeState.UNREACHABLE)) == ""
    repeated = NodeSample("n", 100.0, NodeState.UNREACHABLE, checked_s=88.0, retry_s=109.0)
    assert recheck_text(repeated) == "checked 12 s ago, next try in 9 s"
    due = NodeSample("n", 100.0, NodeState.UNREACHABLE, checked_s=99.8, retry_s=100.2)
    assert recheck_text(due) == "checked just now, next try now"
    assert recheck_text(repeated, compact=True) == "12 s ago, retry in 9 s"
    assert recheck_text(failed, compact=True) == "retry in 9 s"
