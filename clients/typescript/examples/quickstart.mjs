// @memvault/client quickstart: write a memory, recall it, correct it at a stale version
// (and get VersionConflict), then delete it.
//
//   memvault run                                    # the local stack, in another terminal
//   export MEMVAULT_TOKEN=$(memvault dev-token --tenant local --subject user-1)
//   node examples/quickstart.mjs
//
// MEMVAULT_ENDPOINT (default http://127.0.0.1:8787) and MEMVAULT_SUBJECT (default user-1)
// point it elsewhere.
import { MemvaultClient, VersionConflict } from "@memvault/client";

const endpoint = process.env.MEMVAULT_ENDPOINT ?? "http://127.0.0.1:8787";
const subject = process.env.MEMVAULT_SUBJECT ?? "user-1";
const token = process.env.MEMVAULT_TOKEN;
if (!token) {
  console.error("set MEMVAULT_TOKEN: memvault dev-token --tenant local --subject user-1");
  process.exit(2);
}

// A function is called before every attempt, so a token can be refreshed when it expires.
const mv = new MemvaultClient({ endpoint, token: () => token });

// 1. Write. The SDK gives the write a request_id and keeps it on every retry: a write
//    retried after a lost answer stores one memory.
const written = await mv.writeMemory(subject, {
  kind: "semantic",
  canonical_key: "doc-language",
  content: "Prefers Chinese for internal technical documents",
  tags: ["preference"],
  source: { type: "user_statement", ref: "quickstart" },
  consent: true,
});
console.log(`wrote ${written.memory_id} v${written.version}: ${written.content}`);

// 2. Recall. Every write is indexed in the background; wait until this one is.
for (let i = 0; i < 100; i += 1) {
  if ((await mv.getMemory(subject, written.memory_id)).index_status === "indexed") break;
  await new Promise((resolve) => setTimeout(resolve, 200));
}
const found = await mv.recall(subject, "which language for internal docs?");
for (const item of found.items) {
  console.log(`recalled ${item.memory.memory_id} (score ${item.score.toFixed(3)}): ${item.memory.content}`);
}

// 3. Correct at the version we read: a new version supersedes the old one.
const corrected = await mv.correctMemory(subject, written.memory_id, {
  expected_version: written.version,
  content: "Prefers English for internal technical documents",
});
console.log(`corrected to v${corrected.version}: ${corrected.content}`);

// 4. Correct again at the version we read first: it is stale now, nothing is overwritten.
try {
  await mv.correctMemory(subject, corrected.memory_id, {
    expected_version: written.version,
    content: "Prefers French for internal technical documents",
  });
  console.error("a stale correction went through");
  process.exit(1);
} catch (error) {
  if (!(error instanceof VersionConflict)) throw error;
  console.log(`VersionConflict: expected v${error.expectedVersion}, the memory is at v${error.currentVersion}`);
}

// 5. Delete: unreadable at once; the copies are purged in the background.
const job = await mv.deleteMemory(subject, corrected.memory_id);
const done = await mv.waitForDeletion(job.deletion_id, { waitMs: 30_000 });
console.log(`deleted: deletion ${done.deletion_id} is ${done.status}`);
for (const copy of done.copies) console.log(`  ${copy.copy}: ${copy.status}`);
