"""Token counting for the budget: estimated from characters, or exact from the model's tokenizer.

- *estimated*: CJK characters count 1:1, every other character ``1 / chars_per_token``
  (default 4.0), as the seed 000 budget script does; the raw character counts are kept so a
  user can redo the arithmetic with their own ratio. Files are read in 1 MiB chunks.
- *exact via a server*: ``POST {url}/tokenize`` ``{"prompt": text}`` → ``{"count", ...}``
  (vLLM serves it at the root path, not ``/v1``).
- *exact via a local* ``tokenizer.json``: the ``tokenizers`` library (extra
  ``sparktop[tokenizers]``), special tokens not added.

Only regular files are ever opened (checked before the open and again on the descriptor,
opened with ``OPEN_FLAGS``): a FIFO would block until a writer came, a device may never end;
``--file`` refuses them and points a pipe at ``-`` (stdin). Whole source trees are counted by
:mod:`sparktop.sweep.tokens.scan`.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from sparktop.errors import UserError
from sparktop.values import NA

DEFAULT_CHARS_PER_TOKEN = 4.0
CHUNK_BYTES = 1024 * 1024
OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)  # fmt: skip
"""Flags every file is opened with: read-only; never blocking (a file swapped for a FIFO);
never becoming the process's controlling terminal (one swapped for a tty)."""

# CJK punctuation, kana, unified ideographs (+ extension A/B…), Hangul syllables,
# compatibility ideographs, full-width forms: one token per character is closer than 1/4.
_CJK = re.compile(
    "[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
    "\U00020000-\U0002fa1f]"
)

_NOT_COUNTED = NA("not counted")
_NOT_ESTIMATED = NA("not estimated")
_NOT_A_SCAN = NA("not a directory scan")
_NOT_REPORTED = NA("not reported")

Counter_ = Callable[[str], int]
"""An exact counter: text → number of tokens."""


@dataclass(frozen=True, slots=True)
class TokenCount:
    """How many prompt tokens, and how that number was obtained.

    ``method``: ``given``, ``estimated``, ``exact (/tokenize)`` or ``exact (tokenizer.json)``.
    ``cjk_chars`` / ``other_chars`` are the raw character counts (NA when tokens were given).
    Directory scans fill ``files_counted``, ``files_skipped`` and ``skipped`` (reason, count).
    ``max_model_len`` is what ``/tokenize`` reported, when it did. ``note`` explains a
    fallback (e.g. an exact count that failed).
    """

    tokens: int
    method: str
    source: str = ""
    cjk_chars: int | NA = _NOT_COUNTED
    other_chars: int | NA = _NOT_COUNTED
    chars_per_token: float | NA = _NOT_ESTIMATED
    files_counted: int | NA = _NOT_A_SCAN
    files_skipped: int | NA = _NOT_A_SCAN
    skipped: tuple[tuple[str, int], ...] = ()
    max_model_len: int | NA = _NOT_REPORTED
    note: str = ""

    @property
    def exact(self) -> bool:
        """True when a tokenizer produced the count (or the user gave it)."""
        return self.method != "estimated"


_ASCII_RUNS = re.compile(r"[\x00-\x7f]+")


def count_chars(text: str) -> tuple[int, int]:
    """``(cjk, other)`` character counts of ``text``."""
    if text.isascii():
        return 0, len(text)
    # Source text is mostly ASCII with a few symbols: look for CJK only in what is not.
    cjk = len(_CJK.findall(_ASCII_RUNS.sub("", text)))
    return cjk, len(text) - cjk


def _estimate(cjk: int, other: int, chars_per_token: float) -> int:
    """Whole tokens, at least 1 for any text (``hi`` is a token, not 0.5 of one)."""
    estimate = int(cjk + other / chars_per_token)
    return max(estimate, 1) if cjk + other else estimate


def estimate_text_tokens(
    text: str, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN, source: str = "text"
) -> TokenCount:
    """Estimated tokens of ``text``: CJK 1:1, other characters ÷ ``chars_per_token`` (> 0)."""
    if not chars_per_token > 0:
        raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
    cjk, other = count_chars(text)
    return TokenCount(
        tokens=_estimate(cjk, other, chars_per_token),
        method="estimated",
        source=source,
        cjk_chars=cjk,
        other_chars=other,
        chars_per_token=chars_per_token,
    )


class NotText(Exception):
    """A file is binary or not UTF-8."""


class CountCancelled(Exception):
    """A count was cancelled (its pane closed, the app quit) before it finished."""


DEFAULT_MAX_SEND_MB = 8
"""At most this much text (MiB, UTF-8) is sent to one server's ``/tokenize`` per count: a
directory larger than that is estimated locally instead (``budget --max-send-mb`` raises it).
It bounds what a mistyped path (``/usr/share``) uploads to a server, and for how long."""


