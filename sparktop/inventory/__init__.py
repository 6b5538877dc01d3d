"""The cluster inventory (``cluster.yaml``, DESIGN.md §3): frozen validated models and the loader.

``load_inventory(path)`` returns an :class:`Inventory` or raises
:class:`~sparktop.errors.UserError` with one line naming the file, line, column and key path.
"""

from __future__ import annotations

from sparktop.inventory.loader import load_inventory, parse_inventory
from sparktop.inventory.models import (
    AlertThresholds,
    EngineConfig,
    Inventory,
    NodeConfig,
    SshSettings,
)
from sparktop.inventory.names import is_valid_host

__all__ = [
    "AlertThresholds",
    "EngineConfig",
    "Inventory",
    "NodeConfig",
    "SshSettings",
    "is_valid_host",
    "load_inventory",
    "parse_inventory",
]
