"""paramiko starts without `invoke`; `invoke` loads when a `Match exec` line needs it, and only then.

Each case runs in a fresh interpreter: the point is what an import does to `sys.modules`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_opening_the_ssh_layer_does_not_load_invoke_and_match_exec_still_works() -> None:
    out = _run(
        "import json, sys\n"
        "import k26ctl.remote.ssh as ssh\n"
        "before = sorted(m for m in sys.modules if m.startswith('invoke.'))\n"
        "text = 'Match exec true\\n  User bob\\nMatch exec false\\n  Port 2\\n'\n"
        "config = ssh.paramiko.SSHConfig.from_text(text)\n"
        "found = config.lookup('somehost')\n"
        "print(json.dumps({'before': before, 'user': found.get('user'), 'port': found.get('port'),\n"
        "                  'after': 'invoke.collection' in sys.modules}))\n"
    )
    assert out["before"] == [], "paramiko's import loaded invoke's modules"
    assert (out["user"], out["port"]) == ("bob", None), "Match exec did not run the commands"
    assert out["after"] is True


def test_a_module_already_imported_or_missing_is_left_alone() -> None:
    out = _run(
        "import json, sys\n"
        "import invoke\n"
        "from k26ctl.deferred_import import defer_import\n"
        "real = sys.modules['invoke']\n"
        "defer_import('invoke')\n"
        "defer_import('k26ctl_no_such_module')\n"
        "print(json.dumps({'same': sys.modules['invoke'] is real,\n"
        "                  'missing': 'k26ctl_no_such_module' in sys.modules}))\n"
    )
    assert out == {"same": True, "missing": False}


def test_the_stand_in_becomes_the_real_module_on_first_use() -> None:
    out = _run(
        "import json, sys\n"
        "from k26ctl.deferred_import import defer_import\n"
        "defer_import('invoke')\n"
        "import invoke\n"
        "stand_in = type(invoke).__name__\n"
        "run = invoke.run\n"
        "print(json.dumps({'stand_in': stand_in, 'real': type(sys.modules['invoke']).__name__,\n"
        "                  'callable': callable(run)}))\n"
    )
    assert out == {"stand_in": "_OnFirstUse", "real": "module", "callable": True}
