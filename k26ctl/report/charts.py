"""matplotlib, drawing into SVG that is inlined in the page (no pyplot: no GUI backend, no global state).

Axis text and lines are drawn in a placeholder colour that becomes `currentColor` in the SVG, so a
chart follows the page's light or dark scheme; series use the Okabe-Ito palette, readable on both and
by colour-blind readers, and every series also has its own marker and a legend label."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from markupsafe import Markup

from k26ctl.errors import ConfigError

INSTALL_HINT = "pip install 'k26ctl[report]' (matplotlib draws the charts)"
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")
MARKERS = ("o", "s", "^", "D", "v", "P", "h", "<")
GOOD, BAD, SKIP = "#009E73", "#D55E00", "#999999"
INK = "#010203"  # placeholder for the page's text colour
_GRID = "#020304"  # placeholder for the page's grid colour
_PAPER = "#030405"  # placeholder for the page's background (legends hide what is under them)


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("--html needs matplotlib, which is not installed", INSTALL_HINT) from None


def _rc() -> Any:
    return {
        "svg.fonttype": "none",  # text stays text: small, selectable, found by the browser's search
        "text.parse_math": False,  # a '$' in a server's string is a dollar sign, not TeX
        "font.family": "sans-serif",
        "font.size": 10,
        "text.color": INK,
        "axes.labelcolor": INK,
        "axes.edgecolor": INK,
        "xtick.color": INK,
        "ytick.color": INK,
        "axes.facecolor": "none",
        "figure.facecolor": "none",
        "savefig.facecolor": "none",
        "legend.facecolor": _PAPER,
        "legend.edgecolor": _GRID,
        "legend.framealpha": 1.0,
        "grid.color": _GRID,
        "axes.grid": True,
        "grid.linewidth": 0.6,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }


@contextmanager
def figure(width: float = 7.0, height: float = 3.4) -> Iterator[Any]:
    """A matplotlib Figure (inches) drawn under the report's style."""
    require_matplotlib()
    import matplotlib

    with matplotlib.rc_context(_rc()):
        from matplotlib.figure import Figure

        yield Figure(figsize=(width, height), layout="constrained")


_HEADER = re.compile(r"^.*?(?=<svg)", re.S)


def svg(fig: Any, name: str, label: str) -> Markup:
    """The figure as inline SVG. `name` salts matplotlib's ids (clip paths) so that several charts in
    one page do not share them; `label` is the chart's accessible name."""
    import matplotlib

    out = io.StringIO()
    with matplotlib.rc_context({**_rc(), "svg.hashsalt": f"k26ctl-{name}"}):
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    text = _HEADER.sub("", out.getvalue(), count=1)
    text = text.replace(INK, "currentColor").replace(_GRID, "var(--grid)").replace(_PAPER, "var(--bg)")
    escaped = str(Markup.escape(label))
    text = text.replace("<svg ", f'<svg role="img" aria-label="{escaped}" ', 1)
    return Markup(text)  # matplotlib escapes every text it writes
