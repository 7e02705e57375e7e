/**
 * `@memvault/client`: the memvault HTTP API from TypeScript.
 *
 * ```ts
 * import { MemvaultClient, VersionConflict } from "@memvault/client";
 *
 * const mv = new MemvaultClient({ endpoint: "http://127.0.0.1:8787", token: () => getToken() });
 * const memory = await mv.writeMemory("user-1", {
 *   kind: "semantic", content: "Prefers tea", source: { type: "user_statement" }, consent: true,
 * });
 * for await (const m of mv.iterMemories("user-1")) console.log(m.content);
 * ```
 *
 * The LangGraph.js checkpointer and store are at `@memvault/client/langgraph`, the
 * Vercel AI SDK tools at `@memvault/client/ai`.
 */
export {
  MemvaultClient,
  VERSION,
  newRequestId,
  sha256Hex,
  type Answer,
  type CallOptions,
  type ClientOptions,
  type Request,
  type TokenProvider,
} from "./client.js";
export * from "./errors.js";
export { OPERATIONS, pathOf, type OperationName } from "./operations.js";
export { GATEWAY_STATUSES, RETRY_STATUSES, RetryPolicy, type RetryOptions } from "./retry.js";
export { asData, memoryLine, MEMORY_HEADER } from "./render.js";
export type * from "./types.js";
