/**
 * `MemvaultStore`: LangGraph.js's long-term store on memvault's governed memory, with the
 * Python `memvault_client.langgraph.MemvaultStore`'s mapping (the two read each other's items):
 *
 * - a namespace names a subject and a scope. The subject is fixed (`subjectId`, for a
 *   token bound to one subject) or is one label of the namespace (`subjectLabel`, the
 *   first by default, for a tenant service); the whole namespace is the memory's scope
 *   (`langgraph.ns`), so one key in two namespaces is two facts;
 * - an item is one memory chain: the key is its canonical key, the value (a JSON object)
 *   its content. `put` is a governed write (the write policy, consent, idempotency by a
 *   request id kept across retries) that supersedes the current version; `delete` deletes
 *   the chain through the purge pipeline;
 * - the namespace and each of its prefixes are tags (`lgns.<hash>`), so listing and recall
 *   are filtered by the server; `search` with a query is memvault's recall (every hit
 *   re-validated against the table), without one a listing; `filter` applies to values
 *   as LangGraph's own stores do; `index: false` keeps an item out of query results.
 */
import {
  BaseStore,
  InvalidNamespaceError,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import type { MemvaultClient } from "../client.js";
import { NotFound } from "../errors.js";
import type { Memory, MemoryKind, MemoryWrite, Sensitivity, SourceType } from "../types.js";
import { deepEqual, sha256HexOf } from "./shared.js";

/** The scope key that holds an item's namespace (a JSON array of its labels). */
export const NAMESPACE_SCOPE = "langgraph.ns";
const PREFIX_TAG = "lgns.";
const CREATED_TAG = "lgc.";
const NO_INDEX_TAG = "lgx";
/** memvault allows 20 tags: one per prefix (with the empty one), plus two. */
export const MAX_NAMESPACE_DEPTH = 17;
const MAX_SCOPE_VALUE = 256;
const MAX_KEY = 100;
const MAX_CONTENT_CHARS = 4000;
const PAGE = 100;
const RECALL_MAX = 100;
const SUBJECT = /^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$/;

/** A namespace, key or value memvault cannot hold as given (nothing was sent). */
export class StoreValueError extends TypeError {
  constructor(message: string) {
    super(message);
    this.name = "StoreValueError";
  }
}

/**
 * `n` in base 26, a to z, `width` letters. Tags carry no digits: the write policy scans
 * tags for personal data like any text, and a run of digits can read as a phone number.
 */
function letters(n: bigint, width: number): string {
  const out: string[] = [];
  for (let i = 0; i < width; i += 1) {
    out.push(String.fromCharCode(97 + Number(n % 26n)));
    n /= 26n;
  }
  return out.reverse().join("");
}

function encodeNamespace(namespace: string[]): string {
  return JSON.stringify(namespace);
}

/** The tag every item under `prefix` carries (the Python store's `prefix_tag`). */
export async function prefixTag(prefix: string[]): Promise<string> {
  const hex = await sha256HexOf(encodeNamespace(prefix));
  return PREFIX_TAG + letters(BigInt(`0x${hex.slice(0, 32)}`), 24);
}

function createdTag(at: Date): string {
  return CREATED_TAG + letters(BigInt(at.getTime()), 10);
}

function createdFrom(tag: string): Date | undefined {
  const rest = tag.slice(CREATED_TAG.length);
  if (!tag.startsWith(CREATED_TAG) || !/^[a-z]+$/.test(rest)) return undefined;
  let ms = 0;
  for (const ch of rest) ms = ms * 26 + (ch.charCodeAt(0) - 97);
  const when = new Date(ms);
  return Number.isNaN(when.getTime()) ? undefined : when;
}

function matchesCondition(condition: MatchCondition, namespace: string[]): boolean {
  const path = condition.path;
  if (namespace.length < path.length) return false;
  const labels = condition.matchType === "prefix" ? namespace : namespace.slice(namespace.length - path.length);
  return path.every((p, i) => p === "*" || p === labels[i]);
}

function operator(actual: unknown, op: string, value: unknown): boolean {
  if (op === "$eq") return deepEqual(actual, value);
  if (op === "$ne") return !deepEqual(actual, value);
  if (!["$gt", "$gte", "$lt", "$lte"].includes(op)) {
    throw new StoreValueError(`unsupported filter operator ${JSON.stringify(op)}: use $eq, $ne, $gt, $gte, $lt or $lte`);
  }
  const a = Number(actual);
  const b = Number(value);
  if (actual === null || actual === undefined || typeof actual === "boolean" || Number.isNaN(a) || Number.isNaN(b)) {
    return false; // a missing or non-numeric field does not match
  }
  return op === "$gt" ? a > b : op === "$gte" ? a >= b : op === "$lt" ? a < b : a <= b;
}

/** LangGraph's filter semantics: equality, nested objects, and $eq/$ne/$gt/$gte/$lt/$lte. */
function compare(actual: unknown, wanted: unknown): boolean {
  if (wanted && typeof wanted === "object" && !Array.isArray(wanted)) {
    const entries = Object.entries(wanted as Record<string, unknown>);
    if (entries.some(([k]) => k.startsWith("$"))) return entries.every(([op, v]) => operator(actual, op, v));
    return (
      !!actual &&
      typeof actual === "object" &&
      entries.every(([k, v]) => compare((actual as Record<string, unknown>)[k], v))
    );
  }
  if (Array.isArray(wanted)) {
    return Array.isArray(actual) && actual.length === wanted.length && wanted.every((w, i) => compare(actual[i], w));
  }
  return deepEqual(actual, wanted);
}

function matchesFilter(value: Record<string, unknown>, wanted: Record<string, unknown> | undefined): boolean {
  return !wanted || Object.entries(wanted).every(([k, v]) => compare(value[k], v));
}

function isGet(op: Operation): op is GetOperation {
  return "key" in op && !("value" in op);
}
function isPut(op: Operation): op is PutOperation {
  return "value" in op;
}
function isSearch(op: Operation): op is SearchOperation {
  return "namespacePrefix" in op;
}
function isListNamespaces(op: Operation): op is ListNamespacesOperation {
  return "limit" in op && "offset" in op && !("namespacePrefix" in op);
}

export interface MemvaultStoreOptions {
  client: MemvaultClient;
  /** The subject of every namespace; without it, the namespace's label at `subjectLabel`. */
  subjectId?: string;
  subjectLabel?: number;
  /**
   * Whether the subject has consented to long-term memory: memvault keeps none without
   * it, so with `false` every put answers `ConsentRequired`. Asked for, not defaulted.
   */
  consent: boolean;
  kind?: MemoryKind;
  sourceType?: SourceType;
  sourceRef?: string;
  sensitivity?: Sensitivity;
  /** Agent roles the items are visible to (empty: all). */
  visibility?: string[];
}

export class MemvaultStore extends BaseStore {
  readonly client: MemvaultClient;
  readonly subjectId: string | undefined;
  readonly subjectLabel: number;
  readonly consent: boolean;
  readonly kind: MemoryKind;
  readonly source: { type: SourceType; ref: string };
  readonly sensitivity: Sensitivity;
  readonly visibility: string[];

  constructor(options: MemvaultStoreOptions) {
    super();
    if (!options.client) throw new TypeError("give a MemvaultClient (client)");
    if (typeof options.consent !== "boolean") {
      throw new TypeError("say whether the subject consented to long-term memory (consent: true or false)");
    }
    this.client = options.client;
    this.subjectId = options.subjectId;
    this.subjectLabel = options.subjectLabel ?? 0;
    if (this.subjectId === undefined && this.subjectLabel < 0) {
      throw new RangeError("subjectLabel is the index of a namespace label: 0 or more");
    }
    this.consent = options.consent;
    this.kind = options.kind ?? "semantic";
    this.source = { type: options.sourceType ?? "tool_result", ref: options.sourceRef ?? "langgraph-store" };
    this.sensitivity = options.sensitivity ?? "internal";
    this.visibility = [...(options.visibility ?? [])];
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) results.push(await this.run(op));
    return results as OperationResults<Op>;
  }

  private run(op: Operation): Promise<unknown> {
    if (isPut(op)) return this.putOp(op);
    if (isGet(op)) return this.getOp(op);
    if (isSearch(op)) return this.searchOp(op);
    if (isListNamespaces(op)) return this.listNamespacesOp(op);
    throw new TypeError("unknown store operation");
  }

  // ----------------------------------------------------------------- mapping

  private subject(namespace: string[], what = "namespace"): string {
    if (this.subjectId !== undefined) return this.subjectId;
    const subject = namespace[this.subjectLabel];
    if (subject === undefined) {
      throw new InvalidNamespaceError(
        `this store takes the subject from label ${this.subjectLabel} of the ${what}, and ` +
          `${JSON.stringify(namespace)} has none: give a longer ${what}, or subjectId`,
      );
    }
    if (!SUBJECT.test(subject)) {
      throw new InvalidNamespaceError(
        `namespace label ${this.subjectLabel} names the subject, which must be 1-128 letters, digits ` +
          "or _.:@+- and start with a letter or digit",
      );
    }
    return subject;
  }

  private static checkNamespace(namespace: string[]): void {
    if (namespace.length === 0) throw new InvalidNamespaceError("an item's namespace cannot be empty");
    if (namespace.length > MAX_NAMESPACE_DEPTH) {
      throw new InvalidNamespaceError(`namespaces may be at most ${MAX_NAMESPACE_DEPTH} labels deep`);
    }
    if (encodeNamespace(namespace).length > MAX_SCOPE_VALUE) {
      throw new InvalidNamespaceError(`a namespace may take at most ${MAX_SCOPE_VALUE} characters as a JSON array`);
    }
  }

  private static checkKey(key: string): void {
    if (typeof key !== "string" || !key || key.length > MAX_KEY || key !== key.trim()) {
      throw new StoreValueError(`a key must be 1-${MAX_KEY} characters with no leading or trailing whitespace`);
    }
  }

  private item(memory: Memory, score?: number, search = false): Item | SearchItem {
    const namespace = JSON.parse(memory.scope[NAMESPACE_SCOPE] as string) as string[];
    let value: unknown;
    try {
      value = JSON.parse(memory.content);
    } catch {
      value = undefined;
    }
    if (!value || typeof value !== "object" || Array.isArray(value)) value = { content: memory.content };
    let created = new Date(memory.created_at);
    for (const tag of memory.tags ?? []) created = createdFrom(tag) ?? created;
    const item: Item = {
      namespace,
      key: memory.canonical_key ?? memory.memory_id,
      value: value as Record<string, unknown>,
      createdAt: created,
      updatedAt: new Date(memory.created_at),
    };
    return search ? { ...item, score } : item;
  }

  private ours(memory: Memory): boolean {
    const encoded = memory.scope?.[NAMESPACE_SCOPE];
    if (encoded === undefined || memory.kind !== this.kind) return false;
    try {
      const labels = JSON.parse(encoded) as unknown;
      return Array.isArray(labels) && labels.every((l) => typeof l === "string");
    } catch {
      return false;
    }
  }

  /** Every current memory of `subject` with `tag` (and canonical `key`). */
  private async listing(subject: string, tag: string, key?: string): Promise<Memory[]> {
    const found: Memory[] = [];
    for await (const memory of this.client.iterMemories(subject, {
      kind: this.kind,
      canonical_key: key,
      tag,
      pageSize: PAGE,
    })) {
      if (this.ours(memory)) found.push(memory);
    }
    return found;
  }

  private async current(namespace: string[], key: string): Promise<Memory | undefined> {
    const subject = this.subject(namespace);
    const encoded = encodeNamespace(namespace);
    for (const memory of await this.listing(subject, await prefixTag(namespace), key)) {
      if (memory.scope[NAMESPACE_SCOPE] === encoded && memory.canonical_key === key) return memory;
    }
    return undefined;
  }

  // ---------------------------------------------------------------- get / put

  private async getOp(op: GetOperation): Promise<Item | null> {
    MemvaultStore.checkNamespace(op.namespace);
    MemvaultStore.checkKey(op.key);
    const memory = await this.current(op.namespace, op.key);
    return memory ? this.item(memory) : null;
  }

  private async putOp(op: PutOperation): Promise<void> {
    MemvaultStore.checkNamespace(op.namespace);
    MemvaultStore.checkKey(op.key);
    const subject = this.subject(op.namespace);
    const current = await this.current(op.namespace, op.key);
    if (op.value === null) {
      if (current) {
        try {
          await this.client.deleteMemory(subject, current.memory_id);
        } catch (error) {
          if (!(error instanceof NotFound)) throw error; // deleted meanwhile
        }
      }
      return;
    }
    if (typeof op.value !== "object" || Array.isArray(op.value)) {
      throw new StoreValueError("a store value must be an object with string keys");
    }
    let content: string;
    try {
      content = sortedJson(op.value);
    } catch (error) {
      throw new StoreValueError(`a store value must be JSON-serializable: ${String(error)}`);
    }
    if (content.length > MAX_CONTENT_CHARS) {
      throw new StoreValueError(
        `the value takes ${content.length} characters as JSON; memvault holds at most ${MAX_CONTENT_CHARS} ` +
          "per memory: keep large content in an artifact and store its id",
      );
    }
    const tags: string[] = [];
    for (let n = 0; n <= op.namespace.length; n += 1) tags.push(await prefixTag(op.namespace.slice(0, n)));
    if (current) tags.push(createdTag(this.item(current).createdAt)); // the item's first version's
    if (op.index === false) tags.push(NO_INDEX_TAG);
    const body: MemoryWrite = {
      kind: this.kind,
      canonical_key: op.key,
      content,
      tags,
      scope: { [NAMESPACE_SCOPE]: encodeNamespace(op.namespace) },
      source: this.source,
      sensitivity: this.sensitivity,
      consent: this.consent,
      visibility: this.visibility,
    };
    // The SDK gives the write a request id and keeps it across its retries.
    await this.client.writeMemory(subject, body);
  }

  // ------------------------------------------------------------------ search

  private async searchOp(op: SearchOperation): Promise<SearchItem[]> {
    const prefix = op.namespacePrefix;
    const subject = this.subject(prefix, "namespace prefix");
    const limit = op.limit ?? 10;
    const offset = op.offset ?? 0;
    if (limit < 0 || offset < 0) throw new StoreValueError("limit and offset must be 0 or more");
    const wanted = limit + offset;
    let hits: Array<[Memory, number | undefined]>;
    if (op.query) {
      if (wanted > RECALL_MAX) {
        throw new StoreValueError(`a search with a query returns at most ${RECALL_MAX} items (limit + offset)`);
      }
      if (wanted === 0) return [];
      const answer = await this.client.recall(subject, {
        query: op.query,
        tags: [await prefixTag(prefix)],
        limit: op.filter ? RECALL_MAX : Math.max(wanted, 1),
        kinds: [this.kind],
      });
      hits = answer.items
        .filter((hit) => this.ours(hit.memory) && !(hit.memory.tags ?? []).includes(NO_INDEX_TAG))
        .map((hit) => [hit.memory, hit.score]);
    } else {
      const listed = await this.listing(subject, await prefixTag(prefix));
      listed.sort((a, b) =>
        a.created_at === b.created_at ? (a.memory_id < b.memory_id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1,
      );
      hits = listed.map((m) => [m, undefined]);
    }
    const items: SearchItem[] = [];
    for (const [memory, score] of hits) {
      const item = this.item(memory, score, true) as SearchItem;
      if (!prefix.every((label, i) => item.namespace[i] === label)) continue; // a tag's hash collision
      if (matchesFilter(item.value, op.filter)) items.push(item);
    }
    return items.slice(offset, offset + limit);
  }

  // --------------------------------------------------------- list namespaces

  private async listNamespacesOp(op: ListNamespacesOperation): Promise<string[][]> {
    const conditions = op.matchConditions ?? [];
    let prefix: string[] = [];
    for (const condition of conditions) {
      if (condition.matchType === "prefix") {
        const star = condition.path.indexOf("*");
        const fixed = (star >= 0 ? condition.path.slice(0, star) : condition.path) as string[];
        if (fixed.length > prefix.length) prefix = fixed;
      }
    }
    const subject = this.subject(prefix, "prefix condition");
    const seen = new Map<string, string[]>();
    for (const memory of await this.listing(subject, await prefixTag(prefix))) {
      const namespace = JSON.parse(memory.scope[NAMESPACE_SCOPE] as string) as string[];
      if (conditions.every((c) => matchesCondition(c, namespace))) {
        const shown = op.maxDepth !== undefined ? namespace.slice(0, op.maxDepth) : namespace;
        seen.set(JSON.stringify(shown), shown);
      }
    }
    const sorted = [...seen.values()].sort((a, b) => compareLabels(a, b));
    return sorted.slice(op.offset, op.offset + op.limit);
  }
}

function compareLabels(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i += 1) {
    const x = a[i] as string;
    const y = b[i] as string;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

/** JSON with keys sorted at every level (Python's `json.dumps(..., sort_keys=True)` content). */
function sortedJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      return Object.fromEntries(Object.keys(v as object).sort().map((k) => [k, (v as Record<string, unknown>)[k]]));
    }
    return v;
  });
}
