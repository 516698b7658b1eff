"""Make a tiny random-weight Llama model plus a locally trained tokenizer.

Run it with the vLLM venv's python (it needs torch, transformers, tokenizers):

    ~/.cache/agentreplay/vllm-cpu/bin/python scripts/make_tiny_model.py OUT_DIR [--seed 0]

No model can be downloaded on the test machines, so integration tests make one
from a fixed seed. The weights are random: the model's text is noise, but it
runs through vLLM's whole serving path (tokenizer, chat template, prefix cache,
streaming) like a real one. Idempotent: a complete OUT_DIR is left as it is.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<|pad|>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
DONE_MARKER = ".complete"

_WORDS = (
    "agent session replay request token prompt cache block server client stream "
    "decode prefill latency throughput queue batch model context window file edit "
    "read write search test build error retry tool call result patch diff commit "
    "branch merge function class method import return value string integer list "
    "dict tuple async await yield lambda python rust golang java typescript shell "
    "kernel memory thread process socket buffer parser lexer grammar syntax tree "
    "node graph edge vertex matrix vector tensor gradient weight layer attention "
    "head embedding vocabulary sample temperature seed random uniform normal mean "
    "median percentile histogram metric counter gauge label engine worker lane"
).split()
_PUNCT = [".", ",", ";", ":", "!", "?", "()", "[]", "{}", "->", "==", "+=", "::", "/*", "*/"]


def _corpus(seed: int, lines: int = 6000) -> list[str]:
    """Varied deterministic text: words, identifiers, numbers, code-ish punctuation.

    A few repeated lines give a vocabulary of only a few hundred merges; mixing
    random identifiers and numbers gives the trainer enough distinct pairs to
    reach ``VOCAB_SIZE``.
    """
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789"
    out = []
    for _ in range(lines):
        parts = []
        for _ in range(rng.randint(4, 16)):
            kind = rng.random()
            if kind < 0.55:
                parts.append(rng.choice(_WORDS))
            elif kind < 0.7:
                a, b = rng.choice(_WORDS), rng.choice(_WORDS)
                parts.append(rng.choice([f"{a}_{b}", f"{a}{b.capitalize()}", f"{a}.{b}()"]))
            elif kind < 0.8:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 6))))
            elif kind < 0.9:
                parts.append(rng.choice(_PUNCT))
            else:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(2, 7))))
        out.append(" " * rng.choice([0, 0, 4, 8]) + " ".join(parts))
    return out


def _is_complete(out: Path) -> bool:
    return (out / DONE_MARKER).exists() and all((out / f).exists() for f in REQUIRED_FILES)


def _make_tokenizer(out: Path, seed: int) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<|pad|>",
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return tok.get_vocab_size()


def _make_model(out: Path, seed: int, vocab_size: int, bos: int, eos: int, pad: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,  # head_dim 64: the CPU attention kernels reject 16
        num_key_value_heads=1,
        max_position_embeddings=8192,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.generation_config.bos_token_id = bos
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(out, safe_serialization=True)


def make_tiny_model(out: Path, seed: int = 0) -> bool:
    """Write the model into ``out``; return False when it was already complete."""
    if _is_complete(out):
        return False
    out.mkdir(parents=True, exist_ok=True)
    (out / DONE_MARKER).unlink(missing_ok=True)
    vocab = _make_tokenizer(out, seed)
    ids = json.loads((out / "tokenizer.json").read_text())["model"]["vocab"]
    _make_model(out, seed, vocab, ids["<s>"], ids["</s>"], ids["<|pad|>"])
    (out / DONE_MARKER).write_text(json.dumps({"seed": seed, "vocab_size": vocab}) + "\n")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    made = make_tiny_model(args.out_dir, args.seed)
    state = "made" if made else "already complete"
    print(f"tiny model {state}: {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
