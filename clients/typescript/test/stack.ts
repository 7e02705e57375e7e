/** What the tests need from the stack the global setup started. */
import { readFile, realpath } from "node:fs/promises";
import path from "node:path";
import { inject } from "vitest";
import { MemvaultClient, type ClientOptions } from "@memvault/client";
import { mintToken, type TokenClaims } from "../scripts/stack.mjs";
import { ALL_SCOPES } from "./global-setup.js";

export { ALL_SCOPES };

export function stack() {
  return inject("memvault");
}

/**
 * A token from `memvault dev-token` for this run's tenant: every scope unless `claims`
 * says otherwise. (A Python start each: the shared service token is cheaper.)
 */
export async function mint(claims: Partial<TokenClaims> = {}): Promise<string> {
  const s = stack();
  return mintToken({ bin: s.bin, env: s.env }, { tenant: s.tenant, scope: ALL_SCOPES, ...claims });
}

/** The Python that runs `memvault` (its script's #! line), to compare with the Python adapters. */
export async function memvaultPython(): Promise<string> {
  const bin = await realpath(stack().bin);
  const first = (await readFile(bin, "utf8").catch(() => "")).split("\n")[0] ?? "";
  if (first.startsWith("#!") && !first.includes(" ")) return first.slice(2).trim();
  return path.join(path.dirname(bin), "python");
}

/** A subject id no other test uses: tests share the stack and its tenant, never a subject. */
export function freshSubject(prefix = "ts"): string {
  return `${prefix}-${globalThis.crypto.randomUUID().slice(0, 12)}`;
}

/** A client with the run's service token (any subject of the tenant). */
export function serviceClient(options: Partial<ClientOptions> = {}, pii = false): MemvaultClient {
  const s = stack();
  return new MemvaultClient({ endpoint: s.url, token: pii ? s.servicePii : s.service, ...options });
}

/** A memory write body for `content`. */
export function memory(content: string, extra: Record<string, unknown> = {}) {
  return {
    kind: "semantic" as const,
    content,
    source: { type: "user_statement" as const, ref: "test" },
    consent: true,
    ...extra,
  };
}
