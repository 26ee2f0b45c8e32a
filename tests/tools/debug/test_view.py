"""A stopped session as a DAP client shows it, drawn from the adapter's answers: the
program's text with the current instruction and the breakpoints, the registers (one tensor
expanded), the call stack and a debug console, rendered in headless Chromium. With
``SHAPEVM_SCREENSHOTS=docs`` it saves ``docs/debugger.png``."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from tests.tools.debug.dap import Client
from tests.tools.debug.programs import save_programs
from tests.tools.tooling import chromium, playwright_api, screenshot_path

CSS = """
body { margin: 0; background: #1e1e1e; color: #cccccc; font: 13px system-ui, sans-serif; }
.window { display: grid; grid-template-columns: 380px 1fr; grid-template-rows: 1fr 170px;
  height: 100vh; }
.side { grid-row: 1 / 3; background: #252526; overflow: hidden; border-right: 1px solid #333; }
.side h3 { margin: 0; padding: 6px 12px; font-size: 11px; letter-spacing: .05em;
  background: #2d2d2d; color: #bbb; }
.tree div { padding: 1px 0 1px calc(12px + var(--d) * 14px); white-space: nowrap; }
.tree .name { color: #9cdcfe; } .tree .value { color: #ce9178; } .tree .scope { color: #ddd; }
.tree .type { color: #6a9955; margin-left: 6px; }
.editor { font: 13px/19px ui-monospace, Menlo, Consolas, monospace; overflow: hidden;
  padding-top: 6px; }
.tab { background: #1e1e1e; border-bottom: 1px solid #333; padding: 6px 14px; color: #fff;
  font: 13px system-ui, sans-serif; }
.line { display: flex; white-space: pre; }
.line .gutter { width: 22px; text-align: center; color: #e51400; }
.line .no { width: 34px; text-align: right; padding-right: 14px; color: #858585; }
.line.current { background: #4b4b18; }
.line.current .gutter::after { content: "➜"; color: #ffcc00; }
.console { border-top: 1px solid #333; padding: 6px 14px;
  font: 12px/18px ui-monospace, Menlo, monospace; overflow: hidden; }
.console .in { color: #6fa8dc; } .console .out { color: #ddd; }
"""


def _tree(items: list[tuple[int, str, str, str]]) -> str:
    rows = []
    for depth, name, value, typ in items:
        cls = "scope" if not value else "name"
        text = f'<span class="{cls}">{html.escape(name)}</span>'
        if value:
            text += f': <span class="value">{html.escape(value)}</span>'
        if typ:
            text += f'<span class="type">{html.escape(typ)}</span>'
        rows.append(f'<div style="--d:{depth}">{text}</div>')
    return "".join(rows)


def _view(c: Client) -> tuple[str, dict[str, str]]:
    frame = c.ok("stackTrace", threadId=1)["stackFrames"][0]
    source = c.ok("source", sourceReference=1)["content"].splitlines()
    items: list[tuple[int, str, str, str]] = []
    shown: dict[str, str] = {}
    for scope in c.ok("scopes", frameId=frame["id"])["scopes"]:
        items.append((0, "▾ " + scope["name"], "", ""))
        for var in c.ok("variables", variablesReference=scope["variablesReference"])["variables"]:
            open_ = var["name"] == "t3"
            mark = ("▾ " if open_ else "▸ ") if var["variablesReference"] else "  "
            items.append((1, mark + var["name"], var["value"], var.get("type", "")))
            shown[var["name"]] = var["value"]
            if open_:
                details = c.ok("variables", variablesReference=var["variablesReference"])
                items += [(2, d["name"], d["value"], "") for d in details["variables"]]
    console = []
    for expr in ("t3[0, :3]", "2*b + 1"):
        result = c.ok("evaluate", expression=expr, context="repl")
        detail = ""
        if result["variablesReference"]:
            kids = c.ok("variables", variablesReference=result["variablesReference"])["variables"]
            detail = " " + next(k["value"] for k in kids if k["name"] == "values")
        console.append((expr, result["result"] + detail))
    breakpoints = {4, 8}
    lines = "".join(
        f'<div class="line{" current" if n == frame["line"] else ""}">'
        f'<span class="gutter">{"●" if n in breakpoints and n != frame["line"] else ""}</span>'
        f'<span class="no">{n}</span>{html.escape(text)}</div>'
        for n, text in enumerate(source, 1)
    )
    stack = _tree([(1, frame["name"], "", f"line {frame['line']}")])
    page = f"""<!doctype html><html><head><meta charset="utf-8"><style>{CSS}</style></head>
<body><div class="window">
<div class="side"><h3>VARIABLES</h3><div class="tree">{_tree(items)}</div>
<h3>CALL STACK</h3><div class="tree">{stack}</div>
<h3>BREAKPOINTS</h3><div class="tree">{_tree([(1, "● mlp.svbc @mlp", "", "lines 4, 8")])}</div>
</div>
<div class="editor"><div class="tab">mlp.svbc @mlp</div>{lines}</div>
<div class="console">{
        "".join(
            f'<div class="in">&gt; {html.escape(e)}</div><div class="out">{html.escape(r)}</div>'
            for e, r in console
        )
    }</div>
</div></body></html>"""
    return page, shown


def test_a_stopped_session_renders_as_a_client_shows_it(tmp_path: Path):
    api = playwright_api()
    files = save_programs(tmp_path)
    c = Client()
    try:
        c.launch(program=str(files["mlp"]), shapes={"x": [3, 8]}, stopOnEntry=False, seed=0)
        lines = [{"line": 4}, {"line": 8}]
        c.ok("setBreakpoints", source={"sourceReference": 1}, breakpoints=lines)
        c.ok("configurationDone")
        assert c.event("stopped")["reason"] == "breakpoint"
        c.ok("continue", threadId=1)
        assert c.event("stopped")["reason"] == "breakpoint"
        page_html, shown = _view(c)
    finally:
        c.close()
    assert shown["t3"] == "f32[3, 4]" and shown["b"] == "3" and "t4" not in shown
    (tmp_path / "view.html").write_text(page_html, encoding="utf-8")
    with api.sync_playwright() as p:
        browser = chromium(p)
        page = browser.new_page(viewport={"width": 1180, "height": 560})
        page.goto((tmp_path / "view.html").as_uri())
        assert "OP_CALL tanh(t3)" in page.inner_text(".line.current")
        assert "(3, 4)" in page.inner_text(".side")
        shot = screenshot_path("debugger.png")
        if shot is not None:
            page.screenshot(path=str(shot))
        browser.close()


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
