/** MemvaultSaver beyond the validation suite: the Python layout, large values, replays, withheld state. */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { emptyCheckpoint, uuid6, type Checkpoint } from "@langchain/langgraph-checkpoint";
import { describe, expect, it } from "vitest";
import { CheckpointConflict, CheckpointWithheld, MemvaultSaver, prefixTag } from "@memvault/client/langgraph";
import { ArtifactReferenced, ConsentRequired } from "@memvault/client";
import { freshSubject, memvaultPython, serviceClient } from "./stack.js";

const run = promisify(execFile);

function checkpoint(values: Record<string, unknown>): Checkpoint {
  return {
    ...emptyCheckpoint(),
    id: uuid6(3),
    channel_values: values,
    channel_versions: Object.fromEntries(Object.keys(values).map((k) => [k, 1])),
  };
}

const meta = { source: "loop" as const, step: 0, parents: {} };

async function saverFor(subject: string) {
  return new MemvaultSaver({ client: serviceClient(), subjectId: subject });
}

describe("MemvaultSaver", () => {
  it("names runs and store tags as the Python adapters do", async () => {
    const python = await memvaultPython();
    const { stdout } = await run(python, [
      "-c",
      "from memvault_client.langgraph.saver import MemvaultSaver as S\n" +
        "from memvault_client.langgraph.store import prefix_tag\n" +
        "print(S.registry_run_id('t-1\u00e9'), S.checkpoint_run_id('t-1\u00e9', 'child', 3), prefix_tag(('users', '\u00fc1')))",
    ]);
    expect(stdout.trim().split(" ")).toEqual([
      await MemvaultSaver.registryRunId("t-1\u00e9"),
      await MemvaultSaver.checkpointRunId("t-1\u00e9", "child", 3),
      await prefixTag(["users", "\u00fc1"]),
    ]);
  });

  it("moves a value too large for the run state to an artifact and reads it back", async () => {
    const subject = freshSubject("lgs");
    const saver = await saverFor(subject);
    const threadId = `t-${freshSubject()}`;
    // 40 KB that does not compress to nothing: larger than the 32 KiB checkpoint bound.
    const big = Array.from({ length: 4000 }, (_, i) => `line ${i} ${(i * 7919) % 1000}`).join("\n");
    const cp = checkpoint({ transcript: big, small: 1 });
    const stored = await saver.put({ configurable: { thread_id: threadId } }, cp, meta, { transcript: 1, small: 1 });
    const head = await saver.client.getRun(await MemvaultSaver.checkpointRunId(threadId, "", 0), { subjectId: subject });
    expect(head.artifact_refs.length).toBeGreaterThan(0);
    expect(JSON.stringify(head.state).length).toBeLessThan(24 * 1024);
    const back = await saver.getTuple(stored);
    expect(back?.checkpoint.channel_values).toEqual({ transcript: big, small: 1 });
    // The run references the artifact: it cannot be deleted while the run's history holds it.
    const artifactId = head.artifact_refs[0]?.artifact_id as string;
    await expect(saver.client.deleteArtifact(subject, artifactId)).rejects.toBeInstanceOf(ArtifactReferenced);
    await saver.deleteThread(threadId);
    expect(await saver.getTuple({ configurable: { thread_id: threadId } })).toBeUndefined();
    expect((await saver.client.getArtifact(subject, artifactId)).state).toBe("COMMITTED");
  });

  it("takes a replayed put and repeated writes once, and refuses a stale parent", async () => {
    const subject = freshSubject("lgs");
    const saver = await saverFor(subject);
    const threadId = `t-${freshSubject()}`;
    const root = checkpoint({ n: 1 });
    const c1 = await saver.put({ configurable: { thread_id: threadId } }, root, meta, { n: 1 });
    // The same put again (its answer was lost): the same config, nothing new.
    expect(await saver.put({ configurable: { thread_id: threadId } }, root, meta, { n: 1 })).toEqual(c1);
    await saver.putWrites(c1, [["n", 2]], "task-1");
    await saver.putWrites(c1, [["n", 2]], "task-1");
    const tuple = await saver.getTuple(c1);
    expect(tuple?.pendingWrites).toEqual([["task-1", "n", 2]]);

    const child = checkpoint({ n: 2 });
    const c2 = await saver.put(c1, child, meta, { n: 2 });
    // Writes for c1 that arrive after c2 was put are kept with c1 (late writes).
    await saver.putWrites(c1, [["n", 3]], "task-2");
    expect((await saver.getTuple(c1))?.pendingWrites).toEqual([
      ["task-1", "n", 2],
      ["task-2", "n", 3],
    ]);
    expect((await saver.getTuple(c2))?.pendingWrites).toEqual([]);
    // Another child of c1 would fork the thread.
    const rival = await saver.put(c1, checkpoint({ n: 9 }), meta, { n: 1 }).catch((e: unknown) => e);
    expect(rival).toBeInstanceOf(CheckpointConflict);
    expect((rival as CheckpointConflict).currentCheckpointId).toBe(c2.configurable?.checkpoint_id);
  });

  it("stops on a checkpoint the token may not read instead of acting on an empty one", async () => {
    const subject = freshSubject("lgs");
    // Personal data in what the saver keeps as text needs the subject's consent.
    const withoutConsent = await saverFor(subject);
    const personal = { configurable: { thread_id: `t-${freshSubject()}`, checkpoint_ns: "inbox:alice@example.com" } };
    await expect(withoutConsent.put(personal, checkpoint({ n: 0 }), meta, {})).rejects.toBeInstanceOf(ConsentRequired);
    const reader = new MemvaultSaver({
      client: serviceClient({}, true), // max_sensitivity pii
      subjectId: subject,
      consent: true,
    });
    // A namespace that holds personal data (an e-mail address): the state is personal data.
    const config = { configurable: { thread_id: `t-${freshSubject()}`, checkpoint_ns: "mail alice@example.com" } };
    const stored = await reader.put(config, checkpoint({ n: 1 }), meta, { n: 1 });
    expect((await reader.getTuple(stored))?.checkpoint.channel_values).toEqual({ n: 1 });
    const internal = await saverFor(subject); // max_sensitivity internal (the default)
    await expect(internal.getTuple(stored)).rejects.toBeInstanceOf(CheckpointWithheld);
  });
});
