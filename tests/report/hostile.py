"""Result documents with hostile strings where a server, a profile or a file puts text."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
# each tries to run script, load something, or break out of the markup it lands in
PAYLOADS = (
    "<script>console.error('pwned-script')</script>",
    '<img src="http://10.231.255.1/x.png" onerror="console.error(\'pwned-img\')">',
    "</pre></section><iframe src='https://example.invalid/'></iframe>",
    "\"'><svg onload=console.error('pwned-svg')>",
    "</style><style>body{background:url(http://10.231.255.1/bg)}</style>",
    "$\\frac{a}{b}$ ${x}^2$ {{ 7*7 }} {% raw %}",
)
JOINED = " ".join(PAYLOADS)


def fixture(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def hostile_smoke() -> dict[str, Any]:
    doc = copy.deepcopy(fixture("deploy-unpatched.json")["smoke"])
    doc["model"] = JOINED
    doc["base_url"] = PAYLOADS[1]
    doc["server"]["version"] = PAYLOADS[0]
    doc["server"]["server_args"][PAYLOADS[3]] = PAYLOADS[4]
    doc["server"]["server_args"]["speculative_" + PAYLOADS[0]] = JOINED
    first = doc["results"][0]
    first["name"] = PAYLOADS[5] + PAYLOADS[0]
    first["text"] = JOINED * 2
    first["findings"].append(
        {
            "detector": PAYLOADS[0],
            "score": 1,
            "threshold": 0,
            "span": [3, 60],
            "excerpt": PAYLOADS[1],
            "message": PAYLOADS[2],
            "severity": "fail",
        }
    )
    for answer in doc["probes"]["answers"]:
        for token in answer.get("mismatch_tokens", []):
            token["expected"], token["got"] = PAYLOADS[0], PAYLOADS[3]
    return doc


def hostile_sweep() -> dict[str, Any]:
    doc = copy.deepcopy(fixture("sweep.json"))
    for point in doc["points"]:
        point["assignment"] = {
            (PAYLOADS[5] if k == "spec.ddtree.budget" else PAYLOADS[0]): v
            for k, v in point["assignment"].items()
        }
        point["label"] = PAYLOADS[3]
        point["detail"] = PAYLOADS[1]
    doc["session"] = PAYLOADS[2]
    doc["objective"]["description"] = PAYLOADS[4]
    return doc


def hostile_bisect_log() -> dict[str, Any]:
    doc = copy.deepcopy(fixture("bisect-log.json"))
    doc["session"] = PAYLOADS[0]
    doc["spec"]["param"] = PAYLOADS[5]
    for step in doc["steps"]:
        step["detail"] = JOINED
        step["assignment"] = {PAYLOADS[5]: step["assignment"]["spec.ddtree.budget"]}
    return doc


def hostile_fleet() -> dict[str, Any]:
    names = [PAYLOADS[0], PAYLOADS[3], PAYLOADS[5]]
    members = {
        n: {
            "phase": "failed" if i == 0 else "old",
            "config": "new",
            "detail": PAYLOADS[1],
            "fingerprint": None,
            "seconds": {"remove": 0.1, "drain": 1.0, "deploy": 10.0, PAYLOADS[4]: 1.0},
            "updated": "",
            "where": JOINED,
        }
        for i, n in enumerate(names)
    }
    return {
        "kind": "fleet-roll",
        "fleet": PAYLOADS[2],
        "run_id": PAYLOADS[0],
        "action": "deploy",
        "status": "halted",
        "reason": JOINED,
        "exit_code": 1,
        "wall_seconds": 12.5,
        "order": names,
        "members": members,
        "load": {
            "url": PAYLOADS[1],
            "sent": 3,
            "ok": 2,
            "failed": 1,
            "degenerate": 0,
            "p50_s": 0.1,
            "p99_s": 0.2,
            "windows": [{"t": 5.0, "sent": 3, "ok": 2, "p99_s": 0.2}],
        },
    }
