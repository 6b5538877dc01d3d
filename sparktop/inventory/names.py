"""Checks for the inventory's strings: names, hosts, users, URLs, paths, display text.

Each check raises ``PydanticCustomError`` so the loader can point at the offending line.
Nothing from the inventory is ever interpolated into a shell command; these checks are a
second line of defence (and catch typos early), not the first.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic_core import PydanticCustomError

from sparktop.safe_text import port_problem, without_credentials

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_DNS_LABEL_RE = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_ALIAS_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
_NUMERIC_LABEL_RE = re.compile(r"\d+|0[xX][0-9a-fA-F]*")
_SCOPE_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
_ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DISPLAY_MAX = 80
SHOWN_MAX = 60


def clip(value: str) -> str:
    """``value`` cut to ``SHOWN_MAX`` characters, for quoting it in an error message."""
    return value if len(value) <= SHOWN_MAX else value[: SHOWN_MAX - 1] + "…"


def _pattern(kind: str, regex: re.Pattern[str], hint: str = "") -> Callable[[str], str]:
    """An after-validator accepting strings that fully match ``regex``."""
    error_type = "invalid_" + kind.replace(" ", "_")
    template = f"invalid {kind} '{{value}}'" + (f": {hint}" if hint else "")

    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise PydanticCustomError(error_type, template, {"value": clip(value)})
        return value

    return check


check_name = _pattern(
    "name",
    _NAME_RE,
    "use letters, digits, '-', '_' and '.', starting with a letter or digit "
    "(at most 64 characters)",
)
check_user = _pattern("user name", _USER_RE)
check_env = _pattern("environment variable name", _ENV_RE)


def is_valid_host(value: str) -> bool:
    """True for a DNS name, an IPv4/IPv6 literal, or an ssh-config ``Host`` alias.

    Aliases are limited to letters, digits, ``.``, ``_`` and ``-`` and may not start with
    ``-`` (so a host can never be read as an ``ssh`` option). A name whose last label is a
    number (``300.1.1.1``, ``1.2.3``, ``0x7f000001``) is refused: it is not a valid IPv4
    address, yet the resolver would read it as one (``1.2.3`` → 1.2.0.3). An IPv6 zone
    (``fe80::1%eth0``) must be an interface name.
    """
    scope = value.partition("%")[2]
    try:
        ipaddress.ip_address(value)
    except ValueError:
        pass
    else:
        return not scope or bool(_SCOPE_RE.fullmatch(scope))
    if not _ALIAS_RE.fullmatch(value):
        return False
    labels = value.split(".")
    if _NUMERIC_LABEL_RE.fullmatch(labels[-1]):
        return False
    # Dotted names must be valid DNS names (labels of at most 63 characters).
    return len(labels) == 1 or all(_DNS_LABEL_RE.fullmatch(label) for label in labels)


def check_host(value: str) -> str:
    if not is_valid_host(value):
        raise PydanticCustomError(
            "invalid_host",
            "invalid host name '{value}': expected a DNS name, an IPv4/IPv6 address or an "
            "ssh-config alias (letters, digits, '.', '_', '-')",
            {"value": clip(value)},
        )
    return value


def check_url(value: str) -> str:
    """An ``http(s)://[user:password@]host[:port][/path]`` base URL; no query or fragment.

    Credentials are allowed (a basic-auth proxy); recordings redact them.
    """
    problem = ""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        parts, port = None, None
        problem = port_problem(value) or "expected a base URL like http://10.0.0.1:8000"
    if parts is None:
        pass
    elif not value.isprintable() or any(ch.isspace() for ch in value):
        problem = "spaces and control characters are not allowed"
    elif parts.scheme not in ("http", "https"):
        problem = "expected http:// or https://"
    elif not parts.hostname or not is_valid_host(parts.hostname):
        problem = "expected a host name or IP address after http://"
    elif port == 0:
        problem = "port 0 is not a port"
    elif parts.query or parts.fragment:
        problem = "expected a base URL without '?' or '#'"
    if problem:
        raise PydanticCustomError(
            "invalid_url",
            "invalid URL '{value}': {problem}",
            {"value": clip(without_credentials(value)), "problem": problem},
        )
    return value.rstrip("/")


def check_display(value: str) -> str:
    """Text shown in the UI: one printable line of at most ``DISPLAY_MAX`` characters."""
    if not value.isprintable() or len(value) > DISPLAY_MAX:
        raise PydanticCustomError(
            "invalid_text",
            "expected one line of printable text (at most {limit} characters)",
            {"limit": DISPLAY_MAX},
        )
    return value


def expand_path(value: Any) -> Any:
    """``~`` and ``~user`` expanded; a path with a NUL byte or an unknown user is refused."""
    if not isinstance(value, str | Path):
        return value
    text = str(value)
    if "\x00" in text or not text.strip():
        raise PydanticCustomError("invalid_path", "invalid path '{value}'", {"value": clip(text)})
    try:
        return Path(text).expanduser()
    except RuntimeError:  # "~nosuchuser/…", or no home directory at all
        raise PydanticCustomError(
            "invalid_path",
            "cannot expand '~' in '{value}' (no such user or no home directory)",
            {"value": clip(text)},
        ) from None
