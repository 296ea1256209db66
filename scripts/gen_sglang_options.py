#!/usr/bin/env python3
"""Generate k26ctl/data/sglang_options.json from a real SGLang release's own argument parser.

How: the release wheel is installed with `--no-deps` into a throwaway venv (system site packages
visible, so torch and friends import when present), then `sglang.srt.server_args.ServerArgs.add_cli_args`
builds SGLang's real argparse parser and the table is read from its actions. Third-party modules that
are not installed are replaced by permissive stub modules (only missing top-level non-SGLang packages;
SGLang's own code always runs for real). The parser is only built, never used to launch anything.

The DDTree flags of the open PR sgl-project/sglang#29907 (`--speculative-ddtree-budget`, algorithm
DDTREE) are not in any release; they are added from the PR's description and marked `"source": "pr"`.

Usage: scripts/gen_sglang_options.py [--version 0.5.15] [--wheel PATH] [--out k26ctl/data/sglang_options.json]
The wheel is looked up in /tmp/sglang-wheels, else fetched with `pip download --no-deps`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "k26ctl" / "data" / "sglang_options.json"

# Permissive stand-ins for third-party modules that are not installed (SGLang imports them at module
# level but building the parser never uses them). `STUBBED` lists the names being stubbed.
STUBS = r"""
import argparse, importlib.abc, importlib.machinery, importlib.util, json, sys, types

class _StubMeta(type):
    def __new__(mcls, name, bases, namespace, **kwargs):
        return super().__new__(mcls, name, bases, namespace)
    def __init__(cls, name, bases, namespace, **kwargs):
        super().__init__(name, bases, namespace)
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub_class(f"{cls.__name__}.{name}")
    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        if not args and not kwargs:
            # A probe such as "which device is active": fail, so the caller takes its fallback.
            raise RuntimeError(f"{cls.__name__} is a stub of a missing module")
        return _stub_class(cls.__name__ + "()")
    def __getitem__(cls, item):
        return cls
    def __setitem__(cls, item, value):
        pass
    def __contains__(cls, item):
        return False
    def __len__(cls):
        return 0
    def __or__(cls, other):
        return cls
    __ror__ = __or__
    def __iter__(cls):
        return iter(())
    def __bool__(cls):
        return False
    def __int__(cls):
        return 0
    def __index__(cls):
        return 0
    def __lt__(cls, other):
        return False
    __le__ = __gt__ = __ge__ = __lt__

def _any_schema(cls, source, handler):
    from pydantic_core import core_schema
    return core_schema.any_schema()

def _stub_class(name):
    namespace = {"__module__": "stub", "__get_pydantic_core_schema__": classmethod(_any_schema)}
    return _StubMeta(name, (), namespace)

class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub_class(f"{self.__name__}.{name}")

STUBBED = []

class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        mod = _StubModule(spec.name)
        mod.__path__ = []
        return mod
    def exec_module(self, module):
        pass

class _StubFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.util.spec_from_loader(fullname, _StubLoader(), is_package=True)
        return None

sys.meta_path.insert(0, _StubFinder())
"""

# Runs inside the throwaway venv; prints the table as JSON on stdout.
EXTRACT = (
    STUBS
    + r"""

# Stub only what a hard import of SGLang's own code reports missing, one package at a time, so that
# optional imports guarded by try/except still see the real ImportError.
for _attempt in range(100):
    try:
        from sglang.srt.server_args import ServerArgs
        break
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if not top or top == "sglang" or top in STUBBED:
            raise
        STUBBED.append(top)
        print(f"stubbing missing module {top}", file=sys.stderr)
        for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
            del sys.modules[name]
else:
    raise SystemExit("too many missing modules")
import sglang.version

parser = argparse.ArgumentParser(allow_abbrev=False)
ServerArgs.add_cli_args(parser)
try:
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    algorithms = [m.name for m in SpeculativeAlgorithm]
except Exception:
    algorithms = []
def _choices(choices):
    if choices is None or isinstance(choices, type):
        return None
    names = [str(c) for c in choices]
    # A set has no stable order between runs: sort it so the committed table is reproducible.
    return sorted(names) if isinstance(choices, (set, frozenset)) else names

options = []
for action in parser._actions:
    if not action.option_strings or isinstance(action, argparse._HelpAction):
        continue
    help_text = action.help if isinstance(action.help, str) else ""
    choices = action.choices
    options.append({
        "flags": list(action.option_strings),
        "dest": action.dest,
        "takes_value": action.nargs != 0,
        "nargs": action.nargs if action.nargs is None or isinstance(action.nargs, (int, str)) else None,
        "choices": _choices(action.choices),
        "hidden": help_text == argparse.SUPPRESS,
        "help": "" if help_text == argparse.SUPPRESS else " ".join(help_text.split()),
    })
