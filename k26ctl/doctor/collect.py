"""One read-only pass over the host: everything k26ctl depends on, as `Facts`.

Nothing is written, started or restarted: nvidia-smi and nvcc queries, the profile's Python locating
its `sglang` (without importing it), git reads with optional locks off, the patch anchors read, the
unit and `systemctl show`, the journal since the unit's last start, and three GETs through the SSH
forward. Secrets are removed here already (redact.py), so neither the table nor a bundle carries them.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import TYPE_CHECKING, Any

from k26ctl.doctor import redact
from k26ctl.doctor.facts import (
    Facts,
    Gpu,
    GpuFacts,
    HttpFacts,
    JournalFacts,
    PatchFact,
    ProfileFacts,
    RuleFinding,
    SGLangFacts,
    TreeFacts,
    UnitFacts,
)
from k26ctl.doctor.inventory import load_inventory
from k26ctl.errors import K26Error

if TYPE_CHECKING:
    from k26ctl.profile import Profile
    from k26ctl.remote.base import Host

GPU_QUERY = (
    "--query-gpu=index,name,driver_version,compute_cap,memory.total",
    "--format=csv,noheader,nounits",
)
CUDA_VERSION = re.compile(r"CUDA Version:\s*([0-9.]+)")
NVCC_RELEASE = re.compile(r"release ([0-9.]+)")
JOURNAL_SCAN = 5000  # newest journal entries searched for the last start
KEEP_HEAD, KEEP_TAIL = 1500, 1500  # lines of one load kept: its start, and its latest
# systemd's own line as it starts the unit: the load begins after the last one
STARTING = re.compile(r"^(Starting|Started) ")
HTTP_TIMEOUT = 15.0


def collect(host: Host, profile: Profile) -> Facts:
    from k26ctl.patches.host import locate_sglang

    sglang = SGLangFacts()
    try:
        tree = locate_sglang(host, profile)
        sglang = SGLangFacts(root=tree.root, version=tree.version, python=tree.python)
    except K26Error as exc:
        sglang = SGLangFacts(error=exc.one_line())
    patches, patches_error = _patches(host, profile)
    unit = _unit(host, profile)
    journal = _journal(host, profile)
    http = (
        _http(host, profile)
        if unit.active == "active"
        else HttpFacts(error=f"the service is {unit.active or 'not running'}")
    )
    version = sglang.version or profile.sglang.version
    return Facts(
        host=host.name,
        collected=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        profile=ProfileFacts(
            name=profile.name or "",
            service=profile.service.name,
            served_name=profile.served_name,
            model_path=profile.sglang.model_path,
            algorithm=profile.spec.algorithm.value,
            draft_model_path=profile.spec.draft_model_path,
            enable_metrics=profile.sglang.enable_metrics,
            patches=list(profile.patches),
        ),
        gpu=_gpu(host, profile),
        sglang=sglang,
        tree=_tree(host, sglang.root) if sglang.root else TreeFacts(error="no sglang tree found"),
        patches=patches,
        patches_error=patches_error,
        unit=unit,
        journal=journal,
        http=http,
        rules=_rules(profile, version, {p.name: p.state for p in patches}),
        earlier_release_accept=_earlier_release_accept(host, profile, version),
    )


def parse_gpus(text: str) -> list[Gpu] | None:
    """`index, name, driver, compute capability, memory MiB` lines; None when one is not that."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            return None
        memory = int(parts[4]) if parts[4].isdigit() else None
        gpus.append(
            Gpu(
                index=int(parts[0]),
                name=parts[1],
                driver=parts[2],
                compute_cap=parts[3],
                memory_total_mib=memory,
            )
        )
    return gpus or None


def _gpu(host: Host, profile: Profile) -> GpuFacts:
    found = host.run(["nvidia-smi", *GPU_QUERY], timeout=20)
    gpus = parse_gpus(found.stdout) if found.ok else None
    if gpus is None:
        detail = (
            found.stderr.strip().splitlines()
            or found.stdout.strip().splitlines()
            or [f"exit {found.returncode}"]
        )[-1]
        return GpuFacts(ok=False, error=f"nvidia-smi {' '.join(GPU_QUERY)}: {redact.text(detail)[:300]}")
    header = host.run(["nvidia-smi"], timeout=20)
    cuda = CUDA_VERSION.search(header.stdout) if header.ok else None
    nvcc = None
    if profile.service.cuda_home:
        out = host.run([f"{profile.service.cuda_home.rstrip('/')}/bin/nvcc", "--version"], timeout=20)
        release = NVCC_RELEASE.search(out.stdout) if out.ok else None
        nvcc = release.group(1) if release else None
    return GpuFacts(ok=True, gpus=gpus, cuda_driver=cuda.group(1) if cuda else None, nvcc=nvcc)


def _tree(host: Host, root: str) -> TreeFacts:
    """The git checkout the package lives in, if any (a source install); read-only git commands."""
    git = ["env", "GIT_OPTIONAL_LOCKS=0", "git", "-c", "safe.directory=*", "-C", root]
    top = host.run([*git, "rev-parse", "--show-toplevel", "HEAD"], timeout=30)
    if not top.ok:
        missing = "not found" in top.stderr or top.returncode == 127
        return TreeFacts(git=False, error="git is not installed on the host" if missing else None)
    lines = top.stdout.split()
    described = host.run([*git, "describe", "--tags", "--always"], timeout=30)
    status = host.run([*git, "status", "--porcelain", "--untracked-files=no"], timeout=60)
    return TreeFacts(
        git=True,
        toplevel=lines[0] if lines else None,
        revision=lines[1] if len(lines) > 1 else None,
        describe=described.stdout.strip() or None if described.ok else None,
        changed=[redact.text(line) for line in status.stdout.splitlines() if line.strip()][:200],
    )


