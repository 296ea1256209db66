"""The fleet file: replicas of one service behind an SGLang router, validated like a profile.

```yaml
fleet:
  name: prod
  profile: ddtree-b16-patched.yaml     # every member's profile (path relative to this file)
  set: [sglang.host=0.0.0.0]          # overrides for every member (profile --set syntax)
  router:
    kind: smg                          # optional: smg or sglang-router (else asked of the gateway)
    url: http://127.0.0.1:30000        # as the operator reaches it (through `via` when given)
    via: {address: gateway}            # optional: an SSH host whose loopback reaches the router
    admin_key_env: K26_ROUTER_KEY      # optional: the variable holding its admin key
    owned: {host: 127.0.0.1, port: 30000, prometheus_port: 29000}   # optional launch settings
  members:
    - {name: gpu1, url: "http://10.0.0.11:30000", set: [host.address=gpu1]}
    - {name: gpu2, url: "http://10.0.0.12:30000", profile: gpu2.yaml}
  roll: {serial: 1, max_fail: 0, min_healthy: 1, drain_timeout: 300, soak: 30}
```
A file is a fleet file when its top-level key is `fleet` (k26ctl.fleet.source tells, cheaply).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from k26ctl.errors import ConfigError
from k26ctl.fleet.source import read_fleet_yaml
from k26ctl.profile import HostConfig, LoadedProfile, load_profile

_NAME = r"^[a-z0-9][a-z0-9._-]{0,40}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OwnedRouter(_Model):
    """How k26ctl starts the router when it owns it: bound explicitly, no static worker list (the
    roll owns the list), health checks patient enough for slow-loading, busy workers."""

    host: str = "127.0.0.1"
    port: int = Field(default=30000, ge=1, le=65535)
    prometheus_host: str = "127.0.0.1"
    prometheus_port: int = Field(default=29000, ge=1, le=65535)
    policy: Literal["cache_aware", "round_robin", "random", "power_of_two"] = "round_robin"
    health_check_interval_secs: int = Field(default=5, ge=1)
    # SGLang's own /health may take up to 20 s on a busy worker: a shorter probe marks it dead.
    health_check_timeout_secs: int = Field(default=30, ge=1)
    health_failure_threshold: int = Field(default=3, ge=1)
    health_success_threshold: int = Field(default=1, ge=1)
    request_timeout_secs: int = Field(default=600, ge=1)
    tokenizer_path: str | None = None  # without it the router's hub lookup is pointed at a closed port
    extra_args: list[str] = Field(default_factory=list)  # e.g. --control-plane-api-keys id:name:admin:KEY

    def argv(self, executable: str = "sglang-router") -> list[str]:
        argv = [
            executable, "launch",
            "--host", self.host, "--port", str(self.port),
            "--prometheus-host", self.prometheus_host, "--prometheus-port", str(self.prometheus_port),
            "--policy", self.policy,
            "--health-check-interval-secs", str(self.health_check_interval_secs),
            "--health-check-timeout-secs", str(self.health_check_timeout_secs),
            "--health-failure-threshold", str(self.health_failure_threshold),
            "--health-success-threshold", str(self.health_success_threshold),
            "--request-timeout-secs", str(self.request_timeout_secs),
        ]  # fmt: skip
        if self.tokenizer_path:
            argv += ["--tokenizer-path", self.tokenizer_path]
        return [*argv, *self.extra_args]

    @field_validator("extra_args")
    @classmethod
    def _no_static_workers(cls, value: list[str]) -> list[str]:
        if any(arg.startswith("--worker-urls") for arg in value):
            raise ValueError("no --worker-urls: the roll owns the router's worker list")
        return value


class RouterConfig(_Model):
    url: str
    kind: Literal["sglang-router", "smg"] | None = None  # None: k26ctl asks the gateway and says which
    via: HostConfig | None = None
    admin_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    owned: OwnedRouter | None = None
    request_timeout: float = Field(default=5.0, gt=0, le=120)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")


class MemberConfig(_Model):
    name: str = Field(pattern=_NAME)
    url: str  # the worker as the router reaches it
    profile: str | None = None  # this member's own profile (else the fleet's)
    set: list[str] = Field(default_factory=list)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")


class RollConfig(_Model):
    serial: int = Field(default=1, ge=1)
    max_fail: int = Field(default=0, ge=0)
    min_healthy: int = Field(default=1, ge=0)
    drain_timeout: float = Field(default=300.0, gt=0)
    add_timeout: float = Field(default=120.0, gt=0)
    soak: float = Field(default=10.0, ge=0)


class FleetConfig(_Model):
    name: str = Field(pattern=_NAME)
    description: str | None = None
    profile: str | None = None
    set: list[str] = Field(default_factory=list)
    router: RouterConfig
    members: list[MemberConfig] = Field(min_length=1)
    roll: RollConfig = Field(default_factory=RollConfig)

    @model_validator(mode="after")
    def _distinct(self) -> FleetConfig:
        for attr in ("name", "url"):
            values = [getattr(m, attr) for m in self.members]
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"members: {attr} {dupes[0]} appears twice")
        if self.profile is None and any(m.profile is None for m in self.members):
            raise ValueError("members without their own profile need the fleet's `profile`")
        return self


class FleetFile(_Model):
    fleet: FleetConfig


class Member(BaseModel):
    """A member with its profile loaded (fleet overrides, then its own, then the command line's)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    url: str
    loaded: LoadedProfile


class Fleet(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: FleetConfig
    path: Path
    members: list[Member]

    @property
    def name(self) -> str:
        return self.config.name

    def member(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise ConfigError(f"fleet {self.name} has no member {name!r}", f"members: {self.member_names()}")

    def member_names(self) -> str:
        return ", ".join(m.name for m in self.members)


def load_fleet(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Fleet:
    """Validate the fleet file and load every member's profile. `overrides` (--set) apply to all."""
    path = Path(path)
    data = read_fleet_yaml(path)
    if not isinstance(data, dict) or "fleet" not in data:
        raise ConfigError(f"{path}: not a fleet file (no top-level 'fleet' key)")
    try:
        config = FleetFile.model_validate(data).fleet
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{path}: {loc}: {err['msg']}", "see the fleet file format in README.md") from None
    members = []
    for mc in config.members:
        ref = mc.profile or config.profile
        assert ref is not None  # checked by the model
        profile_path = Path(ref) if Path(ref).is_absolute() else path.parent / ref
        loaded = load_profile(profile_path, [*config.set, *mc.set, *overrides])
        members.append(Member(name=mc.name, url=mc.url, loaded=loaded))
    _check_distinct_hosts(path, members)
    return Fleet(config=config, path=path, members=members)


def _check_distinct_hosts(path: Path, members: list[Member]) -> None:
    seen: dict[tuple[str, str | None, str], str] = {}
    for member in members:
        host = member.loaded.profile.host
        key = (host.address, host.lab, member.loaded.profile.service.name)
        if key in seen:
            raise ConfigError(
                f"{path}: members {seen[key]} and {member.name} deploy the same service on the same host",
                "give each member its own host (set: [host.address=...])",
            )
        seen[key] = member.name
