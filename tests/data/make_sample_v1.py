"""Writes ``sample_v1.svbc`` and ``sample_v1.txt``: run once per format version, then commit.

The files of older versions are never regenerated: later versions must keep loading them.
"""

from __future__ import annotations

from pathlib import Path

from shapevm.bytecode import format_program, parse_program, save
from tests.bytecode.programs import TEXTS

HERE = Path(__file__).parent


def main() -> None:
    program = parse_program(TEXTS["consts"] + TEXTS["control"] + TEXTS["memory"] + TEXTS["mlp"])
    save(program, HERE / "sample_v1.svbc")
    (HERE / "sample_v1.txt").write_text(format_program(program), encoding="utf-8")


if __name__ == "__main__":
    main()
