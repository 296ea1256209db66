"""What is watched: a profile's server (through an SSH port forward per cycle) or a URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from k26ctl.smoke.runner import SmokeTarget
from k26ctl.smoke.suite import Suite, load_suite
from k26ctl.watch.canary import CanarySettings, canary_suite
from k26ctl.watch.metrics import Identity
from k26ctl.watch.store import target_key

if TYPE_CHECKING:
    from k26ctl.profile import LoadedProfile


@dataclass
class WatchTarget:
    key: str  # the state directory's name
    label: str  # shown in records and history
    identity: Identity
    suite: Suite
    api_key: str | None
    min_accept_length: float | None
    profile: LoadedProfile | None = None
    url: str | None = None
    model: str | None = None
    accept_new_host_key: bool = False
    api_key_env: str | None = None

    def open(self) -> AbstractContextManager[SmokeTarget]:
        if self.profile is None:
            return _fixed(SmokeTarget(self.url or "", self.model, self.api_key))
        from k26ctl.smoke.target import profile_target

        return profile_target(
            self.profile.profile,
            model=self.model,
            api_key_env=self.api_key_env,
            accept_new_host_key=self.accept_new_host_key,
        )


@contextmanager
def _fixed(target: SmokeTarget) -> Iterator[SmokeTarget]:
    yield target


def url_target(
    url: str, model: str | None, suite_ref: str | None, api_key: str | None, canary: CanarySettings
) -> WatchTarget:
    import httpx

    parsed = httpx.URL(url)
    host = f"{parsed.host}:{parsed.port}" if parsed.port else str(parsed.host)
    suite = canary_suite(load_suite(suite_ref or "default"), canary.prompts, canary.max_tokens)
    return WatchTarget(
        key=target_key(None, url),
        label=url,
        identity=Identity(host, model or _model_name(url, api_key), ""),
        suite=suite,
        api_key=api_key,
        min_accept_length=None,
        url=url,
        model=model,
    )


def profile_watch_target(
    loaded: LoadedProfile,
    model: str | None,
    suite_ref: str | None,
    api_key_env: str | None,
    canary: CanarySettings,
    accept_new_host_key: bool,
) -> WatchTarget:
    from k26ctl import inputs

    profile = loaded.profile
    name = profile.name or (loaded.path.stem if loaded.path else "profile")
    api_key = inputs.api_key(api_key_env or profile.sglang.api_key_env)
    suite = canary_suite(
        load_suite(suite_ref or profile.smoke.suite or "default"), canary.prompts, canary.max_tokens
    )
    host = profile.host.address or (f"lab:{profile.host.lab}" if profile.host.lab else "local")
    return WatchTarget(
        key=target_key(name, None),
        label=name,
        identity=Identity(host, model or profile.served_name, name),
        suite=suite,
        api_key=api_key,
        min_accept_length=profile.smoke.min_accept_length,
        profile=loaded,
        model=model,
        accept_new_host_key=accept_new_host_key,
        api_key_env=api_key_env,
    )


def _model_name(url: str, api_key: str | None) -> str:
    """The served model's name for the metrics' labels ("" when the server does not say yet)."""
    from k26ctl.errors import K26Error
    from k26ctl.smoke.client import ResponseError, SGLangClient

    try:
        with SGLangClient(url, api_key, timeout=5.0) as client:
            names = client.model_names()
    except (K26Error, ResponseError):
        return ""
    return names[0] if names else ""
