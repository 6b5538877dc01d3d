"""sparktop: a terminal monitor for vLLM on small clusters of NVIDIA DGX Spark (GB10) nodes."""

import sys

__version__ = "0.1.0"

# httpx's package imports its own command-line client when it can (click, Pygments and rich's
# syntax and progress modules: ~40 modules, ~3 MB of RSS); sparktop never runs it. An empty
# ``httpx._main`` makes that import fail, as it does where those are not installed, so
# ``httpx.main`` is httpx's own "dependencies not installed" stub in this process only.
sys.modules.setdefault("httpx._main", type(sys)("httpx._main"))
