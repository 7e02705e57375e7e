/** The SDK against a real `memvault run`: every operation, typed errors, pagination, options. */
import { readFile } from "node:fs/promises";
import net from "node:net";
import { describe, expect, it } from "vitest";
import {
  ConnectionFailed,
  ConsentRequired,
  ERRORS_BY_CODE,
  Forbidden,
  IdempotencyKeyReused,
  IllegalTransition,
  MemvaultClient,
  MemvaultError,
  NotFound,
  OPERATIONS,
  SecretDetected,
  Unauthorized,
  ValidationFailed,
  VERSION,
  VersionConflict,
  type Memory,
} from "@memvault/client";
import { freshSubject, memory, mint, serviceClient, stack } from "./stack.js";

/** A fetch that counts requests by method and path (query left out). */
function countingFetch() {
  const seen: string[] = [];
  const f: typeof fetch = (input, init) => {
    const url = new URL(String(input));
    seen.push(`${init?.method ?? "GET"} ${url.pathname}`);
    return fetch(input, init);
  };
  return { seen, fetch: f };
}

async function waitIndexed(client: MemvaultClient, subject: string, id: string): Promise<Memory> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = await client.getMemory(subject, id);
    if (m.index_status === "indexed" || Date.now() > deadline) return m;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("long-term memory", () => {
  it("writes, reads, lists, corrects at the expected version, and deletes", async () => {
    const subject = freshSubject();
    const client = serviceClient();
    const written = await client.writeMemory(
      subject,
      memory("Prefers Chinese for internal docs", { canonical_key: "doc-language", tags: ["preference"] }),
    );
    expect(written.version).toBe(1);
    expect(written.status).toBe("active");

    expect((await client.getMemory(subject, written.memory_id)).content).toBe("Prefers Chinese for internal docs");
    const page = await client.listMemories(subject, { canonical_key: "doc-language" });
    expect(page.items.map((m) => m.memory_id)).toEqual([written.memory_id]);

    const corrected = await client.correctMemory(subject, written.memory_id, {
      expected_version: 1,
      content: "Prefers English for internal docs",
    });
    expect(corrected.version).toBe(2);
    const history = await client.memoryHistory(subject, corrected.memory_id);
    expect(history.versions.map((v) => v.version).sort()).toEqual([1, 2]);

    const job = await client.deleteMemory(subject, corrected.memory_id);
    expect(job.deletion_id).toMatch(/\w/);
    await expect(client.getMemory(subject, corrected.memory_id)).rejects.toBeInstanceOf(NotFound);
    const done = await client.waitForDeletion(job.deletion_id, { waitMs: 20_000 });
    expect(done.status).toBe("COMPLETED");
  });

  it("VersionConflict carries the current version", async () => {
    const subject = freshSubject();
    const client = serviceClient();
    const first = await client.writeMemory(subject, memory("Lives in Lisbon", { canonical_key: "home-city" }));
    const second = await client.correctMemory(subject, first.memory_id, { expected_version: 1, content: "Lives in Porto" });
    const third = await client.correctMemory(subject, second.memory_id, { expected_version: 2, content: "Lives in Faro" });
    expect(third.version).toBe(3);

    const stale = await client
      .correctMemory(subject, third.memory_id, { expected_version: 1, content: "Lives in Braga" })
      .catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(VersionConflict);
    const conflict = stale as VersionConflict;
    expect(conflict.status).toBe(409);
    expect(conflict.code).toBe("version_conflict");
    expect(conflict.expectedVersion).toBe(1);
    expect(conflict.currentVersion).toBe(3);
    expect(conflict.currentMemoryId).toBe(third.memory_id);
    // Nothing was overwritten.
    expect((await client.getMemory(subject, third.memory_id)).content).toBe("Lives in Faro");

    // A run's conflict carries the current checkpoint; currentVersion reads its version.
    const runId = `run-${freshSubject()}`;
    await client.createRun(runId, { subject_id: subject, plan_version: "p1" });
    await client.advanceRun(runId, { expected_version: 1, status: "RUNNING", step: "one" }, { subjectId: subject });
    const runConflict = await client
      .advanceRun(runId, { expected_version: 1, status: "RUNNING", step: "again" }, { subjectId: subject })
      .catch((e: unknown) => e);
    expect(runConflict).toBeInstanceOf(VersionConflict);
    expect((runConflict as VersionConflict).currentVersion).toBe(2);
  });

  it("paginates with an async iterator, one page at a time", async () => {
    const subject = freshSubject();
    const counting = countingFetch();
    const client = serviceClient({ fetch: counting.fetch });
    const ids = new Set<string>();
    for (let i = 0; i < 7; i += 1) {
      ids.add((await client.writeMemory(subject, memory(`Fact number ${i}`, { tags: ["paged"] }))).memory_id);
    }
    counting.seen.length = 0;
    const listed: string[] = [];
    for await (const m of client.iterMemories(subject, { tag: "paged", pageSize: 3 })) listed.push(m.memory_id);
    expect(listed).toHaveLength(7);
    expect(new Set(listed)).toEqual(ids);
    expect(counting.seen.filter((s) => s.startsWith("GET "))).toHaveLength(3); // 3 + 3 + 1

    // Lazily: stopping after two items fetched one page only.
    counting.seen.length = 0;
    const firstTwo: string[] = [];
    for await (const m of client.iterMemories(subject, { tag: "paged", pageSize: 3 })) {
      firstTwo.push(m.memory_id);
      if (firstTwo.length === 2) break;
    }
    expect(counting.seen).toHaveLength(1);

    // A page's next_token goes back as is.
    const one = await client.listMemories(subject, { tag: "paged", limit: 5 });
    expect(one.items).toHaveLength(5);
    expect(one.next_token).toBeTruthy();
    const two = await client.listMemories(subject, { tag: "paged", limit: 5, next_token: one.next_token });
    expect(two.items).toHaveLength(2);
    expect(two.next_token).toBeNull();
  });

  it("makes a request_id once per write; a replay is the same memory, another payload is refused", async () => {
    const subject = freshSubject();
    const client = serviceClient();
    const a = await client.writeMemory(subject, memory("Drinks tea", { request_id: "fixed-id-1" }));
    const b = await client.writeMemory(subject, memory("Drinks tea", { request_id: "fixed-id-1" }));
    expect(b.memory_id).toBe(a.memory_id);
    await expect(
      client.writeMemory(subject, memory("Drinks coffee", { request_id: "fixed-id-1" })),
    ).rejects.toBeInstanceOf(IdempotencyKeyReused);
    // Without one, two calls are two writes (each its own generated id).
    const c = await client.writeMemory(subject, memory("Likes hiking"));
    const d = await client.writeMemory(subject, memory("Likes hiking"));
    expect(d.memory_id).not.toBe(c.memory_id);
  });

  it("writes a batch: each write in its place, a refusal as an item, a retry replayed", async () => {
    const subject = freshSubject();
    const client = serviceClient();
    const third = memory("Booked the aisle seat", { request_id: "batch-fixed-3" });
    const bodies = [memory("Flies to Lisbon on the 14th"), memory("Its key is AKIAIOSFODNN7EXAMPLE"), third];
    const answer = await client.writeMemories(subject, bodies);
    expect(answer.items.map((i) => [i.status, i.error?.code ?? null])).toEqual([
      [201, null],
      [422, "secret_detected"],
      [201, null],
    ]);
    expect([answer.written, answer.replayed, answer.refused]).toEqual([2, 0, 1]);
    expect(JSON.stringify(answer)).not.toContain("AKIAIOSFODNN7EXAMPLE");
    const listed = (await client.listMemories(subject)).items.map((m) => m.memory_id).sort();
    expect(listed).toEqual(answer.items.flatMap((i) => (i.memory ? [i.memory.memory_id] : [])).sort());
    const again = await client.writeMemories(subject, [third]);
    expect([again.replayed, again.items[0]?.memory?.memory_id]).toEqual([1, answer.items[2]?.memory?.memory_id]);
    await expect(
      client.writeMemories(subject, [memory("a", { request_id: "same" }), memory("b", { request_id: "same" })]),
    ).rejects.toBeInstanceOf(ValidationFailed);
  });

  it("recalls, traces the recall and the memory, takes feedback, exports and forgets the subject", async () => {
    const subject = freshSubject();
    const client = serviceClient();
    const written = await client.writeMemory(subject, memory("Prefers green tea in the morning"));
    await waitIndexed(client, subject, written.memory_id);
    const found = await client.recall(subject, "what does the user drink in the morning?");
    expect(found.items.map((i) => i.memory.memory_id)).toContain(written.memory_id);
    expect(found.recall_id).toBeTruthy();
    const trace = await client.recallTrace(found.recall_id as string, { subjectId: subject });
    expect(trace.recall_id).toBe(found.recall_id);
    const memoryTrace = await client.memoryTrace(subject, written.memory_id);
    expect(memoryTrace.memory_id).toBe(written.memory_id);

    const feedback = await client.giveFeedback(subject, {
      recall_id: found.recall_id as string,
      memory_id: written.memory_id,
      verdict: "helpful",
    });
    expect(feedback.feedback_id).toBeTruthy();
    expect((await client.listFeedback(subject)).items.map((f) => f.feedback_id)).toContain(feedback.feedback_id);

    const exported = await client.exportSubject(subject);
    expect(JSON.stringify(exported)).toContain(written.memory_id);

    const job = await client.forgetSubject(subject);
    expect((await client.deletionStatus(job.deletion_id)).deletion_id).toBe(job.deletion_id);
    await expect(client.getMemory(subject, written.memory_id)).rejects.toBeInstanceOf(NotFound);
  });
});

