"""The project's GPU check, part 2 of 2: real SGLang 0.5.15 on one NVIDIA GPU, judged by k26ctl.

usage (on the GPU machine, after `source scripts/gpu/env.sh`; see scripts/gpu/README.md):
  python3 scripts/gpu/run_check.py --models DIR --out DIR [--configs a,b,...] [--deadline S]
                                   [--reference DIR] [--previous FILE] [--temperature 0.7]
  python3 scripts/gpu/run_check.py --url URL --out DIR [--configs NAME]   (dry check: smoke only)
  python3 scripts/gpu/run_check.py --render FILE.json        (rewrite FILE.md from FILE.json)

One server per configuration, one after another, each started with `python -m sglang.launch_server`
on 127.0.0.1 and stopped before the next. For each: whether it started (or the error, verbatim),
start-up seconds, tokens/s alone and with 8 in flight, accept length from meta_info and from the
server, whether its greedy output equals the non-speculative baseline's up to near ties (first
differing token and the baseline's top-2 log-probability margin there), whether the drafter accepts
anything, and `k26ctl smoke --url ... --suite lab --json` against it (exit code, findings, warnings).
Then the sampled pass (--temperature, default 0.7; 0 skips it): the lab suite with every prompt sampled
at that temperature, `--rescoring`, so the rescoring probes judge the sampled answers (their verdict,
figures and which of their checks failed go to the configuration's `smoke_sampled`).

The baseline configuration runs first and leaves, in --out, reference.json (its greedy token ids and
top-2 margins) and smoke-baseline.json (k26ctl's own baseline): later runs read them from
--reference. Results go to --out/real-gpu.json and real-gpu.md after every configuration, so a run cut
short still leaves what it measured; --previous merges an earlier run's results. The run stops
starting servers once fewer than --min-left seconds remain before --deadline, and stops at the first
server that fails to start when it was expected to.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STARTED = time.monotonic()
LOGS = Path(os.environ.get("K26_GPU_LOGS", "/tmp/k26-gpu-logs"))
NEW_TOKENS = 192
try:  # the project's own figures: a near tie (nats) and "nothing accepted" (tokens per verify pass)
    from k26ctl.smoke.acceptance import NOTHING_ACCEPTED
    from k26ctl.smoke.baseline import NEAR_TIE_MARGIN as NEAR_TIE
except ImportError:  # rendering only, outside the project
    NOTHING_ACCEPTED, NEAR_TIE = 1.05, 0.25


def _chat(question: str, think: bool = True) -> str:
    opened = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    return opened + ("" if think else "<think></think>")


PROMPTS = [
    ("capital", _chat("What is the capital of France?")),
    ("plants", _chat("Explain how plants make food.", think=False)),
    ("count", _chat("Count from one to ten.")),
    ("bees", "Bees live together in a hive."),
    ("bread", "Bread is made from"),
    ("repeat", "The sea is blue. The sea is blue. The sea is blue. The sea is"),
]


@dataclass(frozen=True)
class Config:
    name: str
    what: str
    model: str  # folder under --models
    args: tuple[str, ...] = ()
    speculative: bool = False
    cuda_graph: bool = True


def _ngram(tokens: int) -> tuple[str, ...]:
    return ("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", str(tokens))


def _dflash(block: int) -> tuple[str, ...]:
    return (
        "--speculative-algorithm", "DFLASH",
        "--speculative-draft-model-path", f"{{models}}/dflash-b{block}",
        "--speculative-num-draft-tokens", str(block),
    )  # fmt: skip


def _standalone(topk: int, tokens: int) -> tuple[str, ...]:
    return (
        "--speculative-algorithm", "STANDALONE",
        "--speculative-draft-model-path", "{models}/lab-draft",
        "--speculative-num-steps", "3",
        "--speculative-eagle-topk", str(topk),
        "--speculative-num-draft-tokens", str(tokens),
        "--disable-cuda-graph",  # with graphs, capturing the draft's needs `cutlass` (not in the image)
    )  # fmt: skip


CONFIGS = [
    Config("baseline", "no speculation (the reference)", "lab-target"),
    Config("random", "same architecture, random weights", "random-target"),
    Config("ngram4", "NGRAM, 4 draft tokens", "lab-target", _ngram(4), True),
    Config("ngram8", "NGRAM, 8 draft tokens", "lab-target", _ngram(8), True),
    Config("ngram16", "NGRAM, 16 draft tokens", "lab-target", _ngram(16), True),
    Config("dflash8", "DFLASH block 8, random drafter, layers [0, 2]", "lab-target", _dflash(8), True),
    Config("dflash16", "DFLASH block 16, random drafter, layers [0, 2]", "lab-target", _dflash(16), True),
    Config(
        "standalone_k1",
        "STANDALONE draft model, topk 1, 3 steps, 4 draft tokens, CUDA graphs off",
        "lab-target",
        _standalone(1, 4),
        True,
        cuda_graph=False,
    ),
    Config(
        "standalone_k4",
        "STANDALONE draft model, topk 4, 3 steps, 8 draft tokens, CUDA graphs off",
        "lab-target",
        _standalone(4, 8),
        True,
        cuda_graph=False,
    ),
]
BY_NAME = {c.name: c for c in CONFIGS}


# ---- HTTP ---------------------------------------------------------------------------------------


@dataclass
class Server:
    port: int

    def call(self, method: str, path: str, body: Any = None, timeout: float = 120) -> tuple[int, str, float]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read().decode(errors="replace"), time.monotonic() - started
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace"), time.monotonic() - started
        except Exception as exc:  # connection refused while starting, timeouts
            return -1, repr(exc), time.monotonic() - started

    def generate(self, text: str, logprobs: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "text": text,
            "sampling_params": {"temperature": 0, "max_new_tokens": NEW_TOKENS, "ignore_eos": True},
        }
        if logprobs:
            body.update(return_logprob=True, top_logprobs_num=2)
        status, raw, seconds = self.call("POST", "/generate", body)
        if status != 200:
            return {"error": f"HTTP {status}: {raw[:500]}", "seconds": seconds}
        answer = json.loads(raw)
        return {
            "ids": answer.get("output_ids") or [],
            "text": answer.get("text", ""),
            "meta": answer.get("meta_info") or {},
            "seconds": seconds,
        }

    def info(self) -> dict[str, Any]:
        status, raw, _ = self.call("GET", "/get_server_info")
        try:
            data = json.loads(raw) if status == 200 else {}
        except ValueError:
            data = {}
        return data if isinstance(data, dict) else {}


def server_accept(info: dict[str, Any]) -> float | None:
    states = info.get("internal_states") or [{}]
    value = info.get("avg_spec_accept_length", states[0].get("avg_spec_accept_length") if states else None)
    return round(float(value), 3) if isinstance(value, (int, float)) else None


def top2_margins(meta: dict[str, Any]) -> list[float | None]:
    margins: list[float | None] = []
    for entry in meta.get("output_top_logprobs") or []:
        values = [item[0] for item in (entry or []) if isinstance(item, list) and item]
        margins.append(round(values[0] - values[1], 5) if len(values) >= 2 else None)
    return margins


# ---- one configuration --------------------------------------------------------------------------


@dataclass
class Run:
    args: argparse.Namespace
    reference: dict[str, Any] = field(default_factory=dict)  # prompt -> {ids, margins}

    def left(self) -> float:
        return self.args.deadline - (time.monotonic() - STARTED)


def launch_argv(config: Config, models: Path, port: int, prefill_graphs_flag: bool) -> list[str]:
    argv = [
        sys.executable, "-m", "sglang.launch_server",
        "--model-path", str(models / config.model),
        "--host", "127.0.0.1", "--port", str(port),
        "--attention-backend", "triton", "--sampling-backend", "pytorch", "--grammar-backend", "none",
        "--enable-metrics", "--served-model-name", "lab-llama", "--context-length", "2048",
        "--max-running-requests", "16", "--cuda-graph-max-bs", "16", "--max-total-tokens", "131072",
    ]  # fmt: skip
    if config.cuda_graph and prefill_graphs_flag:
        # prefill graphs for 42 token counts cost ~28 s per start and serve nothing here
        argv += ["--cuda-graph-backend-prefill", "disabled"]
    return argv + [a.replace("{models}", str(models)) for a in config.args]


def error_lines(log: Path) -> list[str]:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    hits = [line for line in lines if re.search(r"Error|Exception|error:|Traceback|raise |assert", line)]
    return (hits or lines)[-12:]


def start(config: Config, run: Run, prefill_flag: bool) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    log = LOGS / f"{config.name}.log"
    argv = launch_argv(config, Path(run.args.models), run.args.port, prefill_flag)
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(run.args.port)
    begun = time.monotonic()
    limit = min(run.args.start_timeout, max(30.0, run.left() - 30))
    started = False
    while time.monotonic() - begun < limit and proc.poll() is None:
        if server.call("GET", "/health", timeout=5)[0] == 200:
            started = True
            break
        time.sleep(0.5)
    result: dict[str, Any] = {
        "argv": " ".join(argv[1:]),
        "started": started,
        "startup_s": round(time.monotonic() - begun, 1),
    }
    if not started:
        result["exit_code"] = proc.poll()
        result["error"] = error_lines(log) or [f"no /health 200 within {limit:.0f} s"]
    return proc, result


def stop(proc: subprocess.Popen[bytes]) -> float:
    begun = time.monotonic()
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
    return round(time.monotonic() - begun, 1)


def compare(ids: dict[str, list[int]], reference: dict[str, Any]) -> tuple[bool | None, list[dict[str, Any]]]:
    """Per prompt: the first token that differs from the baseline and the baseline's top-2 margin
    there. Lossless: every answer equal, or first differing at a near tie."""
    if not reference:
        return None, []
    rows = []
    for prompt, _ in PROMPTS:
        mine, base = ids.get(prompt) or [], reference[prompt]["ids"]
        first = next((i for i, (a, b) in enumerate(zip(mine, base, strict=False)) if a != b), None)
        if first is None and len(mine) != len(base):
            first = min(len(mine), len(base))
        margins = reference[prompt].get("margins") or []
        margin = margins[first] if first is not None and first < len(margins) else None
        rows.append(
            {
                "prompt": prompt,
                "same": first is None,
                "first_diff": first,
                "baseline_margin": margin,
                "near_tie": margin is not None and margin <= NEAR_TIE,
            }
        )
    return all(r["same"] or r["near_tie"] for r in rows), rows


def sampled_suite(lab_yaml: str, temperature: float) -> str:
    """The lab suite with every prompt sampled at `temperature` only (no greedy answers, no determinism
    repeats): the T > 0 pass, judged by the text detectors and the rescoring probes. Raises ValueError
    when the suite's layout is not the one this edits (a changed suite must be looked at, not guessed)."""
    edits = [
        (r"^name: lab$", f"name: lab-t{temperature:g}"),
        (r"^temperatures: \[[0-9., ]*\]$", f"temperatures: [{temperature:g}]"),
        (r"^determinism: true$", "determinism: false"),
    ]
    for pattern, line in edits:
        lab_yaml, found = re.subn(pattern, line, lab_yaml, count=1, flags=re.MULTILINE)
        if not found:
            raise ValueError(f"the lab suite has no line matching {pattern!r}")
    if re.search(r"^\s+temperatures:", lab_yaml, flags=re.MULTILINE):
        raise ValueError("a lab prompt sets its own temperatures")
    return lab_yaml


