"""Host-key verification against known_hosts, as OpenSSH does it, with a fix-it message.

asyncssh verifies the key; this module decides *which* known_hosts files to trust (the
inventory's ``known_hosts``, else ``UserKnownHostsFile``/``GlobalKnownHostsFile`` from the SSH
config, else OpenSSH's defaults) and remembers what the host's entries were, so a refused key
can be reported as OpenSSH would: *unknown* (add it with ``ssh-keyscan``), *changed* (remove
the stale entry with ``ssh-keygen -R``; with the time the old key was last verified),
*REVOKED* (marked ``@revoked``: no command, since the fix would re-trust a stolen key), or not
signed by the ``@cert-authority`` trusted for the host. :class:`HostKeyClient` is the asyncssh
client that applies OpenSSH's ``accept-new`` (an unknown key, never a changed one).
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
"""OpenSSH's default ``UserKnownHostsFile`` and ``GlobalKnownHostsFile`` (ssh_config(5))."""


def _expand(path: str | os.PathLike[str]) -> str:
    return os.path.expanduser(os.fspath(path))


def known_hosts_files(
    explicit: str | os.PathLike[str] | None, configured: object
) -> tuple[str, ...]:
    """The known_hosts files to trust, in OpenSSH's order; missing files are skipped.

    ``explicit`` is the inventory's ``known_hosts`` (wins when set). ``configured`` is
    asyncssh's resolved ``SSHClientConnectionOptions.known_hosts``: a list of paths from the
    SSH config, ``[]`` when the config says nothing (use the defaults), or ``None`` for
    ``UserKnownHostsFile none`` (only the global files are left).
    """
    if explicit is not None:
        candidates: Sequence[str] = (_expand(explicit),)
    elif isinstance(configured, list | tuple) and configured:
        candidates = [_expand(p) for p in configured if isinstance(p, str | os.PathLike)]
    elif configured is None:
        candidates = GLOBAL_KNOWN_HOSTS
    else:
        candidates = [_expand(p) for p in USER_KNOWN_HOSTS] + list(GLOBAL_KNOWN_HOSTS)
    return tuple(p for p in candidates if os.path.isfile(p) and os.access(p, os.R_OK))


@dataclass(slots=True)
class KnownHostsMatcher:
    """An asyncssh ``known_hosts`` callable that records what it was asked and found.

    After a failed connect, ``had_entry`` says whether the host had any trusted key (the key
    *changed*) or none (the host is *unknown*); ``host``/``port`` are the names asyncssh
    matched (after ``HostName`` and ``HostKeyAlias`` from the SSH config); set them to the
    resolved host and port up front so the message is right even if asyncssh never asks.
    """

    files: tuple[str, ...]
    host: str = ""
    port: int | None = None
    had_entry: bool = False
    asked: bool = False
    new_key: asyncssh.SSHKey | None = None
    target: str = USER_KNOWN_HOSTS[0]
    """The file named in messages when ``files`` is empty (where a key would be added)."""
    ca_only: bool = False
    """The host's only entries are ``@cert-authority`` keys: it must present a certificate."""
    revoked: bool = False
    """Some key is marked ``@revoked`` for the host."""

    def __call__(self, host: str, addr: str, port: int | None) -> Any:
        self.asked, self.host, self.port = True, host, port
        known = asyncssh.read_known_hosts(list(self.files)) if self.files else None
        if known is None:
            return ((), (), (), (), (), (), ())
        result = tuple(known.match(host, addr, port))
        if port:
            # asyncssh falls back to the port-less entries when ``[host]:port`` has no
            # trusted key, and so drops a ``@revoked [host]:port`` line: keep it, as OpenSSH.
            exact = getattr(known, "_match", None)
            if callable(exact):
                extra = [k for k in exact(host, addr, port)[2] if k not in result[2]]
                result = (result[0], result[1], (*result[2], *extra), *result[3:])
        host_keys, ca_keys, revoked = result[0], result[1], result[2]
        self.had_entry = bool(host_keys or ca_keys)
        self.ca_only = bool(ca_keys) and not host_keys
        self.revoked = bool(revoked)
        return result


def _pattern(host: str, port: int | None) -> str:
    return host if port in (None, 22) else f"[{host}]:{port}"


