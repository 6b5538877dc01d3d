"""Convert the real-vLLM tests' tiny Llama to GGUF with llama.cpp's own converter.

Run by :mod:`sparktop.testing.real_llamacpp` with the vLLM environment's interpreter (the
converter imports torch, which sparktop does not depend on)::

    <vllm venv>/bin/python real_llamacpp_convert.py LLAMA_CPP_DIR MODEL_DIR OUT.gguf

``convert_hf_to_gguf.py`` names a BPE tokenizer's pre-tokenizer by hashing how it splits a
probe text, and refuses one it does not know; the tiny model's tokenizer is trained locally
(byte-level BPE with GPT-2's split rule), so it is declared as GPT-2's (``gpt-2``) here, the one
change to the converter's run. Weights are written as f32 (the page of
``../shared/fixtures/real/SOURCES.md`` came from such a file). Imports nothing from sparktop.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: real_llamacpp_convert.py LLAMA_CPP_DIR MODEL_DIR OUT.gguf", file=sys.stderr)
        return 2
    llama, model, out = Path(argv[1]), argv[2], argv[3]
    sys.path[:0] = [str(llama), str(llama / "gguf-py")]
    from conversion import base  # llama.cpp's converter package, on the path just added

    def gpt2_pre_tokenizer(self: object, tokenizer: object) -> str:
        return "gpt-2"  # the name llama.cpp's vocabulary loader knows (not "gpt2")

    base.TextModel.get_vocab_base_pre = gpt2_pre_tokenizer
    script = str(llama / "convert_hf_to_gguf.py")
    sys.argv = [script, model, "--outfile", out, "--outtype", "f32"]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
