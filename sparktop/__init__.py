"""sparktop: a terminal monitor for vLLM on small clusters of NVIDIA DGX Spark (GB10) nodes."""

import sys

__version__ = "0.1.0"

# httpx's package imports its own command-line client when it can (click, Pygments and rich's
# syntax and progress modules: ~40 modules, ~3 MB of RSS); sparktop never runs it. An empty
# ``httpx._main`` makes that import fail, as it does where those are not installed, so
# ``httpx.main`` is httpx's own "dependencies not installed" stub in this process only.
sys.modules.setdefault("httpx._main", type(sys)("httpx._main"))


def _no_pydantic_plugins() -> tuple[()]:
    return ()


# pydantic looks for third-party plugins (the ``pydantic`` entry-point group) when it builds
# the first model's validator: importing ``importlib.metadata`` (zipfile, csv, email: ~55
# modules, ~3 MB of RSS) and reading every installed distribution's entry points. sparktop's
# models (the inventory, profiles, recordings) are validated without plugins, as pydantic
# does under ``PYDANTIC_DISABLE_PLUGINS=__all__``; this loader answers so without the scan.
_plugin_loader = type(sys)("pydantic.plugin._loader")
_plugin_loader.get_plugins = _no_pydantic_plugins  # type: ignore[attr-defined]
sys.modules.setdefault("pydantic.plugin._loader", _plugin_loader)
