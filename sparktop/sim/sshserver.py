"""A reusable asyncssh SSH server on loopback that answers exec requests through a callback.

Used by the simulator (a GB10 cluster model answers the probe) and by the tests (canned
fixture output answers it). Clients authenticate with a public key; the server has its own
host key, so clients verify it exactly as they would verify a real node.

Fault injection for tests and demo scenarios, per server:

- :meth:`SshServerHandle.hang` — every command not answered yet blocks until
  :meth:`~SshServerHandle.unhang`: the node answers TCP and SSH but the probe never returns.
- :meth:`SshServerHandle.stall_streams` — long-lived commands (``nvidia-smi -lms``) stop
  printing until :meth:`~SshServerHandle.resume_streams`; other commands still answer.
- :meth:`SshServerHandle.go_away` — stop listening and drop every connection (connection
  refused); :meth:`~SshServerHandle.come_back` listens again on the same port and host key.

Example::

    async def responder(command: str) -> tuple[str, int]:
        return "hello\\n", 0

    server = await start_ssh_server(responder)
    known_hosts_text = server.known_hosts_line()   # "[127.0.0.1]:PORT ssh-ed25519 AAAA…"
    server.client_key.write_private_key("id_ed25519")
    ...
    await server.close()
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import asyncssh

Responder = Callable[[str], Awaitable[tuple[str, int]]]
"""``async (command) -> (stdout, exit_status)``: what the node prints for one exec request."""

Streamer = Callable[[str], AsyncIterator[str | int] | None]
"""For long-lived commands: ``(command) -> chunks`` printed as they come (an ``int`` ends the
command with that exit status), or None when the command is for the responder."""

KEY_ALG = "ssh-ed25519"


def public_key_line(key: asyncssh.SSHKey) -> str:
    """``"ssh-ed25519 AAAA…"`` (algorithm and base64 blob, no comment) for a key."""
    text = key.export_public_key("openssh").decode("ascii")
    return " ".join(text.split()[:2])


def known_hosts_host(host: str, port: int) -> str:
    """The host pattern OpenSSH writes in known_hosts: ``host`` on 22, else ``[host]:port``."""
    return host if port == 22 else f"[{host}]:{port}"


class _Server(asyncssh.SSHServer):
    """Tracks live connections so :meth:`SshServerHandle.go_away` can drop them."""

    def __init__(self, handle: SshServerHandle) -> None:
        self._handle = handle
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        # True = asyncssh opens the TCP connection itself (a jump host for ProxyJump).
        return self._handle.allow_tcp_forwarding and dest_host in ("127.0.0.1", "::1", "localhost")

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._handle._connections.add(conn)
        self._handle.connections_accepted += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._handle._connections.discard(self._conn)


class SshServerHandle:
    """A running loopback SSH server.

    Attributes: ``host``, ``port``, ``host_key`` (private), ``host_key_public`` (OpenSSH
    public key line), ``client_key`` (a private key the server accepts, generated when no
    ``authorized_client_keys`` were given, else None), ``commands`` (every exec command
    received, in order), ``connections_accepted`` (TCP connections accepted so far),
    ``allow_tcp_forwarding`` (act as a ProxyJump host, loopback destinations only).
    """

    def __init__(
        self,
        responder: Responder,
        host: str,
        host_key: asyncssh.SSHKey,
        authorized_keys: Sequence[asyncssh.SSHKey],
        client_key: asyncssh.SSHKey | None,
    ) -> None:
        self.host = host
        self.port = 0
        self.host_key = host_key
        self.host_key_public = public_key_line(host_key)
        self.client_key = client_key
        self.commands: list[str] = []
        self.connections_accepted = 0
        self.allow_tcp_forwarding = False
        self.streamer: Streamer | None = None
        self.streams_running = 0
        """Long-lived commands printing right now."""
        self._responder = responder
        self._authorized = asyncssh.import_authorized_keys(
            "".join(public_key_line(k) + "\n" for k in authorized_keys)
        )
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._connections: set[asyncssh.SSHServerConnection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._released = asyncio.Event()
        self._released.set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    # -- lifecycle -----------------------------------------------------------------------

    async def _listen(self, port: int) -> None:
        self._acceptor = await asyncssh.listen(
            self.host,
            port,
            server_factory=lambda: _Server(self),
            server_host_keys=[self.host_key],
            authorized_client_keys=self._authorized,
            process_factory=self._handle,
            encoding="utf-8",
            keepalive_interval=0,
        )
        self.port = self._acceptor.get_port()

    async def _stop(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
            await self._acceptor.wait_closed()
            self._acceptor = None
        for conn in list(self._connections):
            conn.abort()
        self._connections.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        """Stop listening, drop every connection and cancel running commands."""
        self._released.set()
        await self._stop()

    @property
    def listening(self) -> bool:
        return self._acceptor is not None

    @property
    def active_connections(self) -> int:
        return len(self._connections)

    # -- fault injection -----------------------------------------------------------------

    def hang(self) -> None:
        """Make every command that has not answered yet block until :meth:`unhang`."""
        self._released.clear()

    def unhang(self) -> None:
        self._released.set()

    def stall_streams(self) -> None:
        """Long-lived commands print nothing more until :meth:`resume_streams` (they stay
        open: a stalled ``nvidia-smi -lms``)."""
        self._flowing.clear()

    def resume_streams(self) -> None:
        self._flowing.set()

    async def go_away(self) -> None:
        """Stop listening and drop every connection: clients see "connection refused"."""
        await self._stop()

    async def come_back(self) -> None:
        """Listen again on the same port with the same host key."""
        if self._acceptor is None:
            await self._listen(self.port)

    # -- client-side helpers -------------------------------------------------------------

    def known_hosts_line(self, host: str | None = None, port: int | None = None) -> str:
        """A known_hosts line trusting this server: ``[127.0.0.1]:PORT ssh-ed25519 AAAA…``."""
        pattern = known_hosts_host(host or self.host, self.port if port is None else port)
        return f"{pattern} {self.host_key_public}"

    # -- exec requests -------------------------------------------------------------------

    async def _handle(self, process: asyncssh.SSHServerProcess[str]) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        command = process.command or ""
        self.commands.append(command)
        try:
            await self._released.wait()
            stream = self.streamer(command) if self.streamer is not None else None
            if stream is not None:
                process.exit(await self._stream(process, stream))
                return
            try:
                stdout, status = await self._responder(command)
            except Exception as exc:  # a responder bug shows up as a failed command
                process.stderr.write(f"responder failed: {type(exc).__name__}: {exc}\n")
                stdout, status = "", 255
            process.stdout.write(stdout)
            process.exit(status)
        except (OSError, asyncssh.Error):
            pass  # the client went away mid-command
        finally:
            with contextlib.suppress(Exception):
                process.close()
            if task is not None:
                self._tasks.discard(task)

    async def _stream(
        self, process: asyncssh.SSHServerProcess[str], stream: AsyncIterator[str | int]
    ) -> int:
        """Print the chunks as they come; the exit status (0 when the chunks end)."""
        self.streams_running += 1
        try:
            async for chunk in stream:
                if isinstance(chunk, int):
                    return chunk
                await self._flowing.wait()
                await self._released.wait()
                process.stdout.write(chunk)
                await process.stdout.drain()
            return 0
        finally:
            self.streams_running -= 1
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]


def generate_key() -> asyncssh.SSHKey:
    """A fresh Ed25519 private key (host or client)."""
    return asyncssh.generate_private_key(KEY_ALG)


async def start_ssh_server(
    responder: Responder,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    host_key: asyncssh.SSHKey | None = None,
    authorized_client_keys: Sequence[asyncssh.SSHKey] | None = None,
    allow_tcp_forwarding: bool = False,
    streamer: Streamer | None = None,
) -> SshServerHandle:
    """Start an SSH server on ``host:port`` (0 = a free port) answering with ``responder``.

    ``host_key`` defaults to a fresh Ed25519 key. ``authorized_client_keys`` are the public
    (or private) keys allowed to log in as any user; when None a client key is generated and
    exposed as ``handle.client_key``. ``allow_tcp_forwarding`` lets clients use the server as
    a ProxyJump host to other loopback ports. ``streamer`` answers long-lived commands
    chunk by chunk (see :data:`Streamer`).
    """
    client_key: asyncssh.SSHKey | None = None
    if authorized_client_keys is None:
        client_key = generate_key()
        authorized_client_keys = [client_key]
    handle = SshServerHandle(
        responder, host, host_key or generate_key(), authorized_client_keys, client_key
    )
    handle.allow_tcp_forwarding = allow_tcp_forwarding
    handle.streamer = streamer
    await handle._listen(port)
    return handle
