#!/usr/bin/env python3
"""Generate k26ctl/data/sglang_options.json from the argument parsers of real SGLang releases.

How: each release wheel (0.5.14 to 0.5.23) is unpacked and imported by a helper venv (system site
packages visible, so torch and friends import when present, plus a few small packages SGLang needs
while importing); `sglang.srt.server_args.ServerArgs.add_cli_args` builds SGLang's real argparse parser
and the table is read from its actions. Third-party modules that are not installed are replaced by
permissive stub modules (only missing top-level non-SGLang packages; SGLang's own code always runs for
real). The parser is only built, never used to launch anything.

The file is compact: the oldest release's table in full, then per release what it added, removed or
changed (flags, choices, deprecations) and which speculative algorithms appeared or went. The DDTree
branch (open PR sgl-project/sglang#29907) is no release: its additions (`--speculative-ddtree-budget`,
algorithm DDTREE, its environment knobs) are listed separately, from the branch's `server_args.py`
and `environ.py` at the revision named below.

Usage: scripts/gen_sglang_options.py [--versions 0.5.14,...] [--cache /work/cache] [--out PATH]
Wheels are looked up in CACHE/sglang-X/, else fetched there with `pip download --no-deps`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import venv
import zipfile
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
REAL_DEPENDENCIES = ["dill", "psutil", "tqdm", "pybase64", "pyzmq", "msgspec"]

RELEASES = [f"0.5.{n}" for n in range(14, 24)]

# The DDTree branch of sgl-project/sglang#29907 (revision 93e9850e), on top of roughly 0.5.15.
DDTREE_BRANCH: dict[str, Any] = {
    "name": "DDTree PR #29907",
    "revision": "93e9850e430035f8a363fd881a6a0c5436b95108",
    "options": [
        {
            "flags": ["--speculative-ddtree-budget"],
            "dest": "speculative_ddtree_budget",
            "value": True,
            "type": "int",
        }
    ],
    "algorithms": ["DDTREE"],
    # environ.py of the branch: name -> [type, default]
    "environment": {
        "SGLANG_DDTREE_MAX_TOPK": ["int", 6],
        "SGLANG_DDTREE_DEPTH_BONUS": ["float", 0.2],
        "SGLANG_DDTREE_RANK_PROBE": ["bool", False],
    },
}

_DEPRECATED = re.compile(r"\bdeprecated\b", re.IGNORECASE)
_REPLACEMENT = re.compile(
    r"(?:use|alias (?:for|of))\s+(--[A-Za-z0-9{},_=-]+(?:\s+--[A-Za-z0-9{},_=-]+)*)", re.IGNORECASE
)


def compact_option(option: dict[str, Any]) -> dict[str, Any]:
    """One parser action as stored: only what validation reads, defaults left out."""
    out: dict[str, Any] = {"flags": option["flags"], "dest": option["dest"]}
    if option["takes_value"]:
        out["value"] = True
    if option["nargs"] is not None:
        out["nargs"] = option["nargs"]
    if option["choices"] is not None:
        out["choices"] = option["choices"]
    help_text = option.get("help") or ""
    if _DEPRECATED.search(help_text):
        match = _REPLACEMENT.search(help_text)
        out["deprecated"] = match.group(1).rstrip(".,") if match else True
    if option.get("hidden"):
        out["hidden"] = True
    return out


def find_wheel(version: str, cache: Path) -> Path:
    folder = cache / f"sglang-{version}"
    found = sorted(folder.glob(f"sglang-{version}-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", f"sglang=={version}", "-d", str(folder)],
        check=True,
    )
    return sorted(folder.glob(f"sglang-{version}-*.whl"))[0]


def create_parser_venv(wheel: Path | None, env_dir: Path, stub_modules: list[str] | None = None) -> Path:
    """A venv (over the system site packages) with the helper packages and, given a wheel, the release
    installed --no-deps; returns its python.

    With `stub_modules`, a .pth hook stubs exactly those modules at start-up, so a plain
    `from sglang.srt.server_args import ServerArgs` works there (tests use it as a stand-in host)."""
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
    if wheel is not None:
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


def extract(wheel: Path, python: Path, workdir: Path) -> dict[str, Any]:
    """The raw parser dump of one release, imported from its unpacked wheel."""
    source = workdir / wheel.stem
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(source, [n for n in archive.namelist() if n.startswith("sglang/")])
    env = {**os.environ, "PYTHONPATH": str(source)}
    result = subprocess.run(
        [str(python), "-c", EXTRACT], capture_output=True, text=True, check=False, cwd=workdir, env=env
    )
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"building the parser of {wheel.name} failed (exit {result.returncode})")
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def release_entry(raw: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """flags[0] -> compact option, and the built-in speculative algorithms, of one release dump."""
    options = {o["flags"][0]: compact_option(o) for o in raw["options"]}
    algorithms = sorted(a for a in raw["speculative_algorithms"] if a != "NONE")
    return options, algorithms


def build_table(raws: list[dict[str, Any]]) -> dict[str, Any]:
    """The compact table: the first release in full, then each next release as a delta."""
    entries = [release_entry(raw) for raw in raws]
    base_options, base_algorithms = entries[0]
    deltas = []
    for (previous, previous_algos), (current, algos), raw in zip(
        entries, entries[1:], raws[1:], strict=False
    ):
        deltas.append(
            {
                "version": raw["version"],
                "added": [current[k] for k in sorted(current) if k not in previous],
                "removed": sorted(k for k in previous if k not in current),
                "changed": [
                    current[k] for k in sorted(current) if k in previous and current[k] != previous[k]
                ],
                "algorithms_added": [a for a in algos if a not in previous_algos],
                "algorithms_removed": [a for a in previous_algos if a not in algos],
            }
        )
    return {
        "generated_by": "scripts/gen_sglang_options.py",
        "parser": "sglang.srt.server_args.ServerArgs.add_cli_args",
        "releases": [raw["version"] for raw in raws],
        "stubbed_modules": {raw["version"]: raw["stubbed"] for raw in raws},
        "base": {
            "version": raws[0]["version"],
            "options": [base_options[k] for k in sorted(base_options)],
            "algorithms": base_algorithms,
        },
        "deltas": deltas,
        "branches": {"ddtree": DDTREE_BRANCH},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default=",".join(RELEASES))
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--cache", type=Path, default=Path("/work/cache"))
    args = ap.parse_args()
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    with tempfile.TemporaryDirectory(prefix="k26ctl-sglang-") as tmp:
        python = create_parser_venv(None, Path(tmp) / "venv")
        raws = []
        for version in versions:
            raw = extract(find_wheel(version, args.cache), python, Path(tmp))
            if raw["version"] != version:
                raise SystemExit(f"the wheel of {version} reports version {raw['version']}")
            print(f"sglang {version}: {len(raw['options'])} options", file=sys.stderr)
            raws.append(raw)
    table = build_table(raws)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, separators=(",", ":")) + "\n", encoding="utf-8")
    size = args.out.stat().st_size
    print(f"{args.out}: {len(versions)} releases, {size} bytes")


if __name__ == "__main__":
    main()
