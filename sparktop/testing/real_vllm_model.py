"""Build the tiny Llama the real-vLLM tests serve, without a model hub.

Run by :mod:`sparktop.testing.real_vllm` with the vLLM environment's own interpreter
(``<cache>/venv/bin/python real_vllm_model.py OUT_DIR``): it needs ``torch``,
``transformers`` and ``tokenizers``, which sparktop itself does not depend on, and it
imports nothing from sparktop.

The model: a ``LlamaConfig`` with 2 layers, hidden size 256, 4 heads of 64 (vLLM's CPU
attention backend refuses head_dim 16 at the first request), random weights from a fixed
seed saved as bfloat16 safetensors. The tokenizer: byte-level BPE trained with the
``tokenizers`` library on this interpreter's standard-library sources (local, sorted, so a
rebuild gives the same vocabulary), saved as a Hugging Face fast tokenizer with a chat
template. The generated text is noise; every server behaviour (metrics, limits, streaming,
``/tokenize``) is vLLM's own.

Prints one JSON line: the versions used, vocabulary size, parameter count and seconds taken.
"""

from __future__ import annotations

import json
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

VOCAB_SIZE = 4096
HIDDEN_SIZE = 256
INTERMEDIATE_SIZE = 512
LAYERS = 2
HEADS = 4  # head_dim 64
MAX_POSITIONS = 2048
TRAINING_FILES = 400

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
    "{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _training_text() -> Iterator[str]:
    """The first TRAINING_FILES standard-library modules, by sorted name."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py"))[:TRAINING_FILES]:
        yield path.read_text(encoding="utf-8", errors="replace")


def build(out: Path) -> dict[str, object]:
    """Write config, safetensors weights and tokenizer files into ``out``."""
    import tokenizers
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    tokenizer_s = time.monotonic() - started

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("</s>"),
        pad_token_id=tok.token_to_id("<pad>"),
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "vocab_size": tok.get_vocab_size(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "tokenizer_s": round(tokenizer_s, 1),
        "build_s": round(time.monotonic() - started, 1),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: real_vllm_model.py OUT_DIR", file=sys.stderr)
        return 2
    print(json.dumps(build(Path(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