def host_key_fix(
    matcher: KnownHostsMatcher, reason: str = "", verified_s: float | None = None
) -> str:
    """One line saying why the host key was refused and, where it is safe, the command that
    fixes it. ``reason`` is asyncssh's (``Host key is revoked``…); ``verified_s`` when this
    host's key was last verified (wall clock), for a key that changed since.

    Example: ``host key for [127.0.0.1]:2203 is not in ~/.ssh/known_hosts; check it, then
    run: ssh-keyscan -p 2203 127.0.0.1 >> ~/.ssh/known_hosts``.
    """
    host, port = matcher.host, matcher.port
    target = _tilde(matcher.files[0] if matcher.files else matcher.target)
    port_opt = f"-p {port} " if port not in (None, 22) else ""
    keyscan = f"ssh-keyscan {port_opt}{shlex.quote(host)} >> {target}"
    pattern = _pattern(host, port)
    if "revoked" in reason.lower():
        # As OpenSSH: no advice to remove the entry, which would re-trust a stolen key.
        what = "its CA key" if "ca key" in reason.lower() else "the key it presented"
        return (
            f"REVOKED host key for {pattern}: {what} is marked @revoked in {target}; a stolen "
            "key may be impersonating this host. Not connecting"
        )
    if matcher.ca_only:
        return cert_authority_problem(matcher)
    if matcher.had_entry:
        last = f" since it was last verified at {_clock(verified_s)}" if verified_s else ""
        return (
            f"host key for {pattern} does not match {target} (changed{last}, or someone is "
            f"intercepting); if the change is expected run: ssh-keygen -R "
            f"{shlex.quote(pattern)} -f {target} && {keyscan}"
        )
    return f"host key for {pattern} is not in {target}; check it, then run: {keyscan}"


def cert_authority_problem(matcher: KnownHostsMatcher) -> str:
    """The host is trusted through a ``@cert-authority`` only and showed no certificate from it
    (a key exchange that finds no common host-key type fails this way too)."""
    target = _tilde(matcher.files[0] if matcher.files else matcher.target)
    return (
        f"host key for {_pattern(matcher.host, matcher.port)} not verified: {target} trusts "
        "only a @cert-authority for it, and the server presented no host certificate signed "
        "by it"
    )


def _clock(time_s: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time_s))


def _tilde(path: str) -> str:
    """The path for a shell command line: ``~/…`` under the home directory, quoted."""
    home = str(Path.home())
    if path.startswith(home + os.sep):
        return "~/" + shlex.quote(path[len(home) + 1 :])
    return shlex.quote(path)


def user_known_hosts_file(explicit: str | os.PathLike[str] | None, configured: object) -> str:
    """Where a newly accepted key is written: the inventory's file, the config's first
    ``UserKnownHostsFile``, else ``~/.ssh/known_hosts``."""
    if explicit is not None:
        return _expand(explicit)
    if isinstance(configured, list | tuple) and configured:
        first = configured[0]
        if isinstance(first, str | os.PathLike):
            return _expand(first)
    return _expand(USER_KNOWN_HOSTS[0])


def record_host_key(path: str, matcher: KnownHostsMatcher) -> None:
    """Append ``matcher.new_key`` for ``matcher.host``/``port`` to a known_hosts file."""
    if matcher.new_key is None:
        return
    line = matcher.new_key.export_public_key("openssh").decode("ascii").split()[:2]
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    with open(path, "a", encoding="ascii") as out:
        out.write(f"{_pattern(matcher.host, matcher.port)} {' '.join(line)}\n")


class HostKeyClient(asyncssh.SSHClient):
    """Accepts an unknown host key only with ``accept_new``; a changed key is always refused."""

    def __init__(
        self,
        matcher: KnownHostsMatcher,
        accept_new: bool,
        accepted: Callable[[asyncssh.SSHClientConnection], None],
    ) -> None:
        self._matcher = matcher
        self._accept_new = accept_new
        self._accepted = accepted

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        """The TCP connection is up (before the SSH handshake): a timeout after this is a
        node that took the connection and did not answer, not one never reached."""
        self._accepted(conn)

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        if not self._accept_new or self._matcher.had_entry:
            return False
        # Recorded only after the connection succeeds (the server proved it holds the key).
        self._matcher.new_key = key
        return True
