/**
 * LangGraph.js's checkpointer validation suite (@langchain/langgraph-checkpoint-validation)
 * against MemvaultSaver on the real stack: put, putWrites, getTuple, list and deleteThread
 * (`specTest`, every test), plus the opt-in getDeltaChannelHistory tests. Each
 * checkpointer the suite creates is a fresh subject, so their threads never meet.
 *
 * Two tests put a second root checkpoint (no parent) into a thread that already has one:
 * a fork, which MemvaultSaver refuses by design, as the Python saver does. For exactly
 * those two, this file asserts the refusal (CheckpointConflict) instead of success; a
 * change that let them pass would fail here.
 */
import { deltaChannelHistoryTests, specTest } from "@langchain/langgraph-checkpoint-validation";
import type { MemvaultClient } from "@memvault/client";
import { CheckpointConflict, MemvaultSaver } from "@memvault/client/langgraph";
import { freshSubject, serviceClient } from "./stack.js";

const FORKS_BY_DESIGN = new Set([
  "MemvaultSaver > MemvaultSaver#put > should only store channel_values that have changed (based on newVersions)",
  "MemvaultSaver > MemvaultSaver#getTuple > namespace: child > should migrate pending sends",
]);
const forksRefused = new Set<string>();

const globals = globalThis as unknown as { it: typeof it };
globals.it = new Proxy(globals.it, {
  apply(target, self, args: unknown[]) {
    const [name, fn, timeout] = args as [string, unknown, number | undefined];
    if (typeof fn !== "function") return Reflect.apply(target, self, args);
    const body = fn as () => unknown;
    return Reflect.apply(target, self, [
      name,
      async () => {
        const full = expect.getState().currentTestName ?? "";
        if (!FORKS_BY_DESIGN.has(full)) return body();
        await expect(Promise.resolve().then(body)).rejects.toBeInstanceOf(CheckpointConflict);
        forksRefused.add(full);
      },
      timeout,
    ]);
  },
});

let client: MemvaultClient;
const initializer = {
  checkpointerName: "MemvaultSaver",
  beforeAllTimeout: 60_000,
  beforeAll() {
    // A tenant service's token: any subject of the tenant, so each checkpointer is its own subject.
    client = serviceClient();
  },
  createCheckpointer() {
    return new MemvaultSaver({ client, subjectId: freshSubject("lgv"), consent: true });
  },
};

specTest(initializer);
deltaChannelHistoryTests(initializer);

afterAll(() => {
  // Both fork tests ran, and each was refused with CheckpointConflict.
  expect([...forksRefused].sort()).toEqual([...FORKS_BY_DESIGN].sort());
});
