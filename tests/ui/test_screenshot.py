"""Palette → Screenshot saves an SVG in the working directory (there is no ~/Downloads on a
server) or a given folder, says where, and never writes through a symbolic link."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.fakes import Scripted, engine
from tests.ui.test_app_pilot import make_app


async def test_screenshot_goes_to_the_working_directory_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "no-home"))  # no Downloads folder anywhere
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.poll_now()
        saved = app.deliver_screenshot()
        await pilot.pause()
        (svg,) = tmp_path.glob("*.svg")
        assert saved == str(svg) and svg.read_text().startswith("<svg")
        messages = [n.message for n in app._notifications]
        assert f"screenshot saved to {svg}" in messages
        other = tmp_path / "shots"
        other.mkdir()
        assert app.deliver_screenshot("one.svg", str(other)) == str(other / "one.svg")
        (tmp_path / "link.svg").symlink_to(tmp_path / "elsewhere.svg")
        assert app.deliver_screenshot("link.svg") is None
        await pilot.pause()
        assert not (tmp_path / "elsewhere.svg").exists()
        assert any("screenshot not saved to" in n.message for n in app._notifications)
