"""HTML reports: one self-contained page per smoke, deploy, bisect, sweep and fleet roll.

A page is made from the JSON document the command prints with --json, never from its live objects,
so `k26ctl report FILE --html PAGE` and a command's own `--html PAGE` give the same page. The charts
are matplotlib SVG (the optional `report` extra), imported only when a page is written.
"""

from __future__ import annotations

from k26ctl.report.page import check_available, page_html, write_page

__all__ = ["check_available", "page_html", "write_page"]
