"""Profile -> LaunchSpec (argv + environment) -> systemd unit text.

The unit is the contract with the host: what `ExecStart=` says is exactly the argv SGLang will see.
Every word goes through `k26ctl.unitfile`, which escapes it for systemd's three rewrites and can parse
the unit back (tests compare both directions, and `systemd-analyze verify` checks the unit).

The one deliberate unescaped expansion is the API key: `sglang.api_key_env: NAME` renders
`--api-key ${NAME}`, which systemd fills from `Environment=`/`EnvironmentFile=` on the host, so the
secret itself never appears in the unit or in k26ctl's output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from k26ctl.algorithms import BY_NAME, DDTREE_BUDGET, DRAFT_TOKENS
from k26ctl.documents import tagged
from k26ctl.errors import ConfigError
from k26ctl.profile import Profile, SpecAlgorithm
from k26ctl.unitfile import (
    EnvRef,
    check_env_name,
    check_text,
    escape_specifiers,
    quote_env_assignment,
    quote_exec_word,
)

REDACTED = "***"
UNIT_TEMPLATE = "sglang.service.j2"

# Flags whose value is a secret when written literally (extra_args); their values are redacted.
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key"})
_SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL|AUTH|COOKIE|PRIVATE)", re.IGNORECASE)
# The characters of a URL scheme (RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )).
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@-]+$")
_USER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*\$?$|^[0-9]+$")


@dataclass
class LaunchSpec:
    """What the service runs: argv (argv[0] is the interpreter) and its Environment= entries.

    `env_refs` maps argv indices to environment variable names that systemd substitutes at start
    (the word in `argv` then reads `${NAME}`); every other word is literal.
    """

    argv: list[str]
    env: dict[str, str]
    env_refs: dict[int, str] = field(default_factory=dict)

    def flags(self) -> list[str]:
        """The option names present in argv (`--x` or the `--x` of `--x=v`)."""
        return [w.split("=", 1)[0] for w in self.argv[3:] if w.startswith("--")]

    def redacted_argv(self) -> list[str]:
        return redact_argv(self.argv, self.env_refs)

    def redacted_env(self) -> dict[str, str]:
        return redact_env(self.env)


# ---- value checks -------------------------------------------------------------------------------


def _check_executable(path: str, where: str) -> str:
    check_text(path, where)
    if not path.startswith("/"):
        raise ConfigError(
            f"{where} must be an absolute path (got {path!r})", "for example /opt/sglang/venv/bin/python"
        )
    bad = sorted(set(path) & set("\"'\\$"))
    if bad:
        raise ConfigError(
            f"{where} contains characters systemd refuses or rewrites in an executable path: {''.join(bad)}",
            "install the interpreter under a plain path",
        )
    parts = path.split("/")[1:]
    if path.endswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(f"{where} must be a normalized path (got {path!r})", "drop '.', '..' and '//'")
    return path


def _check_path_setting(path: str, where: str) -> str:
    check_text(path, where)
    if not path.startswith("/") or path != path.strip() or path.endswith("\\"):
        raise ConfigError(
            f"{where} must be an absolute path (got {path!r})", "for example /etc/sglang/sglang.env"
        )
    return path


def _check_free_text(value: str, where: str) -> str:
    check_text(value, where)
    if value.endswith("\\"):
        raise ConfigError(f"{where} must not end with a backslash (it would join the next unit line)")
    return value


def _check_unit_list(value: str, where: str) -> str:
    """Unit names only (space-separated), each checked like a unit name; no specifiers survive."""
    names = value.split()
    if not names:
        raise ConfigError(f"{where} is empty", "for example multi-user.target")
    for name in names:
        if not _UNIT_NAME.match(name) or len(name) > 255:
            raise ConfigError(f"{where}: {name!r} is not a unit name", "for example multi-user.target")
    return " ".join(escape_specifiers(n) for n in names)


# ---- redaction ----------------------------------------------------------------------------------


def redact_argv(argv: Iterable[str], env_refs: Mapping[int, str] | None = None) -> list[str]:
    """Hide literal secret values (`--api-key VALUE`, `--api-key=VALUE`); `${NAME}` stays visible."""
    refs = env_refs or {}
    out: list[str] = []
    hide_next = False
    for i, word in enumerate(argv):
        if hide_next and i not in refs:
            out.append(REDACTED)
        elif "=" in word and word.split("=", 1)[0] in SECRET_FLAGS:
            out.append(word.split("=", 1)[0] + "=" + REDACTED)
        else:
            out.append(redact_url_credentials(word))
        hide_next = word in SECRET_FLAGS
    return out


def redact_url_credentials(value: str) -> str:
    """`https://user:pw@host` -> `https://user:***@host`; a bare `token@` becomes `***@`.

    A URL with credentials is scheme `://` userinfo `@`, anywhere in a value. Found by scanning from
    each `://` (back over the scheme, forward over the userinfo), so the time is linear in the value's
    length: a regular expression tried at every start backtracks over a long run of letters, and a
    120 KB environment value took `k26ctl render` 22 s."""
    out: list[str] = []
    done = 0  # value[:done] is in `out` already
    at = value.find("://")
    while at != -1:
        start = at
        while start > done and value[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < at and not value[start].isalpha():
            start += 1  # a scheme starts with a letter (the run is ASCII: isalpha is A-Z, a-z)
        end = at + 3
        while end < len(value) and value[end] not in "/@" and not value[end].isspace():
            end += 1
        if start < at and end > at + 3 and end < len(value) and value[end] == "@":
            user, sep, _secret = value[at + 3 : end].partition(":")
            out.append(value[done:start] + value[start : at + 3])
            out.append(f"{user}:{REDACTED}@" if sep else f"{REDACTED}@")
            done = end + 1
            at = value.find("://", done)
        else:
            at = value.find("://", at + 1)
    return "".join(out) + value[done:]


def is_secret_env_name(name: str) -> bool:
    return bool(_SECRET_ENV_NAME.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        k: (REDACTED if is_secret_env_name(k) and v else redact_url_credentials(v)) for k, v in env.items()
    }


# ---- Profile -> LaunchSpec ----------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def block_size_flag(algorithm: SpecAlgorithm) -> str:
    """The flag `spec.block_size` renders as for this algorithm (the catalogue's row says)."""
    return BY_NAME[algorithm.value].block_flag or DRAFT_TOKENS


def render_launch(profile: Profile) -> LaunchSpec:
    """The argv and environment the service runs with. Canonical flag spellings only."""
    sg = profile.sglang
    spec = profile.spec
    argv: list[str] = [_check_executable(sg.python, "sglang.python"), "-m", sg.entrypoint]
    env_refs: dict[int, str] = {}

    def opt(flag: str, value: Any) -> None:
        if value is not None:
            argv.extend([flag, _fmt(value)])

    def switch(flag: str, on: bool) -> None:
        if on:
            argv.append(flag)

    opt("--model-path", sg.model_path)
    opt("--served-model-name", sg.served_model_name)
    opt("--host", sg.host)
    opt("--port", sg.port)
    opt("--tp-size", sg.tp_size)
    opt("--attention-backend", sg.attention_backend)
    switch("--trust-remote-code", sg.trust_remote_code)
    opt("--tool-call-parser", sg.tool_call_parser)
    opt("--reasoning-parser", sg.reasoning_parser)
    opt("--context-length", sg.context_length)
    opt("--mem-fraction-static", sg.mem_fraction_static)
    opt("--max-running-requests", sg.max_running_requests)
    opt("--page-size", sg.page_size)
    switch("--disable-overlap-schedule", sg.disable_overlap_schedule)
    opt("--chunked-prefill-size", sg.chunked_prefill_size)
    opt("--kv-cache-dtype", sg.kv_cache_dtype)
    if sg.cuda_graph == "disabled":
        opt("--cuda-graph-backend-decode", "disabled")
        opt("--cuda-graph-backend-prefill", "disabled")
    else:
        opt("--cuda-graph-max-bs-decode", sg.cuda_graph_max_bs)
    switch("--enable-metrics", sg.enable_metrics)
    opt("--decode-log-interval", sg.decode_log_interval)
    opt("--watchdog-timeout", sg.watchdog_timeout)
    opt("--log-level", sg.log_level)

    env: dict[str, str] = {"PATH": profile.service.path}
    if profile.service.cuda_home:
        env["CUDA_HOME"] = profile.service.cuda_home

    row = BY_NAME[spec.algorithm.value]
    if row.speculative:
        opt("--speculative-algorithm", row.name)
        opt("--speculative-draft-model-path", spec.draft_model_path)
        opt(block_size_flag(spec.algorithm), spec.block_size)
        opt("--speculative-num-steps", spec.num_steps)
        opt("--speculative-eagle-topk", spec.eagle_topk)
        opt("--speculative-draft-attention-backend", spec.draft_attention_backend)
        if DDTREE_BUDGET in row.reads:
            opt(DDTREE_BUDGET, spec.ddtree.budget)
            if spec.ddtree.max_topk is not None:
                env["SGLANG_DDTREE_MAX_TOPK"] = _fmt(spec.ddtree.max_topk)
            if spec.ddtree.depth_bonus is not None:
                env["SGLANG_DDTREE_DEPTH_BONUS"] = _fmt(spec.ddtree.depth_bonus)

    if sg.api_key_env:
        argv.append("--api-key")
        env_refs[len(argv)] = check_env_name(sg.api_key_env, "sglang.api_key_env")
        argv.append(str(EnvRef(sg.api_key_env)))

    restart = profile.restart
    switch("--weight-loader-prefetch-checkpoints", bool(restart.loader_prefetch_checkpoints))
    if restart.loader_threads is not None:
        extra = {"enable_multithread_load": True, "num_threads": restart.loader_threads}
        opt("--model-loader-extra-config", json.dumps(extra, separators=(",", ":")))
    env.update(jit_cache_env(profile))
    argv.extend(sg.extra_args)
    for name, value in profile.service.environment.items():
        env[check_env_name(name, "service.environment")] = value

    for i, word in enumerate(argv):
        check_text(word, f"argument {i} ({word[:40]!r})")
    for name, value in env.items():
        check_text(value, f"environment {name}")
    return LaunchSpec(argv=argv, env=env, env_refs=env_refs)


# The variables that place each JIT cache (their defaults, under HOME or /tmp, are what a hardened
# unit loses): Triton's TRITON_CACHE_DIR (triton/knobs.py), Inductor's TORCHINDUCTOR_CACHE_DIR
# (torch/_inductor/runtime/cache_dir_utils.py), SGLang's SGLANG_DG_CACHE_DIR for DeepGEMM and
# SGLANG_CACHE_DIR (0.5.15 environ.py:956 and deep_gemm_wrapper/compile_utils.py:38; 0.5.23
# environ.py:1373,1383), and the builds of SGLang's own JIT kernels (NGRAM's corpus among them), under
# HOME by default: TVM_FFI_CACHE_DIR in 0.5.15 (jit_kernel/utils.py:280, ~/.cache/tvm-ffi) and
# SGLANG_JIT_CACHE_DIR in 0.5.23 (kernels/jit/utils/compile/cache.py:318, ~/.cache/sglang/jit).
JIT_CACHE_VARS = {
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "SGLANG_DG_CACHE_DIR": "deep_gemm",
    "SGLANG_CACHE_DIR": "sglang",
    "TVM_FFI_CACHE_DIR": "tvm-ffi",
    "SGLANG_JIT_CACHE_DIR": "sglang-jit",
}


def jit_cache_root(profile: Profile) -> str | None:
    """Where the unit keeps its JIT caches (None: k26ctl leaves them where the releases put them)."""
    restart = profile.restart
    if not restart.jit_cache:
        return None
    return (
        restart.jit_cache_dir.rstrip("/") if restart.jit_cache_dir else f"/var/cache/{_cache_name(profile)}"
    )


def _cache_name(profile: Profile) -> str:
    name = profile.service.name
    return name[: -len(".service")] if name.endswith(".service") else name


def jit_cache_env(profile: Profile) -> dict[str, str]:
    root = jit_cache_root(profile)
    if root is None:
        return {}
    return {var: f"{root}/{sub}" for var, sub in JIT_CACHE_VARS.items()}


# ---- unit ---------------------------------------------------------------------------------------


def unit_name(profile: Profile) -> str:
    name = profile.service.name
    return name if name.endswith(".service") else f"{name}.service"


def unit_path(profile: Profile) -> str:
    return profile.service.unit_dir.rstrip("/") + "/" + unit_name(profile)


def exec_start_value(spec: LaunchSpec, *, redact: bool = False) -> str:
    """The ExecStart= value, one option (with its value) per continued line for readable diffs."""
    argv = spec.redacted_argv() if redact else spec.argv
    words = [EnvRef(spec.env_refs[i]) if i in spec.env_refs else w for i, w in enumerate(argv)]
    quoted = [quote_exec_word(w) for w in words]
    lines: list[str] = [" ".join(quoted[:3])]
    for i, q in enumerate(quoted[3:], start=3):
        word = argv[i]
        if word.startswith("--") or not lines[1:]:
            lines.append(q)
        else:
            lines[-1] += " " + q
    return " \\\n    ".join(lines)


def _unit_context(profile: Profile, spec: LaunchSpec, redact: bool) -> dict[str, Any]:
    svc = profile.service
    env = spec.redacted_env() if redact else spec.env
    for value, where in ((svc.user, "service.user"), (svc.group, "service.group")):
        if value is not None and not _USER_NAME.match(value):
            raise ConfigError(f"{where}: {value!r} is not a valid user or group name")
    for unit in svc.after:
        if not _UNIT_NAME.match(unit):
            raise ConfigError(
                f"service.after: {unit!r} is not a unit name", "for example nvidia-persistenced.service"
            )
    return {
        "after": " ".join(escape_specifiers(u) for u in svc.after),
        "description": escape_specifiers(_check_free_text(svc.description, "service.description")),
        "start_limit_burst": svc.start_limit_burst,
        "start_limit_interval_sec": svc.start_limit_interval_sec,
        "user": svc.user,
        "group": svc.group,
        "working_directory": escape_specifiers(
            _check_path_setting(svc.working_directory, "service.working_directory")
        )
        if svc.working_directory
        else None,
        "environment": [quote_env_assignment(k, v) for k, v in env.items()],
        "environment_file": escape_specifiers(
            _check_path_setting(svc.environment_file, "service.environment_file")
        )
        if svc.environment_file
        else None,
        "exec_start": exec_start_value(spec, redact=redact),
        "restart": svc.restart,
        "restart_sec": svc.restart_sec,
        "timeout_start_sec": svc.timeout_start_sec,
        "timeout_stop_sec": svc.timeout_stop_sec,
        "limit_nofile": svc.limit_nofile,
        "syslog_identifier": escape_specifiers(
            _check_free_text(svc.syslog_identifier or svc.name, "service.syslog_identifier")
        ),
        "hardening": svc.hardening,
        # systemd makes /var/cache/<name> for the service and keeps it across restarts
        "cache_directory": _cache_name(profile)
        if profile.restart.jit_cache and not profile.restart.jit_cache_dir
        else None,
        "wanted_by": _check_unit_list(svc.wanted_by, "service.wanted_by"),
    }


def render_unit(profile: Profile, *, redact: bool = False) -> str:
    """The full unit text. `redact=True` hides literal secrets (for display only, never deploy it)."""
    import jinja2

    from k26ctl.resources import templates_dir

    spec = render_launch(profile)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    try:
        template = env.get_template(UNIT_TEMPLATE)
    except jinja2.TemplateNotFound:
        raise ConfigError(f"unit template {UNIT_TEMPLATE} not found in {templates_dir()}") from None
    return template.render(**_unit_context(profile, spec, redact))


def render_env_file(spec: LaunchSpec, *, redact: bool = False) -> str:
    """The environment as an EnvironmentFile= body (KEY="value" lines, for `--format env`)."""
    env = spec.redacted_env() if redact else spec.env
    lines = []
    for name, value in env.items():
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
        lines.append(f'{name}="{escaped}"')
    return "\n".join(lines) + ("\n" if lines else "")


def rendered_document(profile: Profile, fmt: str) -> str:
    """The text `k26ctl render --format FMT` prints, always with literal secrets redacted."""
    import json
    import shlex

    spec = render_launch(profile)
    if fmt == "argv":
        return shlex.join(spec.redacted_argv()) + "\n"
    if fmt == "env":
        return render_env_file(spec, redact=True)
    unit = render_unit(profile, redact=True)
    if fmt == "unit":
        return unit
    document = tagged(
        "render",
        {
            "unit_name": unit_name(profile),
            "unit_path": unit_path(profile),
            "argv": spec.redacted_argv(),
            "env": spec.redacted_env(),
            "env_refs": {str(i): name for i, name in spec.env_refs.items()},
            "unit": unit,
        },
    )
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
