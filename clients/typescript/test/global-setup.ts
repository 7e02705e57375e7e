/**
 * Starts one real `memvault run` for the whole test run ($MEMVAULT_BIN, else the
 * repository's .venv/bin/memvault) on free ports with a fresh temporary data folder,
 * waits for GET /v1/health, mints the run's service tokens with `memvault dev-token`,
 * and stops the stack after. Tests read it with `inject("memvault")` (test/stack.ts).
 */
import type { TestProject } from "vitest/node";
import { startStack, type Stack } from "../scripts/stack.mjs";

export const ALL_SCOPES = "memory:read memory:write memory:delete sessions:write runs:write artifacts:write";

declare module "vitest" {
  export interface ProvidedContext {
    memvault: {
      url: string;
      bin: string;
      env: Record<string, string>;
      tenant: string;
      /** Every scope and `subjects:any`: a tenant service's token, any subject of the tenant. */
      service: string;
      /** The same with `max_sensitivity: pii`. */
      servicePii: string;
    };
  }
}

let stack: Stack | undefined;

export async function setup(project: TestProject): Promise<void> {
  stack = await startStack();
  try {
    const tenant = `ts-${Math.random().toString(36).slice(2, 10)}`;
    const scope = `${ALL_SCOPES} subjects:any`;
    const [service, servicePii] = await Promise.all([
      stack.mint({ tenant, scope }),
      stack.mint({ tenant, scope, maxSensitivity: "pii" }),
    ]);
    project.provide("memvault", { url: stack.url, bin: stack.bin, env: stack.env, tenant, service, servicePii });
  } catch (error) {
    await stack.stop();
    throw error;
  }
}

export async function teardown(): Promise<void> {
  await stack?.stop();
}
