// The shapevm extension: the `shapevm` debug type, which runs the Debug Adapter Protocol
// server that ships with shapevm (`python -m shapevm debug-adapter`), and a command that
// shows the JIT monitor page in a panel. Plain JavaScript: nothing to build.
"use strict";

const vscode = require("vscode");

const TYPE = "shapevm";

function pythonFor(config) {
  return (config && config.python) || vscode.workspace.getConfiguration("shapevm").get("python") || "python3";
}

// Starts the adapter for each debug session, with the interpreter the user chose.
const adapterFactory = {
  createDebugAdapterDescriptor(session) {
    return new vscode.DebugAdapterExecutable(pythonFor(session.configuration), ["-m", "shapevm", "debug-adapter"]);
  },
};

// F5 on an open .svbc file with no launch.json: debug that file.
const configurationProvider = {
  resolveDebugConfiguration(folder, config) {
    if (!config.type && !config.request && !config.name) {
      const editor = vscode.window.activeTextEditor;
      const file = editor && editor.document.uri.fsPath;
      if (file && /\.(svbc|svtxt)$/i.test(file)) {
        Object.assign(config, { type: TYPE, request: "launch", name: "Debug bytecode", program: file, stopOnEntry: true });
      }
    }
    if (!config.program) {
      return vscode.window.showErrorMessage("shapevm: set \"program\" to the .svbc file to debug").then(() => undefined);
    }
    return config;
  },
};

// The monitor page in a panel: an iframe on the page's URL (its token included).
function monitorHtml(url, webview) {
  const origin = new URL(url).origin;
  const csp = [
    "default-src 'none'",
    `frame-src ${origin} ${webview.cspSource}`,
    "style-src 'unsafe-inline'",
  ].join("; ");
  return `<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<style>html,body,iframe{margin:0;padding:0;border:0;width:100%;height:100vh;overflow:hidden}</style>
</head><body><iframe src="${url.replace(/"/g, "&quot;")}" title="shapevm monitor"></iframe></body></html>`;
}

function portOf(url) {
  const u = new URL(url);
  return Number(u.port || (u.protocol === "https:" ? 443 : 80));
}

async function openMonitor(context, given) {
  let url = given || vscode.workspace.getConfiguration("shapevm").get("monitorUrl") || context.globalState.get("shapevm.lastMonitorUrl");
  if (!given) {
    url = await vscode.window.showInputBox({
      prompt: "The monitor's URL, as printed by shapevm.vm.start_monitor() or `shapevm monitor`",
      value: url || "http://127.0.0.1:",
      validateInput: (v) => (/^https?:\/\/[^/]+/.test(v) ? undefined : "a URL such as http://127.0.0.1:8765/"),
    });
  }
  if (!url) return undefined;
  await context.globalState.update("shapevm.lastMonitorUrl", url);
  const external = (await vscode.env.asExternalUri(vscode.Uri.parse(url))).toString(true);
  const port = portOf(url);
  const panel = vscode.window.createWebviewPanel("shapevm.monitor", "shapevm monitor", vscode.ViewColumn.Beside, {
    enableScripts: true,
    retainContextWhenHidden: true,
    portMapping: [{ webviewPort: port, extensionHostPort: port }],
  });
  panel.webview.html = monitorHtml(external, panel.webview);
  return panel;
}

function activate(context) {
  context.subscriptions.push(
    vscode.debug.registerDebugAdapterDescriptorFactory(TYPE, adapterFactory),
    vscode.debug.registerDebugConfigurationProvider(TYPE, configurationProvider),
    vscode.commands.registerCommand("shapevm.openMonitor", (url) => openMonitor(context, url)),
  );
}

function deactivate() {}

module.exports = { activate, deactivate, monitorHtml, adapterFactory, configurationProvider };
