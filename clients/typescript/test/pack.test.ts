/**
 * `npm pack`'s tarball installed into an empty project, and the quickstart example run
 * from there against the stack: what a user gets from the registry works.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { PACKAGE_DIR } from "../scripts/stack.mjs";
import { freshSubject, mint, stack } from "./stack.js";

const run = promisify(execFile);
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

describe("the packed package", () => {
  it("installs from its tarball into an empty project and runs the quickstart", { timeout: 120_000 }, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "memvault-pack-"));
    try {
      // dist/ is built by `npm test` (pretest); packing again would only rebuild it.
      await run(npm, ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], { cwd: PACKAGE_DIR });
      const tarball = (await readdir(dir)).find((f) => f.endsWith(".tgz")) as string;
      const { stdout: listing } = await run("tar", ["tzf", path.join(dir, tarball)]);
      expect(listing).toContain("package/dist/index.js");
      expect(listing).toContain("package/dist/index.d.ts");
      expect(listing).toContain("package/dist/langgraph/index.js");
      expect(listing).toContain("package/dist/ai/index.js");
      expect(listing).not.toContain("package/node_modules");
      expect(listing).not.toContain("package/test/");

      const project = path.join(dir, "app");
      await run("mkdir", ["-p", project]);
      await writeFile(path.join(project, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
      await run(npm, ["install", "--offline", "--no-audit", "--no-fund", "--silent", path.join(dir, tarball)], {
        cwd: project,
      });
      await copyFile(path.join(PACKAGE_DIR, "examples", "quickstart.mjs"), path.join(project, "quickstart.mjs"));
      const subject = freshSubject("qs");
      const { stdout } = await run(process.execPath, ["quickstart.mjs"], {
        cwd: project,
        env: {
          ...process.env,
          MEMVAULT_ENDPOINT: stack().url,
          MEMVAULT_SUBJECT: subject,
          MEMVAULT_TOKEN: await mint({ subject }),
        },
      });
      expect(stdout).toMatch(/^wrote mem_\w+ v1: Prefers Chinese/m);
      expect(stdout).toMatch(/^recalled mem_\w+ \(score [\d.]+\): Prefers Chinese/m);
      expect(stdout).toMatch(/^corrected to v2: Prefers English/m);
      expect(stdout).toMatch(/^VersionConflict: expected v1, the memory is at v2$/m);
      expect(stdout).toMatch(/^deleted: deletion \w+ is COMPLETED$/m);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
