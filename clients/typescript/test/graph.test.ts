/** A LangGraph.js graph on MemvaultSaver: state kept across invocations, and no forks under a race. */
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { MemorySaver, type BaseCheckpointSaver, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { describe, expect, it } from "vitest";
import { MemvaultClient } from "@memvault/client";
import { CheckpointConflict, MemvaultSaver } from "@memvault/client/langgraph";
import { freshSubject, stack } from "./stack.js";

const State = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  count: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
});

/** Two nodes, a then b; each appends its name and adds one. */
function twoNodes(saver: MemvaultSaver) {
  return new StateGraph(State)
    .addNode("a", async () => ({ log: ["a"], count: 1 }))
    .addNode("b", async () => ({ log: ["b"], count: 1 }))
    .addEdge(START, "a")
    .addEdge("a", "b")
    .addEdge("b", END)
    .compile({ checkpointer: saver });
}

async function history(saver: MemvaultSaver, threadId: string): Promise<CheckpointTuple[]> {
  const all: CheckpointTuple[] = [];
  for await (const t of saver.list({ configurable: { thread_id: threadId, checkpoint_ns: "" } })) all.push(t);
  return all;
}

/** Newest first, each checkpoint's parent is the next one: one line, no branch. */
function expectLinear(all: CheckpointTuple[]): void {
  const parents = all.map((t) => t.parentConfig?.configurable?.checkpoint_id);
  expect(new Set(parents).size).toBe(parents.length); // no two checkpoints share a parent
  for (let i = 0; i < all.length - 1; i += 1) {
    expect(parents[i]).toBe(all[i + 1]?.checkpoint.id);
  }
  expect(parents[all.length - 1]).toBeUndefined();
}

