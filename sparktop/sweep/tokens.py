"""Token counting for the budget: estimated from characters, or exact from the model's tokenizer.

- *estimated*: CJK characters count 1:1, every other character ``1 / chars_per_token``
  (default 4.0), as the seed 000 budget script does; the raw character counts are kept so a
  user can redo the arithmetic with their own ratio. Files are read in 1 MiB chunks.
- *exact via a server*: ``POST {url}/tokenize`` ``{"prompt": text}`` → ``{"count", ...}``
  (vLLM serves it at the root path, not ``/v1``).
- *exact via a local* ``tokenizer.json``: the ``tokenizers`` library (extra
  ``sparktop[tokenizers]``), special tokens not added.

A directory scan skips ``SKIP_DIRS`` and hidden folders, and skips files that are binary (a NUL
byte or invalid UTF-8), oversized, unreadable or not regular files, counting each reason.
Only regular files are ever opened (:func:`open_regular`): a FIFO would block until a writer
came, a device may never end; ``--file`` refuses them and points a pipe at ``-`` (stdin).
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from sparktop.errors import UserError
from sparktop.model import NA

DEFAULT_CHARS_PER_TOKEN = 4.0
DEFAULT_MAX_FILE_BYTES = 32 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024

SKIP_DIRS = frozenset(
    {
        ".git",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        "dist",
        "build",
        ".next",
        "target",
        ".idea",
        ".mypy_cache",
    }
)
"""Directory names never descended into (hidden folders are skipped too); DESIGN.md §7."""

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
    return int(cjk + other / chars_per_token)


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
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
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
        if b"\x00" in chunk:
            raise NotText("contains NUL bytes (binary)")
        try:
            text = decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as exc:
            raise NotText(f"not UTF-8 text ({exc.reason})") from None
        if text:
            yield text
        if not chunk:
            return


def _count_stream(
    chunks: Iterable[str], chars_per_token: float, exact: Counter_ | None
) -> tuple[int, int, int]:
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
            tokens, cjk, other = _count_stream(iter_text(stream), chars_per_token, exact)
        else:
            with open_regular(path) as fh:
                tokens, cjk, other = _count_stream(iter_text(fh), chars_per_token, exact)
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


def normalise_exts(exts: Iterable[str] | str | None) -> tuple[str, ...]:
    """``".py,.md"`` or ``["py", ".MD"]`` → ``(".py", ".md")``; empty means every file."""
    if exts is None:
        return ()
    items = exts.split(",") if isinstance(exts, str) else list(exts)
    out = []
    for item in items:
        ext = item.strip().lower()
        if ext:
            out.append(ext if ext.startswith(".") else f".{ext}")
    return tuple(dict.fromkeys(out))


def _walk_files(root: Path, exts: tuple[str, ...], errors: list[OSError]) -> Iterator[str]:
    # Plain strings, not Path objects: building a Path per file costs as much as counting it.
    for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if not exts or name.lower().endswith(exts):
                yield os.path.join(dirpath, name)


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def scan_directory(
    path: str | Path,
    exts: Iterable[str] | str | None = None,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    exact: Counter_ | None = None,
    method: str = "estimated",
) -> TokenCount:
    """Count every text file under ``path`` (filtered by ``exts``), per-file then summed.

    Estimated unless ``exact`` is given (then ``method`` names it). Per file the estimate is
    ``int(cjk + other / chars_per_token)``, as the seed's script does. Raises
    :class:`UserError` when ``path`` is missing, not a directory or unreadable; an exact
    counter's :class:`RuntimeFailure` propagates.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise UserError(f"directory {path} not found")
    if not root.is_dir():
        raise UserError(f"{path} is not a directory (use --file for a single file)")
    if not os.access(root, os.R_OK | os.X_OK):
        raise UserError(f"cannot read directory {path}: permission denied")
    wanted = normalise_exts(exts)
    skipped: Counter[str] = Counter()
    errors: list[OSError] = []
    tokens = cjk = other = counted = 0
    for file in _walk_files(root, wanted, errors):
        try:
            with open_regular(file) as fh:
                if os.fstat(fh.fileno()).st_size > max_file_bytes:
                    skipped[f"larger than {_size(max_file_bytes)}"] += 1
                    continue
                t, c, o = _count_stream(iter_text(fh), chars_per_token, exact)
        except NotRegular as exc:
            skipped[f"not a regular file ({exc.kind})"] += 1
            continue
        except NotText:
            skipped["binary or not UTF-8"] += 1
            continue
        except OSError:
            skipped["unreadable"] += 1
            continue
        tokens, cjk, other, counted = tokens + t, cjk + c, other + o, counted + 1
    if errors:
        skipped["unreadable folder"] += len(errors)
    return TokenCount(
        tokens=tokens,
        method=method if exact is not None else "estimated",
        source=str(path),
        cjk_chars=cjk,
        other_chars=other,
        chars_per_token=chars_per_token if exact is None else NA("exact count"),
        files_counted=counted,
        files_skipped=sum(skipped.values()),
        skipped=tuple(sorted(skipped.items())),
    )


def count_via_endpoint(url: str, text: str, api_key: str | None = None) -> TokenCount:
    """Exact token count of ``text`` from ``POST {url}/tokenize``; RuntimeFailure when down."""
    from sparktop.sweep.exact_tokens import count_with_endpoint

    return count_with_endpoint(url, text, api_key)


def count_via_tokenizer(path: str | Path, text: str) -> TokenCount:
    """Exact token count of ``text`` with a local ``tokenizer.json`` (UserError if unusable)."""
    from sparktop.sweep.exact_tokens import count_with_tokenizer

    return count_with_tokenizer(path, text)


def with_note(count: TokenCount, note: str) -> TokenCount:
    """``count`` with ``note`` set (for a fallback the caller wants to explain)."""
    return replace(count, note=note)
