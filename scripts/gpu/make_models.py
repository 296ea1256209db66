"""Make the GPU check's models (on the GPU machine, about a minute; works on a CPU, slowly).

usage: python3 scripts/gpu/make_models.py OUTDIR [--random-only]
       env: TARGET_STEPS (1500), DRAFT_STEPS (800)

--random-only makes again, from OUTDIR/lab-target's tokenizer and config, the models that have random
weights (the same on every machine: seeded, initialised on the CPU), so only the two trained models
need to travel from the run that trained them.

- lab-target:    a 3.7 M-parameter Llama (4 layers, hidden 256) trained on k26ctl's lab corpus, with
                 its own 1024-token byte-level BPE tokenizer and a chat template: coherent on the lab
                 suite, greedy-deterministic;
- random-target: the same architecture with random weights (token soup behind a healthy /health);
- lab-draft:     a 0.46 M Llama (1 layer, hidden 128), same tokenizer, trained on the same corpus: the
                 STANDALONE draft model, which accepts well;
- dflash-b8, dflash-b16: DFlash drafters (SGLang's DFlashDraftModel layout) with random weights,
                 reading the target's layers [0, 2] (capture ids are layer id + 1, so an id of
                 num_layers - 1 never fires): they serve, and accept nothing.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|pad|>", "<|MASK|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if (thinking is defined and not thinking) or (enable_thinking is defined and not enable_thinking) %}"
    "{{ '<think></think>' }}{% endif %}{% endif %}"
)
HIDDEN, LAYERS = 256, 4
DFLASH_LAYERS = [0, 2]


def train_tokenizer(docs: list[str]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def write_tokenizer(tok: Any, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    tok.save(str(directory / "tokenizer.json"))
    config = {
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
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    generation = {
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|pad|>"],
        "do_sample": False,
    }
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=2))


def llama_config(vocab: int, ids: dict[str, int], hidden: int, layers: int, inter: int) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|pad|>"],
        tie_word_embeddings=False,
    )


def train(config: Any, stream: Any, steps: int, name: str, device: str) -> Any:
    """Next-token training on random windows of the corpus (AdamW, warm-up then cosine)."""
    import torch
    import torch.nn.functional as F
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device)
    if steps <= 0:
        return model
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.98), weight_decay=0.01)
    seq, batch, warm = 256, 32, 50
    started = time.time()
    for step in range(steps):
        cosine = 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))
        scale = (step + 1) / warm if step < warm else cosine
        for group in opt.param_groups:
            group["lr"] = 2e-3 * max(scale, 0.05)
        starts = torch.randint(0, stream.numel() - seq - 1, (batch,), device=device)
        window = stream[starts.view(-1, 1) + torch.arange(seq + 1, device=device)]
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = model(input_ids=window[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, config.vocab_size), window[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 250 == 0 or step == steps - 1:
            print(f"{name} step {step} loss {loss.item():.3f} ({time.time() - started:.0f} s)", flush=True)
    return model


def save_model(model: Any, tok: Any, directory: Path) -> None:
    import torch

    model.to(torch.bfloat16).save_pretrained(str(directory), safe_serialization=True)
    write_tokenizer(tok, directory)


def dflash_drafter(directory: Path, block: int, vocab: int, ids: dict[str, int], tok: Any) -> None:
    """Random-weight DFlash drafter: one layer, per-head q/k norms, fc over the captured features."""
    import torch
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    heads, kv_heads, head_dim, inter = 4, 2, HIDDEN // 4, 768
    config = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "num_hidden_layers": 1,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": inter,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 2048,
        "vocab_size": vocab,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "block_size": block,
        "num_target_layers": LAYERS,
        "dflash_config": {
            "block_size": block,
            "target_layer_ids": DFLASH_LAYERS,
            "mask_token": "<|MASK|>",
            "mask_token_id": ids["<|MASK|>"],
        },
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|pad|>"],
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    gen = torch.Generator().manual_seed(block)

    def rand(*shape: int) -> Any:
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    def ones(n: int) -> Any:
        return torch.ones(n, dtype=torch.bfloat16)

    p = "layers.0."
    tensors = {
        "fc.weight": rand(HIDDEN, len(DFLASH_LAYERS) * HIDDEN),
        "hidden_norm.weight": ones(HIDDEN),
        "norm.weight": ones(HIDDEN),
        p + "self_attn.q_proj.weight": rand(heads * head_dim, HIDDEN),
        p + "self_attn.k_proj.weight": rand(kv_heads * head_dim, HIDDEN),
        p + "self_attn.v_proj.weight": rand(kv_heads * head_dim, HIDDEN),
        p + "self_attn.o_proj.weight": rand(HIDDEN, heads * head_dim),
        p + "self_attn.q_norm.weight": ones(head_dim),
        p + "self_attn.k_norm.weight": ones(head_dim),
        p + "input_layernorm.weight": ones(HIDDEN),
        p + "post_attention_layernorm.weight": ones(HIDDEN),
        p + "mlp.gate_proj.weight": rand(inter, HIDDEN),
        p + "mlp.up_proj.weight": rand(inter, HIDDEN),
        p + "mlp.down_proj.weight": rand(HIDDEN, inter),
    }
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(tok, directory)


def random_models(out: Path, tok: Any) -> None:
    """random-target and the DFlash drafters: seeded and initialised on the CPU, so every machine
    makes the same weights."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    config = LlamaConfig.from_pretrained(str(out / "lab-target"))
    torch.manual_seed(0)
    save_model(LlamaForCausalLM(config), tok, out / "random-target")
    for block in (8, 16):
        dflash_drafter(out / f"dflash-b{block}", block, tok.get_vocab_size(), ids, tok)


def main(out: Path, random_only: bool = False) -> None:
    import torch
    from tokenizers import Tokenizer

    from k26ctl.lab.server.corpus import documents

    if random_only:
        random_models(out, Tokenizer.from_file(str(out / "lab-target" / "tokenizer.json")))
        print("models:", sorted(p.name for p in out.iterdir()), flush=True)
        return

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    random.seed(0)
    docs = documents()
    tok = train_tokenizer(docs)
    vocab = tok.get_vocab_size()
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    corpus: list[int] = []
    order = list(range(len(docs)))
    for _ in range(40):
        random.shuffle(order)
        for i in order:
            corpus.extend(tok.encode(docs[i]).ids)
    stream = torch.tensor(corpus, device=device)
    print(f"corpus {len(corpus) // 40} tokens per pass, vocab {vocab}, device {device}", flush=True)
    target_steps = int(os.environ.get("TARGET_STEPS", "1500"))
    draft_steps = int(os.environ.get("DRAFT_STEPS", "800"))
    target = llama_config(vocab, ids, HIDDEN, LAYERS, 768)
    save_model(train(target, stream, target_steps, "lab-target", device), tok, out / "lab-target")
    draft = llama_config(vocab, ids, 128, 1, 384)
    save_model(train(draft, stream, draft_steps, "lab-draft", device), tok, out / "lab-draft")
    random_models(out, tok)
    print("models:", sorted(p.name for p in out.iterdir()), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), random_only="--random-only" in sys.argv[2:])