def _patches(host: Host, profile: Profile) -> tuple[list[PatchFact], str | None]:
    from k26ctl.patches.host import patch_status
    from k26ctl.patches.model import load_patches

    try:
        states = patch_status(host, profile, sorted(set(load_patches()) | set(profile.patches)))
    except K26Error as exc:
        return [], exc.one_line()
    return [PatchFact(name=s.name, state=s.state, message=s.message, target=s.target) for s in states], None


def _unit(host: Host, profile: Profile) -> UnitFacts:
    from k26ctl.deploy.facts import read_unit
    from k26ctl.deploy.plan import sha256_text
    from k26ctl.remote.systemd import Systemd
    from k26ctl.render import render_unit, unit_name, unit_path

    path = unit_path(profile)
    props = Systemd(host, unit_name(profile)).show("ActiveState", "SubState", "NRestarts")
    text = read_unit(host, path)
    return UnitFacts(
        path=path,
        exists=text is not None,
        matches_profile=None if text is None else sha256_text(text) == sha256_text(render_unit(profile)),
        active=props.get("ActiveState", ""),
        sub=props.get("SubState", ""),
        restarts=props.get("NRestarts", ""),
        text=redact.unit_text(text, profile) if text is not None else None,
    )


def _journal(host: Host, profile: Profile) -> JournalFacts:
    from k26ctl.remote.systemd import Systemd
    from k26ctl.render import unit_name

    try:
        entries = Systemd(host, unit_name(profile)).journal(lines=JOURNAL_SCAN)
    except K26Error as exc:
        return JournalFacts(error=exc.one_line())
    messages = [e.message for e in entries]
    starts = [i for i, m in enumerate(messages) if STARTING.match(m)]
    load = messages[starts[-1] :] if starts else messages
    dropped = max(0, len(load) - KEEP_HEAD - KEEP_TAIL)
    kept = load if not dropped else [*load[:KEEP_HEAD], *load[-KEEP_TAIL:]]
    return JournalFacts(lines=[redact.text(line, profile) for line in kept], dropped=dropped)


def _http(host: Host, profile: Profile) -> HttpFacts:
    from k26ctl.httpsafe import BoundedClient, HttpError
    from k26ctl.smoke.target import server_url

    inventory = load_inventory()
    headers = _auth(profile)
    facts: dict[str, Any] = {"reachable": False}
    try:
        with (
            server_url(host, profile) as url,
            BoundedClient(url, timeout=HTTP_TIMEOUT, headers=headers) as client,
        ):
            for path in ("/server_info", "/get_server_info"):
                answer = client.request("GET", path)
                facts.update(server_info_path=path, server_info_status=answer.status_code)
                if answer.status_code == 200:
                    info = answer.json()
                    if isinstance(info, dict):
                        facts["server_info_keys"] = sorted(str(k) for k in info)
                        wanted = [*inventory.server_info.keys, "speculative_dflash_block_size"]
                        facts["identity"] = redact.mapping({k: info[k] for k in wanted if k in info})
                    break
            models = client.request("GET", "/v1/models")
            facts["models_status"] = models.status_code
            if models.status_code == 200:
                data = models.json().get("data") if isinstance(models.json(), dict) else None
                facts["model_ids"] = [str(m.get("id")) for m in data or [] if isinstance(m, dict)]
            metrics = client.request("GET", "/metrics", max_body=8 * 1024 * 1024)
            facts["metrics_status"] = metrics.status_code
            if metrics.status_code == 200:
                facts["metric_names"] = metric_names(metrics.text)
            facts["reachable"] = True
    except (HttpError, K26Error, ValueError) as exc:
        message = exc.one_line() if isinstance(exc, K26Error) else str(exc)
        facts["error"] = redact.text(message)[:300]
    return HttpFacts(**facts)


def metric_names(text: str) -> list[str]:
    """Sample names of a Prometheus text page, without label sets or duplicates."""
    names: set[str] = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{\s]", line, maxsplit=1)[0]
            if name:
                names.add(name)
    return sorted(names)


def _auth(profile: Profile) -> dict[str, str]:
    from k26ctl.inputs import api_key

    try:
        key = api_key(profile.sglang.api_key_env)
    except K26Error:
        return {}
    return {"Authorization": f"Bearer {key}"} if key else {}


def _rules(profile: Profile, version: str | None, patch_states: dict[str, str]) -> list[RuleFinding]:
    from k26ctl.validate import collect_findings
    from k26ctl.validate.checks import with_host_version

    findings, _ = collect_findings(
        with_host_version(profile, version), systemd=False, host_patches=patch_states
    )
    return [RuleFinding(level=f.level, code=f.code, message=f.message, hint=f.hint) for f in findings]


def _earlier_release_accept(host: Host, profile: Profile, version: str | None) -> tuple[str, float] | None:
    from k26ctl.deploy import accept_baseline as ab

    if profile.spec.algorithm.value == "NONE":
        return None
    try:
        data = ab.read_baselines(host, profile.service.name)
    except K26Error:
        return None
    entry = data.same_config_other_release(ab.config_key(profile, version))
    return (str(entry.key.get("sglang")), entry.accept_length) if entry is not None else None
