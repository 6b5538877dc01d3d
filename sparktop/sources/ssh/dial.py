"""Opening an SSH connection to a node as OpenSSH would, naming what answered when it is not
an SSH server.

:func:`dial` resolves ``~/.ssh/config`` for the host (asyncssh's options), picks the
known_hosts files that apply, verifies the host key (``accept_new``: OpenSSH's
``accept-new``, recording an unknown key, never a changed one) and tells a port that speaks
another protocol (:class:`NotSsh`: its first line, printable) from a hung sshd (a
``TimeoutError``) and a refused host key (:class:`HostKeyRefused`, with the command that fixes
it). Other asyncssh and OS errors propagate to the caller, which turns them into the node's
row.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import asyncssh
from asyncssh.encryption import get_default_encryption_algs
from asyncssh.packet import PacketDecodeError

from sparktop.sources.ssh.hostkeys import (
    HostKeyClient,
    KnownHostsMatcher,
    cert_authority_problem,
    host_key_fix,
    known_hosts_files,
    record_host_key,
    user_known_hosts_file,
)
from sparktop.sources.ssh.util import Heard, connect_kwargs, expand_path, gcm_first

if TYPE_CHECKING:
    from sparktop.inventory import SshSettings

log = logging.getLogger(__name__)

CONNECT_MARGIN_S = 1.0
"""Safety net beyond asyncssh's own ``connect_timeout``."""


class NotSsh(Exception):
    """The port answered in another protocol; ``message``: "not an SSH server (why)"."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.message = f"not an SSH server ({why})"


class HostKeyRefused(Exception):
    """The host key could not be verified; ``message`` says why and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def dial(
    settings: SshSettings,
    host: str,
    *,
    accept_new: bool,
    verified_s: float | None,
    on_accepted: Callable[[], None],
    name: str,
) -> asyncssh.SSHClientConnection:
    """A verified connection to ``host``; ``on_accepted`` is called once TCP is accepted
    (so a timeout after it is a hung sshd, not an unreachable host). ``verified_s``: when
    this node's key was last verified (the fix text says so). Raises :class:`NotSsh`,
    :class:`HostKeyRefused`, ``TimeoutError`` (``connect_timeout_s`` +
    :data:`CONNECT_MARGIN_S`), ``FileNotFoundError``/``IsADirectoryError`` for a
    known_hosts path that cannot be used, and asyncssh's errors."""
    known_hosts = expand_path(settings.known_hosts)
    if known_hosts is not None and os.path.isdir(known_hosts):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), known_hosts)
    if known_hosts is not None and not accept_new and not os.path.exists(known_hosts):
        # Nothing could be trusted; say so rather than "not in known_hosts" (accept-new
        # creates the file, as OpenSSH does).
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), known_hosts)
    kwargs = connect_kwargs(settings, host)
    # Resolve the SSH config for this host to learn which known_hosts files apply.
    options = await asyncssh.SSHClientConnectionOptions.construct(**kwargs)
    if list(options.encryption_algs) == get_default_encryption_algs():
        kwargs["encryption_algs"] = gcm_first(options.encryption_algs)
    files = known_hosts_files(settings.known_hosts, options.known_hosts)
    target = user_known_hosts_file(settings.known_hosts, options.known_hosts)
    matcher = KnownHostsMatcher(files, host=options.host, port=options.port, target=target)
    handshake: list[asyncssh.SSHClientConnection] = []
    heard = Heard()

    def accepted(conn: asyncssh.SSHClientConnection) -> None:
        on_accepted()
        handshake.append(conn)
        heard.listen(conn)

    try:
        async with asyncio.timeout(settings.connect_timeout_s + CONNECT_MARGIN_S):
            conn = await asyncssh.connect(
                **kwargs,
                known_hosts=matcher,
                client_factory=lambda: HostKeyClient(matcher, accept_new, accepted),
            )
    except asyncssh.HostKeyNotVerifiable as exc:
        problem = host_key_fix(matcher, exc.reason, verified_s)
        raise HostKeyRefused(problem) from None
    except (asyncssh.KeyExchangeFailed, asyncssh.ConnectionLost, ConnectionResetError):
        if matcher.ca_only:  # only certificate host-key types were offered: no match
            raise HostKeyRefused(cert_authority_problem(matcher)) from None
        if handshake and not handshake[0].get_extra_info("server_version"):
            # An HTTP server on the port: it answers our version line and hangs up.
            raise NotSsh(heard.closed()) from None
        raise
    except TimeoutError:
        # Words but no version line (a banner, escape sequences): another protocol, not
        # a hung sshd ("no SSH answer"), which sends nothing.
        versionless = handshake and not handshake[0].get_extra_info("server_version")
        if versionless and (why := heard.held(settings.connect_timeout_s)):
            raise NotSsh(why) from None
        raise
    except (PacketDecodeError, asyncssh.ProtocolError, asyncssh.ProtocolNotSupported) as exc:
        # Garbage where SSH packets belong: the settings are not at fault.
        raise NotSsh(f"garbled SSH answer: {exc}") from None
    heard.stop(conn)
    if matcher.new_key is not None:
        record_host_key(target, matcher)
        log.warning("%s: added the new host key to %s", name, target)
    return conn
