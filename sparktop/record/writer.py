"""``--record FILE``: writes ticks as JSON lines from a background thread.

The caller's :meth:`Recorder.write` only puts the (immutable) tick on a bounded queue and
returns at once: encoding, compression and disk writes happen on the recorder's thread, so a
slow disk never stalls the UI (a full queue drops the tick and counts it). The stream is
flushed once the queue is empty, at most every :data:`MIN_FLUSH_S` (at the monitor's 1 Hz:
every tick as it comes), and under a flood at least every ``flush_s`` (1 s): ``.zst`` with a
zstd block flush and ``.gz`` with a zlib sync flush. So a crash or ``kill -9`` loses at most
the ticks handed over in the last second (at 1 Hz, none older than 0.2 s) and the file stays
readable up to there. Any other suffix is written uncompressed.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import queue
import threading
import time
import zlib
from pathlib import Path
from typing import IO, Any

import zstandard

from sparktop.errors import UserError
from sparktop.outfile import create_file
from sparktop.record.tick import Tick, tick_to_json

log = logging.getLogger(__name__)

QUEUE_TICKS = 120
"""Ticks that may wait for the writer thread (2 minutes at 1 Hz) before new ones are dropped."""

ZSTD_LEVEL = 6
MIN_FLUSH_S = 0.2
"""Shortest time between two flushes (each ends a zstd block: a flush per tick of a flood
would cost the compression)."""

_STOP = object()


class _Barrier:
    """Queued by :meth:`Recorder.sync`: the thread flushes, then sets the event."""

    def __init__(self) -> None:
        self.done = threading.Event()


def compression_of(path: Path) -> str:
    """``"zst"``, ``"gz"`` or ``""`` from the file name."""
    suffix = path.suffix.lower()
    return {".zst": "zst", ".zstd": "zst", ".gz": "gz"}.get(suffix, "")


class _Stream:
    """A compressed (or plain) binary stream with a flush that makes its data decodable."""

    def __init__(self, raw: IO[bytes], kind: str) -> None:
        self.raw = raw
        self.kind = kind
        self._zst: Any = None
        self._gz: gzip.GzipFile | None = None
        if kind == "zst":
            self._zst = zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(raw, closefd=False)
        elif kind == "gz":
            self._gz = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6)

    def write(self, data: bytes) -> None:
        if self._zst is not None:
            self._zst.write(data)
        elif self._gz is not None:
            self._gz.write(data)
        else:
            self.raw.write(data)

    def flush(self) -> None:
        if self._zst is not None:
            self._zst.flush(zstandard.FLUSH_BLOCK)
        elif self._gz is not None:
            self._gz.flush(zlib.Z_SYNC_FLUSH)
        self.raw.flush()

    def close(self) -> None:
        if self._zst is not None:
            self._zst.flush(zstandard.FLUSH_FRAME)
            self._zst.close()
        elif self._gz is not None:
            self._gz.close()
        self.raw.close()


class Recorder:
    """Appends ticks to a new recording at ``path`` (header first). Thread-safe ``write``.

    ``raw`` is the file already opened for it (see :func:`sparktop.outfile.create_file`);
    without it ``path`` is created (``force`` replaces an existing file; a symbolic link is
    never followed). Raises :class:`UserError` when the file cannot be created or the header
    cannot be written (a full disk at start). ``dropped`` counts ticks the full queue
    refused; ``error`` holds the first write failure (the recorder then stops, and
    :meth:`write` counts each tick it can no longer take in ``lost``).
    """

    def __init__(
        self,
        path: Path,
        header: dict[str, Any],
        *,
        flush_s: float = 1.0,
        max_queue: int = QUEUE_TICKS,
        raw: IO[bytes] | None = None,
        force: bool = False,
    ) -> None:
        self.path = path
        self.flush_s = flush_s
        self.dropped = 0
        self.written = 0
        self.lost = 0
        self.error: str | None = None
        if raw is None:
            raw = create_file(path, "--record", force=force)
        self._stream = _Stream(raw, compression_of(path))
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._closed = False
        try:
            self._write_line(header)
            self._stream.flush()
        except OSError as exc:
            with contextlib.suppress(OSError):
                raw.close()
            raise UserError(f"--record: cannot write {path}: {exc.strerror or exc}") from None
        self._thread = threading.Thread(target=self._run, name="sparktop-record", daemon=True)
        self._thread.start()

    def write(self, tick: Tick) -> bool:
        """Queue a tick; never blocks. False when dropped (queue full, closed or failed)."""
        if self.error is not None:
            self.lost += 1
            return False
        if self._closed:
            return False
        try:
            self._queue.put_nowait(tick)
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def sync(self, timeout_s: float = 10.0) -> bool:
        """Wait until every tick queued so far is written and flushed (True when it was)."""
        if self._closed or self.error is not None:
            return False
        barrier = _Barrier()
        try:
            self._queue.put(barrier, timeout=timeout_s)
        except queue.Full:
            return False
        return barrier.done.wait(timeout_s)

    def close(self) -> None:
        """Write what is queued, end the stream and wait for the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        while self._thread.is_alive():  # a thread that died on an error takes nothing
            try:
                self._queue.put(_STOP, timeout=0.5)
                break
            except queue.Full:
                continue
        self._thread.join()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_line(self, obj: Any) -> None:
        self._stream.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def _run(self) -> None:
        last_flush = time.monotonic()
        dirty = False
        try:
            while True:
                since = time.monotonic() - last_flush
                wait = max(0.0, min(self.flush_s, MIN_FLUSH_S) - since)
                try:
                    item = self._queue.get(timeout=wait if dirty else None)
                except queue.Empty:
                    item = None  # idle with dirty data: flush it now
                if item is _STOP:
                    break
                if isinstance(item, Tick):
                    self._write_line(tick_to_json(item))
                    self.written += 1
                    dirty = True
                since = time.monotonic() - last_flush
                idle = item is None or (self._queue.empty() and since >= MIN_FLUSH_S)
                if dirty and (idle or since >= self.flush_s or isinstance(item, _Barrier)):
                    self._stream.flush()
                    last_flush, dirty = time.monotonic(), False
                if isinstance(item, _Barrier):
                    item.done.set()
        except Exception as exc:  # disk full, codec bug: stop recording, keep the app alive
            self.error = _why(exc)
            log.error("recording to %s stopped: %s", self.path, self.error)
        finally:
            try:
                self._stream.close()
            except Exception as exc:
                self.error = self.error or f"closing failed: {_why(exc)}"
            finally:
                with contextlib.suppress(OSError):
                    self._stream.raw.close()


def _why(exc: BaseException) -> str:
    """``No space left on device`` for an OSError, else the exception in one line."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
