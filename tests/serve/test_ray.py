"""The server on Ray Serve: a local Ray instance, two replicas, tritonclient against Ray's
HTTP proxy. Slow (Ray starts a dozen processes, about 40 s and 1.6 GiB on 2 cores):
``python -m pytest -m slow tests/serve``."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
httpclient = pytest.importorskip("tritonclient.http")

from shapevm.serve import ServeOptions  # noqa: E402
from shapevm.serve.ray import deployment  # noqa: E402
from tests.serve import helpers  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def ray_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("ray") / "mlp.svbc"
    helpers.mlp().save(path)
    port = _free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        app = deployment(
            [path, helpers.elementwise()],
            names=["mlp", "ew"],
            num_replicas=2,
            options=ServeOptions(max_batch_size=8),
            ray_actor_options={"num_cpus": 0.5},
        )
        serve.run(app, name="shapevm", route_prefix="/")
        yield f"127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


def _input(x: np.ndarray) -> Any:
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


@pytest.mark.slow
def test_replicas_serve_the_v2_routes(ray_url: str) -> None:
    client = httpclient.InferenceServerClient(ray_url, concurrency=8)
    assert client.is_server_ready() and client.is_model_ready("mlp")
    assert client.get_model_metadata("ew")["inputs"][0]["shape"] == [-1, 4]
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((int(rng.integers(1, 5)), 16)).astype(np.float32) for _ in range(40)]
    results = [client.async_infer("mlp", [_input(x)]) for x in xs]
    exp = helpers.mlp()
    for x, r in zip(xs, results, strict=True):
        y = r.get_result().as_numpy("output_0")
        assert np.allclose(y, exp.call(x), rtol=1e-5, atol=1e-5)
    status = serve.status().applications["shapevm"].deployments["shapevm"]
    assert status.replica_states.get("RUNNING") == 2
    client.close()


def test_the_builder_for_ray_config_files(tmp_path) -> None:
    from shapevm.serve.ray import build

    path = tmp_path / "mlp.svbc"
    helpers.mlp().save(path)
    app = build({"models": str(path), "num_replicas": "3", "max_batch_size": "4"})
    assert type(app).__name__ == "Application"
    with pytest.raises(ValueError, match="found colour"):
        build({"models": str(path), "colour": "red"})
    with pytest.raises(FileNotFoundError, match="no model file"):
        build({"models": str(tmp_path / "nope.svbc")})


@pytest.mark.slow
def test_the_command_line_form(tmp_path) -> None:
    import signal
    import subprocess
    import sys
    import threading

    path = tmp_path / "ew.svbc"
    helpers.elementwise().save(path)
    port = _free_port()
    cmd = [sys.executable, "-m", "shapevm", "serve", str(path), "--ray", "--port", str(port)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("shapevm serve --ray: http://"):
                break
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # Ray's logs
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        y = client.infer("ew", [_input(x)]).as_numpy("output_0")
        assert y.tolist() == (x * 2 + 1).tolist()
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
