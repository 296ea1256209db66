"""Profiles: the YAML description of one deployment.

A profile file may name a parent with `extends:` (relative to the file, chains allowed, cycles
rejected); parents are deep-merged under children. `--set a.b=c` overrides are applied last, with the
value parsed as YAML flow syntax and coerced by the field's type. Unknown keys anywhere are errors
with a did-you-mean hint, because a silently ignored key on a 7-minute restart cycle is expensive.
"""

from __future__ import annotations

import difflib
import enum
import hashlib
import json
import typing
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from k26ctl.algorithms import NAMES as ALGORITHM_NAMES
from k26ctl.errors import ConfigError

# One member per row of the algorithm catalogue (k26ctl/algorithms.py); a profile names one of them.
SpecAlgorithm = enum.Enum(  # type: ignore[misc]  # members come from the catalogue, not literals
    "SpecAlgorithm", [(name, name) for name in ALGORITHM_NAMES], type=str, module=__name__
)


def _reject_control_chars(value: str, where: str = "value") -> str:
    # Cc covers C0, DEL and the C1 range (U+0085 is a line break to some parsers); Zl/Zp are the
    # Unicode line and paragraph separators; Cs are lone surrogates, which cannot be written as UTF-8.
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp", "Cs"):
            raise ValueError(f"{where} contains a newline or control character ({ch!r})")
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_enum_values=False)

    @field_validator("*", mode="after")
    @classmethod
    def _no_control_chars(cls, value: Any) -> Any:
        def check(v: Any) -> None:
            if isinstance(v, str):
                _reject_control_chars(v)
            elif isinstance(v, Mapping):
                for k, item in v.items():
                    check(k)
                    check(item)
            elif isinstance(v, (list, tuple)):
                for item in v:
                    check(item)

        check(value)
        return value


class HostConfig(_Model):
    """Where the service runs. `address` is an SSH alias (resolved through ~/.ssh/config), a host name,
    `local` for this machine, or empty when `lab` names a lab host."""

    address: str = "k26-host"
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    identity_file: str | None = None
    lab: str | None = None
    connect_timeout: float = Field(default=10.0, gt=0, le=300)
    command_timeout: float = Field(default=120.0, gt=0)
    accept_new_host_key: bool = False
    sudo: bool | None = None  # None: use sudo -n only when the login user is not root


class ServiceConfig(_Model):
    # systemd unit names are at most 255 bytes including ".service"
    name: str = Field(default="sglang", pattern=r"^[A-Za-z0-9:_.@-]+$", max_length=200)
    description: str = "SGLang server"
    unit_dir: str = "/etc/systemd/system"
    user: str | None = None
    group: str | None = None
    working_directory: str | None = None
    path: str = "/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    cuda_home: str | None = "/usr/local/cuda"
    environment: dict[str, str] = Field(default_factory=dict)
    environment_file: str | None = None
    restart: Literal["no", "on-failure", "always", "on-abnormal"] = "on-failure"
    restart_sec: int = Field(default=30, ge=0)
    start_limit_burst: int = Field(default=3, ge=1)
    start_limit_interval_sec: int = Field(default=7200, ge=0)
    timeout_start_sec: int = Field(default=1800, ge=1)
    timeout_stop_sec: int = Field(default=120, ge=1)
    # How long SGLang may take to finish its running requests after SIGTERM; systemd must wait that long.
    drain_timeout_sec: int | None = Field(default=None, ge=0)
    limit_nofile: int = Field(default=65536, ge=1024)
    syslog_identifier: str | None = None
    hardening: bool = True
    wanted_by: str = Field(default="multi-user.target", pattern=r"^[A-Za-z0-9:_.@-]+( [A-Za-z0-9:_.@-]+)*$")
    after: list[str] = Field(default_factory=list)  # extra units to start after, e.g. nvidia-persistenced

    @model_validator(mode="after")
    def _stop_outlasts_drain(self) -> ServiceConfig:
        if self.drain_timeout_sec is not None and self.timeout_stop_sec < self.drain_timeout_sec:
            raise ValueError(
                f"timeout_stop_sec ({self.timeout_stop_sec}) is shorter than drain_timeout_sec "
                f"({self.drain_timeout_sec}): systemd would kill SGLang while it finishes its requests"
            )
        return self


class DDTreeConfig(_Model):
    budget: int | None = None
    max_topk: int | None = None
    depth_bonus: float | None = None


class SpecConfig(_Model):
    algorithm: SpecAlgorithm = SpecAlgorithm("NONE")
    draft_model_path: str | None = None
    block_size: int | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    draft_attention_backend: str | None = None
    ddtree: DDTreeConfig = Field(default_factory=DDTreeConfig)


