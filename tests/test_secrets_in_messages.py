"""Secrets never reach a message (a trial found them echoed): a URL's password and query values
in inventory, ``sweep`` and ``budget`` errors and warnings; the content of a file passed as an
inventory or profile by mistake (a ``.env``, a private key, ``/etc/shadow`` with one line that
nearly matches a key). Each error still says what is wrong, with file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.safe_text import cut_credentials, without_credentials

SECRETS = ("S3cretPW", "QSECRET", "hf_SECRET", "sk-SECRET2", "SECRETHASH", "b3BlbnNzaC1rZXk")


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    text = out + err
    for secret in SECRETS:
        assert secret not in text, text
    return code, err


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://admin:S3cretPW@127.0.0.1:1/?token=QSECRET", "http://127.0.0.1:1/?token=<redacted>"),
        ("ftp://admin:S3cretPW@127.0.0.1/", "ftp://127.0.0.1/"),
        ("admin:S3cretPW@127.0.0.1:8000", "127.0.0.1:8000"),
        ("http://h/?a=QSECRET&b=&c=2#f", "http://h/?a=<redacted>&b=<redacted>&c=<redacted>#f"),
        ("http://user@host:1/p", "http://host:1/p"),
    ],
)  # fmt: skip
def test_every_form_of_a_url_loses_its_secrets(url: str, shown: str) -> None:
    assert without_credentials(url) == shown
    said = cut_credentials(f"endpoint {url} unreachable", url)
    assert "S3cretPW" not in said and "QSECRET" not in said


@pytest.mark.parametrize(
    "url",
    [
        "http://admin:S3cretPW@127.0.0.1:99999/?token=QSECRET",
        "http://admin:S3cretPW@127.0.0.1:1/ x?token=QSECRET",
        "htp://admin:S3cretPW@127.0.0.1:1/?token=QSECRET",
        "http://admin:S3cretPW@127.0.0.1:1/?token=QSECRET",
    ],
)
def test_an_inventory_url_error_redacts_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, url: str
) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(f'engines: [{{name: e, url: "{url}"}}]\n')
    code, err = _run(capsys, ["snapshot", "-i", str(inv)])
    assert code == 2 and f"{inv}:1:26: engines[0].url: invalid URL 'htt" in err.replace(
        "'htp", "'htt"
    )


@pytest.mark.parametrize(
    "endpoint", ["ftp://admin:S3cretPW@127.0.0.1/", "admin:S3cretPW@127.0.0.1:8000"]
)
def test_sweep_endpoint_errors_redact_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, endpoint: str
) -> None:
    argv = ["sweep", "--endpoint", endpoint, "-o", str(tmp_path / "x.yaml"), "--yes"]
    code, err = _run(capsys, argv)
    assert code == 2 and "--endpoint must be an http:// or https:// URL, got '" in err


def test_budget_warning_redacts_the_query_token(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://tok@127.0.0.1:{port}/?token=QSECRET"
    code, err = _run(capsys, ["budget", "--prompt-tokens", "5", "--endpoint", url])
    assert code == 1 and f"http://127.0.0.1:{port}/?token=<redacted> unreachable" in err


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("HF_TOKEN=hf_SECRET1\nVLLM_API_KEY=sk-SECRET2\n", "KEY=value lines (a .env or shell"),
        ("export HF_TOKEN=hf_SECRET1\n", "KEY=value lines"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"
            "-----END OPENSSH PRIVATE KEY-----\n",
            "a PEM block (a key or certificate?)",
        ),
        ("just S3cretPW words\n", "plain text"),
    ],
)
def test_a_file_that_is_no_inventory_is_never_quoted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, kind: str
) -> None:
    path = tmp_path / ".env"
    path.write_text(content)
    code, err = _run(capsys, ["snapshot", "-i", str(path)])
    assert code == 2 and f"{path}:1:1: the inventory must be a mapping" in err and kind in err


SHADOW = (
    "root:$6$salt$SECRETHASH:19000:0:99999:7:::\n"
    "daemon:*:19000:0:99999:7:::\n"
    "ops:$6$salt$SECRETHASH2:19000:0:99999:7:::\n"
    "prometheus:!:20791:::::\n"  # difflib finds 'prometheus' in it: it used to pass as a typo
)


def test_a_shadow_file_with_a_near_matching_line_is_no_inventory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "shadow"
    path.write_text(SHADOW)
    code, err = _run(capsys, ["snapshot", "-i", str(path)])
    assert code == 2 and f"{path}:1:1: not a sparktop inventory (its 4 top-level keys" in err


def test_a_shadow_file_as_a_profile_is_no_profile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "shadow"
    path.write_text(SHADOW.replace("prometheus", "cluster"))
    code, err = _run(capsys, ["budget", "--prompt-tokens", "5", "--profile", str(path)])
    assert code == 2 and "not a sparktop profile" in err


def test_a_typo_still_gets_did_you_mean(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("nodse: []\nengines: []\n")
    assert main(["snapshot", "-i", str(path)]) == 2
    assert "unknown key 'nodse' (did you mean 'nodes'?)" in capsys.readouterr().err
