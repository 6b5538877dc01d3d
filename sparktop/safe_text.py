"""Text from nodes and servers made safe for a terminal: every output, TUI or not.

A GPU name, an error line from a node or a metric label can hold any character. Written to a
terminal as it is, an ESC starts an escape sequence (OSC 0 sets the window title, OSC 52
writes the clipboard, CSI moves the cursor), and the invisible formatting characters reorder
or hide what is shown (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066–2069 isolates, U+200B–200F
zero-width and direction marks, U+2028/2029 line and paragraph separators). :func:`printable`
replaces each with one visible cell:

- C0 controls with their Unicode control pictures (ESC → ``␛``, TAB → ``␉``), DEL → ``␡``;
- U+2028/2029 → ``␤``;
- C1 controls, format characters (category Cf: bidi controls, zero-width characters, the
  BOM, soft hyphen, tag characters), surrogates, private-use and unassigned code points →
  ``�``.

Other spaces (no-break, ideographic) are left as they are: a terminal does nothing with them.
:func:`printable_lines` keeps line breaks for multi-line text;
:class:`sparktop.safe_console.PrintableConsole` is a rich ``Console`` whose every rendered
segment goes through it (the tables of ``snapshot`` and the alert list), so the rule holds
for text that reaches rich by any path.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import re
import sys
import unicodedata
from collections.abc import Iterator
from typing import IO, Any

_PICTURES = str.maketrans(
    {c: chr(0x2400 + c) for c in range(0x20)}
    | {0x7F: "\u2421"}
    | {c: "\ufffd" for c in range(0x80, 0xA0)}
    | {0x2028: "\u2424", 0x2029: "\u2424"}
)

_HARMLESS = frozenset({"Zs"})
"""Categories :meth:`str.isprintable` refuses that a terminal only shows (other spaces)."""


def _visible(ch: str) -> str:
    if ch.isprintable() or unicodedata.category(ch) in _HARMLESS:
        return ch
    return "\ufffd"


def printable(text: str) -> str:
    """``text`` as one line a terminal only shows: every control, bidi, zero-width or other
    invisible character replaced by a visible one-cell symbol (see the module docstring).
    Printable text is returned as it is (one :meth:`str.isprintable` check)."""
    if text.isprintable():
        return text
    text = text.translate(_PICTURES)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _visible(ch) for ch in text)


_ESCAPE_RE = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC … BEL or ST (window title, clipboard)
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC … ST
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor moves, clear screen)
    r"|\x1b[ -/]*[0-~]"  # the other escape sequences (charset, keypad, reset)
)


def strip_escapes(text: str) -> str:
    """``text`` without its whole terminal escape sequences (CSI ``␛[2J``, OSC ``␛]0;title␇``,
    DCS…): a one-line summary of a node's error reads ``Failed to initialize NVML: Unknown
    Error``, not ``]0;owned[2JFailed…``. Anything left (a lone ESC, BEL, CR) is for
    :func:`printable` to show."""
    return _ESCAPE_RE.sub("", text) if "\x1b" in text else text


def printable_lines(text: str) -> str:
    """:func:`printable` for multi-line text: line feeds are kept, all else is replaced."""
    if text.isprintable():
        return text
    return "\n".join(printable(line) for line in text.split("\n"))


class PrintableFormatter(logging.Formatter):
    """Log records as text a terminal only shows (warnings may quote a node or a hook)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable_lines(super().format(record))


def printable_warnings() -> None:
    """Make Python's last-resort log handler (warnings to stderr when nothing else is
    configured) print through :class:`PrintableFormatter`."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(PrintableFormatter())
    logging.lastResort = handler


class _Held(logging.Handler):
    def __init__(self, keep: int) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(PrintableFormatter())
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        self.lines.append(self.format(record))


@contextlib.contextmanager
def held_warnings(out: IO[str] | None = None, keep: int = 20) -> Iterator[None]:
    """While a full-screen UI owns the terminal, warnings are held (the newest ``keep``, and
    a count) instead of being written over the screen, and printed to ``out`` (stderr) once
    it is given back."""
    held = _Held(keep)
    previous = logging.lastResort
    logging.lastResort = held  # other libraries' warnings, when nothing else handles them
    ours = logging.getLogger("sparktop")
    propagate = ours.propagate
    ours.addHandler(held)
    ours.propagate = False  # ours are held even where the root logger has a stream handler
    try:
        yield
    finally:
        ours.removeHandler(held)
        ours.propagate = propagate
        logging.lastResort = previous
        if held.count:
            stream = out or sys.stderr
            print(
                f"sparktop: {held.count} warning(s) while the monitor ran; the last:", file=stream
            )
            for line in held.lines:
                print(line, file=stream)


class PrintableWriter:
    """A text stream around ``out`` whose writes go through :func:`printable_lines` (for
    commands that print plain text: the budget, profiles, a replay summary)."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out

    def write(self, text: str) -> int:
        return self._out.write(printable_lines(text))

    def flush(self) -> None:
        self._out.flush()


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_printable(text: str) -> str:
    """JSON text (from :func:`json.dumps` with ``ensure_ascii=False``) with every character
    :func:`printable` would replace written as a ``\\uXXXX`` escape instead: the document
    decodes to the same values, and ``cat``/``tail -f`` of it cannot act on the terminal.
    Line feeds (the layout of ``indent=``) are kept; JSON escapes the ones inside strings."""
    if text.isprintable():
        return text
    return "".join(
        ch
        if ch.isprintable() or ch == "\n" or unicodedata.category(ch) in _HARMLESS
        else _json_escape(ch)
        for ch in text
    )


def dumps_printable(obj: object, **kwargs: Any) -> str:
    """:func:`json.dumps` (non-ASCII text kept readable) through :func:`json_printable`."""
    return json_printable(json.dumps(obj, ensure_ascii=False, **kwargs))


IDENTITY_MAX = 256
"""Longest server-given identity string kept (model id, root, name label): a real one (a hub
name, a checkpoint path) is well under it."""


def clip_identity(text: str) -> str:
    """A server-given identity string (``/v1/models`` id or root, a ``model_name`` label) as
    stored: at most :data:`IDENTITY_MAX` characters, a longer one cut with ``…`` and its
    length (``MMMM… (1,000,000 chars, clipped)``), so one hostile answer cannot grow every
    recording line, JSON snapshot and screen by a megabyte."""
    if len(text) <= IDENTITY_MAX:
        return text
    note = f"… ({len(text):,} chars, clipped)"
    return text[: IDENTITY_MAX - len(note)] + note


REDACTED = "<redacted>"
"""What a secret in a URL (a password, a query value) is shown as."""

_QUERY_VALUE = re.compile(r"([?&][^=&#]*=)[^&#]*")


def _userinfo(url: str) -> str:
    """The ``user[:password]`` of ``url``, also when it has no scheme (``admin:pw@host:8000``
    is read by ``urlsplit`` as scheme ``admin``), an empty string when it has none."""
    rest = url.split("://", 1)[1] if "://" in url else url
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return authority.rpartition("@")[0] if "@" in authority else ""


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` cut from it and each query value shown as
    ``<redacted>`` (``?token=…``), with or without a scheme, whatever the scheme; text that is
    no URL comes back unchanged. The one form in which a URL given by the user reaches a
    message, a recording or a report: its secrets never do."""
    user = _userinfo(url)
    if user:
        url = url.replace(user + "@", "", 1)
    return _QUERY_VALUE.sub(lambda m: m.group(1) + REDACTED, url)


def port_problem(url: str) -> str | None:
    """What is wrong with the port of ``url`` (``http://h:99999``: ``port 99999 is out of
    range (1-65535)``), None when it has none or a valid one. ``urlsplit`` raises for these
    only when ``.port`` is read, deep inside a client, where it became a traceback."""
    rest = url.split("://", 1)[1] if "://" in url else url
    host = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    port = host.rpartition("]")[2] if host.startswith("[") else host
    if ":" not in port:
        return None
    text = port.rpartition(":")[2]
    if not text:
        return None  # "host:" is the default port
    if not text.isascii() or not text.isdigit():
        return f"port {printable(text)!r} is not a number"
    if not 1 <= int(text) <= 65535:
        return f"port {int(text)} is out of range (1-65535)"
    return None


def check_url_option(flag: str, url: str) -> str:
    """``url`` given as ``flag`` (``--endpoint``), checked before any use: an ``http://`` or
    ``https://`` URL with a valid port. Raises :class:`~sparktop.errors.UserError` naming the
    flag and the URL without its secrets."""
    from sparktop.errors import UserError

    shown = without_credentials(url)
    if not re.match(r"https?://", url):
        raise UserError(f"{flag} must be an http:// or https:// URL, got {shown!r}")
    problem = port_problem(url)
    if problem:
        raise UserError(f"{flag}: {problem}, got {shown!r}")
    return url


def cut_credentials(text: str, url: str) -> str:
    """``text`` with the ``user:password@`` and the query values of ``url`` removed wherever
    they stand (an error that quotes the URL, in any form that keeps them)."""
    user = _userinfo(url)
    if user:
        text = text.replace(user + "@", "")
    query = url.partition("?")[2].partition("#")[0]
    for pair in query.split("&"):
        value = pair.partition("=")[2]
        if len(value) >= 3:  # a shorter value would blank unrelated text; it is no secret
            text = text.replace(value, REDACTED)
    return text
