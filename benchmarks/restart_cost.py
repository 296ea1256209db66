#!/usr/bin/env python3
"""Restart cost on the real SGLang 0.5.15 CPU server under systemd: where the stop -> ready time goes
when the host's page cache is cold or warm, and what reading the weights ahead before the stop saves.

The lab host (`k26ctl lab host up --real`) gets a copy of the tiny lab model whose MLPs are widened
with zeros to a SIZE GiB checkpoint (same answers: the extra rows and columns are zero), so the weight
phase reads SIZE GiB from disk like a real checkpoint. Each round deploys it three times with
`k26ctl deploy --force`:

  cold        page cache dropped (`echo 1 > /proc/sys/vm/drop_caches` on this machine, which the lab
              host shares), restart.readahead=never: imports and weights both come from disk
  warm        right after `cold`, nothing dropped, restart.readahead=never
  cold+ahead  page cache dropped, restart.readahead=always: the weights are read (rate-bounded)
              while the old server still serves, then the restart

Every figure is k26ctl's own output (`deploy --json`: the phases parsed from the journal, the
read-ahead report). Ratios compare runs of the same invocation.

    sudo PYTHONPATH=$PWD python3 benchmarks/restart_cost.py [--name k26rbench] [--rounds 2] [--size 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "profiles" / "lab" / "sglang.yaml"
MODEL = "/srv/k26bench/model"
TINY = "/opt/sglang/models/k26real-tiny"

# Widens the tiny model's MLPs with zeros so its checkpoint is SIZE GiB and its answers are the same
# (the extra gate/up rows are zero, so silu(0) * 0 adds nothing through the extra down columns, which
# are zero too). Streams the new safetensors file (8-byte little-endian header length, JSON header,
# raw data) without holding it in memory; SGLang then really reads every byte at load.
WIDEN = r"""
import json, os, struct, sys
src, dst, gib = sys.argv[1], sys.argv[2], float(sys.argv[3])
config = json.load(open(os.path.join(src, "config.json")))
hidden, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
with open(os.path.join(src, "model.safetensors"), "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    base = 8 + n
    data = f.read()
header.pop("__metadata__", None)
wide = max(inter, int(gib * (1 << 30)) // (4 * 3 * hidden * layers))
def raw(name):
    a, b = header[name]["data_offsets"]
    return data[a:b]
out, offset = {}, 0
for name, info in header.items():
    assert info["dtype"] == "F32", info
    shape = list(info["shape"])
    if name.endswith(("gate_proj.weight", "up_proj.weight")):
        shape = [wide, hidden]
    elif name.endswith("down_proj.weight"):
        shape = [hidden, wide]
    size = 4 * shape[0] * shape[1] if len(shape) == 2 else 4 * shape[0]
    out[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
    offset += size
text = json.dumps(out)
text += " " * (-len(text) % 8)
zeros = bytes(1 << 22)
def pad(f, count):
    while count:
        k = min(count, len(zeros))
        f.write(zeros[:k])
        count -= k
with open(os.path.join(dst, "model.safetensors.tmp"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text.encode())
    for name in out:
        b = raw(name)
        if name.endswith(("gate_proj.weight", "up_proj.weight")):
            f.write(b)
            pad(f, 4 * (wide - inter) * hidden)
        elif name.endswith("down_proj.weight"):
            row = 4 * inter
            for r in range(hidden):
                f.write(b[r * row:(r + 1) * row])
                pad(f, 4 * (wide - inter))
        else:
            f.write(b)
    f.flush()
    os.fsync(f.fileno())
os.replace(os.path.join(dst, "model.safetensors.tmp"), os.path.join(dst, "model.safetensors"))
config["intermediate_size"] = wide
json.dump(config, open(os.path.join(dst, "config.json"), "w"), indent=2)
print(wide)
"""


def lab(name: str) -> Any:
    from k26ctl.lab.host import lab_up

    return lab_up(name, real_sglang=("0.5.15",))


def on_host(name: str, *argv: str) -> str:
    from k26ctl.lab.host import lab_status

    status = lab_status(name)
    assert status.host is not None
    h = status.host
    ssh = ["ssh", "-i", h.key_path, "-o", f"UserKnownHostsFile={h.known_hosts_path}", "-o", "BatchMode=yes"]
    remote = shlex.join(argv)  # ssh hands the host one command line
    proc = subprocess.run([*ssh, f"root@{h.address}", remote], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv}: {proc.stderr.strip()}")
    return proc.stdout


def make_model(name: str, gib: float) -> int:
    """The widened copy of the tiny model on the host (made once; its size in bytes)."""
    on_host(
        name,
        "sh",
        "-c",
        f"mkdir -p {MODEL} && cp -p {TINY}/tokenizer*.json {TINY}/generation_config.json {MODEL}/",
    )
    python = "/opt/sglang/0.5.15/venv/bin/python"
    have = int(
        on_host(name, "sh", "-c", f"stat -c %s {MODEL}/model.safetensors 2>/dev/null || echo 0").strip()
    )
    if abs(have - gib * (1 << 30)) > 64 << 20:
        on_host(name, "rm", "-f", f"{MODEL}/zz-pad.safetensors")
        on_host(name, python, "-c", WIDEN, TINY, MODEL, str(gib))
    return int(on_host(name, "sh", "-c", f"du -sb {MODEL}/model.safetensors | cut -f1").strip())


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


def deploy(name: str, readahead: str) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "k26ctl", "deploy", str(PROFILE), "--yes", "--no-smoke", "--force", "--json",
        "--set", f"host.lab={name}", "--set", f"sglang.model_path={MODEL}",
        "--set", f"restart.readahead={readahead}", "--set", "restart.readahead_rate_mb_s=400",
        # the old 0.5.15 server's scheduler outlives its SIGKILL in the lab (systemd waits the whole
        # TimeoutStopSec again): shorter stop timeouts keep each round to minutes
        "--set", "service.drain_timeout_sec=10", "--set", "service.timeout_stop_sec=15",
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1200, cwd=ROOT)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"deploy exit {proc.returncode}: {proc.stdout[-800:]} {proc.stderr[-800:]}")
    doc: dict[str, Any] = json.loads(proc.stdout)
    doc["bench_wall_seconds"] = wall
    return doc


def row(case: str, doc: dict[str, Any]) -> dict[str, Any]:
    from k26ctl.deploy.phases import RestartPhases

    phases = RestartPhases.from_json(doc["phases"])
    ahead = doc.get("readahead") or {}
    return {
        "case": case,
        "downtime": phases.downtime_seconds,
        "stop": phases.stop_seconds or 0.0,
        "imports": phases.seconds("imports") + phases.seconds("launch"),
        "setup": phases.seconds("distributed") + phases.seconds("model-setup"),
        "weights": phases.seconds("weights"),
        "rest": sum(phases.seconds(n) for n in ("kv-cache", "init", "graphs", "server-start", "warmup")),
        "readahead_seconds": ahead.get("seconds") if ahead.get("outcome") not in (None, "skipped") else None,
        "readahead_mb_s": ahead.get("rate_mb_s"),
        "resident_before": ahead.get("resident_before"),
        "resident_after": ahead.get("resident_after"),
        "bytes": ahead.get("bytes"),
        "wall": doc["bench_wall_seconds"],
        "summary": phases.summary(),
    }


def median(rows: list[dict[str, Any]], case: str, key: str) -> float:
    return statistics.median(r[key] for r in rows if r["case"] == case)


def table(rows: list[dict[str, Any]], size: int) -> str:
    cases = ["cold", "warm", "cold+ahead"]
    keys = [
        ("downtime", "stop -> ready"),
        ("stop", "old server stop"),
        ("imports", "imports + launch"),
        ("setup", "dist. init + model setup"),
        ("weights", "weight loading"),
        ("rest", "KV, init, warm-up"),
    ]
    n = sum(1 for r in rows if r["case"] == "cold")
    out = [
        f"Weights {size / (1 << 30):.2f} GiB; median of {n} round(s), seconds; phases from the journal.",
        "",
        "| phase | cold | warm | cold + read-ahead | cold / warm | cold / cold+read-ahead |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, label in keys:
        c, w, a = (median(rows, case, key) for case in cases)
        out.append(
            f"| {label} | {c:.1f} | {w:.1f} | {a:.1f} | {c / w:.1f}x | {c / a:.1f}x |"
            if w > 0.05 and a > 0.05
            else f"| {label} | {c:.2f} | {w:.2f} | {a:.2f} | | |"
        )
    ahead = [r for r in rows if r["case"] == "cold+ahead" and r["readahead_seconds"] is not None]
    if ahead:
        sec = statistics.median(r["readahead_seconds"] for r in ahead)
        rate = statistics.median(r["readahead_mb_s"] or 0 for r in ahead)
        before = statistics.median(r["resident_before"] / r["bytes"] for r in ahead)
        after = statistics.median(r["resident_after"] / r["bytes"] for r in ahead)
        out.append(
            f"| read-ahead before the stop (not downtime) | | | {sec:.1f} ({rate:.0f} MB/s, limit 400; "
            f"resident {before:.0%} -> {after:.0%}) | | |"
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--name", default="k26rbench")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--size", type=float, default=2.0, help="GiB of the extra weight shard")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (drop_caches, the lab host)", file=sys.stderr)
        return 2
    lab(args.name)
    size = make_model(args.name, args.size)
    rows: list[dict[str, Any]] = []
    deploy(args.name, "never")  # the model's unit in place and running: every measured run is a restart
    for index in range(args.rounds):
        for case, drop, readahead in (
            ("cold", True, "never"),
            ("warm", False, "never"),
            ("cold+ahead", True, "always"),
        ):
            if drop:
                drop_caches()
            result = row(case, deploy(args.name, readahead))
            rows.append(result)
            print(f"round {index + 1} {case}: {result['summary']}", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"bytes": size, "runs": rows}, indent=1) + "\n")
    print(table(rows, size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
