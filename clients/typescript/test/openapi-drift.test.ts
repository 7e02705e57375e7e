/** The committed generated types are what openapi-typescript makes of the served document. */
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { GENERATED, fetchDocument, render } from "../scripts/openapi.mjs";
import { stack } from "./stack.js";

describe("generated OpenAPI types", () => {
  it("match GET /v1/openapi.json of the running stack (else: npm run generate)", async () => {
    const fresh = await render(await fetchDocument(stack().url));
    const committed = await readFile(GENERATED, "utf8");
    if (fresh !== committed) {
      const a = committed.split("\n");
      const b = fresh.split("\n");
      const at = a.findIndex((line, i) => line !== b[i]);
      expect.fail(
        `src/generated/openapi.ts differs from the served document from line ${at + 1}:\n` +
          `  committed: ${a[at] ?? "(end)"}\n  served:    ${b[at] ?? "(end)"}\nrun \`npm run generate\` and commit`,
      );
    }
  });
});
