"""``shapevm debug-adapter``: the Debug Adapter Protocol over standard input and output.

One request at a time on the main thread; the program runs in a thread of its own
(`Session`) and reports through events. Every request gets a response: an unknown one or
one that fails gets ``success: false`` with a message saying why and how to fix it, and
the adapter reads on; a malformed frame is reported as an ``output`` event. The session
ends with ``disconnect`` or when the client closes the stream.

The program's text form is served as a source with ``sourceReference`` 1, one instruction
per line; an instruction reference (``instructionPointerReference``, disassembly
addresses) is the instruction's index.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import traceback
from typing import Any, BinaryIO

from shapevm.bytecode.errors import format_message
from shapevm.bytecode.printer import format_instr
from shapevm.runtime.bctrace import NamedStep
from shapevm.tools.debug.protocol import MessageReader, MessageWriter, ProtocolError
from shapevm.tools.debug.session import CONTINUE, STEP, STEP_OUT, Session
from shapevm.tools.debug.target import LaunchArgs, LaunchError, Target
from shapevm.tools.debug.values import EvaluateError, Values

SOURCE_REF = 1
THREAD = 1
FRAME = 1
CAPABILITIES = {
    "supportsConfigurationDoneRequest": True,
    "supportsInstructionBreakpoints": True,
    "supportsDisassembleRequest": True,
    "supportsSteppingGranularity": True,
    "supportsEvaluateForHovers": True,
    "supportsTerminateRequest": True,
    "supportsExceptionInfoRequest": True,
    "supportsConditionalBreakpoints": False,
    "supportsRestartRequest": False,
    "exceptionBreakpointFilters": [],
}


class RequestError(ValueError):
    """A request that cannot be served as asked; its message goes back to the client."""


class Adapter:
    """Serves the requests of one debug session."""

    def __init__(self, writer: MessageWriter) -> None:
        self.writer = writer
        self.seq = 0
        self.target: Target | None = None
        self.session: Session | None = None
        self.values: Values | None = None
        self.line_bps: set[int] = set()
        self.instr_bps: set[int] = set()
        self.configured = False

    # -- messages -----------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(message)

    def event(self, name: str, body: dict[str, Any] | None = None) -> None:
        if name == "stopped" and self.values is not None:
            self.values.reset()
        self.send({"type": "event", "event": name, "body": body or {}})

    def output(self, text: str, category: str = "console") -> None:
        self.event("output", {"category": category, "output": text.rstrip("\n") + "\n"})

    def handle(self, msg: dict[str, Any]) -> bool:
        """Serve one message; ``False`` once the session is over."""
        seq, command = msg.get("seq"), msg.get("command")
        if msg.get("type") != "request" or not isinstance(command, str) or not isinstance(seq, int):
            self.output(
                format_message(
                    "shapevm debug-adapter: ignored a message that is not a request",
                    expected='{"seq": <int>, "type": "request", "command": "<name>", ...}',
                    found=repr(msg)[:200],
                ),
                "stderr",
            )
            return True
        args = msg.get("arguments") or {}
        method = getattr(self, "on_" + command, None)
        try:
            if method is None:
                raise RequestError(
                    f"shapevm debug-adapter does not support the {command!r} request"
                )
            if not isinstance(args, dict):
                raise RequestError(f"the arguments of {command!r} must be an object")
            body = method(args)
            self._respond(seq, command, True, body)
            after = getattr(self, "after_" + command, None)
            if after is not None:
                after(args)
        except (RequestError, LaunchError, EvaluateError) as exc:
            self._respond(seq, command, False, message=str(exc))
        except Exception as exc:  # a bug of ours: answer, say so, and stay up
            traceback.print_exc(file=sys.stderr)
            self._respond(seq, command, False, message=f"internal error in {command}: {exc!r}")
        return command != "disconnect"

    def _respond(
        self, seq: int, command: str, ok: bool, body: Any = None, message: str = ""
    ) -> None:
        out: dict[str, Any] = {
            "type": "response",
            "request_seq": seq,
            "command": command,
            "success": ok,
        }
        if body is not None:
            out["body"] = body
        if message:
            out["message"] = message
        self.send(out)

    def _session(self) -> Session:
        if self.session is None:
            raise RequestError("no program is loaded: send 'launch' first")
        return self.session

    def _stopped(self) -> Session:
        session = self._session()
        if not session.stopped:
            raise RequestError("the program is running: pause it first")
        return session

    # -- lifecycle ----------------------------------------------------------------------------
    def on_initialize(self, args: dict[str, Any]) -> dict[str, Any]:
        return CAPABILITIES

    def on_launch(self, args: dict[str, Any]) -> None:
        if self.session is not None:
            raise RequestError("a program is already launched in this session")
        self.target = Target(LaunchArgs.parse(args))
        self.session = Session(self.target, self.event)
        self.values = Values(self.session)

    def after_launch(self, args: dict[str, Any]) -> None:
        t = self.target
        assert t is not None
        self.event("initialized")
        shapes = ", ".join(f"{a.shape}" for a in t.arrays)
        dims = ", ".join(f"{k}={v}" for k, v in t.env.items())
        self.output(
            f"loaded {t.args.program}: {t.exp!r}\ninputs {shapes}; {dims or 'no dimension'}; "
            f"{t.compiled_note}"
        )

    def on_configurationDone(self, args: dict[str, Any]) -> None:
        self.configured = True

    def after_configurationDone(self, args: dict[str, Any]) -> None:
        if self.session is not None and self.session._thread is None:
            self.session.start()

    def on_disconnect(self, args: dict[str, Any]) -> None:
        if self.session is not None:
            self.session.terminate()

    def on_terminate(self, args: dict[str, Any]) -> None:
        session = self._session()
        ended = session._ended
        session.terminate()
        if not ended:
            self.event("terminated")

    # -- breakpoints --------------------------------------------------------------------------
    def on_setBreakpoints(self, args: dict[str, Any]) -> dict[str, Any]:
        t = self._target()
        source = args.get("source") or {}
        wanted = [b.get("line") for b in args.get("breakpoints") or [] if isinstance(b, dict)]
        if not wanted:
            wanted = list(args.get("lines") or [])
        out: list[dict[str, Any]] = []
        pcs: set[int] = set()
        ours = source.get("sourceReference") == SOURCE_REF or (
            not source.get("sourceReference") and source.get("name") == self._source()["name"]
        )
        for line in wanted:
            if not ours:
                out.append(
                    {
                        "verified": False,
                        "line": line,
                        "message": "breakpoints go in the program's bytecode text, which this "
                        "session shows as a source of its own",
                    }
                )
                continue
            pc = t.pc_at_line(line) if isinstance(line, int) else None
            out.append(self._breakpoint(pc, f"line {line}", line))
            if out[-1]["verified"]:
                pcs.add(out[-1]["id"])
        if ours:
            self.line_bps = pcs
            self._sync()
        return {"breakpoints": out}

    def on_setInstructionBreakpoints(self, args: dict[str, Any]) -> dict[str, Any]:
        out: list[dict[str, Any]] = []
        pcs: set[int] = set()
        for b in args.get("breakpoints") or []:
            ref = b.get("instructionReference") if isinstance(b, dict) else None
            try:
                pc = int(ref) + int(b.get("offset", 0))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                out.append({"verified": False, "message": f"bad instruction reference {ref!r}"})
                continue
            out.append(self._breakpoint(pc, f"instruction {pc}"))
            if out[-1]["verified"]:
                pcs.add(out[-1]["id"])
        self.instr_bps = pcs
        self._sync()
        return {"breakpoints": out}

    def on_setExceptionBreakpoints(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"breakpoints": []}  # a failing program always stops where it fails

    def _breakpoint(self, pc: int | None, asked: str, line: int | None = None) -> dict[str, Any]:
        t = self._target()
        stop = t.stop_at_or_after(pc) if pc is not None and 0 <= pc < len(t.instrs) else None
        if stop is None:
            return {"verified": False, "message": f"{asked}: no instruction there or after it"}
        bp = {
            "id": stop,
            "verified": True,
            "line": t.line_of[stop],
            "source": self._source(),
            "instructionReference": str(stop),
        }
        if stop != pc or (line is not None and bp["line"] != line):
            bp["message"] = f"moved to the next instruction that runs (#{stop})"
        return bp

    def _sync(self) -> None:
        if self.session is not None:
            self.session.breakpoints = self.line_bps | self.instr_bps

    def _target(self) -> Target:
        if self.target is None:
            raise RequestError("no program is loaded: send 'launch' first")
        return self.target

    # -- running ------------------------------------------------------------------------------
    def on_continue(self, args: dict[str, Any]) -> dict[str, Any]:
        self._stopped()
        return {"allThreadsContinued": True}

    def after_continue(self, args: dict[str, Any]) -> None:
        self._resume(CONTINUE)

    def on_next(self, args: dict[str, Any]) -> None:
        self._stopped()

    def after_next(self, args: dict[str, Any]) -> None:
        self._resume(STEP)

    on_stepIn = on_next
    after_stepIn = after_next
    on_stepOut = on_next

    def after_stepOut(self, args: dict[str, Any]) -> None:
        self._resume(STEP_OUT)

    def _resume(self, mode: str) -> None:
        session = self._session()
        if session.error is not None:  # stopped on the failure: running on ends the program
            mode = CONTINUE
        session.resume(mode)

    def on_pause(self, args: dict[str, Any]) -> None:
        self._session().pause()

    # -- looking --------------------------------------------------------------------------
    def on_threads(self, args: dict[str, Any]) -> dict[str, Any]:
        name = f"@{self.target.fn.name}" if self.target is not None else "main"
        return {"threads": [{"id": THREAD, "name": name}]}

    def on_stackTrace(self, args: dict[str, Any]) -> dict[str, Any]:
        session = self._stopped()
        t = self._target()
        pc, step = session.pc, session.step
        if isinstance(step, NamedStep):
            name = f"@{t.fn.name} {step.name} (compiled region)"
        else:
            name = (
                f"@{t.fn.name} #{pc} {format_instr(t.instrs[pc]).split(' = ')[-1].split('  ')[0]}"
            )
        frame = {
            "id": FRAME,
            "name": name,
            "source": self._source(),
            "line": t.line_of[pc],
            "column": 1,
            "instructionPointerReference": str(pc),
        }
        return {"stackFrames": [frame], "totalFrames": 1}

    def on_scopes(self, args: dict[str, Any]) -> dict[str, Any]:
        self._stopped()
        assert self.values is not None
        return {"scopes": self.values.scopes()}

    def on_variables(self, args: dict[str, Any]) -> dict[str, Any]:
        self._stopped()
        assert self.values is not None
        items = self.values.variables(int(args.get("variablesReference", 0)))
        start, count = int(args.get("start") or 0), int(args.get("count") or 0)
        return {"variables": items[start : start + count] if count else items[start:]}

    def on_evaluate(self, args: dict[str, Any]) -> dict[str, Any]:
        self._stopped()
        assert self.values is not None
        return self.values.evaluate(str(args.get("expression", "")))

    def on_source(self, args: dict[str, Any]) -> dict[str, Any]:
        t = self._target()
        ref = args.get("sourceReference") or (args.get("source") or {}).get("sourceReference")
        if ref != SOURCE_REF:
            raise RequestError(f"no source with reference {ref!r}: this session has {SOURCE_REF}")
        return {"content": t.text, "mimeType": "text/x-shapevm-bytecode"}

    def _source(self) -> dict[str, Any]:
        t = self._target()
        name = os.path.basename(t.args.program) + f" @{t.fn.name}"
        return {"name": name, "sourceReference": SOURCE_REF, "presentationHint": "normal"}

    def on_disassemble(self, args: dict[str, Any]) -> dict[str, Any]:
        t = self._target()
        try:
            base = int(args.get("memoryReference", "0")) + int(args.get("offset") or 0)
        except (TypeError, ValueError):
            raise RequestError(f"bad memory reference {args.get('memoryReference')!r}") from None
        first = base + int(args.get("instructionOffset") or 0)
        count = int(args.get("instructionCount") or 0)
        out = []
        for pc in range(first, first + count):
            if 0 <= pc < len(t.instrs):
                instr = t.instrs[pc]
                out.append(
                    {
                        "address": str(pc),
                        "instruction": format_instr(instr).strip(),
                        "symbol": f"@{t.fn.name}",
                        "location": self._source(),
                        "line": t.line_of[pc],
                    }
                )
            else:
                out.append({"address": str(pc), "instruction": "", "presentationHint": "invalid"})
        return {"instructions": out}

    def on_exceptionInfo(self, args: dict[str, Any]) -> dict[str, Any]:
        error = self._stopped().error
        if error is None:
            raise RequestError("the program is not stopped on an error")
        return {
            "exceptionId": type(error).__name__,
            "description": str(error),
            "breakMode": "always",
            "details": {"message": str(error), "typeName": type(error).__name__},
        }


def serve(instream: BinaryIO, outstream: BinaryIO) -> int:
    """Serve one session on these streams; returns the exit status."""
    reader = MessageReader(instream)
    adapter = Adapter(MessageWriter(outstream))
    while True:
        try:
            msg = reader.read()
        except ProtocolError as exc:
            adapter.output(f"shapevm debug-adapter: skipped a malformed message: {exc}", "stderr")
            if exc.truncated:
                break
            continue
        if msg is None or not adapter.handle(msg):
            break
    if adapter.session is not None:
        adapter.session.terminate()
    return 0


def serve_tcp(port: int, host: str = "127.0.0.1") -> int:
    """Serve sessions on ``host:port`` (one per connection, each in a thread), for clients
    that connect to a running adapter (VS Code's ``debugServer``); prints the address."""
    with socket.create_server((host, port)) as server:
        print(f"shapevm debug-adapter: listening on {host}:{server.getsockname()[1]}", flush=True)
        try:
            while True:
                conn, _ = server.accept()
                threading.Thread(target=_connection, args=(conn,), daemon=True).start()
        except KeyboardInterrupt:
            return 0


def _connection(conn: socket.socket) -> None:
    with conn, conn.makefile("rb") as rfile, conn.makefile("wb", buffering=0) as wfile:
        try:
            serve(rfile, wfile)  # type: ignore[arg-type]
        except OSError:
            pass  # the client went away


def main(port: int | None = None) -> int:
    """The adapter on this process's standard streams (or, with ``port``, on a TCP port of
    127.0.0.1). On the standard streams the protocol keeps the original standard output;
    anything else that writes there (a library's print, C code) goes to standard error
    instead, so it cannot break the framing."""
    if port is not None:
        return serve_tcp(port)
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(sys.stdin.buffer, protocol_out)


__all__ = ["Adapter", "RequestError", "main", "serve", "serve_tcp"]
