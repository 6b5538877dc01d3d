"""One remote command over an open SSH connection, with its output bounded.

``conn.run()`` keeps everything a command prints; a node whose nvidia-smi lists 50,000 GPUs
(or prints garbage without end) would cost the monitor megabytes and a long parse on the
event loop each poll. :func:`run_bounded` reads stdout in chunks and gives up past
:data:`OUTPUT_MAX_CHARS` (closing the channel, so the rest is never received); stderr is
discarded (the probe sends nvidia-smi's own to stdout). :class:`Progress` tells a caller whose
deadline expired whether the command was running (the node's sshd answered: the connection
works, the command hangs) or never started (the connection itself is in doubt).
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncssh

OUTPUT_MAX_CHARS = 256 * 1024
"""A probe's output is ~2 KB per GPU plus /proc/meminfo (8 GPUs: ~6 KB); 256 Ki characters
is far beyond any real node and small enough to parse in milliseconds."""

CHUNK_CHARS = 64 * 1024


@dataclass(slots=True)
class Progress:
    """How far the commands of one poll got: ``started`` once sshd accepted one (its session
    opened and the command was started), ``received`` characters of output so far."""

    started: bool = False
    received: int = 0


class OutputTooLarge(Exception):
    """The command printed more than the limit; ``head`` is what was read (up to the limit)."""

    def __init__(self, limit: int, head: str) -> None:
        super().__init__(f"output over {limit:,} characters")
        self.limit = limit
        self.head = head


async def run_bounded(
    conn: asyncssh.SSHClientConnection,
    command: str,
    progress: Progress,
    limit: int = OUTPUT_MAX_CHARS,
) -> tuple[str, int | None]:
    """Run ``command`` and return (stdout, exit status or None). Raises
    :class:`OutputTooLarge` past ``limit`` characters, asyncssh/OS errors as ``conn.run``."""
    proc = await conn.create_process(command, stderr=asyncssh.DEVNULL)
    progress.started = True
    try:
        chunks: list[str] = []
        size = 0
        while True:
            data = await proc.stdout.read(CHUNK_CHARS)
            if not data:
                break
            text = data if isinstance(data, str) else data.decode("utf-8", "replace")
            size += len(text)
            progress.received += len(text)
            chunks.append(text)
            if size > limit:
                raise OutputTooLarge(limit, "".join(chunks)[:limit])
        await proc.wait()
        return "".join(chunks), proc.exit_status
    finally:
        # Closing (not waiting for the close) drops whatever the node still sends: a node
        # that never acknowledges the close cannot hold the poll.
        proc.close()