def _lab_suite_text() -> str:
    import k26ctl.smoke

    return (Path(k26ctl.smoke.__file__).parent / "suites" / "lab.yaml").read_text()


def rescoring_summary(report: dict[str, Any]) -> dict[str, Any] | None:
    """The rescoring probes' verdict and figures from a smoke --json report, and which of their checks
    failed (the `rescore_*` findings)."""
    rescoring = report.get("rescoring")
    if not isinstance(rescoring, dict):
        return None
    findings = [f for r in report.get("results", []) for f in r.get("findings", [])]
    findings += report.get("suite_findings", [])
    keys: tuple[str, ...] = (
        "verdict",
        "note",
        "tokens",
        "low_tokens",
        "low_expected",
        "low_tail",
        "surprise_z",
    )
    keys += ("departures", "departures_expected", "departure_tail", "redrawn", "redraw_s", "elapsed_s")
    out = {k: rescoring.get(k) for k in keys}
    out["answers"] = len(rescoring.get("answers") or [])
    out["min_answer_z"] = min((a.get("z", 0.0) for a in rescoring.get("answers") or []), default=None)
    out["evidence"] = sorted(
        {f["detector"] for f in findings if f["detector"].startswith("rescore_") and f["severity"] == "fail"}
    )
    return out


def smoke(config: Config, run: Run, temperature: float = 0.0) -> dict[str, Any]:
    """`k26ctl smoke --suite lab` against the server; at a temperature above 0 the sampled pass instead
    (sampled_suite), with the rescoring probes asked for."""
    out = Path(run.args.out)
    url = run.args.url or f"http://127.0.0.1:{run.args.port}"
    argv = [sys.executable, "-m", "k26ctl", "smoke", "--url", url]
    reference = Path(run.args.reference).resolve() / "smoke-baseline.json"
    tag = config.name if temperature == 0 else f"{config.name}-t{temperature:g}"
    if temperature > 0:
        try:
            suite_file = LOGS / f"suite-lab-t{temperature:g}.yaml"
            suite_file.write_text(sampled_suite(_lab_suite_text(), temperature))
        except (OSError, ValueError) as exc:
            return {"exit": None, "error": f"no sampled suite: {exc}"}
        argv += ["--suite", str(suite_file), "--json", "--rescoring"]
    else:
        argv += ["--suite", "lab", "--json"]
        if config.name == "baseline":
            argv += ["--record-baseline", str(out.resolve() / "smoke-baseline.json")]
        elif reference.exists():
            argv += ["--baseline", str(reference)]
    begun = time.monotonic()
    try:
        # cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH's k26ctl
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=max(60.0, min(300.0, run.left())), cwd=LOGS
        )
    except subprocess.TimeoutExpired:
        return {"exit": None, "error": "k26ctl smoke did not finish in time"}
    (LOGS / f"smoke-{tag}.json").write_text(done.stdout)
    (LOGS / f"smoke-{tag}.stderr").write_text(done.stderr[-20000:])
    result: dict[str, Any] = {
        "exit": done.returncode,
        "seconds": round(time.monotonic() - begun, 1),
        "command": "k26ctl " + " ".join(argv[3:]),
    }
    try:
        report = json.loads(done.stdout)
    except ValueError:
        result["stderr_tail"] = done.stderr.strip().splitlines()[-3:]
        return result
    findings = [f for r in report.get("results", []) for f in r.get("findings", [])]
    findings += report.get("suite_findings", [])
    failing = {f["detector"] for f in findings if f["severity"] == "fail"}
    baseline = report.get("baseline") or {}
    result.update(
        summary=report.get("summary"),
        findings=sorted(failing),
        warnings=report.get("warnings", []),
        messages=[f["message"] for f in report.get("suite_findings", []) if f["severity"] == "fail"][:6],
        accept_length=report.get("accept_length"),
        baseline_exact=baseline.get("exact_match_rate"),
        baseline_near_ties=baseline.get("near_ties"),
    )
    if temperature > 0:
        result["temperature"] = temperature
        result["rescoring"] = rescoring_summary(report)
    return result