describe("sessions, runs, context and artifacts", () => {
  it("appends to a session, summarizes it and ends it", async () => {
    const subject = freshSubject();
    const client = serviceClient();
    const session = `s-${freshSubject()}`;
    await client.appendMessage(subject, session, { role: "user", content: "Hello there" });
    const read = await client.appendMessage(subject, session, { role: "assistant", content: "Hi!" });
    expect(read.messages.map((m) => m.content)).toEqual(["Hello there", "Hi!"]);
    const seqs = read.messages.map((m) => m.seq);
    const summarized = await client.putSummary(subject, session, {
      content: "Greetings were exchanged",
      from_seq: Math.min(...seqs),
      through_seq: Math.max(...seqs),
    });
    expect(summarized.summary?.content).toBe("Greetings were exchanged");
    expect((await client.readSession(subject, session)).messages).toHaveLength(2);
    await client.endSession(subject, session);
    await expect(client.readSession(subject, session)).rejects.toBeInstanceOf(NotFound);
  });

  it("creates and advances a run, records operations and events, lists its events", async () => {
    const subject = freshSubject();
    // A token bound to the subject: the run calls need no subject_id.
    const client = new MemvaultClient({ endpoint: stack().url, token: await mint({ subject }) });
    const runId = `run-${freshSubject()}`;
    const created = await client.createRun(runId, { subject_id: subject, plan_version: "p1" });
    expect(created.version).toBe(1);
    expect((await client.createRun(runId, { subject_id: subject, plan_version: "p1" })).version).toBe(1);
    const advanced = await client.advanceRun(runId, {
      expected_version: 1,
      status: "RUNNING",
      step: "fetch",
      state: { cursor: 3 },
    });
    expect(advanced.version).toBe(2);
    expect((await client.getRun(runId)).state).toEqual({ cursor: 3 });
    expect((await client.getRunVersion(runId, 1)).step).toBe("created");
    const op = await client.recordOperation(runId, "op-1", { status: "COMMITTED", result_ref: "receipt-1" });
    expect(op.status).toBe("COMMITTED");
    for (let i = 0; i < 3; i += 1) {
      await client.deliverEvent(runId, { event_id: `ev-${i}`, type: "custom.note" });
    }
    const again = await client.deliverEvent(runId, { event_id: "ev-0", type: "custom.note" });
    expect(again.duplicate).toBe(true);
    const events: string[] = [];
    for await (const e of client.iterRunEvents(runId, { pageSize: 2 })) events.push(e.event_id);
    expect(events.sort()).toEqual(["ev-0", "ev-1", "ev-2"]);
    await expect(
      client.advanceRun(runId, { expected_version: 2, status: "CREATED", step: "back" }),
    ).rejects.toBeInstanceOf(IllegalTransition);
  });

  it("assembles working memory and reproduces it from its manifest", async () => {
    const subject = freshSubject();
    const client = serviceClient();
    await client.writeMemory(subject, memory("Works on the billing service"));
    const ctx = await client.assembleContext(subject, { goal: "Plan the week", token_budget: 500 });
    expect(ctx.rendered).toContain("Plan the week");
    const again = await client.reproduceContext(subject, ctx.manifest);
    expect(again.rendered).toBe(ctx.rendered);
  });

  it("uploads an artifact through its presigned URL, downloads it and deletes it", async () => {
    const subject = freshSubject();
    const client = serviceClient();
    const data = new TextEncoder().encode(JSON.stringify({ report: "quarterly", rows: [1, 2, 3] }));
    const artifact = await client.uploadArtifact(subject, data, { mediaType: "application/json", name: "report" });
    expect(artifact.state).toBe("COMMITTED");
    expect(await client.getArtifact(subject, artifact.artifact_id)).toMatchObject({ size_bytes: data.byteLength });
    expect(await client.downloadArtifact(subject, artifact.artifact_id)).toEqual(data);
    const job = await client.deleteArtifact(subject, artifact.artifact_id);
    expect(job.deletion_id).toBeTruthy();
    await expect(client.getArtifact(subject, artifact.artifact_id)).rejects.toBeInstanceOf(NotFound);
  });

  it("answers health without a token", async () => {
    const client = new MemvaultClient({ endpoint: stack().url });
    expect((await client.health()).status).toBe("ok");
    // The User-Agent names the package's version.
    const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    expect(VERSION).toBe(pkg.version);
  });
});

