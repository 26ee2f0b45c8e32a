"""``shapevm validate FILE``: exit 0 when valid, 1 with the verifier's report, 2 when corrupt."""

from __future__ import annotations

import sys
from typing import TextIO

from shapevm.bytecode.errors import BytecodeFormatError, BytecodeSyntaxError
from shapevm.bytecode.verify import check
from shapevm.tools.dis import plural, read_any

EXIT_VALID, EXIT_INVALID, EXIT_CORRUPT = 0, 1, 2


def run_validate(path: str, file: TextIO | None = None, err: TextIO | None = None) -> int:
    """Load (checking every checksum, constant data included) and verify ``path``."""
    out = file or sys.stdout
    errors = err or sys.stderr
    try:
        program, _ = read_any(path)
    except OSError as exc:
        print(f"shapevm validate: cannot read {path}: {exc.strerror or exc}", file=errors)
        return EXIT_CORRUPT
    except (BytecodeFormatError, BytecodeSyntaxError) as exc:
        print(f"{path}: {type(exc).__name__}: {exc}", file=errors)
        return EXIT_CORRUPT
    diagnostics = check(program)
    if diagnostics:
        print(f"{path}: VerifyError: {plural(len(diagnostics), 'problem')}", file=out)
        for d in diagnostics:
            print("\n" + d.render(), file=out)
        return EXIT_INVALID
    n = sum(fn.num_instructions for fn in program.functions)
    counts = [
        plural(len(program.functions), "function"),
        plural(n, "instruction"),
        plural(len(program.constants), "constant"),
    ]
    print(f"{path}: valid ({', '.join(counts)})", file=out)
    return EXIT_VALID
