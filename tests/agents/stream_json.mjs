// Runs one headless agent command whose stdout is newline-delimited JSON
// (`claude -p`, `gemini -p` with `--output-format stream-json`, `codex
// exec --json`), handing each event to `onEvent` as it arrives. The
// command runs in its own process group, killed whole on exit, on
// AGENT_TIMEOUT_MS and when `onEvent` returns "stop" (an agent may
// relaunch itself in a child process: Codex's npm launcher on Node < 22).
// Resolves to {code, err}: the exit code (or signal, or "timeout") and its
// stderr.
import { spawn } from "node:child_process";

export function runStreamJson(bin, args, { cwd, env }, onEvent) {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    const kill = () => { try { process.kill(-child.pid, "SIGKILL"); } catch {} };
    let buf = "", err = "", timedOut = false;
    child.stdout.on("data", (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let ev;
        try { ev = JSON.parse(line); } catch { continue; }
        if (onEvent(ev) === "stop") kill();
      }
    });
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => { timedOut = true; kill(); }, Number(process.env.AGENT_TIMEOUT_MS || 90000));
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      kill();
      resolve({ code: timedOut ? "timeout" : code ?? signal, err });
    });
  });
}
