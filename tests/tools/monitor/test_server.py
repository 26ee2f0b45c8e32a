"""The monitor's HTTP side: the JSON API against `jit_info`, the event stream, the CLI and
environment switch, and the security rules (loopback by default, the Host-header check
against DNS rebinding, the token for other addresses)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from urllib.parse import quote, urlsplit

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
import shapevm.vm as vm
from shapevm.runtime import bctrace
from shapevm.tools import monitor
from shapevm.tools.monitor import server as server_module


@pytest.fixture
def url():
    bctrace.enable(False)
    address = vm.start_monitor()
    yield address
    vm.stop_monitor()
    bctrace.enable(False)


def get(url: str, path: str, host: str | None = None, method: str = "GET"):
    """``(status, headers, body)``; ``host`` replaces the Host header."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.putrequest(method, path, skip_host=host is not None)
    if host is not None:
        conn.putheader("Host", host)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), body


def test_state_api_is_jit_info_and_jit_stats(url):
    f = sv.jit(lambda x: snp.tanh(x) * 2.0, shapes="b, 3", hot_threshold=2, background=False)
    for b in (4, 4, 4):
        f(np.ones((b, 3), np.float32))
    status, headers, body = get(url, "/api/state")
    assert status == 200 and headers["Content-Type"] == "application/json"
    state = json.loads(body)
    assert set(state) >= {"time", "pid", "stats", "functions", "variants", "queue", "memory"}
    assert state["pid"] == os.getpid()
    expected = {(r["function"], r["key_text"], r["status"], r["hits"]) for r in vm.jit_info()}
    got = {(r["function"], r["key_text"], r["status"], r["hits"]) for r in state["variants"]}
    assert got == expected
    stats = vm.jit_stats()
    assert {k: state["stats"][k] for k in stats} == json.loads(json.dumps(stats))


def test_code_api_returns_the_variants_texts_or_a_json_error(url):
    def code_api_fn(x):
        return x * 3.0

    f = sv.jit(code_api_fn, shapes="b", hot_threshold=1, background=False)
    f(np.ones(2, np.float32))
    status, _, body = get(url, f"/api/code?function=code_api_fn&key={quote('exact (2,)')}")
    assert status == 200
    code = json.loads(body)
    assert "OP_CALL mul(t0, 3.0)" in code["bytecode"] and code["listing"]
    status, _, body = get(url, "/api/code?function=code_api_fn&key=nope")
    assert status == 404
    assert json.loads(body)["error"].startswith("no variant 'nope' of function 'code_api_fn'")


def test_event_stream_sends_the_state_at_least_once_a_second(url):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("GET", "/api/events")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    stamps = []
    while len(stamps) < 3:
        line = resp.fp.readline().decode()
        if line.startswith("data: "):
            event = json.loads(line[6:])
            stamps.append((time.monotonic(), event["latency_incremental"]))
    conn.close()
    assert [s[1] for s in stamps] == [False, True, True]
    assert stamps[2][0] - stamps[1][0] < 1.0
    assert bctrace.ACTIVE is not None  # a page is watching: calls are recorded


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "127.0.0.1:1", "localhost", "attacker.localhost.example:{port}", ""],
)
def test_a_host_header_that_does_not_name_the_monitor_is_refused(url, host):
    port = urlsplit(url).port
    status, _, body = get(url, "/api/state", host=host.format(port=port))
    assert status == 403
    text = body.decode()
    assert text.startswith("refused: Host header ")
    assert f"expected: one of 127.0.0.1, [::1], localhost with port {port}" in text
    assert "DNS rebinding" in text


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "LOCALHOST"])
def test_loopback_names_are_accepted(url, name):
    status, _, _ = get(url, "/api/state", host=f"{name}:{urlsplit(url).port}")
    assert status == 200


