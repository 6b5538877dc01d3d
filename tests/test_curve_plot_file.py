"""``--plot FILE.svg`` on ``budget`` and ``snapshot``: the curves for reports, as SVG."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparktop.cli import main
from tests.sim_helpers import running_sim
from tests.test_snapshot_expected import _run as run_process


def _text(path: Path) -> str:
    """The SVG's text with Rich's non-breaking spaces as spaces."""
    return path.read_text().replace("&#160;", " ")


def _budget(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["budget", *argv])
    return code, capsys.readouterr().err


def test_budget_plot_writes_both_curves_with_the_context_marked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "budget.svg"
    code, err = _budget(capsys, "--prompt-tokens", "65536", "--concurrency", "4", "--plot",
                        str(out))  # fmt: skip
    assert code == 0, err
    svg = _text(out)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "65,536 prompt tokens × 4" in svg  # the title
    for text in ("TTFT", "aggregate", "prompt tokens (log)", "▲", "interpolated"):
        assert text in svg, text
    assert "#61afef" in svg  # the default theme's first line colour

    # again, over the file it wrote: a report is replaced, not refused
    code, err = _budget(capsys, "--prompt-tokens", "2048", "--plot", str(out))
    assert code == 0, err
    assert "2,048 prompt tokens × 1" in _text(out)


def test_budget_plot_under_no_color_has_no_theme_colours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out = tmp_path / "plain.svg"
    code, err = _budget(capsys, "--prompt-tokens", "8192", "--plot", str(out))
    assert code == 0, err
    svg = _text(out)
    assert "▲" in svg and "#61afef" not in svg


def test_budget_plot_refuses_other_formats_and_links_before_printing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "plot.png"
    code = main(["budget", "--prompt-tokens", "8192", "--plot", str(png)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and not png.exists()
    assert "only SVG is written" in err and "rsvg-convert" in err
    target = tmp_path / "target.txt"
    target.write_text("keep me")
    link = tmp_path / "link.svg"
    link.symlink_to(target)
    code = main(["budget", "--prompt-tokens", "8192", "--plot", str(link)])
    assert code == 2 and "symbolic link" in capsys.readouterr().err
    assert target.read_text() == "keep me"


async def test_snapshot_plot_draws_each_engine_on_its_curve(tmp_path: Path) -> None:
    out = tmp_path / "snap.svg"
    async with running_sim(nodes=1, speed=5) as sim:
        inv = str(sim.inventory_path)
        code, text, err = await run_process(
            "snapshot", "-i", inv, "--window", "10", "--plot", str(out)
        )
    assert code in (0, 4), err  # 4: degraded (a warning listed); the plot is written either way
    assert text  # the table is printed as without --plot
    svg = _text(out)
    assert svg.count("engine dsv41") == 2  # TTFT and aggregate panels
    assert "◆" in svg and "live p50" in svg


def test_snapshot_plot_is_checked_before_polling(tmp_path: Path) -> None:
    inv = tmp_path / "c.yaml"
    inv.write_text("cluster: x\nnodes:\n  - {name: a, host: 127.0.0.1, port: 9}\n")
    code = main(["snapshot", "-i", str(inv), "--plot", str(tmp_path / "x.pdf")])
    assert code == 2
    assert not (tmp_path / "x.pdf").exists()
    assert os.listdir(tmp_path) == ["c.yaml"]