def measure(config: Config, run: Run, prefill_flag: bool) -> dict[str, Any]:
    proc, result = start(config, run, prefill_flag)
    result.update(name=config.name, what=config.what, speculative=config.speculative)
    try:
        if not result["started"]:
            return result
        server = Server(run.args.port)
        info = server.info()
        keys = (
            "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
            "speculative_num_draft_tokens", "speculative_dflash_block_size", "disable_cuda_graph",
        )  # fmt: skip
        result["resolved"] = {k: info[k] for k in keys if k in info}
        result["version"] = info.get("version")
        reference = config.name == "baseline"
        alone = {p: server.generate(text) for p, text in PROMPTS}
        errors = [a["error"] for a in alone.values() if "error" in a]
        if errors:
            result["error"] = errors[:3]
            result["serves"] = False
            return result
        result["serves"] = True
        tokens = sum(len(a["ids"]) for a in alone.values())
        result["tok_s_alone"] = round(tokens / sum(a["seconds"] for a in alone.values()), 1)
        texts = [text for _, text in PROMPTS] + [PROMPTS[0][1], PROMPTS[1][1]]
        with ThreadPoolExecutor(8) as pool:
            begun = time.monotonic()
            batch = list(pool.map(server.generate, texts))
            wall = time.monotonic() - begun
        result["tok_s_8_in_flight"] = round(sum(len(b.get("ids", [])) for b in batch) / wall, 1)
        ids = {p: a["ids"] for p, a in alone.items()}
        # the same prompts verified beside seven others: a verify that breaks only in a batch shows here
        batched = {p: batch[i].get("ids") or [] for i, (p, _) in enumerate(PROMPTS)}
        result["batch_equals_alone"] = all(batched[p] == ids[p] for p in ids)
        metas = [a["meta"] for a in alone.values()]
        verify = sum(m.get("spec_verify_ct") or 0 for m in metas)
        result["accept_meta"] = (
            round(sum(m.get("completion_tokens") or 0 for m in metas) / verify, 3) if verify else None
        )
        result["accept_server"] = server_accept(server.info())
        result["drafter_accepts"] = (
            None if not config.speculative else (result["accept_meta"] or 1.0) > NOTHING_ACCEPTED
        )
        result["sample"] = alone["capital"]["text"][:160]
        if reference:  # a second pass with the top-2 log-probabilities: the reference, if repeatable
            again = {p: server.generate(text, logprobs=True) for p, text in PROMPTS}
            run.reference = {
                p: {"ids": a.get("ids", []), "margins": top2_margins(a.get("meta", {}))}
                for p, a in again.items()
            }
            (Path(run.args.out) / "reference.json").write_text(json.dumps(run.reference))
            result["lossless"] = (
                all(run.reference[p]["ids"] == ids[p] for p in ids) and result["batch_equals_alone"]
            )
            result["vs_baseline"] = "reference (repeat identical)" if result["lossless"] else "repeat differs"
        else:
            # lossless only when the answers alone AND the same answers in a batch of 8 match the baseline
            alone_ok, result["vs_baseline"] = compare(ids, run.reference)
            batch_ok, result["vs_baseline_batched"] = compare(batched, run.reference)
            result["lossless_alone"], result["lossless_batched"] = alone_ok, batch_ok
            result["lossless"] = None if alone_ok is None or batch_ok is None else alone_ok and batch_ok
        result["smoke"] = smoke(config, run)
        result["smoke_exit"] = result["smoke"].get("exit")
        if run.args.temperature > 0:  # the sampled pass: text detectors and the rescoring probes
            result["smoke_sampled"] = smoke(config, run, run.args.temperature)
        return result
    finally:
        result["shutdown_s"] = stop(proc)


