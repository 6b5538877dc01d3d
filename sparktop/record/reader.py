"""Reading a recording: header, tick index, and where a damaged file stops being readable.

Compression is recognised from the file's first bytes (zstd or gzip magic; else plain text).
The file is read once, streaming; every complete, valid JSON line becomes an entry in the
index (time, whether it carries alert events, the line kept zlib-compressed in memory and
decoded on demand). Reading stops at the first damage — a corrupt compressed block, a file
that ends mid-stream, a line that is not JSON or not a tick — and :attr:`Recording.stop`
says which line and byte it was and why; everything before it replays. A line longer than
:data:`MAX_LINE_BYTES` is damage too, found while reading: a compressed file of a few hundred
KB can inflate to gigabytes without a newline (a zstd bomb), and is never held whole.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

from sparktop.errors import UserError
from sparktop.jsontext import JsonTooDeep, loads
from sparktop.record.codec import CodecError
from sparktop.record.tick import FORMAT, FORMAT_VERSION, Tick, tick_from_json

CHUNK = 1 << 10
"""Compressed bytes read at a time: damage costs at most this much of the data before it."""
FEED = 256
"""Compressed bytes given to the decompressor at once (``decompress`` has no output bound):
a zstd block of 4 bytes can inflate to 128 KiB, so one call's output stays under 8 MiB."""
MAX_LINE_BYTES = 16 << 20
"""Longest line read: a 256-node tick is a few hundred KB."""
CACHE_TICKS = 64
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class StopInfo:
    """Where reading stopped early: 1-based ``line`` (the header is line 1), ``line_byte``
    (where that line starts in the text: the file's byte for an uncompressed recording, the
    decompressed data's for ``.zst``/``.gz``; None when unknown), ``compressed`` and the
    ``reason``. A compressed file's own damage is located by the reason (``near file byte``):
    a decompressor finds it only at the chunk it was fed."""

    line: int
    line_byte: int | None
    reason: str
    compressed: bool = False

    def __str__(self) -> str:
        if self.line_byte is None:
            where = ""
        elif self.compressed:
            where = f" (byte {self.line_byte:,} of the decompressed text)"
        else:
            where = f" (file byte {self.line_byte:,})"
        return f"stopped at line {self.line}{where}: {self.reason}"


class _Damage(Exception):
    pass


def _chunks(path: Path) -> Iterator[tuple[bytes, int]]:
    """Decompressed chunks and the file offset reached; raises _Damage where it breaks."""
    with path.open("rb") as fh:
        head = fh.read(4)
        fh.seek(0)
        kind = "zst" if head == ZSTD_MAGIC else "gz" if head[:2] == GZIP_MAGIC else ""
        if not kind:
            while block := fh.read(CHUNK):
                yield block, fh.tell()
            return
        dec: Any = _decompressor(kind)
        while block := fh.read(FEED):
            while block:
                if dec.eof:  # another frame / gzip member follows
                    dec = _decompressor(kind)
                try:
                    out = dec.decompress(block)
                except (zstandard.ZstdError, zlib.error) as exc:
                    where = f"near file byte {fh.tell():,}"
                    raise _Damage(f"corrupt {kind} data {where}: {exc}") from None
                yield out, fh.tell()
                block = dec.unused_data if dec.eof else b""
        if not dec.eof:
            raise _Damage("file ends mid-stream (truncated: the recorder did not finish)")


def _too_long(line_no: int) -> str:
    return (
        f"line {line_no} is longer than {MAX_LINE_BYTES >> 20} MiB (no line break): "
        "not a recording's tick"
    )


def _decompressor(kind: str) -> Any:
    if kind == "zst":
        return zstandard.ZstdDecompressor().decompressobj()
    return zlib.decompressobj(wbits=31)


@dataclass(frozen=True, slots=True)
class _Entry:
    line: int
    time_s: float
    alert_events: int
    any_events: int
    packed: bytes