class SGLangConfig(_Model):
    python: str = "/opt/sglang/venv/bin/python"
    entrypoint: str = "sglang.launch_server"  # module run with `python -m`
    package_root: str | None = None  # override where the sglang package lives on the host
    # The host's SGLang release, choosing the option table validation uses; deploy and
    # `validate --remote` fill it from the host when it is not set.
    version: str | None = Field(default=None, pattern=r"^v?[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*$")
    model_path: str = "moonshotai/Kimi-K2.6"
    served_model_name: str | None = None
    host: str = "0.0.0.0"
    port: int = Field(default=30000, ge=1, le=65535)
    tp_size: int = Field(default=8, ge=1)
    attention_backend: str | None = "triton"
    trust_remote_code: bool = True
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    context_length: int | None = Field(default=None, ge=1)
    mem_fraction_static: float | None = Field(default=None, gt=0, le=1)
    max_running_requests: int | None = Field(default=None, ge=1)
    page_size: int | None = Field(default=None, ge=1)
    disable_overlap_schedule: bool = False
    cuda_graph: Literal["enabled", "disabled"] = "enabled"
    cuda_graph_max_bs: int | None = Field(default=None, ge=1)  # rendered as --cuda-graph-max-bs-decode
    chunked_prefill_size: int | None = None  # -1 turns chunked prefill off
    kv_cache_dtype: str | None = None
    enable_metrics: bool = True
    decode_log_interval: int | None = Field(default=None, ge=1)
    watchdog_timeout: int | None = Field(default=None, ge=1)
    log_level: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    extra_args: list[str] = Field(default_factory=list)

    @property
    def local_address(self) -> str:
        """Where the server answers as seen from the host itself: an any-address bind (0.0.0.0, or ::
        which is dual-stack by default) answers on IPv4 loopback."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "", "::", "[::]") else self.host


class ReadinessConfig(_Model):
    timeout: float = Field(default=1800.0, gt=0)
    # Each probe is a URL path on the server: "/" then visible ASCII, no spaces, no scheme or host.
    probes: list[Annotated[str, StringConstraints(pattern=r"^/[!-~]*$", max_length=512)]] = Field(
        default_factory=lambda: ["/health", "/v1/models"], min_length=1
    )
    poll_initial: float = Field(default=1.0, gt=0)
    poll_max: float = Field(default=5.0, gt=0, le=5.0)


class SmokeConfig(_Model):
    suite: str | None = None  # None: the shipped default suite
    min_accept_length: float | None = None
    concurrency: int = Field(default=8, ge=2)
    on_spec_change: bool = True
    timeout: float = Field(default=120.0, gt=0)
    probes: bool = True  # greedy self-consistency probes after the suite (where the server supports them)
    probe_positions: int = Field(default=32, ge=1)  # output tokens probed per temperature-0 answer
    # lossy-by-design SGLang settings (relaxed accept thresholds, simulated accept length): "warn" names
    # them in validate and the verdict, "strict" makes them an error (k26ctl/validate/lossless.py)
    lossless: Literal["warn", "strict"] = "warn"
    # rescoring probes for sampled answers: null follows `probes` (a DDTree server is not asked for
    # log-probabilities unless this is true), false turns them off
    rescoring: bool | None = None
    # Below this share of the configuration's accept-length baseline a deploy fails (below 95 % it warns)
    accept_fail_ratio: float | None = Field(default=None, gt=0, le=1)


class RestartConfig(_Model):
    """What keeps a restart short: kernel caches that survive it, and weights read before the stop."""

    # Triton, Inductor, DeepGEMM and SGLang's own caches in a directory that outlives the process:
    # systemd's CacheDirectory=<service name> (/var/cache/<name>) unless jit_cache_dir names one
    jit_cache: bool = True
    jit_cache_dir: str | None = Field(default=None, pattern=r"^/[^\s]*$")
    # Read the next start's weight files into the page cache while the old server still serves:
    # auto (when less than 90 % of them is resident), always, never
    readahead: Literal["auto", "always", "never"] = "auto"
    readahead_rate_mb_s: float = Field(default=1000.0, gt=0)  # an I/O budget the old server can live with
    readahead_max_seconds: float = Field(default=1800.0, gt=0)
    # The release's own loading flags (their names differ per release; validate checks them)
    loader_prefetch_checkpoints: bool | None = None  # --weight-loader-prefetch-checkpoints
    loader_threads: int | None = Field(default=None, ge=1, le=256)  # --model-loader-extra-config


class Profile(_Model):
    name: str | None = None
    description: str | None = None
    host: HostConfig = Field(default_factory=HostConfig)
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    sglang: SGLangConfig = Field(default_factory=SGLangConfig)
    spec: SpecConfig = Field(default_factory=SpecConfig)
    patches: list[str] = Field(default_factory=list)
    readiness: ReadinessConfig = Field(default_factory=ReadinessConfig)
    smoke: SmokeConfig = Field(default_factory=SmokeConfig)
    restart: RestartConfig = Field(default_factory=RestartConfig)

    @property
    def served_name(self) -> str:
        return self.sglang.served_model_name or self.sglang.model_path

    def speculative_settings(self) -> dict[str, Any]:
        """The settings whose change must be followed by a smoke run."""
        return {
            "spec": self.spec.model_dump(mode="json"),
            "attention_backend": self.sglang.attention_backend,
            "page_size": self.sglang.page_size,
            "patches": sorted(self.patches),
        }

    def fingerprint(self) -> str:
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


class LoadedProfile(BaseModel):
    """A validated profile plus where it came from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    profile: Profile
    path: Path | None
    chain: list[Path]
    overrides: list[str]
    data: dict[str, Any]  # the merged raw mapping, before model defaults