describe("typed errors", () => {
  it("throws the class of each code", async () => {
    const subject = freshSubject();
    const client = new MemvaultClient({ endpoint: stack().url, token: await mint({ subject }) });
    const other = freshSubject();

    const bad = new MemvaultClient({ endpoint: stack().url, token: "not-a-token" });
    await expect(bad.listMemories(subject)).rejects.toBeInstanceOf(Unauthorized);
    await expect(client.listMemories(other)).rejects.toBeInstanceOf(Forbidden);
    await expect(client.getMemory(subject, "mem_00000000000000000000000000000000")).rejects.toBeInstanceOf(NotFound);
    const invalid = await client.writeMemory(subject, memory("")).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(ValidationFailed);
    expect((invalid as ValidationFailed).status).toBe(422);
    await expect(client.writeMemory(subject, memory("Prefers tea", { consent: false }))).rejects.toBeInstanceOf(
      ConsentRequired,
    );
    await expect(
      client.writeMemory(subject, memory("my key is AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")),
    ).rejects.toBeInstanceOf(SecretDetected);
    // Every error is a MemvaultError with the server's code and details, never content.
    const e = (await client.getMemory(subject, "mem_00000000000000000000000000000001").catch((x: unknown) => x)) as MemvaultError;
    expect(e).toBeInstanceOf(MemvaultError);
    expect(e.code).toBe("not_found");
    expect(e.toBody().error.code).toBe("not_found");
  });

  it("has a class for every error code the served OpenAPI document names", async () => {
    const doc = (await (await fetch(`${stack().url}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, { description?: string }> }>>;
    };
    const codes = new Set<string>();
    for (const methods of Object.values(doc.paths)) {
      for (const op of Object.values(methods)) {
        for (const [status, answer] of Object.entries(op.responses)) {
          if (!/^[45]/.test(status)) continue;
          for (const word of (answer.description ?? "").split(",")) {
            const code = word.trim();
            if (/^[a-z]+(_[a-z]+)*$/.test(code)) codes.add(code);
          }
        }
      }
    }
    expect(codes.size).toBeGreaterThan(15);
    for (const code of codes) expect(ERRORS_BY_CODE[code], code).toBeDefined();
  });

  it("names every route of the served OpenAPI document in its operations table", async () => {
    const doc = (await (await fetch(`${stack().url}/v1/openapi.json`)).json()) as { paths: Record<string, object> };
    const served = new Set<string>();
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const method of Object.keys(methods)) served.add(`${method.toUpperCase()} ${path}`);
    }
    served.delete("GET /v1/openapi.json");
    const ours = new Set(Object.values(OPERATIONS).map(([m, p]) => `${m} ${p}`));
    expect(ours).toEqual(served);
  });
});

describe("tokens, timeouts and abort", () => {
  it("calls the token provider for every attempt", async () => {
    const subject = freshSubject();
    const token = stack().service;
    let calls = 0;
    let answered = 0;
    // The first attempt is answered 503 (as a throttling gateway would), the second reaches the stack.
    const flaky: typeof fetch = async (input, init) => {
      answered += 1;
      if (answered === 1) {
        return new Response(JSON.stringify({ error: { code: "throttled", message: "slow down" } }), {
          status: 503,
          headers: { "content-type": "application/json" },
        });
      }
      return fetch(input, init);
    };
    const client = new MemvaultClient({
      endpoint: stack().url,
      fetch: flaky,
      retry: { baseDelayMs: 1 },
      token: async () => {
        calls += 1;
        return token;
      },
    });
    await client.listMemories(subject);
    expect(answered).toBe(2);
    expect(calls).toBe(2);
  });

  it("times an attempt out, retries what is idempotent, and not what is not", async () => {
    // A server that accepts connections and never answers.
    const sockets: net.Socket[] = [];
    let requests = 0;
    const server = net.createServer((s) => {
      sockets.push(s);
      s.on("data", (chunk: Buffer) => {
        if (/^(GET|POST|PUT|PATCH|DELETE) /.test(chunk.toString("latin1"))) requests += 1;
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const client = new MemvaultClient({
        endpoint: `http://127.0.0.1:${port}`,
        token: "t",
        retry: { maxAttempts: 3, baseDelayMs: 1 },
      });
      const started = Date.now();
      const read = await client.listMemories("s1", {}, { timeoutMs: 150 }).catch((e: unknown) => e);
      expect(read).toBeInstanceOf(ConnectionFailed);
      expect((read as ConnectionFailed).details).toMatchObject({ attempts: 3, operation: "memory.list" });
      expect(Date.now() - started).toBeGreaterThanOrEqual(3 * 150 - 20);
      expect(requests).toBe(3);

      const write = await client
        .correctMemory("s1", "m1", { expected_version: 1, content: "x" }, { timeoutMs: 150 })
        .catch((e: unknown) => e);
      expect(write).toBeInstanceOf(ConnectionFailed);
      expect((write as ConnectionFailed).details).toMatchObject({ attempts: 1 });
      expect(requests).toBe(4);
    } finally {
      for (const s of sockets) s.destroy();
      server.close();
    }
  });

  it("aborts a call, in flight or while it waits to retry", async () => {
    const subject = freshSubject();
    const token = stack().service;
    let attempts = 0;
    const always503: typeof fetch = async () => {
      attempts += 1;
      return new Response("{}", { status: 503, headers: { "retry-after": "30" } });
    };
    const client = new MemvaultClient({ endpoint: stack().url, token, fetch: always503 });
    const controller = new AbortController();
    const started = Date.now();
    const pending = client.listMemories(subject, {}, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error("caller gave up")), 100);
    await expect(pending).rejects.toThrow("caller gave up");
    expect(Date.now() - started).toBeLessThan(5000);
    expect(attempts).toBe(1);

    const real = new MemvaultClient({ endpoint: stack().url, token });
    await expect(real.listMemories(subject, {}, { signal: AbortSignal.abort(new Error("already")) })).rejects.toThrow(
      "already",
    );
  });
});
