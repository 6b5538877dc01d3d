"""The TLS handshake of an ``https`` engine, and what a failed one means.

The scheme is the usual mistake: ``https://`` given for a plain-HTTP port, or ``http://`` for
a TLS one. A plain-HTTP server handed a TLS ClientHello either answers in plain text (vLLM's
uvicorn answers ``400`` at once: OpenSSL's "wrong version number"), hangs up, or waits for a
request line that never comes, so the handshake only timed out and the row read ``connect
timed out``. When no ServerHello comes within :data:`HELLO_S` (a TLS server sends it within a
round trip), a second connection asks the port in plain HTTP; if it answers so, the scrape
says it then, not after the timeout. The other way round, :func:`speaks_tls` tells a port
that hung up on a plain request but completes a TLS handshake. Imported only for ``https``
or when a server sent no HTTP answer (never on a monitor's start-up path).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from sparktop.sources.engines.wire import Origin, TLSError

HELLO_S = 0.5
"""How long the ServerHello is waited for before the port is asked whether it speaks plain
HTTP (the handshake goes on meanwhile, up to the client's timeout)."""
PROBE = b"HEAD / HTTP/1.0\r\n\r\n"
PLAIN = "TLS handshake failed: the server answered in plain HTTP (use http:// for this engine)"
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"}
)
"""OpenSSL's reasons for a first answer that is no TLS record (plain text)."""


def tls_reason(exc: BaseException) -> TLSError:
    """The :class:`TLSError` for a handshake that raised ``exc``."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TLSError(f"TLS handshake failed: certificate verify failed: {exc.verify_message}")
    if isinstance(exc, ssl.SSLError) and exc.reason in _NOT_TLS:
        return TLSError(PLAIN, answered=True)
    if isinstance(exc, ssl.SSLError):
        return TLSError(f"TLS handshake failed: {(exc.reason or str(exc)).lower()}")
    return TLSError(
        "TLS handshake failed: the server closed the connection "
        "(a plain-HTTP port? then use http:// for this engine)"
    )


async def handshake(
    writer: asyncio.StreamWriter, context: ssl.SSLContext, origin: Origin, timeout_s: float
) -> None:
    """TLS over ``writer``'s connection, verified for ``origin``'s host, within
    ``timeout_s``. Raises :class:`TLSError` (``answered`` when the port speaks plain HTTP);
    the connection is closed then."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    task = asyncio.ensure_future(writer.start_tls(context, server_hostname=origin.host))
    try:
        done, _ = await asyncio.wait({task}, timeout=min(HELLO_S, timeout_s))
        if not done and await speaks_plain_http(origin, HELLO_S):
            raise TLSError(PLAIN, answered=True)
        async with asyncio.timeout_at(end):
            await task
    except TimeoutError:
        writer.close()
        raise TLSError(
            f"TLS handshake: no answer within {timeout_s:g} s "
            "(the port took the connection; not a TLS server?)"
        ) from None
    except (OSError, EOFError) as exc:  # ssl.SSLError is an OSError
        writer.close()
        failure = tls_reason(exc)
        if not failure.answered and not isinstance(exc, ssl.SSLError):
            # It hung up on the ClientHello: a plain-HTTP server may do that to bytes it
            # cannot read, and answer a plain request.
            failure = TLSError(PLAIN, answered=True) if await speaks_plain_http(origin) else failure
        raise failure from exc
    except BaseException:
        writer.close()
        raise
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _first_bytes(origin: Origin, send: bytes, wait_s: float) -> bytes | None:
    """The first bytes the port answers ``send`` with, or None: no connection, no answer or
    a failure within ``wait_s`` for each step."""
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(wait_s):
            reader, writer = await asyncio.open_connection(origin.host, origin.port)
        writer.write(send)
        data = b""
        async with asyncio.timeout(wait_s):
            while len(data) < 12 and (more := await reader.read(16)):
                data += more  # up to the status code of an HTTP answer
        return data
    except (OSError, EOFError, TimeoutError):
        return None
    finally:
        if writer is not None:
            writer.close()


async def speaks_plain_http(origin: Origin, wait_s: float = HELLO_S) -> bool:
    """True when the port answers a plain ``HEAD /`` in HTTP within ``wait_s`` a step, not
    with a ``400``: nginx, Caddy and Go's servers answer a plain request on their TLS port
    so, and a TLS handshake slower than :data:`HELLO_S` (a far link, a loaded host) must
    still be waited for there."""
    data = await _first_bytes(origin, PROBE, wait_s)
    return data is not None and data.startswith(b"HTTP/") and data[9:12] != b"400"


async def speaks_tls(origin: Origin, wait_s: float = 2 * HELLO_S) -> bool:
    """True when the port completes a TLS handshake within ``wait_s`` (its certificate not
    checked: only the protocol is asked; nothing is sent over it, so a TLS server slow to
    answer a request still counts)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(wait_s):
            _, writer = await asyncio.open_connection(
                origin.host, origin.port, ssl=context, server_hostname=origin.host
            )
        return True
    except (OSError, EOFError, TimeoutError):
        return False
    finally:
        if writer is not None:
            writer.close()
