"""`python -m k26ctl.lab.serve`: the CPU stand-in for `python -m sglang.launch_server`.

Environment switches (lab only): K26LAB_UNVISITED=nan|stale, K26LAB_BUG_SCOPE=all|mask-only,
K26LAB_NEAR_TIE_RATE=R (near-tie argmax flips that depend on the batch shape; K26LAB_NEAR_TIE_GAP,
K26LAB_NEAR_TIE_SEED), K26LAB_VERIFY_FAULT=none|second-request|tool-arguments (K26LAB_FAULT_GAP;
see lab/server/numerics.py),
K26LAB_FAULT_SWITCH=PATH (verify fault or mask bug on and off while serving: lab/server/fault_switch.py),
K26LAB_LOAD_SECONDS=N (stretch loading to N seconds), K26LAB_FAULT=exit-during-load|scheduler-crash|
hang|malformed, K26LAB_HEALTH_TIMEOUT (seconds, default 20). SGLANG_DDTREE_MAX_TOPK caps the DDTree
width per depth. K26LAB_STEP_COST (or --lab-step-cost) paces steps by a modelled GPU step time
(k26ctl/lab/step_cost.py); K26LAB_DRAFT_ORDER (or --lab-draft-order) weakens the n-gram drafter;
K26LAB_DRAFT_INVERTED=1 (or --lab-draft-inverted) makes it propose the least likely token (a drafter
whose drafts are all rejected).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from k26ctl.lab.server.http_api import LabState

FAULTS = ("exit-during-load", "scheduler-crash", "hang", "malformed")
NUM_SHARDS = 16
_print_lock = threading.Lock()


def log(message: str, tp0: bool = False) -> None:
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    with _print_lock:
        sys.stdout.write(f"[{stamp}{' TP0' if tp0 else ''}] {message}\n")
        sys.stdout.flush()


def _progress(done: int, total: int, started: float) -> None:
    """One update of the load bar as SGLang's tqdm draws it (BAR_FORMAT, desc of the default
    multi-thread loader): to stderr, each update ended by a carriage return and only the last by a
    newline, so journald keeps the whole bar as ONE record written when loading is over."""
    elapsed = time.monotonic() - started
    rate = done / elapsed if elapsed > 0 and done else 0.0
    remaining = (total - done) / rate if rate else 0.0

    def clock(seconds: float) -> str:
        return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"

    speed = f"{rate:.2f}it/s" if rate else "?it/s"
    with _print_lock:
        sys.stderr.write(
            f"Multi-thread loading shards: {round(100 * done / total):3d}% Completed | {done}/{total} "
            f"[{clock(elapsed)}<{clock(remaining) if rate else '?'}, {speed}]"
            + ("\n" if done == total else "\r")
        )
        sys.stderr.flush()


def _load(args, fault: str | None, gpus):  # type: ignore[no-untyped-def]
    """Import the tree, load weights (with progress) and build the engine. Returns (engine, info)."""
    import torch

    from k26ctl.lab.server.drafter import NGramDrafter
    from k26ctl.lab.server.engine import Engine, SpecSettings
    from k26ctl.lab.server.numerics import Numerics
    from k26ctl.lab.server.tree_loader import import_tree
    from k26ctl.lab.server.weights import load_model

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    tree = import_tree()
    tree.lab_memory.configure(
        unvisited=os.environ.get("K26LAB_UNVISITED", "nan"), scope=os.environ.get("K26LAB_BUG_SCOPE", "all")
    )
    numerics = Numerics.from_env()
    if args.enable_deterministic_inference:
        numerics = dataclasses.replace(numerics, near_tie_rate=0.0)
    load_seconds = float(os.environ.get("K26LAB_LOAD_SECONDS", "0") or 0)
    started = time.monotonic()
    # SGLang's lines (model_executor/model_runner.py), with the simulated GPU's figures
    log(f"Load weight begin. avail mem={gpus.avail_gb():.2f} GB", tp0=True)
    model_dir = Path(args.model_path)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"model path {model_dir} does not exist or is not a directory")
    gpus.loading(0.0)
    _progress(0, NUM_SHARDS, started)
    model = load_model(model_dir)
    for shard in range(1, NUM_SHARDS + 1):
        if load_seconds > 0:
            time.sleep(load_seconds / NUM_SHARDS)
        if fault == "exit-during-load" and shard == NUM_SHARDS // 2:
            sys.stderr.write("\n")  # tqdm's bar is closed by the exception
            raise RuntimeError(
                "lab fault K26LAB_FAULT=exit-during-load: failed while loading shard " + str(shard)
            )
        gpus.loading(shard / NUM_SHARDS)
        _progress(shard, NUM_SHARDS, started)
    log(
        f"Load weight end. elapsed={time.monotonic() - started:.2f} s, "
        f"type={model.config.to_json()['architectures'][0]}, "
        f"avail mem={gpus.avail_gb():.2f} GB, mem usage={gpus.weights_gb():.2f} GB.",
        tp0=True,
    )
    spec = SpecSettings(algorithm=args.speculative_algorithm or "NONE")
    drafter = None
    if args.speculative_algorithm:
        from k26ctl.lab.server.ddtree import max_topk_from_env

        spec = SpecSettings(
            algorithm=args.speculative_algorithm,
            block_size=args.speculative_num_draft_tokens,
            budget=args.speculative_ddtree_budget,
            max_topk=max_topk_from_env(),
        )
        drafter = NGramDrafter.load(Path(args.speculative_draft_model_path), model.config.vocab_size)
        if drafter.block_size != spec.block_size:
            drafter.block_size = spec.block_size
        if args.lab_draft_order is not None:
            drafter.max_order = args.lab_draft_order
        drafter.inverted = args.lab_draft_inverted
    engine = Engine(
        model,
        tree,
        spec,
        drafter,
        server_args=args,
        max_running_requests=args.max_running_requests,
        context_length=args.context_length,
        numerics=numerics,
    )
    pool = engine.token_to_kv_pool
    gpus.pool_allocated()
    k_size_gb = pool.size * model.config.hidden_size * 4 * model.config.num_hidden_layers / 2**30
    log(
        f"KV Cache is allocated. #tokens: {pool.size}, "
        f"K size: {k_size_gb:.4f} GB, V size: {k_size_gb:.4f} GB",
        tp0=True,
    )
    info = {
        "tree": str(tree.root),
        "backend_file": str(tree.backend_file),
        "target_backend_num_draft_tokens": engine.target_backend_width,
        "draft_backend_num_draft_tokens": engine.draft_backend_width,
        "verify_width": spec.verify_width if args.speculative_algorithm else None,
        "unvisited": tree.lab_memory.unvisited_mode(),
        "bug_scope": tree.lab_memory.bug_scope(),
        "max_topk": spec.max_topk,
        "near_tie_rate": numerics.near_tie_rate,
        "verify_fault": numerics.verify_fault,
        "step_cost": args.lab_step_cost,
        "draft_order": drafter.max_order if drafter is not None else None,
    }
    log(f"Attention backend: TritonAttnBackend from {tree.backend_file}", tp0=True)
    if args.speculative_algorithm == "DDTREE":
        log(
            f"Initialized DDTree worker. block_size={spec.block_size}, tree_budget={spec.budget}, "
            f"max_tree_nodes={spec.verify_width}",
            tp0=True,
        )
    elif args.speculative_algorithm == "DFLASH":
        log(f"Initialized DFlash worker. block_size={spec.block_size}", tp0=True)
    return engine, info


def main(argv: list[str] | None = None) -> int:
    from k26ctl.errors import K26Error
    from k26ctl.lab.server.server_args import parse_args

    try:
        args = parse_args(argv)
    except K26Error as exc:
        log(f"Error in server args: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        return 1
    fault = os.environ.get("K26LAB_FAULT") or None
    if fault is not None and fault not in FAULTS:
        log(f"Error: K26LAB_FAULT={fault!r} is not one of {', '.join(FAULTS)}")
        return 1
    log(f"server_args={args.to_json()}")

    from k26ctl.lab.server.gpu_memory import SimulatedGpus
    from k26ctl.lab.server.http_api import LabState

    state = LabState(args, fault, log)
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    gpus = SimulatedGpus()
    try:
        code = _serve(args, fault, state, stop, gpus, received)
    finally:
        gpus.release()
    if signal.SIGTERM in received and code == 0:
        _end_as_sglang_does()
    return code


def _end_as_sglang_does() -> None:
    """Real SGLang (0.5.15 and 0.5.23, tokenizer_manager.sigterm_watchdog) ends its drain with
    kill_process_tree(own pid, include_parent=True): the process dies of its own SIGKILL, so systemd
    records `code=killed, status=9/KILL` and a stopped unit reads `failed`, not `inactive`."""
    log(f"kill_process_tree called: parent_pid={os.getpid()}, include_parent=True, pid={os.getpid()}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _serve(args, fault, state, stop, gpus, received) -> int:  # type: ignore[no-untyped-def]
    from k26ctl.lab.server.http_api import make_server
    from k26ctl.lab.server.scheduler import GenRequest, Scheduler

    # Like SGLang, the port is bound only once the weights are loaded: a probe during the load is
    # refused (connection refused), then /health answers 503 until the warm-up request has passed.
    try:
        engine, info = _load(args, fault, gpus)
    except Exception as exc:
        log("Scheduler hit an exception: " + traceback.format_exc().rstrip(), tp0=True)
        log(f"Error: failed to load the model: {exc}")
        return 1
    try:
        httpd = make_server(state)
    except OSError as exc:
        log(f"Error: cannot listen on {args.host}:{args.port}: {exc}")
        return 1
    # shutdown() waits for the serving loop to look again: every 50 ms, not the default 0.5 s
    http_thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="http", daemon=True)
    http_thread.start()
    state.lab_info = info
    scheduler = Scheduler(
        engine,
        args.max_running_requests,
        args.decode_log_interval,
        lambda m: log(m, tp0=True),
        crash_on_first_request=fault == "scheduler-crash",
        pacer=_pacer(args, engine),
    )
    state.scheduler = scheduler
    switch = _fault_switch(engine, state)
    if args.lab_step_cost:
        log(f"Step time model: {args.lab_step_cost} (ms; k26ctl/lab/server/step_cost.py)", tp0=True)
    scheduler.start()
    log(f"HTTP server listening on http://{args.host}:{args.port}")
    if not args.skip_server_warmup:
        warm = GenRequest(engine.tokenizer.encode("The"), 4, set())
        scheduler.submit(warm)
        for kind, _ in _drain(warm):
            if kind == "error":
                log("Error: warm-up generation failed")
                return 1
    scheduler.arm_crash()
    state.ready.set()
    log("The server is fired up and ready to roll!")
    while not stop.wait(0.5):
        pass
    # SGLang's own line for SIGTERM (its sigterm_handler); SIGINT is a lab convenience
    name = "SIGTERM" if signal.SIGTERM in received else "SIGINT"
    signum = int(getattr(signal, name))
    log(f"{name} received. signum={signum} frame=None. Draining requests and shutting down...")
    _drain_requests(state, log)
    state.stopping.set()
    if switch is not None:
        switch.stop()
    scheduler.stop()
    httpd.shutdown()
    return 0


def _fault_switch(engine, state):  # type: ignore[no-untyped-def]
    """The lab-only runtime fault switch, when K26LAB_FAULT_SWITCH names a file."""
    from k26ctl.lab.server.fault_switch import ENV, FaultSwitch

    path = os.environ.get(ENV)
    if not path:
        return None

    def apply(faults):  # type: ignore[no-untyped-def]
        engine.request_faults(faults)
        state.lab_info = {**state.lab_info, "runtime_faults": faults.to_json()}

    switch = FaultSwitch(Path(path), apply, lambda m: log(m, tp0=True))
    switch.start()
    return switch


def _pacer(args, engine):  # type: ignore[no-untyped-def]
    from k26ctl.lab.server.step_cost import StepPacer, parse_step_cost

    cost = parse_step_cost(args.lab_step_cost)
    if cost is None:
        return None
    return StepPacer(cost, engine.spec.block_size, engine.spec.algorithm != "NONE")


def _drain_requests(state: LabState, log: Callable[[str], None]) -> None:
    """As SGLang on SIGTERM (tokenizer_manager.sigterm_watchdog): /health turns 503 and the process
    waits until every request it took has been answered, reporting what remains, then exits."""
    state.draining.set()
    reported = 0.0
    while (remaining := state.inflight()) > 0:
        if time.monotonic() - reported >= 1.0:
            log(f"Gracefully exiting... Remaining number of requests {remaining}.")
            reported = time.monotonic()
        time.sleep(0.05)


def _drain(gen):  # type: ignore[no-untyped-def]
    while True:
        kind, payload = gen.events.get()
        yield kind, payload
        if kind in ("done", "error"):
            return


if __name__ == "__main__":
    raise SystemExit(main())