# ---- loading -------------------------------------------------------------------------------------


def _did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    choices = list(choices)
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if match:
        return match[0]
    prefixed = [c for c in choices if c.startswith(word)]
    return prefixed[0] if len(prefixed) == 1 else None


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Maps merge key by key; anything else in `override` replaces what `base` had."""
    merged: dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    from k26ctl import inputs, yamlsafe

    text = inputs.read_text(
        path, what="profile", max_bytes=inputs.MAX_PROFILE_BYTES, hint="check the path, or list profiles/"
    )
    try:
        data = yamlsafe.load(text, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{where}: {problem}", "fix the YAML syntax") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a profile must be a mapping, got {type(data).__name__}")
    if _expanded_size(data, MAX_PROFILE_VALUES) > MAX_PROFILE_VALUES:
        raise ConfigError(
            f"{path}: the profile expands to more than {MAX_PROFILE_VALUES} values",
            "YAML anchors and aliases that multiply (an alias bomb) are refused; write the values out",
        )
    return data


# A real profile has a few hundred values. Aliases share nodes, so a small file can stand for billions
# of them once merged or copied; count what it expands to, and stop counting at the limit.
MAX_PROFILE_VALUES = 100_000


def _expanded_size(node: Any, limit: int) -> int:
    count = 0
    stack = [node]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


# `extends:` chains are a few files long; a longer one is a mistake (or a generated attack).
MAX_EXTENDS_CHAIN = 16


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: RuntimeError before Python 3.13, OSError after
        from k26ctl.termsafe import clean

        raise ConfigError(f"profile {clean(str(path), limit=300)}: symbolic link loop") from None


def _load_chain(path: Path, seen: list[Path]) -> tuple[dict[str, Any], list[Path]]:
    path = _resolve(path)
    if len(seen) >= MAX_EXTENDS_CHAIN:
        raise ConfigError(
            f"{seen[0]}: extends chain longer than {MAX_EXTENDS_CHAIN} files", "shorten the extends: chain"
        )
    if path in seen:
        cycle = " -> ".join(p.name for p in [*seen, path])
        raise ConfigError(f"extends cycle: {cycle}", "remove one of the extends: lines")
    data = _read_yaml(path)
    parent_ref = data.pop("extends", None)
    chain = [*seen, path]
    if parent_ref is None:
        return data, [path]
    if not isinstance(parent_ref, str) or not parent_ref or "\x00" in parent_ref:
        raise ConfigError(f"{path}: extends must be a file name", "for example: extends: base.yaml")
    if not isinstance(parent_ref, str) or not parent_ref:
        raise ConfigError(f"{path}: extends must be a file name", "for example: extends: base.yaml")
    parent_data, parent_chain = _load_chain(path.parent / parent_ref, chain)
    return deep_merge(parent_data, data), [*parent_chain, path]


def _field_names(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _submodel(model: type[BaseModel], key: str) -> type[BaseModel] | None:
    field = model.model_fields.get(key)
    if field is None:
        return None
    annotation = field.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _check_unknown_keys(data: Mapping[str, Any], model: type[BaseModel], where: str, prefix: str) -> None:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in model.model_fields:
            guess = _did_you_mean(str(key), _field_names(model))
            hint = (
                f"did you mean '{prefix}{guess}'?"
                if guess
                else f"known keys: {', '.join(_field_names(model))}"
            )
            raise ConfigError(f"{where}: unknown key '{dotted}'", hint)
        sub = _submodel(model, key)
        if sub is not None and isinstance(value, Mapping):
            _check_unknown_keys(value, sub, where, f"{dotted}.")


def _format_validation_error(exc: ValidationError, where: str) -> ConfigError:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    value = err.get("input")
    text = repr(value)
    shown = (
        "" if isinstance(value, (dict, list)) else f" (got {text[:80] + '...' if len(text) > 80 else text})"
    )
    more = f"; {len(exc.errors()) - 1} more" if len(exc.errors()) > 1 else ""
    return ConfigError(
        f"{where}: {loc}: {msg}{shown}{more}", "fix the value, see profiles/base.yaml for examples"
    )


def parse_override(spec: str) -> tuple[list[str], str, Any]:
    """`a.b=value` -> (['a', 'b'], raw text, parsed value). Values use YAML flow syntax."""
    from k26ctl import yamlsafe

    if "=" not in spec:
        raise ConfigError(f"--set {spec!r}: expected KEY=VALUE", "for example --set spec.ddtree.budget=7")
    key, raw = spec.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {spec!r}: empty key", "for example --set spec.ddtree.budget=7")
    try:
        value = yamlsafe.load(raw, f"--set {key}") if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # not YAML: keep the literal text, the model decides whether it fits
    if _expanded_size(value, MAX_PROFILE_VALUES) > MAX_PROFILE_VALUES:
        raise ConfigError(f"--set {key}: the value expands to more than {MAX_PROFILE_VALUES} values")
    return key.split("."), raw, value


def _field_wants_text(model: type[BaseModel], path: list[str]) -> bool:
    """True when the target is a plain string field (so `--set name=on` stays the text 'on')."""
    current: type[BaseModel] | None = model
    for part in path[:-1]:
        current = _submodel(current, part) if current else None
    if current is None:
        return True  # a free-form map such as service.environment holds strings
    field = current.model_fields.get(path[-1])
    if field is None:
        return False
    if typing.get_origin(field.annotation) is Literal:
        return all(isinstance(arg, str) for arg in typing.get_args(field.annotation))
    return field.annotation in (str, str | None)


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    result = json.loads(json.dumps(data, default=str))
    for spec in overrides:
        path, raw, value = parse_override(spec)
        model: type[BaseModel] | None = Profile
        for i, part in enumerate(path):
            if model is None:
                break  # inside a free-form map (environment): any key is allowed
            if part not in model.model_fields:
                prefix = ".".join(path[:i])
                guess = _did_you_mean(part, _field_names(model))
                full_guess = f"{prefix + '.' if prefix else ''}{guess}" if guess else None
                hint = (
                    f"did you mean '{full_guess}'?" if full_guess else "see profiles/base.yaml for the keys"
                )
                raise ConfigError(f"--set {spec!r}: unknown key '{'.'.join(path[: i + 1])}'", hint)
            model = _submodel(model, part)
        if (
            _field_wants_text(Profile, path)
            and not isinstance(value, (str, list, dict))
            and value is not None
        ):
            value = raw
        node = result
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[path[-1]] = value
    return result


def profile_from_data(data: dict[str, Any], where: str = "profile") -> Profile:
    _check_unknown_keys(data, Profile, where, "")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise _format_validation_error(exc, where) from None


def load_profile(path: str | Path, overrides: Iterable[str] = ()) -> LoadedProfile:
    """Read a profile file with its `extends:` chain and apply `--set` overrides."""
    path = Path(path)
    if not path.exists() and not path.suffix:
        candidate = find_shipped_profile(str(path))
        if candidate is not None:
            path = candidate
    data, chain = _load_chain(path, [])
    if not data and len(chain) == 1:
        raise ConfigError(
            f"{path}: the profile is empty",
            "an empty profile would deploy the built-in Kimi K2.6 defaults to k26-host; "
            "name at least the host and model, or write `extends: base.yaml` to mean the defaults",
        )
    overrides = list(overrides)
    _check_unknown_keys(data, Profile, str(path), "")
    merged = apply_overrides(data, overrides)
    where = f"{path} (with --set)" if overrides else str(path)
    profile = profile_from_data(merged, where)
    if profile.name is None:
        profile = profile.model_copy(update={"name": path.stem})
    return LoadedProfile(profile=profile, path=path, chain=chain, overrides=overrides, data=merged)


def find_shipped_profile(name: str) -> Path | None:
    from k26ctl.resources import profiles_dir

    root = profiles_dir()
    for candidate in (root / f"{name}.yaml", root / "lab" / f"{name}.yaml"):
        if candidate.exists():
            return candidate
    return None


def get_dotted(profile: Profile, key: str) -> Any:
    node: Any = profile
    for part in key.split("."):
        if isinstance(node, BaseModel):
            if part not in type(node).model_fields:
                raise ConfigError(f"unknown key '{key}'", "see profiles/base.yaml for the keys")
            node = getattr(node, part)
        elif isinstance(node, Mapping):
            node = node.get(part)
        else:
            raise ConfigError(f"unknown key '{key}'")
    if isinstance(node, enum.Enum):
        return node.value
    if isinstance(node, BaseModel):
        return node.model_dump(mode="json")
    return node
