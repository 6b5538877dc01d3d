"""The budget pane's count of a path or pasted text, in a thread it can stop (Textual-free).

A count is sent to the live engine's ``POST /tokenize`` when it answers (exact, as ``sparktop
budget --endpoint`` does), else estimated. A directory is read file by file: the count checks
its ``cancel`` flag before each file and each request (closing the pane or quitting sets it),
reports progress, and sends at most :data:`DEFAULT_MAX_SEND_BYTES` of text before falling back
to the local estimate, which then says so.

The thread is a daemon of its own, not the event loop's executor: quitting never waits for a
request in flight (``asyncio.run`` joins its default executor's threads at exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparktop.errors import RuntimeFailure
from sparktop.sweep.tokens import scan, tokens

DEFAULT_MAX_SEND_BYTES = tokens.DEFAULT_MAX_SEND_MB * 1024 * 1024
"""The most text one count sends to ``/tokenize`` (as ``sparktop budget``'s default)."""

PROGRESS_EVERY_S = 0.25
"""Progress is reported at most this often (a scan of small files counts thousands a second)."""

Progress = Callable[[int, int], None]
"""Called on the event loop with the files and characters counted so far."""


class BackgroundCount:
    """One count of ``path`` (file or directory) or ``text``, with ``url`` the engine's base
    URL for ``/tokenize`` (None: estimated). :meth:`run` awaits the
    :class:`~sparktop.sweep.tokens.tokens.TokenCount`; :meth:`cancel` (or cancelling the
    awaiting task) stops it before its next file or request, raising
    :class:`~sparktop.sweep.tokens.tokens.CountCancelled` in the thread."""

    def __init__(
        self,
        url: str | None,
        path: str | None,
        text: str | None,
        progress: Progress | None = None,
        max_send_bytes: int | None = None,
    ) -> None:
        self.url = url
        self.path = path
        self.text = text
        self.progress = progress
        self.max_send_bytes = max_send_bytes
        self.cancelled = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_progress = 0.0

    def cancel(self) -> None:
        self.cancelled.set()

    async def run(self) -> tokens.TokenCount:
        loop = self._loop = asyncio.get_running_loop()
        done: asyncio.Future[tokens.TokenCount] = loop.create_future()

        def deliver(result: tokens.TokenCount | None, error: BaseException | None) -> None:
            if done.done():
                return
            if error is not None:
                done.set_exception(error)
            else:
                assert result is not None
                done.set_result(result)

        def work() -> None:
            result: tokens.TokenCount | None = None
            error: BaseException | None = None
            try:
                result = self.count_blocking()
            except Exception as exc:  # handed to the awaiting task, which says what failed
                error = exc
            # RuntimeError: the loop has closed (the app quit while this counted).
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(deliver, result, error)

        threading.Thread(target=work, name="budget-count", daemon=True).start()
        try:
            return await done
        finally:
            self.cancelled.set()  # a cancelled await (pane closed, app quitting) stops the thread

    def _progress(self, files: int, chars: int) -> None:
        now = time.monotonic()
        if (
            self.progress is None
            or self._loop is None
            or now - self._last_progress < PROGRESS_EVERY_S
        ):
            return
        self._last_progress = now
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self.progress, files, chars)

    def count_blocking(self) -> tokens.TokenCount:
        """In the thread: the count, exact when the engine's ``/tokenize`` answers, else
        estimated with a note saying why (server failure, or the send cap)."""
        url = self.url
        if self.path is None:
            text = self.text or ""
            if url:
                from sparktop.sweep.tokens.exact_tokens import count_with_endpoint

                try:
                    return count_with_endpoint(url, text, **self._cap())
                except (RuntimeFailure, tokens.SendCapReached) as exc:
                    estimate = tokens.estimate_text_tokens(text, source="pasted text")
                    return tokens.with_note(estimate, _why_estimated(exc))
            return tokens.estimate_text_tokens(text, source="pasted text")
        target = Path(self.path).expanduser()

        def count(exact: tokens.Counter_ | None, method: str) -> tokens.TokenCount:
            if target.is_dir():
                return scan.scan_directory(
                    target,
                    exact=exact,
                    method=method,
                    cancel=self.cancelled,
                    progress=self._progress,
                )
            return tokens.count_file(target, exact=exact, method=method)

        if not url:
            return count(None, "estimated")
        from sparktop.sweep.tokens.exact_tokens import EndpointTokenizer

        endpoint = EndpointTokenizer(url, cancel=self.cancelled, **self._cap())
        try:
            return count(endpoint, "exact (/tokenize)")
        except (RuntimeFailure, tokens.SendCapReached) as exc:
            return tokens.with_note(count(None, "estimated"), _why_estimated(exc))
        finally:
            endpoint.close()

    def _cap(self) -> dict[str, Any]:
        return {"max_send_bytes": self.max_send_bytes or DEFAULT_MAX_SEND_BYTES}


def _why_estimated(exc: Exception) -> str:
    if isinstance(exc, tokens.SendCapReached):
        return str(exc)  # the cap's note begins "estimated (send cap):"
    return f"estimated: {exc}"
