"""Build of shapevm's C kernel library (`shapevm._native`); the rest is in pyproject.toml.

The library holds code for every instruction-set level it supports (AVX-512, AVX2+FMA,
portable C), each compiled with per-function target attributes and chosen at import from
the CPU, so one build runs on any x86-64 machine: no ``-march=native``.

``SHAPEVM_NATIVE_DEBUG=1 pip install -e .`` builds with bounds checks (``SV_DEBUG``),
AddressSanitizer and no optimisation of note; run its tests with
``LD_PRELOAD=$(gcc -print-file-name=libasan.so)``.
"""

import os
import sys
from glob import glob

import numpy as np
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CSRC = os.path.join("src", "shapevm", "native", "c")
DEBUG = os.environ.get("SHAPEVM_NATIVE_DEBUG", "") not in ("", "0")

compile_args = [
    "-std=gnu11",
    # Python's flags add -fwrapv; with it GCC kept some of the micro-kernel's accumulators
    # on the stack (half the speed of 4-6 row tiles). The library does not rely on signed
    # overflow wrapping (UBSan checks that in the debug build).
    "-fno-wrapv",
    "-fno-math-errno",
    "-ffp-contract=fast",
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
    "-Wno-cast-function-type",
    "-pthread",
]
link_args = ["-pthread", "-ldl"]
macros = [("NPY_TARGET_VERSION", "NPY_1_23_API_VERSION")]
if DEBUG:
    compile_args += [
        "-O1",
        "-g",
        "-fno-omit-frame-pointer",
        "-fsanitize=address",
        "-fsanitize=undefined",
        "-fno-sanitize=float-cast-overflow",
    ]
    link_args += ["-fsanitize=address", "-fsanitize=undefined"]
    macros.append(("SV_DEBUG", "1"))
else:
    compile_args += ["-O3"]

if sys.platform == "win32":  # pragma: no cover - the library needs a GCC-compatible compiler
    raise SystemExit("shapevm's native library needs gcc or clang (Linux or macOS)")


class BuildNative(build_ext):
    """build_ext that compiles the sources in parallel (one job per CPU: the three
    instruction-set files take most of the time) and says what is missing when the C
    compiler or Python.h is absent."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # CompileError, LinkError, a missing compiler (OSError)
            raise SystemExit(
                "\nshapevm: building the C kernel library (shapevm._native) failed:\n"
                f"  {type(exc).__name__}: {exc}\n"
                "  It needs a C compiler (gcc or clang) and the Python headers (Python.h).\n"
                "  Debian/Ubuntu: apt install gcc python3-dev; Fedora: dnf install gcc "
                "python3-devel;\n  macOS: xcode-select --install. Then run pip install again."
            ) from exc


setup(
    cmdclass={"build_ext": BuildNative},
    ext_modules=[
        Extension(
            "shapevm._native",
            sources=sorted(glob(os.path.join(CSRC, "*.c"))),
            include_dirs=[CSRC, np.get_include()],
            define_macros=macros,
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            depends=sorted(glob(os.path.join(CSRC, "*.h"))),
        )
    ],
)
