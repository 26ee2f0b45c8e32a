// The extension's code against a stand-in for VS Code's API (the `vscode` module exists
// only inside VS Code): it registers the `shapevm` debug type, starts the adapter with the
// configured interpreter, fills a configuration for an open .svbc file, and shows the
// monitor in a panel.
"use strict";

const assert = require("node:assert/strict");
const Module = require("node:module");
const path = require("node:path");
const { test } = require("node:test");

const calls = [];
const settings = { python: "/opt/venv/bin/python", monitorUrl: "" };
const vscode = {
  DebugAdapterExecutable: class { constructor(command, args) { this.command = command; this.args = args; } },
  ViewColumn: { Beside: -2 },
  Uri: { parse: (s) => ({ toString: () => s }) },
  env: { asExternalUri: async (u) => u },
  workspace: { getConfiguration: () => ({ get: (k) => settings[k] }) },
  window: {
    activeTextEditor: { document: { uri: { fsPath: "/work/model.svbc" } } },
    showErrorMessage: async (m) => { calls.push(["error", m]); },
    showInputBox: async (o) => { calls.push(["input", o.value]); return "http://127.0.0.1:8765/?token=abc"; },
    createWebviewPanel: (id, title, column, options) => {
      const panel = { id, title, options, webview: { cspSource: "vscode-webview:", html: "" } };
      calls.push(["panel", panel]);
      return panel;
    },
  },
  debug: {
    registerDebugAdapterDescriptorFactory: (type, f) => { calls.push(["factory", type, f]); return {}; },
    registerDebugConfigurationProvider: (type, p) => { calls.push(["provider", type, p]); return {}; },
  },
  commands: { registerCommand: (name, fn) => { calls.push(["command", name, fn]); return {}; } },
};
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return request === "vscode" ? "vscode" : resolve.call(this, request, ...rest);
};
require.cache.vscode = { id: "vscode", filename: "vscode", loaded: true, exports: vscode };
const extension = require(path.join(__dirname, "..", "extension.js"));
const manifest = require(path.join(__dirname, "..", "package.json"));
const context = { subscriptions: [], globalState: { get: () => undefined, update: async () => {} } };
extension.activate(context);
const find = (kind, name) => calls.find((c) => c[0] === kind && c[1] === name);

test("the manifest contributes the shapevm debug type and the monitor command", () => {
  const debuggerType = manifest.contributes.debuggers.find((d) => d.type === "shapevm");
  assert.deepEqual(debuggerType.configurationAttributes.launch.required, ["program"]);
  for (const key of ["program", "shapes", "inputs", "seed", "stopOnEntry", "jit"]) {
    assert.ok(debuggerType.configurationAttributes.launch.properties[key], key);
  }
  assert.ok(manifest.contributes.commands.some((c) => c.command === "shapevm.openMonitor"));
  assert.ok(manifest.contributes.breakpoints.some((b) => b.language === "shapevm-bytecode"));
  assert.equal(manifest.main, "./extension.js");
});

test("each session starts `python -m shapevm debug-adapter`", () => {
  const factory = find("factory", "shapevm")[2];
  const exe = factory.createDebugAdapterDescriptor({ configuration: {} });
  assert.equal(exe.command, "/opt/venv/bin/python");
  assert.deepEqual(exe.args, ["-m", "shapevm", "debug-adapter"]);
  const own = factory.createDebugAdapterDescriptor({ configuration: { python: "py3" } });
  assert.equal(own.command, "py3");
});

test("F5 without a launch configuration debugs the open .svbc file", async () => {
  const provider = find("provider", "shapevm")[2];
  const config = await provider.resolveDebugConfiguration(undefined, {});
  assert.equal(config.type, "shapevm");
  assert.equal(config.program, "/work/model.svbc");
  assert.equal(config.stopOnEntry, true);
  vscode.window.activeTextEditor = undefined;
  assert.equal(await provider.resolveDebugConfiguration(undefined, {}), undefined);
  assert.match(calls.at(-1)[1], /set "program"/);
});

test("the monitor command shows the page, token included, in a panel", async () => {
  const command = find("command", "shapevm.openMonitor")[2];
  const panel = await command();
  assert.equal(panel.title, "shapevm monitor");
  assert.deepEqual(panel.options.portMapping, [{ webviewPort: 8765, extensionHostPort: 8765 }]);
  assert.match(panel.webview.html, /<iframe src="http:\/\/127\.0\.0\.1:8765\/\?token=abc"/);
  assert.match(panel.webview.html, /frame-src http:\/\/127\.0\.0\.1:8765/);
});
