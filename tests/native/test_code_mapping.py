"""The extension's machine code is mapped into the process at import (Linux 5.14+): the first
call of a kernel's code path at a new shape does not take a page fault for its code (15-25
us each on a virtual machine, a dense layer's whole first call at a new batch size)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shapevm import _native

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc/self/smaps and madvise are Linux's"
)

# In a fresh process: the resident share of each executable mapping of the extension's file,
# right after the import (nothing has run a kernel yet).
_CHILD = r"""
import json
import shapevm._native as n

path = n.__file__
found, current = [], None
for line in open("/proc/self/smaps"):
    parts = line.split()
    if parts and not parts[0].endswith(":"):  # a mapping's header
        current = {"perms": parts[1]} if len(parts) >= 6 and parts[5] == path else None
        if current is not None:
            found.append(current)
    elif current is not None and parts[0] in ("Size:", "Rss:"):
        current[parts[0][:-1]] = int(parts[1])
print(json.dumps({"mapped": n.info()["code_mapped_bytes"], "maps": found}))
"""


def test_code_is_resident_after_import() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    if data["mapped"] == 0:
        pytest.skip("this kernel cannot map code ahead (MADV_POPULATE_READ is Linux 5.14+)")
    code = [m for m in data["maps"] if "x" in m["perms"]]
    assert code, f"no executable mapping of the extension in {data['maps']}"
    size = sum(m["Size"] for m in code)
    rss = sum(m["Rss"] for m in code)
    assert data["mapped"] >= size * 1024 * 0.99
    assert rss >= size * 0.99, f"{rss} of {size} KiB of code resident after the import"


def test_info_reports_the_code_mapped() -> None:
    mapped = _native.info()["code_mapped_bytes"]
    assert isinstance(mapped, int) and mapped >= 0