def test_another_address_needs_the_token_that_the_url_carries():
    server = server_module.MonitorServer("0.0.0.0", 0, None)
    try:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        assert server.token and f"?token={server.token}" in server.url
        base = f"http://127.0.0.1:{server.port}/"
        host = f"127.0.0.1:{server.port}"
        status, _, body = get(base, "/api/state", host=host)
        assert status == 403 and body.decode().startswith("refused: missing or wrong token")
        assert get(base, "/api/state?token=wrong", host=host)[0] == 403
        assert get(base, f"/api/state?token={server.token}", host=host)[0] == 200
        assert get(base, f"/?token={server.token}", host=host)[0] == 200
        # the token does not lift the Host check: a rebound name is still refused
        assert (
            get(base, f"/api/state?token={server.token}", host=f"evil.example:{server.port}")[0]
            == 403
        )
    finally:
        server.close()


def test_a_token_given_on_loopback_is_enforced_too():
    address = vm.start_monitor(token="s3cret")
    try:
        assert address.endswith("/?token=s3cret")
        assert get(address, "/api/state")[0] == 403
        assert get(address, "/api/state?token=s3cret")[0] == 200
        assert get(address, "/static/monitor.js")[0] == 200  # the page's code holds no data
    finally:
        vm.stop_monitor()


def test_pages_files_and_errors(url):
    status, headers, body = get(url, "/")
    assert status == 200 and b"<title>shapevm monitor</title>" in body
    assert headers["Content-Security-Policy"].startswith("default-src 'self'")
    assert "Access-Control-Allow-Origin" not in headers
    for name in ("monitor.js", "chart.js", "monitor.css"):
        assert get(url, f"/static/{name}")[0] == 200
    assert get(url, "/static/../server.py")[0] == 404
    assert get(url, "/nothing")[0] == 404
    status, _, body = get(url, "/api/state", method="POST")
    assert status == 405 and b"use GET" in body


def test_starting_twice_returns_the_running_monitor_or_says_why_not(url):
    assert vm.start_monitor() == url
    with pytest.raises(
        monitor.MonitorError, match=r"a monitor already runs at http://127\.0\.0\.1"
    ):
        vm.start_monitor(port=urlsplit(url).port + 1)


def test_a_port_in_use_and_a_bad_address_get_clear_messages(url):
    with pytest.raises(monitor.MonitorError) as info:
        server_module.MonitorServer("127.0.0.1", urlsplit(url).port, None)
    assert f"cannot serve the monitor on 127.0.0.1:{urlsplit(url).port}" in str(info.value)
    assert "port=0 takes a free one" in str(info.value)
    with pytest.raises(monitor.MonitorError, match="expected: PORT or HOST:PORT"):
        monitor.parse_address("localhost:http")


def test_recording_stops_when_no_page_watches(url, monkeypatch):
    monkeypatch.setattr(server_module, "IDLE_S", 0.0)
    assert bctrace.ACTIVE is None  # a monitor alone records nothing
    get(url, "/api/state")
    assert bctrace.ACTIVE is not None
    deadline = time.monotonic() + 5
    while bctrace.ACTIVE is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert bctrace.ACTIVE is None


def _python(code: str, env_value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SHAPEVM_MONITOR": env_value}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_environment_variable_starts_the_monitor_in_any_program():
    code = (
        "import urllib.request, shapevm, shapevm.tools.monitor as m\n"
        "url = m.start()\n"
        "print(urllib.request.urlopen(url + 'api/state').status)\n"
    )
    done = _python(code, "0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "200"
    assert done.stderr.startswith("shapevm monitor: http://127.0.0.1:")


def test_a_bad_environment_value_is_reported_and_the_program_runs_on():
    done = _python("import shapevm; print('ran')", "nonsense")
    assert done.returncode == 0 and done.stdout.strip() == "ran"
    assert "shapevm: SHAPEVM_MONITOR=nonsense: bad monitor address 'nonsense'" in done.stderr


def test_cli_runs_the_script_with_its_arguments_and_exit_code(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import sys, urllib.request, shapevm.tools.monitor as m\n"
        "print(sys.argv[1:], urllib.request.urlopen(m.start() + 'api/state').status)\n"
        "sys.exit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "shapevm", "monitor", str(script), "a", "--b"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == "['a', '--b'] 200"
    assert done.stderr.startswith("shapevm monitor: http://127.0.0.1:")
    missing = subprocess.run(
        [sys.executable, "-m", "shapevm", "monitor", str(tmp_path / "none.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "no such script" in missing.stderr
