"""JSON document -> one self-contained HTML page (inline CSS and SVG; no script, no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from k26ctl.report.kind import kind_of
from k26ctl.report.values import shown

TEMPLATES = Path(__file__).parent / "templates"
TITLES = {
    "smoke": "smoke",
    "deploy": "deploy",
    "bisect": "bisect-config",
    "bisect-log": "bisect-config log",
    "sweep": "sweep",
    "fleet-roll": "fleet roll",
}


def check_available() -> None:
    """Raise the one-line error naming the package to install when the charts cannot be drawn."""
    from k26ctl.report.charts import require_matplotlib

    require_matplotlib()


def _number(value: Any, digits: int = 2) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _environment() -> Any:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every string in a result may come from a server or a file: escape all
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shown"] = shown
    env.filters["num"] = _number
    return env


def _view(kind: str, doc: dict[str, Any]) -> dict[str, Any]:
    if kind == "smoke":
        from k26ctl.report.smoke_view import smoke_view

        return {"smoke": smoke_view(doc)}
    if kind == "deploy":
        from k26ctl.report.restarts import phase_table, restart_chart
        from k26ctl.report.smoke_view import smoke_view

        smoke = doc.get("smoke") if isinstance(doc.get("smoke"), dict) else None
        restart = {
            "chart": restart_chart([("this restart", doc.get("phases"))], "deploy-restart"),
            "rows": phase_table(doc.get("phases")),
            "expected": doc.get("expected_downtime")
            if isinstance(doc.get("expected_downtime"), dict)
            else None,
            "readahead": doc.get("readahead") if isinstance(doc.get("readahead"), dict) else None,
        }
        return {"deploy": doc, "smoke": smoke_view(smoke) if smoke else None, "restart": restart}
    if kind in ("bisect", "bisect-log"):
        from k26ctl.report.bisect_view import bisect_view

        return {"bisect": bisect_view(doc)}
    if kind == "sweep":
        from k26ctl.report.sweep_view import sweep_view

        return {"sweep": sweep_view(doc)}
    from k26ctl.report.fleet_view import fleet_view

    return {"fleet": fleet_view(doc)}


def page_html(doc: Any) -> str:
    """The page for a command's --json document (nothing else goes in: `report` and --html agree)."""
    kind = kind_of(doc)
    check_available()
    env = _environment()
    from markupsafe import Markup

    css = Markup((TEMPLATES / "page.css").read_text(encoding="utf-8"))  # the package's own file
    template = env.get_template(f"{kind.split('-')[0]}.html.j2")
    return template.render(kind=kind, title=TITLES[kind], css=css, **_view(kind, doc))


def write_page(doc: Any, path: Path) -> None:
    from k26ctl.outputs import write_atomic

    write_atomic(path, page_html(doc))