print(json.dumps({
    "version": sglang.version.__version__,
    "stubbed": sorted(STUBBED),
    "speculative_algorithms": algorithms,
    "options": options,
}))
"""
)

# Small helpers SGLang calls while importing (their results are used, so a stub will not do).
REAL_DEPENDENCIES = ["dill", "psutil", "tqdm", "pybase64", "pyzmq"]

# DDTree, from sgl-project/sglang#29907 (not in any release; a DDTree host runs the PR branch).
DDTREE_OPTIONS: list[dict[str, Any]] = [
    {
        "flags": ["--speculative-ddtree-budget"],
        "dest": "speculative_ddtree_budget",
        "takes_value": True,
        "nargs": None,
        "choices": None,
        "hidden": False,
        "help": "DDTREE only. Tree budget B: the verify width is B + 1 tokens.",
    }
]
DDTREE_ALGORITHMS = ["DDTREE"]

_DEPRECATED = re.compile(r"\bdeprecated\b", re.IGNORECASE)
_REPLACEMENT = re.compile(
    r"(?:use|alias (?:for|of))\s+(--[A-Za-z0-9{},_=-]+(?:\s+--[A-Za-z0-9{},_=-]+)*)", re.IGNORECASE
)


def annotate(option: dict[str, Any], source: str) -> dict[str, Any]:
    """Mark deprecated options and the replacement their help text names."""
    help_text = option.get("help") or ""
    deprecated = bool(_DEPRECATED.search(help_text))
    match = _REPLACEMENT.search(help_text) if deprecated else None
    replacement = match.group(1).rstrip(".,") if match else None
    return {
        **option,
        "deprecated": deprecated,
        "replacement": replacement,
        "source": source,
        "help": help_text[:240],
    }


def find_wheel(version: str, wheel: Path | None, cache: Path) -> Path:
    if wheel is not None:
        return wheel
    for folder in (Path("/tmp/sglang-wheels"), cache):
        found = sorted(folder.glob(f"sglang-{version}-*.whl"))
        if found:
            return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", f"sglang=={version}", "-d", str(cache)],
        check=True,
    )
    return sorted(cache.glob(f"sglang-{version}-*.whl"))[0]


def create_parser_venv(wheel: Path, env_dir: Path, stub_modules: list[str] | None = None) -> Path:
    """A venv (over the system site packages) with the release installed --no-deps; returns its python.

    With `stub_modules`, a .pth hook stubs exactly those modules at start-up, so a plain
    `from sglang.srt.server_args import ServerArgs` works there (tests use it as a stand-in host)."""
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
    subprocess.run([*pip, str(wheel)], check=True, capture_output=True)
    deps = subprocess.run([*pip, *REAL_DEPENDENCIES], capture_output=True, text=True, check=False)
    if deps.returncode != 0:
        sys.stderr.write(deps.stderr)
        print("warning: could not install the helper packages; trying with stubs", file=sys.stderr)
    if stub_modules is not None:
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        hook = STUBS + f"\nSTUBBED.extend({sorted(stub_modules)!r})\n"
        Path(site, "_k26ctl_sglang_stubs.py").write_text(hook, encoding="utf-8")
        Path(site, "_k26ctl_sglang_stubs.pth").write_text("import _k26ctl_sglang_stubs\n", encoding="utf-8")
    return python


def extract(wheel: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="k26ctl-sglang-") as tmp:
        python = create_parser_venv(wheel, Path(tmp) / "venv")
        result = subprocess.run(
            [str(python), "-c", EXTRACT], capture_output=True, text=True, check=False, cwd=tmp
        )
        if result.returncode != 0:
            sys.stderr.write(result.stderr)
            raise SystemExit(f"building SGLang's parser failed (exit {result.returncode})")
        data: dict[str, Any] = json.loads(result.stdout)
        return data


def build_table(raw: dict[str, Any]) -> dict[str, Any]:
    version = raw["version"]
    options = [annotate(o, f"sglang-{version}") for o in raw["options"]]
    known = {f for o in options for f in o["flags"]}
    options += [annotate(o, "pr-29907") for o in DDTREE_OPTIONS if o["flags"][0] not in known]
    algorithms = [a for a in raw["speculative_algorithms"] if a != "NONE"]
    return {
        "sglang_version": version,
        "generated_by": "scripts/gen_sglang_options.py",
        "parser": "sglang.srt.server_args.ServerArgs.add_cli_args",
        "stubbed_modules": raw["stubbed"],
        "speculative_algorithms": {
            "release": algorithms,
            "pr-29907": DDTREE_ALGORITHMS,
        },
        "options": sorted(options, key=lambda o: o["flags"][0]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="0.5.15")
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/k26ctl-sglang-wheels"))
    args = ap.parse_args()
    wheel = find_wheel(args.version, args.wheel, args.cache)
    table = build_table(extract(wheel))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(
        f"{args.out}: {len(table['options'])} options from sglang {table['sglang_version']}"
        f" (stubbed: {', '.join(table['stubbed_modules']) or 'none'})"
    )


if __name__ == "__main__":
    main()
