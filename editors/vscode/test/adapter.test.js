// The adapter under a real DAP client (@vscode/debugadapter-testsupport's DebugClient, as
// VS Code's own debug extensions test theirs): launch, line and instruction breakpoints,
// stepping, scopes and variables, evaluate, disassemble, a failing program, termination.
// Run by tests/tools/debug/test_dap_client.py, which saves the programs and sets
// SHAPEVM_PROGRAMS (their folder) and SHAPEVM_PYTHON (an interpreter with shapevm). One
// adapter serves every test, `python -m shapevm debug-adapter --port 0`, each test being a
// session on a connection of its own (as VS Code's `debugServer` connects).
"use strict";

const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const path = require("node:path");
const readline = require("node:readline");
const { test: nodeTest, before, after, beforeEach, afterEach } = require("node:test");
const { DebugClient } = require("@vscode/debugadapter-testsupport");

const PYTHON = process.env.SHAPEVM_PYTHON || "python3";
const PROGRAMS = process.env.SHAPEVM_PROGRAMS;
const program = (name) => path.join(PROGRAMS, `${name}.svbc`);
const SOURCE = { sourceReference: 1 };

// The client has no timeouts of its own on a TCP connection: each test has one.
const test = (name, fn) => nodeTest(name, { timeout: 60000 }, fn);

let server;
let port;
before(async () => {
  server = spawn(PYTHON, ["-m", "shapevm", "debug-adapter", "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: server.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    server.once("exit", (code) => reject(new Error(`the adapter exited with ${code}`)));
  });
  port = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(first)[1]);
});
after(() => server.kill());

let dc;
beforeEach(async () => {
  dc = new DebugClient(PYTHON, "", "shapevm");
  await dc.start(port);
});
afterEach(() => dc.stop());

// initialize, launch, the initialized event; then breakpoints; then configurationDone.
async function launch(args, configure) {
  const init = await dc.initializeRequest();
  const initialized = dc.waitForEvent("initialized");
  await dc.launchRequest(args);
  await initialized;
  if (configure) await configure();
  const stopped = dc.waitForEvent("stopped");
  await dc.configurationDoneRequest();
  return { init, stopped };
}

async function frame() {
  const st = await dc.stackTraceRequest({ threadId: 1 });
  return st.body.stackFrames[0];
}

async function resume(request) {
  const stopped = dc.waitForEvent("stopped");
  await request({ threadId: 1 });
  return (await stopped).body;
}

test("initialize advertises what the adapter supports", async () => {
  const { body } = await dc.initializeRequest();
  for (const key of [
    "supportsConfigurationDoneRequest", "supportsInstructionBreakpoints", "supportsDisassembleRequest",
    "supportsSteppingGranularity", "supportsEvaluateForHovers",
  ]) assert.equal(body[key], true, key);
});

test("stops on entry, steps one instruction per line, and runs to the end", async () => {
  const { stopped } = await launch({ program: program("mlp"), shapes: { x: [3, 8] }, stopOnEntry: true });
  assert.equal((await stopped).body.reason, "entry");
  let f = await frame();
  assert.equal(f.instructionPointerReference, "0");
  assert.equal(f.source.sourceReference, 1);
  const source = await dc.sourceRequest({ sourceReference: 1, source: SOURCE });
  const lines = source.body.content.split("\n");
  assert.match(lines[f.line - 1], /BIND_INPUTS b/);
  for (const [request, pc] of [[(a) => dc.nextRequest(a), "1"], [(a) => dc.stepInRequest({ ...a, granularity: "instruction" }), "2"]]) {
    assert.equal((await resume(request)).reason, "step");
    f = await frame();
    assert.equal(f.instructionPointerReference, pc);
    assert.match(lines[f.line - 1], pc === "2" ? /OP_CALL matmul/ : /LOAD_CONST/);
  }
  const [exited, terminated] = [dc.waitForEvent("exited"), dc.waitForEvent("terminated")];
  await dc.continueRequest({ threadId: 1 });
  assert.equal((await exited).body.exitCode, 0);
  await terminated;
});

test("line and instruction breakpoints stop where they were set", async () => {
  const { stopped } = await launch({ program: program("mlp"), shapes: { x: [3, 8] }, stopOnEntry: false }, async () => {
    const lines = await dc.setBreakpointsRequest({ source: SOURCE, breakpoints: [{ line: 7 }] });
    assert.equal(lines.body.breakpoints[0].verified, true);
    assert.equal(lines.body.breakpoints[0].instructionReference, "3");
    const instrs = await dc.customRequest("setInstructionBreakpoints", { breakpoints: [{ instructionReference: "5" }] });
    assert.equal(instrs.body.breakpoints[0].verified, true);
  });
  const first = (await stopped).body;
  assert.equal(first.reason, "breakpoint");
  assert.equal((await frame()).instructionPointerReference, "3");
  assert.equal((await frame()).line, 7);
  assert.equal((await resume((a) => dc.continueRequest(a))).reason, "breakpoint");
  assert.equal((await frame()).instructionPointerReference, "5");
});

