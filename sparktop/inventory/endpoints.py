"""Engines named on the command line (``--endpoint URL``, repeatable) instead of in an
inventory: the monitor or ``snapshot`` on this machine and those servers.

Each URL goes through the inventory's own checks (:func:`~sparktop.inventory.names.check_url`
via :class:`~sparktop.inventory.models.EngineConfig`), so a bad one is refused with the
same words, its credentials and query values never shown; the engine is named by its
address (``127.0.0.1:8000``, or ``host:port/path`` behind a proxy), without them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from sparktop.errors import UserError
from sparktop.inventory.models import EngineConfig
from sparktop.inventory.names import check_url
from sparktop.safe_text import without_credentials

FLAG = "--endpoint"


def endpoint_url(text: str) -> str:
    """``text`` as an engine's base URL (trailing ``/`` cut); :class:`UserError` naming the
    problem as the inventory's ``url:`` does (``invalid URL 'ftp://x': expected http:// or
    https://``)."""
    try:
        return check_url(text)
    except PydanticCustomError as exc:
        raise UserError(exc.message()) from None


def endpoint_name(url: str) -> str:
    """The name an ``--endpoint`` engine is shown by: its address without the scheme and
    without secrets (``http://u:pw@10.0.0.1:8000/`` → ``10.0.0.1:8000``)."""
    shown = without_credentials(url).split("://", 1)[-1]
    return shown.rstrip("/")


def endpoint_engines(
    urls: Sequence[str], kind: str | None = None, api_key_env: str | None = None
) -> tuple[EngineConfig, ...]:
    """One engine per URL, in order, read like an inventory engine of ``kind`` (None: the
    default kind, the page then says which kind serves it) with its bearer token in
    ``api_key_env``. Raises :class:`UserError` for a bad URL, kind or variable name, or a
    server given twice."""
    engines: list[EngineConfig] = []
    seen: set[str] = set()
    for url in urls:
        fields = {"name": "endpoint", "url": endpoint_url(url), "api_key_env": api_key_env}
        if kind is not None:
            fields["kind"] = kind
        try:
            config = EngineConfig.model_validate(fields)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            where = {"kind": "--kind", "api_key_env": "--api-key-env"}.get(
                str(error["loc"][0]) if error["loc"] else "", FLAG
            )
            raise UserError(f"{where}: {error['msg']}") from None
        name = endpoint_name(config.url)
        if name in seen:
            raise UserError(f"{FLAG} {name} given twice")
        seen.add(name)
        engines.append(config.model_copy(update={"name": name}))
    return tuple(engines)
