"""The adapter's sessions, driven from Python: launch arguments and their errors, what a
stopped program shows, stepping out, pausing, a failing program, the compiled tier, and
the adapter as a process whose standard output carries nothing but the protocol."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.tools.debug.dap import Client
from tests.tools.debug.programs import W, save_programs
from tests.tools.tooling import require


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return save_programs(tmp_path_factory.mktemp("programs"), loop_count=200_000)


@pytest.fixture
def client():
    c = Client()
    yield c
    c.close()


def launch_error(client: Client, **arguments) -> str:
    client.ok("initialize", adapterID="shapevm")
    resp = client.request("launch", **arguments)
    assert not resp["success"]
    return resp["message"]


def test_a_missing_program_is_refused_with_what_to_give(client, tmp_path):
    text = launch_error(client, program=str(tmp_path / "none.svbc"))
    assert text.startswith(f"no program file '{tmp_path / 'none.svbc'}'")
    assert "expected: the path of a .svbc file" in text


def test_corrupt_bytecode_is_refused_with_the_loaders_message(client, files, tmp_path):
    data = bytearray(files["mlp"].read_bytes())
    data[40] ^= 0xFF
    bad = tmp_path / "bad.svbc"
    bad.write_bytes(bytes(data))
    text = launch_error(client, program=str(bad), shapes={"x": [3, 8]})
    assert text.startswith(f"{bad}: BytecodeFormatError: byte ")


def test_an_invalid_program_is_refused_with_the_verifiers_message(client, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("func @f(t0: f32[b]) -> f32[b]\n  L0:\n    RETURN t9\n")
    text = launch_error(client, program=str(bad), shapes={"t0": [3]})
    assert text.startswith(f"{bad}: VerifyError: ")
    assert "t9 is used before it is defined" in text


def test_shapes_that_violate_the_constraints_get_the_binders_message(client, files):
    text = launch_error(client, program=str(files["mlp"]), shapes={"x": [100, 8]})
    assert text.startswith("the inputs do not fit @mlp: ")
    assert "'b <= 64'" in text and "100 <= 64" in text


@pytest.mark.parametrize(
    ("arguments", "start"),
    [
        ({"shapes": {"x": "three"}}, "bad launch argument 'shapes'"),
        ({"shapes": {"y": [3, 8]}}, "'shapes' names 'y', not an argument"),
        ({}, "argument 'x' has the symbolic shape (b, 8)"),
        ({"shapes": {"x": [3, 8]}, "seed": -1}, "bad launch argument 'seed'"),
        ({"shapes": {"x": [3, 8]}, "jit": "yes"}, "bad launch argument 'jit'"),
        ({"shapes": {"x": [3, 7]}}, "the inputs do not fit @mlp: "),
    ],
)
def test_bad_launch_arguments(client, files, arguments, start):
    assert launch_error(client, program=str(files["mlp"]), **arguments).startswith(start)


def test_no_program_at_all(client):
    text = launch_error(client)
    assert text.startswith("bad launch argument 'program'")
    assert "found:    nothing" in text


def test_an_onnx_program_without_the_importer_says_so(client, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "shapevm.onnx" else real(name, *a),
    )
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    text = launch_error(client, program=str(model))
    assert "this shapevm has no ONNX importer (shapevm.onnx)" in text


def test_inputs_from_an_npz_file_are_the_ones_stepped_through(client, files, tmp_path):
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    np.savez(tmp_path / "in.npz", x=x)
    client.launch(program=str(files["mlp"]), inputs=str(tmp_path / "in.npz"))
    client.ok("configurationDone")
    client.event("stopped")
    t0 = client.ok("evaluate", expression="t0", context="watch")
    assert t0["result"] == "f32[2, 8]"
    values = client.variables(t0["variablesReference"])
    assert values["values"]["value"] == "[0, 1, 2, 3, 4, 5, 6, 7, ...]"
    assert values["execution"]["value"] == "input"
    client.ok("continue", threadId=1)
    expected = np.tanh(np.maximum(x @ W, 0)) * 2
    assert f"max {expected.max():.6g}" in client.output("stdout")


def test_npz_inputs_with_unknown_names_are_refused(client, files, tmp_path):
    np.savez(tmp_path / "in.npz", y=np.zeros((2, 8), np.float32))
    text = launch_error(client, program=str(files["mlp"]), inputs=str(tmp_path / "in.npz"))
    assert "hold arrays the program does not take" in text and "expected: arrays named x" in text


def test_a_tensor_shows_shape_dtype_strides_device_and_how_it_was_made(client, files):
    client.launch(program=str(files["mlp"]), shapes={"x": [3, 8]}, seed=1)
    client.ok("setInstructionBreakpoints", breakpoints=[{"instructionReference": "4"}])
    client.ok("configurationDone")
    assert client.event("stopped")["reason"] == "entry"
    client.ok("continue", threadId=1)
    assert client.event("stopped")["reason"] == "breakpoint"
    (scope,) = [
        s for s in client.ok("scopes", frameId=1)["scopes"] if s["name"] == "Tensor registers"
    ]
    regs = client.variables(scope["variablesReference"])
    assert regs["t2"]["value"] == "f32[3, 4]" and regs["t2"]["type"] == "f32[b, 4]"
    t2 = client.variables(regs["t2"]["variablesReference"])
    assert t2["shape"]["value"] == "(3, 4)" and t2["dtype"]["value"] == "float32"
    assert t2["strides"]["value"] == "(16, 4) bytes = (4, 1) elements"
    assert t2["device"]["value"] == "cpu"
    assert t2["execution"]["value"] == "interpreted: #2 OP_CALL matmul"
    assert t2["declared type"]["value"] == "f32[b, 4]"
    assert {"min", "max", "mean", "memory", "values"} <= set(t2)
    t1 = client.variables(regs["t1"]["variablesReference"])
    assert t1["execution"]["value"] == "constant: #1 LOAD_CONST k0"
    shapes = client.variables(2)
    assert shapes["s0"]["value"] == "3" and shapes["s0"]["type"] == "s0 = BIND_INPUTS b"
    assert client.variables(3) == {
        "b": {"name": "b", "value": "3", "variablesReference": 0, "type": "dimension variable"}
    }


def test_evaluate_registers_indices_and_dimension_expressions(client, files):
    client.launch(program=str(files["mlp"]), shapes={"x": [5, 8]})
    client.ok("setInstructionBreakpoints", breakpoints=[{"instructionReference": "5"}])
    client.ok("configurationDone")
    client.event("stopped")
    client.ok("continue", threadId=1)
    client.event("stopped")
    assert client.ok("evaluate", expression="t3[1:3, ...]")["result"] == "f32[2, 4]"
    assert client.ok("evaluate", expression="t3[0, -1]")["result"].startswith("f32[] = ")
    assert client.ok("evaluate", expression="s0")["result"] == "5"
    assert client.ok("evaluate", expression="b", context="hover")["result"] == "5"
    assert client.ok("evaluate", expression="2*b + floordiv(b, 2)")["result"] == "12"
    for bad, why in [
        ("t5", "t5 holds no value here"),
        ("t3[9]", "index 9 is out of bounds"),
        ("s0[1]", "s0 is an integer: it has no index"),
        ("q + 1", "no value for dimension variable 'q'"),
        ("__import__('os')", "cannot evaluate"),
    ]:
        resp = client.request("evaluate", expression=bad)
        assert not resp["success"] and why in resp["message"], resp["message"]
        assert "expected: a register (t3, s0)" in resp["message"]


def test_breakpoints_on_lines_without_work_move_to_the_next_instruction(client, files):
    client.launch(program=str(files["mlp"]), shapes={"x": [3, 8]})
    body = client.ok(
        "setBreakpoints", source={"sourceReference": 1}, breakpoints=[{"line": 3}, {"line": 99}]
    )
    first, beyond = body["breakpoints"]
    assert first["verified"] and first["line"] == 4 and first["instructionReference"] == "0"
    assert first["message"] == "moved to the next instruction that runs (#0)"
    assert (
        not beyond["verified"] and beyond["message"] == "line 99: no instruction there or after it"
    )
    other = client.ok("setBreakpoints", source={"path": "/elsewhere.py"}, breakpoints=[{"line": 3}])
    assert not other["breakpoints"][0]["verified"]


def test_step_out_runs_to_the_return(client, files):
    client.launch(program=str(files["mlp"]), shapes={"x": [3, 8]})
    client.ok("configurationDone")
    client.event("stopped")
    client.ok("stepOut", threadId=1)
    assert client.event("stopped")["reason"] == "step"
    frame = client.ok("stackTrace", threadId=1)["stackFrames"][0]
    assert frame["name"] == "@mlp #6 RETURN t5"


def test_pause_stops_a_running_loop_and_breakpoints_hit_on_every_iteration(client, files):
    client.launch(program=str(files["loop"]), shapes={"x": [2, 4]}, stopOnEntry=False)
    text = client.ok("source", sourceReference=1)["content"]
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "OP_CALL tanh" in t)
    client.ok("setBreakpoints", source={"sourceReference": 1}, breakpoints=[{"line": line}])
    client.ok("configurationDone")
    assert client.event("stopped")["reason"] == "breakpoint"
    client.ok("continue", threadId=1)
    assert client.event("stopped")["reason"] == "breakpoint"  # the next iteration
    client.ok("setBreakpoints", source={"sourceReference": 1}, breakpoints=[])
    client.ok("continue", threadId=1)
    time.sleep(0.2)
    resp = client.request("variables", variablesReference=1)
    assert resp["message"] == "the program is running: pause it first"
    client.ok("pause", threadId=1)
    assert client.event("stopped")["reason"] == "pause"
    i = int(client.ok("evaluate", expression="t5")["result"].split("= ")[1])
    assert 1 < i < 200_000
    client.ok("terminate")
    client.event("terminated")


def test_a_failing_program_stops_on_the_exception_then_exits_with_1(client, files):
    client.launch(program=str(files["fails"]), shapes={"x": [6]}, stopOnEntry=False, seed=3)
    client.ok("configurationDone")
    stopped = client.event("stopped")
    assert stopped["reason"] == "exception" and stopped["description"] == "RuntimeOpError"
    assert "operands could not be broadcast together" in stopped["text"]
    frame = client.ok("stackTrace", threadId=1)["stackFrames"][0]
    assert frame["instructionPointerReference"] == "3"
    info = client.ok("exceptionInfo", threadId=1)
    assert info["exceptionId"] == "RuntimeOpError" and info["breakMode"] == "always"
    assert client.ok("evaluate", expression="t2")["result"].startswith("f32[")
    client.ok("continue", threadId=1)
    assert "RuntimeOpError" in client.output("stderr")
    assert client.event("exited") == {"exitCode": 1}
    client.event("terminated")


def test_the_compiled_tier_shows_regions_as_single_steps(client, files):
    client.launch(program=str(files["mlp"]), shapes={"x": [4, 8]}, jit=True)
    note = client.output("console")
    assert "compiled: R0" in note, note
    client.ok("configurationDone")
    client.event("stopped")
    names = []
    for _ in range(6):
        frame = client.ok("stackTrace", threadId=1)["stackFrames"][0]
        names.append(frame["name"])
        if "RETURN" in frame["name"]:
            break
        client.ok("next", threadId=1)
        client.event("stopped")
    assert any("(compiled region)" in n for n in names), names
    regs = client.variables(1)
    out = client.variables(regs["t5"]["variablesReference"])
    assert out["execution"]["value"].startswith("compiled: R0")


def test_the_adapter_process_keeps_its_standard_output_for_the_protocol(files):
    messages = [
        {"seq": 1, "type": "request", "command": "initialize", "arguments": {}},
        {
            "seq": 2,
            "type": "request",
            "command": "launch",
            "arguments": {"program": str(files["mlp"]), "shapes": {"x": [2, 8]}},
        },
        {"seq": 3, "type": "request", "command": "disconnect", "arguments": {}},
    ]
    data = b"".join(
        b"Content-Length: %d\r\n\r\n%s" % (len(b), b)
        for b in (json.dumps(m).encode() for m in messages)
    )
    code = (  # noise from Python and from C, written once the adapter runs
        "import os, shapevm.tools.debug.adapter as a, shapevm.__main__ as m\n"
        "serve = a.serve\n"
        "def noisy(i, o):\n"
        "    print('noise'); os.write(1, b'C-level noise\\n')\n"
        "    return serve(i, o)\n"
        "a.serve = noisy\n"
        "raise SystemExit(m.main(['debug-adapter']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=data,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert b"noise\nC-level noise\n" in done.stderr
    out = done.stdout
    assert out.startswith(b"Content-Length: ")
    replies = []
    while out:
        header, _, rest = out.partition(b"\r\n\r\n")
        n = int(header.split(b": ")[1])
        replies.append(json.loads(rest[:n]))
        out = rest[n:]
    assert [r.get("command") or r.get("event") for r in replies] == [
        "initialize",
        "launch",
        "initialized",
        "output",
        "disconnect",
    ]


def test_a_program_that_fails_under_the_jit_is_stepped_in_the_interpreter(client, files):
    client.launch(program=str(files["fails"]), shapes={"x": [6]}, seed=3, jit=True)
    note = client.output("console")
    assert "interpreted: the JIT's first call failed: RuntimeOpError" in note, note
    client.ok("configurationDone")
    assert client.event("stopped")["reason"] == "entry"
    client.ok("continue", threadId=1)
    assert client.event("stopped")["reason"] == "exception"


def test_an_onnx_model_is_stepped_like_a_svbc_file(client, tmp_path):
    pytest.importorskip("shapevm.onnx", reason="this shapevm has no ONNX importer")
    onnx = require("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])],
        "relu_neg",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 4])],
    )
    model = tmp_path / "relu_neg.onnx"
    onnx.save(helper.make_model(graph), str(model))
    client.launch(program=str(model), shapes={"x": [3, 4]})
    client.ok("configurationDone")
    assert client.event("stopped")["reason"] == "entry"
    text = client.ok("source", sourceReference=1)["content"]
    assert "OP_CALL" in text
    client.ok("continue", threadId=1)
    assert client.event("exited") == {"exitCode": 0}