SEND_CAP_NOTE = "estimated (send cap):"
"""How a count's note begins when the send cap stopped its exact count."""


class SendCapReached(Exception):
    """Counting exactly would send more than the cap to ``/tokenize``; nothing more was sent."""


def send_cap_note(cap_bytes: int, flag: bool) -> str:
    """Why a count was estimated when it reached the send cap (naming the flag that raises it)."""
    raise_it = " (--max-send-mb raises it)" if flag else ""
    return (
        f"{SEND_CAP_NOTE} the text is over {cap_bytes / (1024 * 1024):.3g} MiB, the most "
        f"sparktop sends to /tokenize{raise_it}; sending stopped there"
    )


class NotRegular(Exception):
    """A path is not a regular file; ``kind`` says what it is (``FIFO``, ``socket``, …)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``regular file``, ``FIFO``, ``socket``, ``character
    device``…"""
    kinds = (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    )
    return next((name for test, name in kinds if test(mode)), "special file")


def open_regular(path: str | Path) -> BinaryIO:
    """Open ``path`` for binary reading if (following symlinks) it is a regular file.

    Raises :class:`NotRegular` for anything else, without opening it (a device's open can
    have effects); the check is repeated on the open descriptor, opened non-blocking so a
    file swapped for a FIFO in between cannot block. ``OSError`` for missing/unreadable.
    """
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegular(file_kind(info.st_mode))
    fd = os.open(path, OPEN_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(file_kind(mode))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def iter_text(stream: BinaryIO) -> Iterator[str]:
    """Decode a byte stream as strict UTF-8 in 1 MiB chunks; :class:`NotText` on NUL/bad bytes."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    while True:
        chunk = stream.read(CHUNK_BYTES)
        text = decode_text(chunk, decoder.decode, final=not chunk)
        if text:
            yield text
        if not chunk:
            return


def decode_text(
    data: bytes, decode: Callable[[bytes, bool], str] | None = None, *, final: bool = True
) -> str:
    """``data`` as strict UTF-8 text (``decode``: an incremental decoder's, for one chunk of
    several); :class:`NotText` for a NUL byte (binary) or bytes that are not UTF-8."""
    if b"\x00" in data:
        raise NotText("contains NUL bytes (binary)")
    try:
        return decode(data, final) if decode is not None else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(f"not UTF-8 text ({exc.reason})") from None


def count_stream(
    chunks: Iterable[str], chars_per_token: float, exact: Counter_ | None
) -> tuple[int, int, int]:
    """``(tokens, cjk, other)`` of the text in ``chunks``: estimated, or ``exact`` of it all."""
    cjk = other = 0
    kept: list[str] = []
    for text in chunks:
        c, o = count_chars(text)
        cjk += c
        other += o
        if exact is not None:
            kept.append(text)
    tokens = exact("".join(kept)) if exact is not None else _estimate(cjk, other, chars_per_token)
    return tokens, cjk, other


def count_file(
    path: str | Path,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    exact: Counter_ | None = None,
    method: str = "estimated",
    stdin: BinaryIO | None = None,
) -> TokenCount:
    """Count one file (``-`` reads ``stdin``, default standard input), estimated unless
    ``exact`` is given.

    Raises :class:`UserError` for a missing, unreadable, directory or non-text file, and for
    anything but a regular file (a FIFO, socket or device is refused, not read).
    """
    import sys

    name = str(path)
    try:
        if name == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            tokens, cjk, other = count_stream(iter_text(stream), chars_per_token, exact)
        else:
            with open_regular(path) as fh:
                tokens, cjk, other = count_stream(iter_text(fh), chars_per_token, exact)
    except FileNotFoundError:
        raise UserError(f"file {name} not found") from None
    except IsADirectoryError:
        raise UserError(f"{name} is a directory; use --scan-dir") from None
    except NotRegular as exc:
        if exc.kind == "directory":
            raise UserError(f"{name} is a directory; use --scan-dir") from None
        hint = "; to count what a pipe carries, send it to standard input: --file -"
        raise UserError(
            f"{name} is a {exc.kind}, not a regular file{hint if exc.kind == 'FIFO' else ''}"
        ) from None
    except NotText as exc:
        raise UserError(f"{name}: {exc}") from None
    except OSError as exc:
        raise UserError(f"cannot read {name}: {exc.strerror or exc}") from None
    return TokenCount(
        tokens=tokens,
        method=method if exact is not None else "estimated",
        source=name,
        cjk_chars=cjk,
        other_chars=other,
        chars_per_token=chars_per_token if exact is None else NA("exact count"),
    )


def with_note(count: TokenCount, note: str) -> TokenCount:
    """``count`` with ``note`` set (for a fallback the caller wants to explain)."""
    return replace(count, note=note)
