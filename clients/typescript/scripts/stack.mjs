// Start a real `memvault run` for the tests and the type generator: a fresh temporary
// MEMVAULT_HOME and MEMVAULT_DATA_DIR, free ports (18700-18799 first), readiness by
// GET /v1/health, tokens from `memvault dev-token` with the same environment.
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The package's folder (clients/typescript) and the repository root two levels up. */
export const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
export const REPO_ROOT = path.resolve(PACKAGE_DIR, "..", "..");

/** `$MEMVAULT_BIN`, else the repository's `.venv/bin/memvault`. */
export function memvaultBin() {
  return process.env.MEMVAULT_BIN || path.join(REPO_ROOT, ".venv", "bin", "memvault");
}

function portFree(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)));
  });
}

function osPort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen({ port: 0, host: "127.0.0.1" }, () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A free port: from 18700-18799 (at a random start), else one the OS picks. */
export async function freePort(taken = new Set()) {
  const start = Math.floor(Math.random() * 100);
  for (let i = 0; i < 100; i += 1) {
    const port = 18700 + ((start + i) % 100);
    if (!taken.has(port) && (await portFree(port))) return port;
  }
  return osPort();
}

/** The environment for the stack and dev-token: this one without MEMVAULT_* and AWS_*. */
function cleanEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith("MEMVAULT_") && !k.startsWith("AWS_")) env[k] = v;
  }
  return { ...env, PYTHONUNBUFFERED: "1", ...extra };
}

/**
 * Start `memvault run`; resolves once GET /v1/health answers 200.
 * @param {{ timeoutMs?: number, env?: Record<string, string> }} [options]
 */
export async function startStack(options = {}) {
  const bin = memvaultBin();
  if (!existsSync(bin)) {
    throw new Error(`no memvault at ${bin}: run \`make install\` in ${REPO_ROOT}, or set MEMVAULT_BIN`);
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), "memvault-ts-"));
  const port = await freePort();
  const mcpPort = await freePort(new Set([port]));
  const env = cleanEnv({
    MEMVAULT_HOME: path.join(dir, "home"),
    MEMVAULT_DATA_DIR: path.join(dir, "data"),
    MEMVAULT_PORT: String(port),
    MEMVAULT_MCP_PORT: String(mcpPort),
    ...(options.env ?? {}),
  });
  const child = spawn(bin, ["run"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (chunk) => {
    output = (output + chunk.toString()).slice(-20000);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.timeoutMs ?? 90_000);
  let ready = false;
  let ended;
  exited.then((e) => {
    ended = e;
  });
  while (!ready && Date.now() < deadline && ended === undefined) {
    try {
      const answer = await fetch(`${url}/v1/health`, { signal: AbortSignal.timeout(2000) });
      ready = answer.status === 200;
      await answer.body?.cancel();
    } catch {
      // not listening yet
    }
    if (!ready) await new Promise((r) => setTimeout(r, 200));
  }
  if (!ready) {
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
    const why = ended ? `it exited (${ended.code ?? ended.signal})` : "it was not ready in time";
    throw new Error(`memvault run did not start: ${why}\n${output}`);
  }

  return {
    url,
    port,
    mcpPort,
    dir,
    env,
    bin,
    output: () => output,
    /** A token from `memvault dev-token` for this stack. */
    mint: (claims) => mintToken({ bin, env }, claims),
    async stop() {
      process.removeListener("exit", killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGINT");
        const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(timer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * `memvault dev-token` with the stack's environment.
 * @param {{ bin: string, env: Record<string, string> }} where
 * @param {{ tenant: string, subject?: string, scope?: string, agentRole?: string, maxSensitivity?: string, ttl?: number }} claims
 */
export async function mintToken(where, claims) {
  const args = ["dev-token", "--tenant", claims.tenant];
  if (claims.subject) args.push("--subject", claims.subject);
  if (claims.scope) args.push("--scope", claims.scope);
  if (claims.agentRole) args.push("--agent-role", claims.agentRole);
  if (claims.maxSensitivity) args.push("--max-sensitivity", claims.maxSensitivity);
  if (claims.ttl) args.push("--ttl", String(claims.ttl));
  const { stdout } = await run(where.bin, args, { env: where.env });
  return stdout.trim();
}
