"""The ``Alerts`` section of ``sparktop snapshot``'s text output (rich)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

from sparktop.alerts.model import Alert, Severity


def render_alerts(alerts: Iterable[Alert], console: Console) -> None:
    """``Alerts`` heading and one line per alert (severity, subject, message) on a console."""
    alerts = tuple(alerts)
    if not alerts:
        console.print("Alerts: none")
        return
    console.print(f"Alerts ({len(alerts)}):")
    for alert in alerts:
        style = "bold red" if alert.severity is Severity.CRITICAL else "yellow"
        line = Text("  ")
        line.append(f"{alert.severity.value.upper():<8}", style=style)
        line.append(f" {alert.subject}  ", style="bold")
        line.append(alert.message)
        console.print(line)