# ---- the whole run ------------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    env: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "torch": version("torch"),
        "sglang": version("sglang"),
        "sglang_kernel": version("sglang-kernel"),
        "transformers": version("transformers"),
    }
    try:
        query = "--query-gpu=name,driver_version,memory.total"
        line = subprocess.run(["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True)
        name, driver, memory = [part.strip() for part in line.stdout.splitlines()[0].split(",")]
        env.update(gpu=name, driver=driver, gpu_memory=memory)
    except Exception as exc:  # no GPU: say so in the report
        env["gpu"] = f"unknown ({exc!r})"
    return env


def checks(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules the issue sets for the verdicts, evaluated on what was measured."""
    by = {c["name"]: c for c in configs}
    out = []

    def rule(text: str, holds: bool | None, detail: str) -> None:
        out.append({"rule": text, "holds": holds, "detail": detail})

    def exit_of(name: str) -> Any:
        return (by.get(name, {}).get("smoke") or {}).get("exit")

    for name, code, label in (("baseline", 0, "baseline exits 0"), ("random", 1, "random weights exit 1")):
        rule(label, exit_of(name) == code if name in by else None, f"exit {exit_of(name)}")
    good = [c for c in configs if c.get("lossless") and c.get("drafter_accepts") and c.get("smoke")]
    rule(
        "every lossless configuration whose drafter accepts exits 0",
        all(c["smoke"]["exit"] == 0 for c in good) if good else None,
        ", ".join(f"{c['name']} {c['smoke']['exit']}" for c in good),
    )
    idle = [c for c in configs if c.get("drafter_accepts") is False and c.get("smoke")]
    rule(
        "a drafter that accepts nothing exits 1 and says so",
        all(
            c["smoke"]["exit"] == 1 and "drafter_accepts_nothing" in c["smoke"].get("findings", [])
            for c in idle
        )
        if idle
        else None,
        ", ".join(f"{c['name']} {c['smoke']['exit']}" for c in idle),
    )
    clear = [c for c in configs if c.get("smoke") and _clear_divergence(c)]
    rule(
        "a divergence at a clear choice exits 1",
        all(c["smoke"]["exit"] == 1 for c in clear) if clear else None,
        ", ".join(f"{c['name']} {c['smoke']['exit']}" for c in clear),
    )
    out += sampled_checks(configs)
    return out


def _rescored(config: dict[str, Any]) -> dict[str, Any]:
    return (config.get("smoke_sampled") or {}).get("rescoring") or {}


def sampled_checks(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sampled pass's rules: lossless configurations pass it (on the rescoring evidence and as a
    whole), random weights fail it on the rescoring evidence. A configuration whose server would not
    return log-probabilities (rescoring skipped) is named, not counted."""
    sampled = [c for c in configs if c.get("smoke_sampled")]
    if not sampled:
        return []
    t = next(
        (c["smoke_sampled"].get("temperature") for c in sampled if c["smoke_sampled"].get("temperature")),
        None,
    )
    at = f"at temperature {t:g}" if isinstance(t, (int, float)) else "at the sampled temperature"
    out = []
    lossless = [c for c in sampled if c.get("lossless")]
    judged = [c for c in lossless if _rescored(c).get("verdict") in ("pass", "weak-pass", "fail")]
    unjudged = [c["name"] for c in lossless if c not in judged]
    detail = ", ".join(f"{c['name']} {_rescored(c).get('verdict')}" for c in judged)
    if unjudged:
        detail += f"; not rescored: {', '.join(unjudged)}"
    out.append(
        {
            "rule": f"{at} every lossless configuration passes the rescoring probes",
            "holds": all(_rescored(c)["verdict"] != "fail" for c in judged) if judged else None,
            "detail": detail,
        }
    )
    accepting = [c for c in lossless if c.get("drafter_accepts") is not False]
    out.append(
        {
            "rule": f"{at} every lossless configuration whose drafter accepts exits 0",
            "holds": all(c["smoke_sampled"].get("exit") == 0 for c in accepting) if accepting else None,
            "detail": ", ".join(f"{c['name']} {c['smoke_sampled'].get('exit')}" for c in accepting),
        }
    )
    random = next((c for c in sampled if c["name"] == "random"), None)
    if random is not None:
        r, s = _rescored(random), random["smoke_sampled"]
        evidence = ", ".join(r.get("evidence") or []) or "none"
        findings = ", ".join(s.get("findings") or []) or "none"
        out.append(
            {
                "rule": f"{at} random weights fail on the rescoring evidence",
                "holds": None if r.get("verdict") in (None, "skipped") else r.get("verdict") == "fail",
                "detail": f"rescoring {r.get('verdict')}, evidence {evidence}; smoke exit {s.get('exit')}, "
                f"findings {findings}",
            }
        )
    return out


def _clear_divergence(config: dict[str, Any]) -> bool:
    rows = config.get("vs_baseline")
    return isinstance(rows, list) and any(
        not r["same"] and r.get("baseline_margin") is not None and not r["near_tie"] for r in rows
    )


def save(out: Path, data: dict[str, Any]) -> None:
    data["checks"] = checks(data["configs"])
    (out / "real-gpu.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / "real-gpu.md").write_text(render(data))


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, spec) if spec else str(value)


def _lossless_cell(c: dict[str, Any]) -> str:
    rows = c.get("vs_baseline")
    if not isinstance(rows, list):
        return f"{_fmt(c.get('lossless'))} ({rows})" if rows else _fmt(c.get("lossless"))
    batched = c.get("vs_baseline_batched")
    batch_diffs = [r for r in batched if not r["same"]] if isinstance(batched, list) else []
    if c.get("lossless_alone") and c.get("lossless_batched") is False:
        return f"no: alone identical, in a batch of 8 {len(batch_diffs)}/6 differ"
    diffs = [r for r in rows if not r["same"]]
    if not diffs:
        return "yes: all 6 identical" + (" alone and in a batch of 8" if isinstance(batched, list) else "")
    parts = [
        f"{r['prompt']}@{r['first_diff']} margin {_fmt(r['baseline_margin'], '.3f')}"
        + (" (near tie)" if r["near_tie"] else "")
        for r in diffs[:3]
    ]
    more = f" +{len(diffs) - 3}" if len(diffs) > 3 else ""
    return f"{_fmt(c.get('lossless'))}: {len(rows) - len(diffs)}/6 identical; " + "; ".join(parts) + more


def render(data: dict[str, Any]) -> str:
    env = data["environment"]
    lines = [
        "# Real SGLang on a GPU: k26ctl's verdicts (scripts/gpu)",
        "",
        f"Run {env.get('date')} on {env.get('gpu')} (driver {env.get('driver')}, {env.get('gpu_memory')}), "
        f"Python {env.get('python')}, torch {env.get('torch')}, SGLang {env.get('sglang')}, "
        f"sglang-kernel {env.get('sglang_kernel')}, transformers {env.get('transformers')}.",
        "",
        "Model: a 3.7 M Llama trained on the lab corpus (scripts/gpu/make_models.py); every server with "
        "`--attention-backend triton --sampling-backend pytorch`. Tokens/s: 6 prompts x 192 tokens one "
        "at a time, and 8 requests in flight. Accept length: completion_tokens / spec_verify_ct of those 6 "
        "answers (meta), and /get_server_info's average (server). Lossless: greedy ids equal to the "
        f"baseline's, or first differing where the baseline's top-2 log-probabilities are within {NEAR_TIE} "
        "(a near tie). Smoke: `k26ctl smoke --url ... --suite lab --json`, against k26ctl's baseline "
        "recorded from the baseline server.",
        "",
        "| config | what | started | start-up s | tok/s alone | tok/s 8 in flight | accept meta / server "
        "| lossless vs baseline | drafter accepts | smoke exit | smoke findings / warnings |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in data["configs"]:
        s = c.get("smoke") or {}
        notes = ", ".join(s.get("findings") or []) or "none"
        if s.get("warnings"):
            notes += "; warnings: " + " / ".join(w[:140] for w in s["warnings"])
        if s.get("baseline_near_ties"):
            notes += f"; near ties tolerated: {', '.join(s['baseline_near_ties'])}"
        error = " / ".join(c.get("error") or [])[:400]
        started = _fmt(c.get("started")) if c.get("started") else f"no: {error}"
        lines.append(
            f"| {c['name']} | {c.get('what', '')} | {started} | {_fmt(c.get('startup_s'))} "
            f"| {_fmt(c.get('tok_s_alone'))} | {_fmt(c.get('tok_s_8_in_flight'))} "
            f"| {_fmt(c.get('accept_meta'))} / {_fmt(c.get('accept_server'))} | {_lossless_cell(c)} "
            f"| {_fmt(c.get('drafter_accepts'))} | {_fmt(s.get('exit'))} | {notes.replace('|', '/')} |"
        )
    if data.get("note"):
        lines += ["", f"**Note.** {data['note']}"]
    lines += render_sampled(data["configs"])
    lines += ["", "## The rules, on this run", ""]
    for check in data.get("checks", []):
        mark = {True: "holds", False: "BROKEN", None: "not exercised"}[check["holds"]]
        lines.append(f"- {check['rule']}: **{mark}** ({check['detail'] or 'no such configuration'})")
    skipped = data.get("skipped") or []
    if skipped:
        lines += ["", f"Not run (time or an earlier failure): {', '.join(skipped)}."]
    lines += ["", "## Smoke summaries", ""]
    for c in data["configs"]:
        s = c.get("smoke") or {}
        if s.get("summary"):
            lines.append(f"- {c['name']}: `{s['summary']}`")
            for message in s.get("messages") or []:
                lines.append(f"  - {message}")
    return "\n".join(lines) + "\n"


def render_sampled(configs: list[dict[str, Any]]) -> list[str]:
    """The sampled pass's table (empty when no configuration had one)."""
    sampled = [c for c in configs if c.get("smoke_sampled")]
    if not sampled:
        return []
    lines = [
        "",
        "## Sampled pass: the lab suite at temperature "
        f"{_fmt(sampled[0]['smoke_sampled'].get('temperature'))}, with the rescoring probes",
        "",
        "Every prompt sampled only (`k26ctl smoke --url ... --suite FILE --json --rescoring`, FILE the lab "
        "suite with `temperatures: [T]`); each sampled prompt drawn twice more in pairs, every answer "
        "rescored by one prefill (k26ctl/smoke/rescoring.py).",
        "",
        "| config | smoke exit | rescoring | answers / tokens | unlikely (expected) | surprise z run / "
        "lowest answer | departures (expected, P) | rescoring evidence | other failing findings |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in sampled:
        s, r = c["smoke_sampled"], _rescored(c)
        others = [f for f in s.get("findings") or [] if not f.startswith("rescore_")]
        verdict = _fmt(r.get("verdict")) + (f" ({r['note']})" if r.get("note") else "")
        if s.get("error"):
            verdict = f"- ({s['error']})"
        lines.append(
            f"| {c['name']} | {_fmt(s.get('exit'))} | {verdict.replace('|', '/')[:300]} "
            f"| {_fmt(r.get('answers'))} / {_fmt(r.get('tokens'))} "
            f"| {_fmt(r.get('low_tokens'))} ({_fmt(r.get('low_expected'))}) "
            f"| {_fmt(r.get('surprise_z'))} / {_fmt(r.get('min_answer_z'))} "
            f"| {_fmt(r.get('departures'))} ({_fmt(r.get('departures_expected'))}, "
            f"{_fmt(r.get('departure_tail'), '.2g')}) "
            f"| {', '.join(r.get('evidence') or []) or 'none'} | {', '.join(others) or 'none'} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", help="folder of make_models.py's models")
    parser.add_argument("--out", help="folder for real-gpu.json/.md, reference.json, smoke-baseline.json")
    parser.add_argument("--configs", default=",".join(c.name for c in CONFIGS))
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds from start to stop by")
    parser.add_argument("--min-left", type=float, default=110.0, help="start no server with less left")
    parser.add_argument("--start-timeout", type=float, default=200.0)
    parser.add_argument("--reference", help="folder with a baseline's reference.json, smoke-baseline.json")
    parser.add_argument("--previous", help="an earlier real-gpu.json whose results are kept")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--render", help="rewrite FILE.md from FILE.json and exit")
    parser.add_argument(
        "--temperature", type=float, default=0.7, help="the sampled pass's temperature (0: no sampled pass)"
    )
    parser.add_argument(
        "--url", help="judge this running server instead of starting any (a dry check: smoke passes only)"
    )
    args = parser.parse_args()
    if args.render:
        path = Path(args.render)
        rendered: dict[str, Any] = json.loads(path.read_text())
        rendered["checks"] = checks(rendered["configs"])
        path.with_suffix(".md").write_text(render(rendered))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    args.reference = args.reference or str(out)
    run = Run(args)
    reference_file = Path(args.reference) / "reference.json"
    if reference_file.exists():
        run.reference = json.loads(reference_file.read_text())
    data: dict[str, Any] = {"environment": environment(), "configs": [], "skipped": []}
    if args.previous and Path(args.previous).exists():
        previous = json.loads(Path(args.previous).read_text())
        data["configs"] = previous.get("configs", [])
        data["earlier_environment"] = previous.get("environment")
    names = [n for n in args.configs.split(",") if n]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown and not args.url:
        raise SystemExit(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    if args.url:  # a dry check against a running server: the smoke passes only, under the first name
        config = BY_NAME.get(names[0]) or Config(names[0], "a running server", "")
        result: dict[str, Any] = {
            "name": config.name,
            "what": f"{config.what} (dry check against {args.url})",
        }
        result["smoke"] = smoke(config, run)
        if args.temperature > 0:
            result["smoke_sampled"] = smoke(config, run, args.temperature)
        data["configs"] = [c for c in data["configs"] if c.get("name") != config.name] + [result]
        save(out, data)
        print(json.dumps(result, indent=1), flush=True)
        return
    prefill_flag = True
    for i, name in enumerate(names):
        if run.left() < args.min_left:
            data["skipped"] = names[i:]
            print(f"stop: {run.left():.0f} s left, not starting {', '.join(names[i:])}", flush=True)
            break
        config = BY_NAME[name]
        print(f"=== {name} ({time.monotonic() - STARTED:.0f} s)", flush=True)
        result = measure(config, run, prefill_flag)
        unknown_flag = "--cuda-graph-backend-prefill" in " ".join(result.get("error") or [])
        if not result["started"] and unknown_flag and prefill_flag:
            prefill_flag = False  # an SGLang without the flag: start again with its defaults
            result = measure(config, run, prefill_flag)
        result["run_at"] = data["environment"]["date"]
        data["configs"] = [c for c in data["configs"] if c.get("name") != name] + [result]
        save(out, data)
        keys = ("started", "startup_s", "tok_s_alone", "accept_meta", "lossless", "drafter_accepts")
        shown = {k: result.get(k) for k in keys}
        print(name, shown, "smoke", (result.get("smoke") or {}).get("summary"), flush=True)
        if not result["started"] or result.get("serves") is False:
            data["skipped"] = names[i + 1 :]
            print(f"stop: {name} did not start or serve: {result.get('error')}", flush=True)
            save(out, data)
            break
    save(out, data)
    subprocess.run(["tar", "czf", str(out / "logs.tgz"), "-C", str(LOGS.parent), LOGS.name], check=False)
    print(f"done in {time.monotonic() - STARTED:.0f} s", flush=True)


if __name__ == "__main__":
    main()
