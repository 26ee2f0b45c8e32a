"""The adapter under a real DAP client, and the VS Code extension: runs the Node tests in
``editors/vscode/test`` (``@vscode/debugadapter-testsupport``'s DebugClient against
``shapevm debug-adapter``; the extension's code against a stand-in for VS Code's API) and
packages the extension with ``@vscode/vsce``. ``.ci/run`` installs Node's packages
(``cd editors/vscode && npm ci``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.tools.debug.programs import save_programs
from tests.tools.tooling import need

EXTENSION = Path(__file__).resolve().parents[3] / "editors" / "vscode"
MODULES = EXTENSION / "node_modules"


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    need(found is not None, "node is not installed")
    need(
        (MODULES / "@vscode" / "debugadapter-testsupport").is_dir(),
        "the extension's Node packages are not installed (cd editors/vscode && npm ci)",
    )
    return str(found)


def test_the_adapter_passes_the_dap_client_tests(node, tmp_path):
    save_programs(tmp_path)
    src = str(Path(__file__).resolve().parents[3] / "src")
    env = {
        **os.environ,
        "SHAPEVM_PYTHON": sys.executable,
        "SHAPEVM_PROGRAMS": str(tmp_path),
        "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [node, "--test", "--test-concurrency=1", "test/"],
        cwd=EXTENSION,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    passed = int(re.search(r"^# pass (\d+)", report, re.M).group(1))  # type: ignore[union-attr]
    assert passed == 13 and re.search(r"^# fail 0$", report, re.M), report


def test_the_extension_packages_with_vsce(node, tmp_path):
    out = tmp_path / "shapevm.vsix"
    done = subprocess.run(
        [
            node,
            str(MODULES / "@vscode" / "vsce" / "vsce"),
            "package",
            "--skip-license",
            "--allow-missing-repository",
            "--out",
            str(out),
        ],
        cwd=EXTENSION,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    names = set(zipfile.ZipFile(out).namelist())
    assert {"extension/package.json", "extension/extension.js", "extension/readme.md"} <= names
    assert not any("node_modules" in n or "/test/" in n for n in names)
