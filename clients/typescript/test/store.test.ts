/** MemvaultStore (a LangGraph.js BaseStore) on governed memory, against the real stack. */
import { describe, expect, it } from "vitest";
import { ConsentRequired } from "@memvault/client";
import { MemvaultStore, NAMESPACE_SCOPE, StoreValueError } from "@memvault/client/langgraph";
import { freshSubject, serviceClient } from "./stack.js";

describe("MemvaultStore", () => {
  it("puts, gets, lists, filters, supersedes and deletes items as governed memories", async () => {
    const subject = freshSubject("st");
    const client = serviceClient();
    const store = new MemvaultStore({ client, subjectId: subject, consent: true });

    await store.put(["prefs", "ui"], "theme", { color: "dark", size: 12 });
    await store.put(["prefs", "ui"], "font", { family: "mono", size: 14 });
    await store.put(["prefs", "mail"], "digest", { weekly: true });
    await store.put(["other"], "theme", { color: "light" });

    const theme = await store.get(["prefs", "ui"], "theme");
    expect(theme).toMatchObject({ namespace: ["prefs", "ui"], key: "theme", value: { color: "dark", size: 12 } });
    // One key in two namespaces is two facts.
    expect((await store.get(["other"], "theme"))?.value).toEqual({ color: "light" });
    expect(await store.get(["prefs", "ui"], "missing")).toBeNull();

    // Each item is a memory whose scope is its namespace, written with the store's provenance.
    const listed = await client.listMemories(subject, { canonical_key: "theme" });
    expect(listed.items.map((m) => m.scope[NAMESPACE_SCOPE]).sort()).toEqual(['["other"]', '["prefs","ui"]']);
    expect(listed.items[0]?.source.type).toBe("tool_result");

    const underPrefs = await store.search(["prefs"]);
    expect(underPrefs.map((i) => i.key).sort()).toEqual(["digest", "font", "theme"]);
    expect((await store.search(["prefs"], { filter: { size: { $gt: 12 } } })).map((i) => i.key)).toEqual(["font"]);
    expect((await store.search(["prefs", "ui"], { filter: { color: "dark" } })).map((i) => i.key)).toEqual(["theme"]);
    expect(await store.listNamespaces({ prefix: ["prefs"] })).toEqual([
      ["prefs", "mail"],
      ["prefs", "ui"],
    ]);
    expect(await store.listNamespaces({ maxDepth: 1 })).toEqual([["other"], ["prefs"]]);

    // A put supersedes: a new version of the same memory chain; createdAt stays the first's.
    await new Promise((r) => setTimeout(r, 20));
    await store.put(["prefs", "ui"], "theme", { color: "solarized" });
    const updated = await store.get(["prefs", "ui"], "theme");
    expect(updated?.value).toEqual({ color: "solarized" });
    expect(updated?.createdAt.getTime()).toBe(theme?.createdAt.getTime());
    expect(updated!.updatedAt.getTime()).toBeGreaterThan(theme!.updatedAt.getTime());
    const current = (await client.listMemories(subject, { canonical_key: "theme" })).items.find(
      (m) => m.scope[NAMESPACE_SCOPE] === '["prefs","ui"]',
    );
    expect(current?.version).toBe(2);

    await store.delete(["prefs", "ui"], "theme");
    expect(await store.get(["prefs", "ui"], "theme")).toBeNull();
    await expect(client.getMemory(subject, current!.memory_id)).rejects.toThrow();
  });

  it("searches with a query through memvault's recall", async () => {
    const subject = freshSubject("st");
    const client = serviceClient();
    const store = new MemvaultStore({ client, subjectId: subject, consent: true });
    await store.put(["notes"], "travel", { text: "Prefers window seats on long flights" });
    await store.put(["notes"], "food", { text: "Likes spicy ramen noodles" }, false); // kept out of query results
    const deadline = Date.now() + 30_000;
    let hits: Awaited<ReturnType<typeof store.search>> = [];
    while (Date.now() < deadline) {
      hits = await store.search(["notes"], { query: "window seats on flights" });
      if (hits.length > 0) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(hits.map((h) => h.key)).toEqual(["travel"]);
    expect(hits[0]?.score).toBeGreaterThan(0);
    // Once the unindexed item is in the index too, a query that matches it still leaves it out.
    const food = (await client.listMemories(subject, { canonical_key: "food" })).items[0]!;
    while (Date.now() < deadline && (await client.getMemory(subject, food.memory_id)).index_status !== "indexed") {
      await new Promise((r) => setTimeout(r, 200));
    }
    expect((await client.recall(subject, "spicy ramen noodles")).items.map((i) => i.memory.memory_id)).toContain(
      food.memory_id,
    );
    expect((await store.search(["notes"], { query: "spicy ramen noodles" })).map((h) => h.key)).not.toContain("food");
  });

  it("takes the subject from a namespace label for a tenant service, and needs consent", async () => {
    const client = serviceClient(); // a tenant service's token: subjects:any
    const alice = freshSubject("alice");
    const bob = freshSubject("bob");
    const store = new MemvaultStore({ client, consent: true });
    await store.put([alice, "prefs"], "lang", { value: "pt" });
    await store.put([bob, "prefs"], "lang", { value: "de" });
    expect((await store.get([alice, "prefs"], "lang"))?.value).toEqual({ value: "pt" });
    expect((await client.listMemories(bob)).items.map((m) => m.content)).toEqual(['{"value":"de"}']);

    const refused = new MemvaultStore({ client, consent: false });
    await expect(refused.put([alice, "prefs"], "tz", { value: "UTC" })).rejects.toBeInstanceOf(ConsentRequired);
    await expect(store.put([alice, "prefs"], "big", { text: "x".repeat(5000) })).rejects.toBeInstanceOf(
      StoreValueError,
    );
  });
});
