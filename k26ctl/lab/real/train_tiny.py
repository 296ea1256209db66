"""Build the tiny model real SGLang serves on the lab host, deterministically.

A LlamaForCausalLM (hidden 128, 2 layers, tied embeddings, about 0.2 M parameters) with a 512-token
byte-level BPE trained by the `tokenizers` library on the lab corpus (k26ctl.lab.server.corpus), and a
chat template that renders exactly as the lab's `render_chat` (so the lab suite's prompts are the ones
it was trained on). Fixed seeds, one CPU thread: the same torch build gives the same bytes.

Run with an interpreter that has torch, transformers and tokenizers, such as a release venv:
    /var/cache/k26ctl/sglang/0.5.15/venv/bin/python -m k26ctl.lab.real.train_tiny OUT_DIR [--steps N]
The result is shipped in k26ctl/lab/real/models/k26real-tiny with its SHA256SUMS.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
# Added but not special: decoding keeps them, so SGLang's reasoning parser sees where thinking ends.
THINK_TOKENS = ["<think>", "</think>"]
VOCAB_SIZE = 512
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if thinking is defined and not thinking %}{{ '<think></think>' }}{% endif %}"
    "{% endif %}"
)
SEED = 0
SEQ_LEN = 256
BATCH = 16
PEAK_LR = 3e-3
WARMUP = 30


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args(argv)
    build(args.out, args.steps)
    return 0


def build(out: Path, steps: int) -> None:
    import torch
    import torch.nn.functional as F
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM

    from k26ctl.lab.server.corpus import documents

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(SEED)
    docs = documents()

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_tokens(THINK_TOKENS)
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    vocab = tok.get_vocab_size()

    stream: list[int] = []
    order = list(range(len(docs)))
    for _ in range(60):
        rng.shuffle(order)
        for i in order:
            stream.extend(tok.encode(docs[i]).ids)
    data = torch.tensor(stream)

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|pad|>"],
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), weight_decay=0.01)
    gen = torch.Generator().manual_seed(SEED)
    for step in range(steps):
        scale = (step + 1) / WARMUP if step < WARMUP else 0.5 * (1 + math.cos(math.pi * step / steps))
        for group in opt.param_groups:
            group["lr"] = PEAK_LR * max(scale, 0.05)
        starts = torch.randint(0, data.numel() - SEQ_LEN - 1, (BATCH,), generator=gen)
        window = data[starts.view(-1, 1) + torch.arange(SEQ_LEN + 1)]
        logits = model(input_ids=window[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, vocab), window[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save(str(out / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "model_max_length": 2048,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    generation = {"eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]], "pad_token_id": ids["<|pad|>"]}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
