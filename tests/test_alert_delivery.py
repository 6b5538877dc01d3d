"""Alert delivery: --on-alert (argv, JSON on stdin, bounded, timed out), --alert-log, bell."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from sparktop.alerts import Alert, Event, EventKind, Severity
from sparktop.alerts.delivery import AlertDelivery, parse_command
from sparktop.errors import UserError

HOSTILE = "spark-1 $(touch pwned) `touch pwned2`; touch pwned3 | cat > x \"'"


def event(kind: EventKind = EventKind.FIRED, message: str = "spark-1/gpu0 throttling") -> Event:
    alert = Alert(
        id="gpu.throttle:spark-1/gpu0#1",
        rule="gpu.throttle",
        subject="spark-1/gpu0",
        severity=Severity.WARNING,
        started_s=100.0,
        fired_s=110.0,
        message=message,
        node="spark-1",
        values={"sm_clock_mhz": 1833.0},
    )
    return Event(110.0, kind, alert)


def recorder(tmp_path: Path) -> tuple[tuple[str, ...], Path]:
    """A command that appends its stdin to a file (argv built with shlex, like a user would)."""
    script = tmp_path / "sink.py"
    out = tmp_path / "received.jsonl"
    script.write_text(
        "import sys\n"
        "data = sys.stdin.read()\n"
        "with open(sys.argv[1], 'a') as f:\n"
        "    f.write(data)\n"
    )
    cmd = " ".join(shlex.quote(p) for p in (sys.executable, str(script), str(out)))
    return parse_command(cmd), out


async def test_on_alert_gets_the_event_as_json_on_stdin_without_a_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv, out = recorder(tmp_path)
    delivery = AlertDelivery(on_alert=argv)
    delivery.deliver([event(message=HOSTILE), event(EventKind.CLEARED)])
    await delivery.aclose()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(d["event"] for d in lines) == ["cleared", "fired"]
    fired = next(d for d in lines if d["event"] == "fired")
    assert fired["message"] == HOSTILE and fired["alert"]["rule"] == "gpu.throttle"
    assert fired["alert"]["values"] == {"sm_clock_mhz": 1833.0}
    assert not any((tmp_path / name).exists() for name in ("pwned", "pwned2", "pwned3", "x"))
    assert not delivery.failures


async def test_on_alert_failures_are_reported_not_raised(tmp_path: Path) -> None:
    failing = parse_command(f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(\"boom\")'")
    seen: list[str] = []
    delivery = AlertDelivery(on_alert=failing, on_failure=seen.append)
    delivery.deliver([event()])
    await delivery.aclose()
    assert seen and "exited 1: boom" in seen[0]


async def test_on_alert_is_killed_after_the_timeout() -> None:
    slow = parse_command(f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(60)'")
    delivery = AlertDelivery(on_alert=slow, timeout_s=0.2)
    delivery.deliver([event()])
    await delivery.aclose()
    assert "killed after" in delivery.failures[0]


async def test_pending_commands_are_bounded() -> None:
    slow = parse_command(f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(60)'")
    delivery = AlertDelivery(on_alert=slow, timeout_s=0.2, max_concurrent=1, max_pending=2)
    delivery.deliver([event() for _ in range(5)])
    assert delivery.dropped == 3
    await delivery.aclose()


def test_parse_command_errors_are_user_errors() -> None:
    with pytest.raises(UserError, match="empty command"):
        parse_command("   ")
    with pytest.raises(UserError, match="cannot split"):
        parse_command("notify 'unbalanced")
    with pytest.raises(UserError, match="program not found"):
        parse_command("/nonexistent/sparktop-hook --flag")
    assert parse_command("echo 'a b' c") == ("echo", "a b", "c")


async def test_alert_log_appends_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    path.write_text('{"earlier": true}\n')
    delivery = AlertDelivery(alert_log=path)
    delivery.deliver([event()])
    delivery.deliver([event(EventKind.CLEARED)])
    await delivery.aclose()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"earlier": True}
    assert [d["event"] for d in lines[1:]] == ["fired", "cleared"]
    assert Event.from_json(lines[1]) == event()


async def test_alert_log_cannot_act_on_a_terminal_and_keeps_the_text(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    message = "spark-1 \x1b]52;c;ZWNobyBwd25lZA==\x07 \x9b2J \u202eevil\u2066 \u200b\u2028x\x85"
    delivery = AlertDelivery(alert_log=path)
    delivery.deliver([event(message=message)])
    await delivery.aclose()
    text = path.read_text()
    assert text.count("\n") == 1 and text.endswith("\n") and text[:-1].isprintable()
    assert "\\u202e" in text and "\\u001b" in text
    assert Event.from_json(json.loads(text)).alert.message == message


def test_alert_log_unwritable_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--alert-log: cannot open"):
        AlertDelivery(alert_log=tmp_path / "missing-dir" / "alerts.jsonl")


def test_bell_rings_for_new_alerts_not_for_clearing() -> None:
    assert AlertDelivery.should_ring([event()])
    assert AlertDelivery.should_ring([event(EventKind.ESCALATED)])
    assert not AlertDelivery.should_ring([event(EventKind.CLEARED)])
    assert not AlertDelivery.should_ring([])


async def test_pipeline_delivers_rings_and_records_every_update(tmp_path: Path) -> None:
    import argparse

    from sparktop.alerts import Thresholds
    from sparktop.alerts.pipeline import AlertOutputs, add_output_arguments
    from sparktop.cluster import ClusterState
    from sparktop.plan import Plan
    from sparktop.record import read_ticks
    from tests.alert_samples import node

    parser = argparse.ArgumentParser()
    add_output_arguments(parser)
    log, rec = tmp_path / "alerts.jsonl", tmp_path / "run.jsonl.zst"
    args = parser.parse_args(["--alert-log", str(log), "--bell", "--record", str(rec)])
    outputs = AlertOutputs.from_args(args)
    rings: list[int] = []
    plan = Plan.from_layout("test", {"e": ["spark-1"]}, thresholds=Thresholds(hold_s=2))
    pipeline = outputs.wrap(plan.alert_engine(), plan.header())
    pipeline.bell = lambda: rings.append(1)
    state = ClusterState()
    for t in range(10):
        hot: dict[str, Any] = (
            {"sm_clock_mhz": 1833.0, "clock_event_mask": 0x20} if 2 <= t < 5 else {}
        )
        state.apply(node("spark-1", float(t), **hot))
        pipeline.update(state, float(t))
    outputs.close()
    assert rings == [1]  # fired once; clearing does not ring
    logged = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert logged == ["fired", "cleared"]
    recording, ticks = read_ticks(rec)
    assert len(ticks) == 10 and recording.stop is None
    assert recording.header["profile"]["name"] == plan.profile_name
    assert recording.header["interval_s"] == plan.interval_s
    assert [len(t.alerts) for t in ticks] == [0, 0, 0, 0, 1, 1, 1, 0, 0, 0]


def test_outputs_reject_an_unwritable_recording_before_the_screen_opens(tmp_path: Path) -> None:
    import argparse

    from sparktop.alerts.pipeline import AlertOutputs, add_output_arguments

    parser = argparse.ArgumentParser()
    add_output_arguments(parser)
    args = parser.parse_args(["--record", str(tmp_path / "missing" / "x.zst")])
    with pytest.raises(UserError, match="--record: cannot create"):
        AlertOutputs.from_args(args)
    args = parser.parse_args(["--on-alert", "/nonexistent/hook"])
    with pytest.raises(UserError, match="program not found"):
        AlertOutputs.from_args(args)
