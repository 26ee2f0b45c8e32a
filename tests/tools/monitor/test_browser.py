"""The monitor page in a real browser (Debian's Chromium, headless, driven by Playwright)
while a program runs under ``shapevm monitor``: a function appears, its variant appears and
turns ready, a failed compile shows in red with its reason, the chart and the code panel
fill in. With ``SHAPEVM_SCREENSHOTS=docs`` it saves ``docs/monitor.png``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.tools.tooling import chromium, playwright_api, screenshot_path

PROGRAM = textwrap.dedent(
    """
    import sys
    import threading
    import time
    import numpy as np
    import shapevm as sv
    import shapevm.numpy as snp
    from shapevm.jit.backend import tier3

    gate = threading.Event()  # holds the build of generated C until the page looked
    build = tier3.generate

    def gated_build(*args, **kwargs):
        gate.wait(60)
        return build(*args, **kwargs)

    tier3.generate = gated_build

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((64, 256)).astype(np.float32) / 8
    w2 = rng.standard_normal((256, 64)).astype(np.float32) / 16

    @sv.jit(shapes="b, 64", hot_threshold=3, ahead=False)
    def mlp(x):
        h = snp.maximum(x @ w1, 0.0)
        return snp.tanh(h @ w2) + x

    @sv.jit(shapes="b, 64", hot_threshold=1, lowerings=["no_such_pattern"], ahead=False)
    def broken(x):
        return snp.sum(x * x, axis=1)

    @sv.jit(shapes="b, 64", hot_threshold=1, tier3_min_elements=0)
    def chained(x):
        return snp.tanh(x * 1.5 + 0.25) * x

    def calls(f, sizes, after=()):
        for b in sizes:
            f(np.ones((b, 64), np.float32))
        f.wait(30)  # the compiles finish, then the calls after them run compiled
        for b in after:
            f(np.ones((b, 64), np.float32))

    for line in sys.stdin:
        step = line.strip()
        if step == "cold":
            calls(mlp, [3])
        elif step == "hot":
            calls(mlp, [3, 3, 3, 8, 8, 8], after=[1, 3, 8, 1, 3, 8, 1, 1, 1, 3])
        elif step == "fail":
            calls(broken, [2, 2])
        elif step == "chain":  # lowered and ready; its generated C waits for the gate
            chained(np.ones((2, 64), np.float32))
            deadline = time.monotonic() + 60
            while not any(r["tier3"] == "compiling" for r in chained.jit_info()):
                if time.monotonic() > deadline:
                    raise SystemExit(f"tier 3 never started: {chained.jit_info()}")
                time.sleep(0.01)
        elif step == "build":
            gate.set()
            chained.wait(60)
        elif step == "quit":
            break
        print("done", step, flush=True)
    """
)


def _statuses(page, function: str) -> list[str]:
    return page.eval_on_selector_all(
        f'#variants tbody tr[data-function="{function}"]', "rows => rows.map(r => r.dataset.status)"
    )


@pytest.fixture
def program(tmp_path: Path):
    script = tmp_path / "served.py"
    script.write_text(PROGRAM)
    proc = subprocess.Popen(
        [sys.executable, "-m", "shapevm", "monitor", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = proc.stderr.readline()
    assert first.startswith("shapevm monitor: http://127.0.0.1:"), first
    url = first.split(": ", 1)[1].strip()

    def step(name: str) -> None:
        proc.stdin.write(name + "\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == f"done {name}"

    yield url, step
    if proc.poll() is None:
        proc.stdin.write("quit\n")
        proc.stdin.close()
        proc.wait(30)
    proc.stdout.close()
    proc.stderr.close()


def test_the_page_shows_variants_appear_turn_ready_and_fail_in_red(program):
    sync_api = playwright_api()
    url, step = program
    with sync_api.sync_playwright() as p:
        browser = chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_selector("#conn[data-state=live]")

        step("cold")  # one call: the function is listed, nothing is hot yet
        page.wait_for_selector('#functions tr[data-function="mlp"]')
        assert _statuses(page, "mlp") == []
        # every status the row shows from now on, as the page renders it
        page.evaluate(
            """() => { window.seen = [];
              new MutationObserver(() => {
                for (const r of document.querySelectorAll('#variants tr[data-function="mlp"]')) {
                  const s = r.dataset.key + ':' + r.dataset.status;
                  if (window.seen[window.seen.length - 1] !== s) window.seen.push(s);
                }
              }).observe(document.getElementById('variants'),
                         {childList: true, subtree: true}); }"""
        )
        step("hot")
        page.wait_for_function(
            """() => [...document.querySelectorAll('#variants tr[data-function="mlp"]')]
                     .some(r => r.dataset.key === 'exact (3,)' && r.dataset.status === 'ready')"""
        )
        seen = [s.split(":")[1] for s in page.evaluate("window.seen") if s.startswith("exact (3,)")]
        assert seen[-1] == "ready"
        order = ["queued", "compiling", "ready"]
        assert [order.index(s) for s in seen] == sorted(order.index(s) for s in seen)
        page.wait_for_function(  # the hit rate went up once the variant served calls
            """() => Number(document.querySelector('#functions tr[data-function="mlp"]')
                              .children[3].textContent) > 0"""
        )

        step("fail")  # a compile that fails: the row is red and says why
        # (the page redraws its tables twice a second: each check queries them afresh)
        row = '#variants tr[data-function="broken"].bad'
        page.wait_for_selector(row)
        assert page.get_attribute(row, "data-status") == "failed"
        assert "unknown lowering(s) ['no_such_pattern']" in page.inner_text(row)
        # red (--bad), read in one script: a handle kept across the redraw is detached and
        # its computed style empty
        page.wait_for_function(
            """(sel) => { const td = document.querySelector(sel);
                          return td !== null
                                 && getComputedStyle(td).color === 'rgb(192, 38, 45)'; }""",
            arg=f"{row} td",
        )
        assert "failures" in page.inner_text("#totals")

        # the latency chart has a figure per function, with points drawn
        page.wait_for_selector('#charts figure[data-function="mlp"]')
        caption = page.inner_text('#charts figure[data-function="mlp"] figcaption')
        assert "calls" in caption and ("compiled" in caption or "mixed" in caption)

        # generated C built in the background: in the queue while it compiles, then in the
        # listing of a variant selected before it was built
        step("chain")
        page.wait_for_selector('#queue tr:has-text("chained"):has-text("tier 3")')
        page.click('#variants tr[data-function="chained"][data-key="exact (2,)"]')
        page.wait_for_selector('#tabs button[data-tab="listing"]')
        page.click('#tabs button[data-tab="listing"]')
        page.wait_for_function("() => document.getElementById('code').textContent.startsWith('R0')")
        assert "generated C for" not in page.inner_text("#code")
        step("build")
        page.wait_for_function(
            "() => document.getElementById('code').textContent.includes('generated C for chain')"
        )
        page.wait_for_function(
            "() => !document.getElementById('queue').textContent.includes('chained')"
        )
        page.click('#tabs button[data-tab="bytecode"]')  # the chosen tab stays for the next

        # the code of the selected variant: bytecode and what the compiled code runs
        page.click('#variants tr[data-function="mlp"][data-key="exact (3,)"]')
        page.wait_for_function(
            "() => document.getElementById('code').textContent.includes('func @mlp')"
        )
        assert "R0" in page.inner_text("#code")
        page.click('#tabs button[data-tab="listing"]')
        page.wait_for_function(
            "() => document.getElementById('code').textContent.startsWith('R0 #')"
        )
        page.click('#tabs button[data-tab="bytecode"]')
        assert page.inner_text("#detail-fields").count("\n") >= 10  # every field of the record

        shot = screenshot_path("monitor.png")
        if shot is not None:
            page.wait_for_timeout(1500)
            page.screenshot(path=str(shot), full_page=True)
        assert errors == []
        browser.close()