describe("MemvaultSaver under a graph", () => {
  it("keeps a two-node graph's state across invocations of one thread", async () => {
    const subject = freshSubject("lg");
    const token = stack().service;
    const threadId = `thread-${freshSubject()}`;
    const config = { configurable: { thread_id: threadId } };

    // Two processes in turn: each its own client and saver; only the server holds the thread.
    const first = twoNodes(new MemvaultSaver({ client: new MemvaultClient({ endpoint: stack().url, token }), subjectId: subject }));
    const one = await first.invoke({ log: ["start"] }, config);
    expect(one).toEqual({ log: ["start", "a", "b"], count: 2 });

    const saver = new MemvaultSaver({ client: new MemvaultClient({ endpoint: stack().url, token }), subjectId: subject });
    const second = twoNodes(saver);
    const two = await second.invoke({ log: ["again"] }, config);
    expect(two).toEqual({ log: ["start", "a", "b", "again", "a", "b"], count: 4 });
    expect((await second.getState(config)).values).toEqual(two);

    // Eight checkpoints (input, start, after a, after b; twice), one line.
    const all = await history(saver, threadId);
    expect(all).toHaveLength(8);
    expectLinear(all);
    // They are a memvault run's versions.
    const runId = await MemvaultSaver.checkpointRunId(threadId, "", 0);
    const run = await saver.client.getRun(runId, { subjectId: subject });
    expect(run.status).toBe("RUNNING");
    expect(run.version).toBeGreaterThanOrEqual(9);

    // deleteThread empties the thread; it can be used again.
    await saver.deleteThread(threadId);
    expect(await saver.getTuple(config)).toBeUndefined();
    expect(await second.invoke({ log: ["fresh"] }, config)).toEqual({ log: ["fresh", "a", "b"], count: 2 });
  });

  it("runs a graph with a subgraph as LangGraph's own MemorySaver does, a namespace per subgraph run", async () => {
    const subject = freshSubject("lg");
    const saver = new MemvaultSaver({ client: new MemvaultClient({ endpoint: stack().url, token: stack().service }), subjectId: subject });
    const compile = (checkpointer: BaseCheckpointSaver) => {
      const inner = new StateGraph(State)
        .addNode("a", async () => ({ log: ["inner"], count: 1 }))
        .addEdge(START, "a")
        .addEdge("a", END)
        .compile();
      return new StateGraph(State)
        .addNode("sub", inner)
        .addNode("b", async () => ({ log: ["outer"], count: 1 }))
        .addEdge(START, "sub")
        .addEdge("sub", "b")
        .addEdge("b", END)
        .compile({ checkpointer });
    };
    const threadId = `thread-${freshSubject()}`;
    const config = { configurable: { thread_id: threadId } };
    const ours = compile(saver);
    const reference = compile(new MemorySaver());
    for (const input of [{ log: ["go"] }, { log: ["again"] }]) {
      expect(await ours.invoke(input, config)).toEqual(await reference.invoke(input, config));
    }
    const listed = async (s: BaseCheckpointSaver) => {
      const all: CheckpointTuple[] = [];
      for await (const t of s.list({ configurable: { thread_id: threadId } })) all.push(t);
      return all;
    };
    const all = await listed(saver);
    const namespaces = new Set(all.map((t) => String(t.config.configurable?.checkpoint_ns)));
    expect(namespaces.has("")).toBe(true);
    expect(namespaces.size).toBe(3); // the graph, and one per run of the subgraph
    expect(all).toHaveLength((await listed(reference.checkpointer as BaseCheckpointSaver)).length);
    for (const ns of namespaces) expectLinear(all.filter((t) => t.config.configurable?.checkpoint_ns === ns));
  });

  it("interrupts a graph for approval and resumes it with another saver", async () => {
    const subject = freshSubject("lg");
    const config = { configurable: { thread_id: `thread-${freshSubject()}` } };
    const Log = Annotation.Root({ log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
    const builder = new StateGraph(Log)
      .addNode("plan", async () => ({ log: ["planned"] }))
      .addNode("approve", async () => ({ log: [`approved:${interrupt("approve?") as string}`] }))
      .addNode("act", async () => ({ log: ["acted"] }))
      .addEdge(START, "plan")
      .addEdge("plan", "approve")
      .addEdge("approve", "act")
      .addEdge("act", END);
    const saver = () => new MemvaultSaver({ client: new MemvaultClient({ endpoint: stack().url, token: stack().service }), subjectId: subject });

    const first = await builder.compile({ checkpointer: saver() }).invoke({ log: [] }, config);
    expect(first.log).toEqual(["planned"]);
    expect(JSON.stringify(first)).toContain("approve?");

    const second = builder.compile({ checkpointer: saver() });
    const paused = await second.getState(config);
    expect(paused.next).toEqual(["approve"]);
    expect(paused.tasks[0]?.interrupts[0]?.value).toBe("approve?");
    const done = await second.invoke(new Command({ resume: "yes" }), config);
    expect(done.log).toEqual(["planned", "approved:yes", "acted"]);
    expect((await second.getState(config)).next).toEqual([]);
  });

  it("lets one of two racing workers advance a thread and refuses the other: no fork", async () => {
    const subject = freshSubject("lg");
    const token = stack().service;
    const threadId = `thread-${freshSubject()}`;
    const config: RunnableConfig = { configurable: { thread_id: threadId } };
    const setup = new MemvaultSaver({ client: new MemvaultClient({ endpoint: stack().url, token }), subjectId: subject });
    await twoNodes(setup).invoke({ log: ["start"] }, config);
    const before = await setup.getTuple(config);

    // Both workers read the thread's latest checkpoint before either writes: a true race.
    let loaded = 0;
    let release!: () => void;
    const bothLoaded = new Promise<void>((r) => (release = r));
    class Worker extends MemvaultSaver {
      private waited = false;
      override async getTuple(c: RunnableConfig) {
        const found = await super.getTuple(c);
        if (!this.waited) {
          this.waited = true;
          loaded += 1;
          if (loaded === 2) release();
          await bothLoaded;
        }
        return found;
      }
    }
    const worker = (name: string) =>
      twoNodes(
        new Worker({ client: new MemvaultClient({ endpoint: stack().url, token }), subjectId: subject, writesWaitMs: 500 }),
      ).invoke({ log: [name] }, config);
    const results = await Promise.allSettled([worker("w1"), worker("w2")]);

    const won = results.filter((r) => r.status === "fulfilled");
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    const error = lost[0]?.reason as CheckpointConflict;
    expect(error).toBeInstanceOf(CheckpointConflict);
    expect(error.expectedCheckpointId).toBe(before?.checkpoint.id);
    expect(error.currentCheckpointId).not.toBe(before?.checkpoint.id);

    // The thread holds the winner's work only, on one line.
    const winner = (won[0] as PromiseFulfilledResult<{ log: string[] }>).value.log[3];
    const after = await setup.getTuple(config);
    expect(after?.checkpoint.channel_values).toMatchObject({ log: ["start", "a", "b", winner, "a", "b"], count: 4 });
    const all = await history(setup, threadId);
    expect(all).toHaveLength(8);
    expectLinear(all);
  });
});
