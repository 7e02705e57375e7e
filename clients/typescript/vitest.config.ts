import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The LangGraph.js validation suite uses the global describe/it/expect.
    globals: true,
    globalSetup: ["./test/global-setup.ts"],
    // One real `memvault run` serves every file; files run two at a time (2 cores).
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