test("scopes and variables show registers with shape, dtype, strides and device", async () => {
  const { stopped } = await launch({ program: program("mlp"), shapes: { x: [5, 8] }, stopOnEntry: false }, () =>
    dc.customRequest("setInstructionBreakpoints", { breakpoints: [{ instructionReference: "4" }] }));
  await stopped;
  const scopes = (await dc.scopesRequest({ frameId: (await frame()).id })).body.scopes;
  assert.deepEqual(scopes.map((s) => s.name), ["Tensor registers", "Shape registers", "Dimension variables"]);
  const tensors = (await dc.variablesRequest({ variablesReference: scopes[0].variablesReference })).body.variables;
  const t3 = tensors.find((v) => v.name === "t3");
  assert.equal(t3.value, "f32[5, 4]");
  assert.equal(t3.type, "f32[b, 4]");
  const details = Object.fromEntries((await dc.variablesRequest({ variablesReference: t3.variablesReference })).body.variables.map((v) => [v.name, v.value]));
  assert.equal(details.shape, "(5, 4)");
  assert.equal(details.dtype, "float32");
  assert.equal(details.strides, "(16, 4) bytes = (4, 1) elements");
  assert.equal(details.device, "cpu");
  assert.equal(details.execution, "interpreted: #3 OP_CALL maximum");
  assert.ok(Number(details.min) >= 0, "relu output");
  const shapes = (await dc.variablesRequest({ variablesReference: scopes[1].variablesReference })).body.variables;
  assert.deepEqual(shapes.map((v) => [v.name, v.value]), [["s0", "5"]]);
  const dims = (await dc.variablesRequest({ variablesReference: scopes[2].variablesReference })).body.variables;
  assert.deepEqual(dims.map((v) => [v.name, v.value]), [["b", "5"]]);
});

test("evaluate reads registers and dimension expressions, for hovers too", async () => {
  const { stopped } = await launch({ program: program("mlp"), shapes: { x: [6, 8] }, stopOnEntry: false }, () =>
    dc.customRequest("setInstructionBreakpoints", { breakpoints: [{ instructionReference: "3" }] }));
  await stopped;
  const hover = await dc.evaluateRequest({ expression: "t2", context: "hover", frameId: 1 });
  assert.equal(hover.body.result, "f32[6, 4]");
  assert.ok(hover.body.variablesReference > 0);
  const row = await dc.evaluateRequest({ expression: "t2[0, :2]", context: "watch", frameId: 1 });
  assert.equal(row.body.result, "f32[2]");
  const expr = await dc.evaluateRequest({ expression: "2*b - 1", context: "repl", frameId: 1 });
  assert.equal(expr.body.result, "11");
  await assert.rejects(dc.evaluateRequest({ expression: "t9", context: "repl" }), /t9 holds no value here/);
});

test("disassemble lists instructions by index, padding outside the program", async () => {
  const { stopped } = await launch({ program: program("mlp"), shapes: { x: [2, 8] } });
  await stopped;
  const { body } = await dc.disassembleRequest({ memoryReference: "0", instructionOffset: -2, instructionCount: 6 });
  assert.deepEqual(body.instructions.map((i) => i.address), ["-2", "-1", "0", "1", "2", "3"]);
  assert.equal(body.instructions[0].presentationHint, "invalid");
  assert.equal(body.instructions[2].instruction, "s0 = BIND_INPUTS b");
  assert.match(body.instructions[4].instruction, /^t2: f32\[b, 4\] = OP_CALL matmul\(t0, t1\)/);
  assert.equal(body.instructions[4].line, 6);
});

test("a program that raises stops with reason exception, then exits with 1", async () => {
  const { stopped } = await launch({ program: program("fails"), shapes: { x: [6] }, seed: 3, stopOnEntry: false });
  const ev = (await stopped).body;
  assert.equal(ev.reason, "exception");
  assert.match(ev.text, /operands could not be broadcast together/);
  assert.equal((await frame()).instructionPointerReference, "3");
  const info = await dc.exceptionInfoRequest({ threadId: 1 });
  assert.equal(info.body.exceptionId, "RuntimeOpError");
  const [exited, terminated] = [dc.waitForEvent("exited"), dc.waitForEvent("terminated")];
  await dc.continueRequest({ threadId: 1 });
  assert.equal((await exited).body.exitCode, 1);
  await terminated;
});

test("bad launch arguments get an error response and the adapter stays up", async () => {
  await dc.initializeRequest();
  await assert.rejects(dc.launchRequest({ program: program("mlp"), shapes: { x: [100, 8] } }), /'b <= 64'/);
  await assert.rejects(dc.launchRequest({ program: program("nothing") }), /no program file/);
  await dc.launchRequest({ program: program("mlp"), shapes: { x: [1, 8] } });
  const threads = await dc.threadsRequest();
  assert.equal(threads.body.threads[0].name, "@mlp");
});

test("terminate ends a stopped program", async () => {
  const { stopped } = await launch({ program: program("loop"), shapes: { x: [2, 4] } });
  await stopped;
  const terminated = dc.waitForEvent("terminated");
  await dc.terminateRequest({});
  await terminated;
});
