"""Command line of `python -m k26ctl.lab.serve`: SGLang's flag names, checked the way SGLang does.

GPU-only flags are accepted and ignored so that a unit rendered for a real host runs here unchanged.
Unknown flags are rejected by argparse (exit 2), like SGLang's parser.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from k26ctl.errors import ConfigError
from k26ctl.lab.server.paths import DEFAULT_DRAFT_DIR, DEFAULT_MODEL_DIR

ALGORITHMS = ("NONE", "DFLASH", "DDTREE")


@dataclass
class LabServerArgs:
    model_path: str
    served_model_name: str
    host: str
    port: int
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_draft_tokens: int | None
    speculative_dflash_block_size: int | None
    speculative_ddtree_budget: int | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    attention_backend: str | None
    reasoning_parser: str | None
    tool_call_parser: str | None
    enable_metrics: bool
    api_key: str | None
    tp_size: int
    trust_remote_code: bool
    context_length: int
    mem_fraction_static: float | None
    page_size: int
    disable_overlap_schedule: bool
    max_running_requests: int
    decode_log_interval: int
    watchdog_timeout: float
    log_level: str
    skip_server_warmup: bool
    enable_deterministic_inference: bool = False
    speculative_accept_threshold_single: float = 1.0  # below 1.0: lossy sampled verification
    speculative_accept_threshold_acc: float = 1.0
    lab_step_cost: str | None = None  # k26ctl.lab.server.step_cost: the modelled GPU step time
    lab_draft_order: int | None = None  # the n-gram drafter's context order (None: its config's)
    lab_draft_inverted: bool = False  # the drafter proposes the least likely token: nothing is accepted

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        if data.get("api_key"):
            data["api_key"] = "***"
        return data


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m k26ctl.lab.serve",
        description="CPU stand-in for an SGLang server (k26ctl lab). Takes SGLang's flag names.",
        allow_abbrev=True,  # argparse default, as in SGLang (`--tp` works only through this)
    )
    p.add_argument("--model-path", "--model", default=str(DEFAULT_MODEL_DIR))
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--speculative-algorithm", default=None)
    p.add_argument("--speculative-draft-model-path", default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--speculative-dflash-block-size", type=int, default=None)
    p.add_argument("--speculative-ddtree-budget", type=int, default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-accept-threshold-single", type=float, default=1.0)
    p.add_argument("--speculative-accept-threshold-acc", type=float, default=1.0)
    p.add_argument("--attention-backend", default=None)
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--tool-call-parser", default=None)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--api-key", default=None)
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--page-size", type=int, default=None)
    p.add_argument("--disable-overlap-schedule", action="store_true")
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--decode-log-interval", type=int, default=40)
    p.add_argument("--watchdog-timeout", type=float, default=300)
    p.add_argument("--log-level", default="info")
    p.add_argument("--skip-server-warmup", action="store_true")
    # batch-invariant numerics: the lab's near-tie switch (K26LAB_NEAR_TIE_RATE) has no effect
    p.add_argument("--enable-deterministic-inference", action="store_true")
    # lab-only: step-time model and drafter strength (environment defaults, so profiles need no flag)
    p.add_argument("--lab-step-cost", default=os.environ.get("K26LAB_STEP_COST") or None)
    p.add_argument("--lab-draft-order", type=int, default=_env_int("K26LAB_DRAFT_ORDER"))
    p.add_argument(
        "--lab-draft-inverted", action="store_true", default=os.environ.get("K26LAB_DRAFT_INVERTED") == "1"
    )
    # accepted for compatibility with units rendered for a GPU host; no effect on the CPU
    p.add_argument("--cuda-graph-backend-decode", default=None)
    p.add_argument("--cuda-graph-backend-prefill", default=None)
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--speculative-draft-attention-backend", default=None)
    p.add_argument("--cuda-graph-max-bs-decode", type=int, default=None)
    p.add_argument("--cuda-graph-max-bs", type=int, default=None)
    p.add_argument("--chunked-prefill-size", type=int, default=None)
    p.add_argument("--kv-cache-dtype", default=None)
    return p


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name)
    return int(raw) if raw and raw.strip().isdigit() else None


def _draft_block_size(path: str) -> int | None:
    try:
        return int(json.loads((Path(path) / "config.json").read_text())["block_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def parse_args(argv: list[str] | None = None) -> LabServerArgs:
    """Parse and resolve; argparse errors exit 2, inconsistent values raise ConfigError."""
    ns = build_parser().parse_args(argv)
    algorithm = (ns.speculative_algorithm or "NONE").upper()
    if algorithm not in ALGORITHMS:
        raise ConfigError(
            f"speculative algorithm {ns.speculative_algorithm!r} is not supported by the lab server",
            f"use one of {', '.join(ALGORITHMS)}",
        )
    if ns.tp_size != 1:
        raise ConfigError(
            f"--tp-size {ns.tp_size}: the lab server runs on one CPU process", "use --tp-size 1"
        )
    block = ns.speculative_num_draft_tokens
    if ns.speculative_dflash_block_size is not None:
        if block is not None and block != ns.speculative_dflash_block_size:
            raise ConfigError(
                f"--speculative-num-draft-tokens {block} != --speculative-dflash-block-size "
                f"{ns.speculative_dflash_block_size}",
                "give one of them, or the same value to both",
            )
        block = ns.speculative_dflash_block_size
    draft_path = ns.speculative_draft_model_path
    budget = ns.speculative_ddtree_budget
    page_size = ns.page_size or 1
    max_running = ns.max_running_requests
    if algorithm != "NONE":
        draft_path = draft_path or str(DEFAULT_DRAFT_DIR)
        if block is None:
            block = _draft_block_size(draft_path) or 16
        if block < 2:
            raise ConfigError(f"block size {block} is too small", "use a block size of at least 2")
        max_running = max_running or 48
    if algorithm == "DDTREE":
        if budget is None or budget < 1:
            raise ConfigError("DDTREE needs --speculative-ddtree-budget >= 1", "for example 7 or 16")
        if page_size != 1:
            raise ConfigError(f"DDTREE requires --page-size 1 (got {page_size})", "drop --page-size or set 1")
    elif budget is not None:
        raise ConfigError("--speculative-ddtree-budget needs --speculative-algorithm DDTREE")
    model_path = ns.model_path
    return LabServerArgs(
        model_path=model_path,
        served_model_name=ns.served_model_name or model_path,
        host=ns.host,
        port=ns.port,
        speculative_algorithm=None if algorithm == "NONE" else algorithm,
        speculative_draft_model_path=draft_path if algorithm != "NONE" else None,
        speculative_num_draft_tokens=block if algorithm != "NONE" else None,
        speculative_dflash_block_size=block if algorithm != "NONE" else None,
        speculative_ddtree_budget=budget,
        speculative_num_steps=1 if algorithm != "NONE" else None,
        speculative_eagle_topk=1 if algorithm != "NONE" else None,
        attention_backend=ns.attention_backend,
        reasoning_parser=ns.reasoning_parser,
        tool_call_parser=ns.tool_call_parser,
        enable_metrics=ns.enable_metrics,
        api_key=ns.api_key,
        tp_size=ns.tp_size,
        trust_remote_code=ns.trust_remote_code,
        context_length=ns.context_length or 2048,
        mem_fraction_static=ns.mem_fraction_static,
        page_size=page_size,
        disable_overlap_schedule=ns.disable_overlap_schedule or algorithm == "DDTREE",
        max_running_requests=max_running or 16,
        decode_log_interval=ns.decode_log_interval,
        watchdog_timeout=ns.watchdog_timeout,
        log_level=ns.log_level,
        skip_server_warmup=ns.skip_server_warmup,
        enable_deterministic_inference=ns.enable_deterministic_inference,
        speculative_accept_threshold_single=ns.speculative_accept_threshold_single,
        speculative_accept_threshold_acc=ns.speculative_accept_threshold_acc,
        lab_step_cost=_checked_step_cost(ns.lab_step_cost),
        lab_draft_order=_checked_draft_order(ns.lab_draft_order),
        lab_draft_inverted=ns.lab_draft_inverted,
    )


def _checked_step_cost(text: str | None) -> str | None:
    from k26ctl.lab.server.step_cost import parse_step_cost

    cost = parse_step_cost(text)
    return cost.describe() if cost is not None else None


def _checked_draft_order(order: int | None) -> int | None:
    if order is not None and order < 1:
        raise ConfigError(f"--lab-draft-order {order}: must be at least 1", "for example 3")
    return order