class Recording:
    """An opened recording: ``header``, ``len()`` ticks, ``tick(i)``, ``stop`` (or None).

    Raises :class:`UserError` when the file cannot be read or is not a sparktop recording.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.header: dict[str, Any] = {}
        self.stop: StopInfo | None = None
        self._compressed = False
        self._entries: list[_Entry] = []
        self._cache: dict[int, Tick] = {}
        self._read()

    def __len__(self) -> int:
        return len(self._entries)

    def time_s(self, index: int) -> float:
        return self._entries[index].time_s

    def has_alert_events(self, index: int) -> bool:
        """True when the tick carries an alert firing or escalating."""
        return self._entries[index].alert_events > 0

    def event_count(self, index: int) -> int:
        return self._entries[index].any_events

    def truncate(self, index: int, reason: str) -> None:
        """Treat tick ``index`` and after as damaged (a tick that failed to decode later)."""
        line = self._entries[index].line if index < len(self._entries) else 0
        del self._entries[index:]
        self.stop = StopInfo(line, None, reason)
        self._cache.clear()

    def tick(self, index: int) -> Tick:
        """The tick at ``index`` (a few cached); raises :class:`CodecError` if it does not fit."""
        cached = self._cache.get(index)
        if cached is None:
            data = loads(zlib.decompress(self._entries[index].packed))
            cached = tick_from_json(data)
            if len(self._cache) >= CACHE_TICKS:
                self._cache.pop(next(iter(self._cache)))
            self._cache[index] = cached
        return cached

    def _read(self) -> None:
        try:
            self._scan()
        except OSError as exc:
            raise UserError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if not self.header:
            raise self._not_a_recording(self.stop.reason if self.stop else "empty file")

    def _not_a_recording(self, reason: str) -> UserError:
        """The refusal; a name promising compression the bytes lack (``x.jsonl.zst`` of
        plain text or of xz) says that, not the plain-text reading's damage."""
        for suffix, kind, magic in ((".zst", "zstd", ZSTD_MAGIC), (".gz", "gzip", GZIP_MAGIC)):
            if self.path.name.endswith(suffix):
                try:
                    with self.path.open("rb") as fh:
                        head = fh.read(len(magic))
                except OSError:
                    break
                if head != magic:
                    return UserError(
                        f"{self.path} is not a {kind} file (its name ends in {suffix}; its "
                        f"first bytes are not {kind}'s), nor a plain sparktop recording"
                    )
        return UserError(f"{self.path} is not a sparktop recording ({reason})")

    def _scan(self) -> None:
        line_no = 0
        start = 0  # where the next line starts in the (decompressed) text
        with self.path.open("rb") as fh:
            head = fh.read(4)
        self._compressed = head == ZSTD_MAGIC or head[:2] == GZIP_MAGIC
        parts: list[bytes] = []  # the line being read, unjoined: it may arrive in KB pieces
        size = 0
        try:
            for chunk, _read_to in _chunks(self.path):
                if b"\n" not in chunk:  # no line ends here: only its length to check
                    parts.append(chunk)
                    size += len(chunk)
                    if size > MAX_LINE_BYTES:
                        raise _Damage(_too_long(line_no + 1))
                    continue
                first, *lines, rest = chunk.split(b"\n")
                parts.append(first)
                for line in (b"".join(parts), *lines):
                    if len(line) > MAX_LINE_BYTES:
                        raise _Damage(_too_long(line_no + 1))
                    line_no += 1
                    if not self._take(line, line_no, start):
                        return
                    start += len(line) + 1
                parts, size = [rest], len(rest)
        except _Damage as exc:
            self._stop(line_no + 1, start, str(exc))
            return
        if b"".join(parts).strip():
            self._stop(line_no + 1, start, "last line is incomplete (truncated)")

    def _stop(self, line_no: int, start: int, reason: str) -> None:
        self.stop = StopInfo(line_no, start, reason, self._compressed)

    def _take(self, line: bytes, line_no: int, offset: int) -> bool:
        if not line.strip():
            return True
        try:
            data = loads(line)
        except ValueError as exc:  # not JSON, or nested too deeply (JsonTooDeep)
            why = exc.msg if isinstance(exc, json.JSONDecodeError | JsonTooDeep) else str(exc)
            self._stop(line_no, offset, f"not valid JSON ({why})")
            return False
        if line_no == 1:
            self._check_header(data)
            return True
        if not self.header:
            return False
        try:
            time_s = float(data["t"])
            events = data.get("events") or []
            alerting = sum(1 for e in events if e.get("event") in ("fired", "escalated"))
        except (TypeError, KeyError, ValueError, AttributeError):
            self._stop(line_no, offset, "not a tick (no time 't' or bad events)")
            return False
        self._entries.append(_Entry(line_no, time_s, alerting, len(events), zlib.compress(line, 1)))
        return True

    def _check_header(self, data: Any) -> None:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise self._not_a_recording("no header line")
        version = data.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise UserError(
                f"{self.path}: recording format {version} is newer than this sparktop "
                f"reads ({FORMAT_VERSION}); upgrade sparktop"
            )
        self.header = data


def read_ticks(path: Path) -> tuple[Recording, list[Tick]]:
    """Open and decode every tick (for tests and small files); stops at the first bad tick."""
    rec = Recording(path)
    ticks: list[Tick] = []
    for i in range(len(rec)):
        try:
            ticks.append(rec.tick(i))
        except CodecError as exc:
            rec.truncate(i, f"tick does not decode: {exc}")
            break
    return rec, ticks
