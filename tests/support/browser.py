"""Open pages in Debian's headless Chromium through Playwright's DevTools driver (no browser download):
collect console messages, page errors and every network request, and take screenshots."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def available() -> str | None:
    """Why a browser test cannot run here, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright (the Python DevTools driver) is not installed"
    if not Path(CHROMIUM).exists():
        return "Debian's chromium is not installed (apt-get install chromium)"
    return None


@dataclass
class Loaded:
    console: list[str] = field(default_factory=list)  # "type: text" of every console message
    errors: list[str] = field(default_factory=list)  # uncaught page errors
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    page: Any = None

    @property
    def console_errors(self) -> list[str]:
        return [m for m in self.console if m.startswith(("error:", "warning:"))] + self.errors


class Browser:
    def __init__(self, browser: Any) -> None:
        self._browser = browser

    @contextmanager
    def open(self, path: Path, *, width: int = 1200, height: int = 900) -> Iterator[Loaded]:
        """The page in a light window; `page.emulate_media(color_scheme="dark")` turns it dark."""
        context = self._browser.new_context(
            viewport={"width": width, "height": height}, color_scheme="light", device_scale_factor=1
        )
        page = context.new_page()
        loaded = Loaded(page=page)
        page.on("console", lambda m: loaded.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: loaded.errors.append(str(e)))
        page.on("request", lambda r: loaded.requests.append(r.url))
        page.goto(path.resolve().as_uri(), wait_until="load", timeout=60_000)
        try:
            yield loaded
        finally:
            context.close()


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium with the flags above; Playwright gives each launch a fresh, empty profile
    directory of its own (it refuses --user-data-dir) and removes it afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield Browser(browser)
        finally:
            browser.close()
