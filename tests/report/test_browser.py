"""Every kind of page in Debian's headless Chromium: it loads with no console message and no request
beyond its own file, the key elements are in the DOM, the keyboard reaches them, and a screenshot is
taken (light and dark)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.report.hostile import (
    PAYLOADS,
    fixture,
    hostile_bisect_log,
    hostile_fleet,
    hostile_smoke,
    hostile_sweep,
)
from tests.support import browser

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")
if (why := browser.available()) is not None:
    pytest.skip(why, allow_module_level=True)

from k26ctl.report import write_page

# one worker runs them all: one Chromium start a run, not one on each worker
pytestmark = pytest.mark.xdist_group("browser")

# the page, then CSS selectors with the least count each must match
PAGES: dict[str, tuple[Any, dict[str, int]]] = {
    "deploy-unpatched": (
        lambda: fixture("deploy-unpatched.json"),
        {"section.result.bad": 21, "mark.finding": 10, ".strip span.wrong": 100, "figure svg": 1, "h1": 1},
    ),
    "smoke-patched": (lambda: fixture("smoke-patched.json"), {"section.result.good": 10, "figure svg": 1}),
    "bisect": (lambda: fixture("bisect.json"), {"figure svg": 2, "tbody tr": 5}),
    "bisect-log": (lambda: fixture("bisect-log.json"), {"figure svg": 2, "tbody tr": 5}),
    "sweep": (lambda: fixture("sweep.json"), {"figure svg": 3, "tbody tr": 7, ".badge.bad": 3}),
    "fleet-halted": (lambda: fixture("fleet-halted-bad-roll.json"), {"figure svg": 2, "tbody tr": 3}),
    "fleet-hostile": (hostile_fleet, {"figure svg": 2, "tbody tr": 3}),
    "smoke-hostile": (hostile_smoke, {"mark.finding": 10}),
    "sweep-hostile": (hostile_sweep, {"figure svg": 1}),
    "bisect-hostile": (hostile_bisect_log, {"figure svg": 2}),
}


@pytest.fixture(scope="module")
def chromium() -> Iterator[browser.Browser]:
    with browser.chromium() as opened:
        yield opened


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_loads_clean_with_its_key_elements(chromium: browser.Browser, tmp_path: Path, name: str) -> None:
    """Loaded in a light window, then the window turns dark (as when the system's scheme changes): the
    page follows at once, without a reload."""
    make, selectors = PAGES[name]
    page_file = tmp_path / f"{name}.html"
    write_page(make(), page_file)
    with chromium.open(page_file) as loaded:
        page = loaded.page
        for selector, least in selectors.items():
            found = len(page.query_selector_all(selector))
            assert found >= least, f"{selector}: {found} < {least}"
        # the page's own style applies whole (a stylesheet escaped as HTML loses its font list)
        assert "DejaVu Sans" in page.evaluate("getComputedStyle(document.body).fontFamily")
        for dark in (False, True):
            page.emulate_media(color_scheme="dark" if dark else "light")
            # the scheme is followed: the body's background is dark exactly in dark mode
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            channels = [int(c) for c in background[background.index("(") + 1 : -1].split(",")[:3]]
            assert (sum(channels) < 200) is dark, background
            # nothing is wider than the window: long server strings wrap
            assert page.evaluate("document.documentElement.scrollWidth") <= 1200
            shot = tmp_path / f"{name}-{'dark' if dark else 'light'}.png"
            page.screenshot(path=str(shot), full_page=False)
            assert shot.stat().st_size > 10_000
        # keyboard: the first Tab reaches the skip link, which leads to the content
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.className") == "skip-link"
    assert loaded.console_errors == [], loaded.console_errors
    assert [m for m in loaded.console if "pwned" in m] == []
    assert [u for u in loaded.requests if u != page_file.resolve().as_uri()] == []


def test_findings_are_reachable_by_keyboard(chromium: browser.Browser, tmp_path: Path) -> None:
    page_file = tmp_path / "smoke.html"
    write_page(fixture("deploy-unpatched.json"), page_file)
    with chromium.open(page_file) as loaded:
        marks = loaded.page.query_selector_all("mark.finding")
        assert marks and all(m.get_attribute("tabindex") == "0" for m in marks)
        seen = set()
        for _ in range(200):  # walk the page with Tab until a finding has focus
            loaded.page.keyboard.press("Tab")
            tag = loaded.page.evaluate("document.activeElement.tagName")
            seen.add(tag)
            if tag == "MARK":
                break
        assert "MARK" in seen, seen
    assert loaded.console_errors == []


def test_the_console_check_sees_a_payload_that_is_not_escaped(
    chromium: browser.Browser, tmp_path: Path
) -> None:
    """The checks above can fail: the same payloads written raw run and are seen."""
    raw = tmp_path / "raw.html"
    raw.write_text("<!doctype html><title>raw</title><p>" + PAYLOADS[0] + PAYLOADS[3] + "</p>")
    with chromium.open(raw) as loaded:
        loaded.page.wait_for_function("document.readyState === 'complete'")
    assert any("pwned-script" in m for m in loaded.console_errors), loaded.console
