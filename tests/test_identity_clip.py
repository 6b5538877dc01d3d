"""A server's identity strings are clipped where they enter (a trial's ``/v1/models`` id of a
million ``M``: ``--record`` grew ~1 MB a tick, ``snapshot --json`` printed 1.1 MB and the
engine detail screen ~5,000 lines). Against a server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.safe_text import IDENTITY_MAX, clip_identity
from sparktop.testing.http_stub import serve_threaded
from sparktop.testing.shared import CASES

HUGE = 1_000_000


class _HugeNames(BaseHTTPRequestHandler):
    """A vLLM page whose ``/v1/models`` id (and root) (and with ``label``, its ``model_name``
    labels) are a million characters."""

    label = True

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            entry = {"id": "M" * HUGE, "root": "R" * 40_000, "parent": None, "max_model_len": 4096}
            body = json.dumps({"object": "list", "data": [entry]}).encode()
        elif self.path == "/metrics":
            page = (CASES / "metrics" / "dp2-engines.prom").read_text()
            if self.label:
                page = page.replace('model_name="', 'model_name="' + "L" * HUGE)
            else:  # the model is named by /v1/models alone
                page = re.sub(r'model_name="[^"]*",?', "", page)
            body = page.encode()
        else:
            body = b"{}"
        self.send_response(200 if self.path in ("/v1/models", "/metrics") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_clip_identity_keeps_short_names_and_says_what_it_cut() -> None:
    assert clip_identity("Qwen/Qwen3-32B") == "Qwen/Qwen3-32B"
    clipped = clip_identity("M" * HUGE)
    assert len(clipped) == IDENTITY_MAX and clipped.endswith("… (1,000,000 chars, clipped)")


@pytest.mark.parametrize("label", [True, False], ids=["label-and-models", "models-only"])
def test_a_megabyte_model_id_never_reaches_snapshot_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, label: bool
) -> None:
    handler = type("Huge", (_HugeNames,), {"label": label})
    with serve_threaded(handler) as url:
        inv = tmp_path / "inv.yaml"
        inv.write_text(f"engines: [{{name: e, url: '{url}'}}]\n")
        main(["snapshot", "-i", str(inv), "--json"])
    out = capsys.readouterr().out
    assert len(out) < 64 * 1024, len(out)
    (engine,) = json.loads(out)["engines"]
    if label:
        # A label value past the reader's limit refuses the page, as Prometheus's
        # label_value_length_limit fails the scrape: the row says why, names no model.
        assert engine["state"] == "unavailable"
        assert re.fullmatch(
            r"line \d+: label model_name has a value of 1,000,\d{3} characters; limit [\d,]+",
            engine["message"],
        ), engine["message"]
        assert engine["model"] is None
    else:
        # Named by /v1/models alone: clipped where it enters.
        assert len(engine["model"]) == IDENTITY_MAX
        assert engine["model"].endswith("chars, clipped)")
