"""JSON from files and servers sparktop does not control, with nesting that cannot crash it.

The standard decoder recurses once per ``[`` or ``{`` and ends in ``RecursionError`` (not a
``ValueError``) on a few thousand of them, which callers that catch ``ValueError`` for "not
JSON" let through as a traceback. Here such a document is one more kind of bad JSON.
"""

from __future__ import annotations

import json
from typing import Any


class JsonTooDeep(ValueError):
    """The text nests lists or objects too deeply for the decoder."""

    def __init__(self) -> None:
        super().__init__("nested too deeply")
        self.msg = "nested too deeply"


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``; raises ``json.JSONDecodeError`` (a ``ValueError``) for text that
    is not JSON and :class:`JsonTooDeep` (also a ``ValueError``, with ``msg``) for nesting past
    the interpreter's recursion limit."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JsonTooDeep from None
