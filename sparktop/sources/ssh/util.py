"""Small helpers of the SSH node source: cipher order, failure reasons, paths, clock text,
asyncssh connection arguments from the SSH settings, which local SSH file is missing, and
what a server sent before (or instead of) its SSH version line."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import asyncssh

from sparktop.safe_text import printable

if TYPE_CHECKING:
    from sparktop.inventory import SshSettings


def gcm_first(algs: Sequence[bytes]) -> list[str]:
    """asyncssh's default ciphers with AES-GCM first, used when no SSH config names Ciphers.

    asyncssh drives chacha20-poly1305 with several OpenSSL calls per packet and AES-GCM with
    one: a poll costs about 30 % less CPU on this side (and on an asyncssh server).
    """
    gcm = [a for a in algs if b"-gcm@" in a]
    return [a.decode("ascii") for a in (*gcm, *(a for a in algs if a not in gcm))]


def clock_text(time_s: float) -> str:
    """Local wall-clock time as ``HH:MM:SS``."""
    return time.strftime("%H:%M:%S", time.localtime(time_s))


def failure_reason(exc: BaseException) -> str:
    """A short, secret-free reason for a connection-level failure."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host name ({exc.strerror})"
    if isinstance(exc, asyncssh.ChannelOpenError):
        return f"session refused: {exc.reason}"
    if isinstance(exc, asyncssh.ConnectionLost):
        return "connection lost"
    if isinstance(exc, asyncssh.Error):
        return exc.reason or type(exc).__name__
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def expand_path(value: object) -> str | None:
    """A configured path with ``~`` expanded (None when unset)."""
    return os.path.expanduser(os.fspath(value)) if value else None  # type: ignore[call-overload]


def connect_kwargs(s: SshSettings, host: str) -> dict[str, Any]:
    """asyncssh arguments: the SSH config applies, then the inventory's overrides."""
    kwargs: dict[str, Any] = {
        "host": host,
        "connect_timeout": s.connect_timeout_s,
        "encoding": "utf-8",
        "errors": "replace",
    }
    config = expand_path(s.config)
    if config is not None:
        kwargs["config"] = [config]
    if s.port is not None:
        kwargs["port"] = int(s.port)
    if s.user is not None:
        kwargs["username"] = str(s.user)
    identity = expand_path(s.identity_file)
    if identity is not None:
        kwargs["client_keys"] = [identity]
        # Like OpenSSH: an encrypted key is left to the agent rather than failing here.
        kwargs["ignore_encrypted"] = True
    return kwargs


def local_file_problem(settings: SshSettings, exc: BaseException) -> str | None:
    """``identity file /tmp/k/id_ed25519 not found`` when a file of this machine's SSH
    settings is missing or unreadable (None for anything else): without it the message
    would be a bare "No such file or directory"."""
    name = getattr(exc, "filename", None)
    if not isinstance(exc, OSError) or not name:
        return None
    path = os.path.expanduser(os.fsdecode(name))
    roles = {
        expand_path(settings.identity_file): "identity file",
        expand_path(settings.known_hosts): "known_hosts file",
        expand_path(settings.config): "SSH config file",
    }
    role = roles.get(path, "file")
    if isinstance(exc, FileNotFoundError):
        return f"{role} {path} not found"
    return f"{role} {path}: {exc.strerror or type(exc).__name__}"


HEARD_MAX = 512
"""Bytes of a server's first words kept to name a port that is no SSH server."""
HEARD_LINE_MAX = 60


class Heard:
    """The first ``HEARD_MAX`` bytes a server sent on a new SSH connection. asyncssh skips
    every line before an ``SSH-`` version line (RFC 4253 allows a server such lines), so a
    port speaking another protocol could only be described by what did not come."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = b""

    def listen(self, conn: asyncssh.SSHClientConnection) -> None:
        """Keep what ``conn`` receives until :meth:`stop` (call before any byte arrives)."""
        receive = conn.data_received

        def data_received(data: bytes, datatype: int | None = None) -> None:
            if len(self.data) < HEARD_MAX:
                self.data += data[: HEARD_MAX - len(self.data)]
            receive(data, datatype)

        conn.data_received = data_received  # type: ignore[method-assign]

    @staticmethod
    def stop(conn: asyncssh.SSHClientConnection) -> None:
        """``conn`` receives as asyncssh made it again (the handshake is done)."""
        vars(conn).pop("data_received", None)

    def line(self) -> str | None:
        """The first line that is not blank, printable and at most ``HEARD_LINE_MAX``
        characters (``…`` when cut); None when nothing else came."""
        for raw in self.data.split(b"\n"):
            text = raw.decode("utf-8", "replace").strip()
            if text:
                cut = len(text) > HEARD_LINE_MAX
                return printable(text[:HEARD_LINE_MAX]) + ("…" if cut else "")
        return None

    def closed(self) -> str:
        """Why a port that closed the connection without an SSH version line is no SSH
        server, naming what it sent (an HTTP server's ``400 Bad Request``)."""
        line = self.line()
        if line is None:
            return "it closed the connection without an SSH version line"
        return f'it sent "{line}" and closed the connection'

    def held(self, timeout_s: float) -> str | None:
        """Why a port that sent no SSH version line in ``timeout_s`` seconds is no SSH
        server, naming what it sent instead; None when it sent nothing (a hung sshd)."""
        line = self.line()
        if line is None:
            return None
        return f'it sent "{line}" and no SSH version line within {timeout_s:g} s'
