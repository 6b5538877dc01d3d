"""Token estimate of a whole source tree: walk it, skip what is not text, count per file.

A scan skips ``SKIP_DIRS`` and hidden folders, and skips files that are binary (a NUL byte or
invalid UTF-8), oversized, unreadable or not regular files, counting each reason. A FIFO,
socket or device is never opened (its open can block or act). Per file the estimate is that
of :mod:`sparktop.sweep.tokens.tokens` (CJK 1:1, other characters ÷ ``chars_per_token``).
"""

from __future__ import annotations

import os
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from sparktop.errors import UserError
from sparktop.sweep.tokens.tokens import (
    CHUNK_BYTES,
    DEFAULT_CHARS_PER_TOKEN,
    OPEN_FLAGS,
    CountCancelled,
    Counter_,
    NotRegular,
    NotText,
    TokenCount,
    count_stream,
    decode_text,
    file_kind,
    iter_text,
)
from sparktop.values import NA

DEFAULT_MAX_FILE_BYTES = 32 * 1024 * 1024

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
    """Every file under ``root`` that a scan reads or skips with a reason (sorted, top down;
    ``SKIP_DIRS``, hidden and symlinked folders are not entered)."""
    # Plain strings, not Path objects: building a Path per file costs as much as counting it.
    for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if not exts or name.lower().endswith(exts):
                yield os.path.join(dirpath, name)


def _count_file(
    path: str, max_bytes: int, chars_per_token: float, exact: Counter_ | None
) -> tuple[int, int, int] | None:
    """``(tokens, cjk, other)`` of one regular file; None when it is over ``max_bytes``.

    One open, one ``fstat`` and plain reads on the descriptor: a scan opens hundreds of small
    files and a buffered file object and decoder each was most of its cost. Files over
    ``CHUNK_BYTES`` are decoded a chunk at a time instead, so memory stays bounded. The
    descriptor is checked to be a regular file before any read (:class:`NotRegular`);
    :class:`NotText` for binary or non-UTF-8 content; ``OSError`` when unreadable.
    """
    fd = os.open(path, OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(file_kind(info.st_mode))
        if info.st_size > max_bytes:
            return None
        if info.st_size > CHUNK_BYTES:
            with os.fdopen(fd, "rb") as stream:
                fd = -1  # closed with the file object
                return count_stream(iter_text(stream), chars_per_token, exact)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, max(info.st_size + 1 - total, 64 * 1024)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while being read
                return None
    finally:
        if fd >= 0:
            os.close(fd)
    text = decode_text(chunks[0] if len(chunks) == 1 else b"".join(chunks))
    return count_stream((text,), chars_per_token, exact)


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def scan_directory(
    path: str | Path,
    exts: Iterable[str] | str | None = None,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    exact: Counter_ | None = None,
    method: str = "estimated",
    cancel: threading.Event | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TokenCount:
    """Count every text file under ``path`` (filtered by ``exts``), per-file then summed.

    Estimated unless ``exact`` is given (then ``method`` names it). Per file the estimate is
    ``int(cjk + other / chars_per_token)``, as the seed's script does. ``cancel``, checked
    before each file, stops the scan with :class:`CountCancelled`; ``progress`` is called
    after each file counted with the files and characters counted so far. Raises
    :class:`UserError` when ``path`` is missing, not a directory or unreadable; an exact
    counter's :class:`RuntimeFailure` (or its send cap's) propagates.
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
        if cancel is not None and cancel.is_set():
            raise CountCancelled(str(path))
        try:
            # A FIFO or device is never opened (its open can block or act); the descriptor
            # is checked again in _count_file in case the file is swapped in between.
            mode = os.stat(file).st_mode
            if not stat.S_ISREG(mode):
                raise NotRegular(file_kind(mode))
            counts = _count_file(file, max_file_bytes, chars_per_token, exact)
            if counts is None:
                skipped[f"larger than {_size(max_file_bytes)}"] += 1
                continue
            t, c, o = counts
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
        if progress is not None:
            progress(counted, cjk + other)
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
