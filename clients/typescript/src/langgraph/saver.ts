/**
 * `MemvaultSaver`: LangGraph.js checkpoints as memvault run checkpoints, with the
 * guarantees of the Python `memvault_client.langgraph.MemvaultSaver` and the same layout:
 *
 * - a thread has a *registry* run (`lgt.<hash>`) whose state holds the thread's
 *   generation and the checkpoint namespaces it has used;
 * - each (thread, namespace, generation) is one run (`lgc.<hash>`); each LangGraph
 *   checkpoint is one version of it, written by compare-and-set on the version that holds
 *   its parent. Two writers that resume the same checkpoint can never fork the thread:
 *   one advances, the other gets {@link CheckpointConflict} naming the current checkpoint;
 * - pending writes are merged into the head version's state, keyed by (task_id, index),
 *   so a repeated `putWrites` adds nothing; writes that arrive after later checkpoints
 *   were put (LangGraph sends them in the background) are kept in the head's state under
 *   the id of the ancestor they belong to, and read back with it;
 * - a version's state names the version that holds its parent (`parent_version`), so
 *   `list` and `getTuple` walk the chain with `GET /v1/runs/{id}/versions/{n}` (past
 *   versions never change, so they are cached);
 * - a serialized value too large for the run state (checkpoints are bounded, 32 KiB by
 *   default) is stored in the artifact store and referenced from `artifact_refs`;
 *   reading it back checks its sha256;
 * - `deleteThread` cancels each namespace's run with an empty state and moves the thread
 *   to a new generation, so the thread starts empty and can be used again.
 *
 * One addition for LangGraph.js, whose `list` may be asked for every thread: the threads
 * this saver has written are kept in a directory of runs (`lgd.<hash>`, one page each),
 * per subject.
 *
 * Values are serialized with the saver's `serde` and kept base64-encoded, so run-state
 * policy (secrets, personal data) sees only the thread ids and namespaces as text.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
  WRITES_IDX_MAP,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
} from "@langchain/langgraph-checkpoint";
import type { MemvaultClient } from "../client.js";
import { Forbidden, IllegalTransition, MemvaultError, NotFound, VersionConflict } from "../errors.js";
import type { Checkpoint as RunCheckpoint, RunStatus } from "../types.js";
import { compareCodePoints, deepEqual, fromBase64, hashParts, jsonSize, sha256HexOf, toBase64 } from "./shared.js";

/** The state layout's version, kept in every state this saver writes (the Python saver's). */
const LAYOUT = 1;
const MEDIA_TYPE = "application/json";
/** How many checkpoints back from the head writes for an earlier checkpoint are looked for. */
const LATE_WRITES_DEPTH = 64;
const TERMINAL: ReadonlySet<string> = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);
const VERSION_CACHE = 1024;

type Blob = { t: string; b?: string; a?: string; h?: string };
/** `[task_id, idx, channel, blob, task_path]` */
type WriteEntry = [string, number, string, Blob, string];
/** `[checkpoint_id, task_id, idx, channel, blob, task_path]` */
type LateEntry = [string, string, number, string, Blob, string];
interface State {
  v?: number;
  checkpoint_id?: string | null;
  parent_checkpoint_id?: string | null;
  parent_version?: number | null;
  checkpoint?: Blob;
  metadata?: Blob;
  writes?: WriteEntry[];
  parent_writes?: WriteEntry[];
  late_writes?: LateEntry[];
  [key: string]: unknown;
}

/**
 * The thread moved on: the checkpoint this put (or putWrites) builds on is no longer the
 * thread's latest. Re-read the thread (`getTuple`) and continue from
 * `currentCheckpointId`; nothing was written.
 */
export class CheckpointConflict extends VersionConflict {
  readonly threadId: string;
  readonly checkpointNs: string;
  readonly expectedCheckpointId: string | null;
  readonly currentCheckpointId: string | null;

  constructor(
    message: string,
    where: { threadId: string; checkpointNs: string; expected: string | null; current: string | null },
  ) {
    super(message, {
      details: {
        thread_id: where.threadId,
        checkpoint_ns: where.checkpointNs,
        expected_checkpoint_id: where.expected,
        current_checkpoint_id: where.current,
      },
    });
    this.threadId = where.threadId;
    this.checkpointNs = where.checkpointNs;
    this.expectedCheckpointId = where.expected;
    this.currentCheckpointId = where.current;
  }
}

/** Another name for the same error: a put that would have forked the thread. */
export const ThreadForked = CheckpointConflict;

/**
 * The thread's checkpoint holds personal data (it was put with `consent: true`) and this
 * saver's token may not read it (its `max_sensitivity` is below `pii`). Acting on the
 * empty state the server answers in its place would lose the thread, so the saver stops.
 */
export class CheckpointWithheld extends Forbidden {}

/** An offloaded value's bytes do not have the sha256 its checkpoint names. */
export class ArtifactDigestMismatch extends MemvaultError {
  static override readonly CODE = "artifact_digest_mismatch";
}

export interface MemvaultSaverOptions {
  client: MemvaultClient;
  /** The subject whose runs hold the threads. */
  subjectId: string;
  serde?: SerializerProtocol;
  /** The runs' `plan_version` (default `langgraph`). */
  planVersion?: string;
  /** The largest run state this saver writes before it moves values to artifacts (24 KiB). */
  inlineMaxBytes?: number;
  /** Retention of offloaded values' artifacts (the tenant's default when absent). */
  artifactRetentionDays?: number;
  /** How long `putWrites` waits for its checkpoint's put to land (default 5000 ms). */
  writesWaitMs?: number;
  /**
   * The subject's consent, sent with every checkpoint: needed when a thread id or
   * namespace holds personal data (the server refuses it without, `ConsentRequired`).
   */
  consent?: boolean;
}

function readable(run: RunCheckpoint): RunCheckpoint {
  if ((run.withheld ?? []).includes("state")) {
    throw new CheckpointWithheld(
      "this thread's checkpoint holds personal data above this token's max_sensitivity, so the " +
        "server withheld it; use a token whose max_sensitivity is pii to read or continue the thread",
      { details: { run_id: run.run_id, withheld: [...(run.withheld ?? [])] } },
    );
  }
  return run;
}

function stateOf(run: RunCheckpoint): State {
  return (run.state ?? {}) as State;
}

function nsOf(configurable: Record<string, unknown>): string {
  const ns = configurable["checkpoint_ns"];
  return ns === undefined || ns === null ? "" : String(ns);
}

/** Pending writes in LangGraph's `writesSortKey` order: (task_path, task_id, idx). */
function sortWrites(entries: WriteEntry[]): WriteEntry[] {
  return [...entries].sort(
    (a, b) => compareCodePoints(a[4] ?? "", b[4] ?? "") || compareCodePoints(a[0], b[0]) || a[1] - b[1],
  );
}

/**
 * A checkpoint's pending writes: its state's own, then those that arrived after later
 * checkpoints were put, kept in the states of `newer` (any order). A (task_id, idx) is
 * kept once: a regular write's first copy, a special channel's (negative idx) last.
 */
function pendingOf(state: State, newer: State[]): WriteEntry[] {
  const cid = state.checkpoint_id;
  let entries: WriteEntry[] = [...(state.writes ?? [])];
  const later = [...newer].sort((x, y) => Number(x.parent_version ?? 0) - Number(y.parent_version ?? 0));
  for (const s of later) {
    if (s.parent_checkpoint_id === cid) entries = entries.concat(s.parent_writes ?? []);
    for (const w of s.late_writes ?? []) {
      if (w[0] === cid) entries.push(w.slice(1) as WriteEntry);
    }
  }
  const kept = new Map<string, WriteEntry>();
  for (const entry of entries) {
    const key = JSON.stringify([entry[0], entry[1]]);
    if (!kept.has(key) || entry[1] < 0) kept.set(key, entry);
  }
  return [...kept.values()];
}

function matches(metadata: Record<string, unknown> | undefined, wanted: Record<string, unknown> | undefined): boolean {
  if (!wanted) return true;
  return Object.entries(wanted).every(([k, v]) => deepEqual(metadata?.[k], v));
}

/** Artifact ids a state's blobs point at. */
function artifactsOf(state: State): Set<string> {
  const blobs: Blob[] = [];
  if (state.checkpoint) blobs.push(state.checkpoint);
  if (state.metadata) blobs.push(state.metadata);
  for (const w of [...(state.writes ?? []), ...(state.parent_writes ?? [])]) blobs.push(w[3]);
  for (const w of state.late_writes ?? []) blobs.push(w[4]);
  return new Set(blobs.filter((b) => b && b.a).map((b) => b.a as string));
}

export class MemvaultSaver extends BaseCheckpointSaver {
  readonly client: MemvaultClient;
  readonly subjectId: string;
  readonly planVersion: string;
  readonly inlineMaxBytes: number;
  readonly artifactRetentionDays: number | undefined;
  readonly writesWaitMs: number;
  readonly consent: boolean;
  private readonly versions = new Map<string, RunCheckpoint>();

  constructor(options: MemvaultSaverOptions) {
    super(options.serde);
    if (!options.client) throw new TypeError("give a MemvaultClient (client)");
    if (!options.subjectId) throw new TypeError("give the subject whose runs hold the threads (subjectId)");
    this.client = options.client;
    this.subjectId = options.subjectId;
    this.planVersion = options.planVersion ?? "langgraph";
    this.inlineMaxBytes = options.inlineMaxBytes ?? 24 * 1024;
    this.artifactRetentionDays = options.artifactRetentionDays;
    this.writesWaitMs = options.writesWaitMs ?? 5000;
    this.consent = options.consent ?? false;
  }

  override toJSON(): string {
    return `MemvaultSaver(${this.subjectId})`;
  }

  // ---------------------------------------------------------------- run ids

  /** The run that holds a thread's generation and namespaces. */
  static async registryRunId(threadId: string): Promise<string> {
    return `lgt.${await hashParts("thread", threadId)}`;
  }

  /** The run whose versions are the checkpoints of one namespace of a thread. */
  static async checkpointRunId(threadId: string, checkpointNs: string, generation: number): Promise<string> {
    return `lgc.${await hashParts("checkpoints", threadId, checkpointNs, generation)}`;
  }

  /** One page of the subject's directory of threads. */
  static async directoryRunId(page: number): Promise<string> {
    return `lgd.${await hashParts("threads", page)}`;
  }

  // ------------------------------------------------------------- run access

  private async read(runId: string): Promise<RunCheckpoint | undefined> {
    try {
      return readable(await this.client.getRun(runId, { subjectId: this.subjectId }));
    } catch (error) {
      if (error instanceof NotFound) return undefined;
      throw error;
    }
  }

  /** A past version: it never changes, so it is cached. */
  private async version(runId: string, version: number): Promise<RunCheckpoint> {
    const key = `${runId}#${version}`;
    const cached = this.versions.get(key);
    if (cached) return cached;
    const run = readable(await this.client.getRunVersion(runId, version, { subjectId: this.subjectId }));
    if (this.versions.size >= VERSION_CACHE) {
      this.versions.delete(this.versions.keys().next().value as string);
    }
    this.versions.set(key, run);
    return run;
  }

  private async readOrCreate(runId: string): Promise<RunCheckpoint> {
    const run = await this.read(runId);
    if (run) return run;
    // The same payload again answers the run: safe when two writers race here.
    return readable(await this.client.createRun(runId, { subject_id: this.subjectId, plan_version: this.planVersion }));
  }

  private async advance(
    runId: string,
    expected: number,
    status: RunStatus,
    step: string,
    state: Record<string, unknown>,
    artifactRefs: Array<{ artifact_id: string; sha256: string }> = [],
  ): Promise<RunCheckpoint> {
    const body: Parameters<MemvaultClient["advanceRun"]>[1] = {
      expected_version: expected,
      status,
      step: step.slice(0, 200),
      state,
      artifact_refs: artifactRefs,
    };
    if (this.consent) body.consent = true;
    return this.client.advanceRun(runId, body, { subjectId: this.subjectId });
  }

  private async generation(threadId: string): Promise<number> {
    const registry = await this.read(await MemvaultSaver.registryRunId(threadId));
    return registry ? Number(stateOf(registry)["generation"] ?? 0) : 0;
  }

  /** The thread's generation, with `checkpointNs` recorded among its namespaces. */
  private async register(threadId: string, checkpointNs: string): Promise<number> {
    const runId = await MemvaultSaver.registryRunId(threadId);
    for (;;) {
      const registry = await this.readOrCreate(runId);
      const state = stateOf(registry);
      const generation = Number(state["generation"] ?? 0);
      const namespaces = [...((state["namespaces"] as string[] | undefined) ?? [])];
      if (namespaces.includes(checkpointNs) || state["overflow"]) return generation;
      if (namespaces.length === 0) await this.listThread(threadId);
      let next: Record<string, unknown> = { v: LAYOUT, generation, namespaces: [...namespaces, checkpointNs] };
      if (jsonSize(next) > this.inlineMaxBytes) {
        // Too many namespaces to list: deleteThread still hides them (the generation moves
        // on) but cannot cancel their runs one by one.
        next = { v: LAYOUT, generation, namespaces, overflow: true };
      }
      try {
        await this.advance(runId, registry.version, "RUNNING", "langgraph thread", next);
      } catch (error) {
        if (error instanceof VersionConflict) continue; // another writer registered meanwhile
        throw error;
      }
      return generation;
    }
  }

  // -------------------------------------------------------- thread directory

  /** Record `threadId` in the subject's directory of threads (once). */
  private async listThread(threadId: string): Promise<void> {
    for (let page = 0; ; ) {
      const runId = await MemvaultSaver.directoryRunId(page);
      const run = await this.readOrCreate(runId);
      const state = stateOf(run);
      const threads = [...((state["threads"] as string[] | undefined) ?? [])];
      if (threads.includes(threadId)) return;
      if (state["full"]) {
        page += 1;
        continue;
      }
      let next: Record<string, unknown> = { v: LAYOUT, threads: [...threads, threadId] };
      const full = jsonSize(next) > this.inlineMaxBytes;
      if (full) next = { v: LAYOUT, threads, full: true };
      try {
        await this.advance(runId, run.version, "RUNNING", "langgraph threads", next);
      } catch (error) {
        if (error instanceof VersionConflict) continue; // re-read this page
        throw error;
      }
      if (!full) return;
      page += 1;
    }
  }

  private async unlistThread(threadId: string): Promise<void> {
    for (let page = 0; ; page += 1) {
      const runId = await MemvaultSaver.directoryRunId(page);
      for (;;) {
        const run = await this.read(runId);
        if (!run) return;
        const state = stateOf(run);
        const threads = (state["threads"] as string[] | undefined) ?? [];
        if (!threads.includes(threadId)) break;
        try {
          await this.advance(runId, run.version, "RUNNING", "langgraph threads", {
            ...state,
            threads: threads.filter((t) => t !== threadId),
          });
          return;
        } catch (error) {
          if (!(error instanceof VersionConflict)) throw error;
        }
      }
    }
  }

  private async listedThreads(): Promise<string[]> {
    const found: string[] = [];
    for (let page = 0; ; page += 1) {
      const run = await this.read(await MemvaultSaver.directoryRunId(page));
      if (!run) return found;
      for (const t of (stateOf(run)["threads"] as string[] | undefined) ?? []) {
        if (!found.includes(t)) found.push(t);
      }
    }
  }

  // ----------------------------------------------------------------- values

  private async pack(value: unknown): Promise<Blob> {
    const [type, data] = await this.serde.dumpsTyped(value);
    return { t: type, b: toBase64(data) };
  }

  private async unpack(blob: Blob): Promise<any> {
    let inline = blob;
    if (blob.a) {
      const raw = await this.client.downloadArtifact(this.subjectId, blob.a);
      if ((await sha256HexOf(raw)) !== blob.h) {
        throw new ArtifactDigestMismatch("an offloaded checkpoint value does not match its sha256", {
          details: { artifact_id: blob.a },
        });
      }
      inline = JSON.parse(new TextDecoder().decode(raw)) as Blob;
    }
    return this.serde.loadsTyped(inline.t, fromBase64(inline.b ?? ""));
  }

  /**
   * Move the largest inline values to the artifact store until the state fits; answers
   * the artifact references the state now holds.
   */
  private async offload(state: State): Promise<Array<{ artifact_id: string; sha256: string }>> {
    const blobs: Blob[] = [];
    if (state.checkpoint) blobs.push(state.checkpoint);
    if (state.metadata) blobs.push(state.metadata);
    for (const w of [...(state.writes ?? []), ...(state.parent_writes ?? [])]) blobs.push(w[3]);
    for (const w of state.late_writes ?? []) blobs.push(w[4]);
    while (jsonSize(state) > this.inlineMaxBytes) {
      const inline = blobs.filter((b) => b.b !== undefined);
      if (inline.length === 0) break; // nothing left to move: the server answers payload_too_large
      const largest = inline.reduce((x, y) => ((y.b as string).length > (x.b as string).length ? y : x));
      const data = new TextEncoder().encode(JSON.stringify({ t: largest.t, b: largest.b }));
      const artifact = await this.client.uploadArtifact(this.subjectId, data, {
        mediaType: MEDIA_TYPE,
        name: "langgraph-value",
        retentionDays: this.artifactRetentionDays,
      });
      const digest = await sha256HexOf(data);
      for (const key of Object.keys(largest)) delete (largest as Record<string, unknown>)[key];
      Object.assign(largest, { t: "artifact", a: artifact.artifact_id, h: digest });
    }
    const refs = new Map<string, string>();
    for (const b of blobs) if (b.a) refs.set(b.a, b.h as string);
    return [...refs.entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([artifact_id, sha256]) => ({
      artifact_id,
      sha256,
    }));
  }

  private conflict(threadId: string, checkpointNs: string, expected: string | null, current: string | null) {
    return new CheckpointConflict(
      `thread ${JSON.stringify(threadId)} (namespace ${JSON.stringify(checkpointNs)}) is at checkpoint ` +
        `${JSON.stringify(current)}, not ${JSON.stringify(expected)}: another writer moved it on; re-read ` +
        "the thread and continue from its latest checkpoint",
      { threadId, checkpointNs, expected, current },
    );
  }

  // -------------------------------------------------------------------- put

  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    _newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const conf = config.configurable;
    if (!conf || conf["thread_id"] === undefined || conf["thread_id"] === null || conf["thread_id"] === "") {
      throw new TypeError('MemvaultSaver.put needs config.configurable.thread_id: pass { configurable: { thread_id } }');
    }
    const threadId = String(conf["thread_id"]);
    const checkpointNs = nsOf(conf);
    const parentId: string | null = getCheckpointId(config) || null;
    const checkpointId = checkpoint.id;
    const stored: RunnableConfig = {
      configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, checkpoint_id: checkpointId },
    };
    const generation = await this.register(threadId, checkpointNs);
    const runId = await MemvaultSaver.checkpointRunId(threadId, checkpointNs, generation);
    const state: State = {
      v: LAYOUT,
      checkpoint_id: checkpointId,
      parent_checkpoint_id: parentId,
      parent_version: null,
      checkpoint: await this.pack(copyCheckpoint(checkpoint)),
      metadata: await this.pack(metadata),
      writes: [],
    };
    let refs: Array<{ artifact_id: string; sha256: string }> | undefined;
    for (;;) {
      const head = await this.readOrCreate(runId);
      const headState = stateOf(head);
      const current = headState.checkpoint_id ?? null;
      if (current === checkpointId && (headState.parent_checkpoint_id ?? null) === parentId) {
        return stored; // a replay of this very put (its answer was lost): done
      }
      if (current !== parentId || TERMINAL.has(head.status)) {
        throw this.conflict(threadId, checkpointNs, parentId, current);
      }
      // The version holding the parent as it finally was (with all its writes).
      state.parent_version = parentId !== null ? head.version : null;
      refs ??= await this.offload(state);
      try {
        await this.advance(runId, head.version, "RUNNING", `langgraph checkpoint ${checkpointId}`, state, refs);
      } catch (error) {
        // Re-read: writes to the parent landed (retry), or a rival won (conflict above).
        if (error instanceof VersionConflict || error instanceof IllegalTransition) continue;
        throw error;
      }
      return stored;
    }
  }

  // ------------------------------------------------------------- putWrites

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    const conf = config.configurable;
    if (!conf || conf["thread_id"] === undefined || conf["thread_id"] === null || conf["thread_id"] === "") {
      throw new TypeError("MemvaultSaver.putWrites needs config.configurable.thread_id");
    }
    const checkpointId = conf["checkpoint_id"];
    if (checkpointId === undefined || checkpointId === null || checkpointId === "") {
      throw new TypeError("MemvaultSaver.putWrites needs config.configurable.checkpoint_id");
    }
    const threadId = String(conf["thread_id"]);
    const checkpointNs = nsOf(conf);
    const generation = await this.generation(threadId);
    const runId = await MemvaultSaver.checkpointRunId(threadId, checkpointNs, generation);
    const packed: Array<[number, string, Blob]> = [];
    for (const [i, [channel, value]] of writes.entries()) {
      packed.push([WRITES_IDX_MAP[channel] ?? i, channel, await this.pack(value)]);
    }
    let waited = 0;
    for (;;) {
      const head = await this.read(runId);
      const current = head ? (stateOf(head).checkpoint_id ?? null) : null;
      let found: [slot: "writes" | "late_writes", known: WriteEntry[]] | undefined;
      if (head && !TERMINAL.has(head.status)) found = await this.writesSlot(runId, head, String(checkpointId));
      if (!head || !found) {
        // LangGraph may send a checkpoint's writes while its put is still in flight.
        if (waited < this.writesWaitMs && (!head || !TERMINAL.has(head.status))) {
          const delay = Math.min(200, 10 + waited / 4);
          await new Promise((r) => setTimeout(r, delay));
          waited += delay;
          continue;
        }
        throw this.conflict(threadId, checkpointNs, String(checkpointId), current);
      }
      const [slot, known] = found;
      const state = structuredClone(stateOf(head));
      const existing = new Map<string, WriteEntry>(known.map((w) => [JSON.stringify([w[0], w[1]]), w]));
      let changed = false;
      for (const [idx, channel, blob] of packed) {
        const entry: WriteEntry = [taskId, idx, channel, blob, taskPath];
        const key = JSON.stringify([taskId, idx]);
        const before = existing.get(key);
        if (before && (idx >= 0 || deepEqual(before, entry))) continue; // (task_id, idx) once
        if (slot === "writes") {
          state.writes ??= [];
          const at = state.writes.findIndex((w) => w[0] === taskId && w[1] === idx);
          if (at < 0) state.writes.push(entry);
          else state.writes[at] = entry; // the special channels keep the last
        } else {
          state.late_writes ??= [];
          state.late_writes.push([String(checkpointId), ...entry]);
        }
        existing.set(key, entry);
        changed = true;
      }
      if (!changed) return;
      const refs = await this.offload(state);
      try {
        await this.advance(runId, head.version, "RUNNING", `langgraph writes ${checkpointId}`, state, refs);
      } catch (error) {
        if (error instanceof VersionConflict) continue; // another task's writes landed: merge again
        throw error;
      }
      return;
    }
  }

  /**
   * Where writes for `checkpointId` go in the head's state, with the writes that
   * checkpoint already has; undefined when it is not on the thread's line (yet).
   */
  private async writesSlot(
    runId: string,
    head: RunCheckpoint,
    checkpointId: string,
  ): Promise<["writes" | "late_writes", WriteEntry[]] | undefined> {
    const headState = stateOf(head);
    const current = headState.checkpoint_id;
    if (current === checkpointId) return ["writes", pendingOf(headState, [])];
    if (current === undefined || current === null || checkpointId > current) return undefined; // in flight
    const states = await this.walk(runId, head, checkpointId, LATE_WRITES_DEPTH);
    const last = states[states.length - 1];
    if (last && last.checkpoint_id === checkpointId) return ["late_writes", pendingOf(last, states.slice(0, -1))];
    return undefined;
  }

  // ------------------------------------------------------------------- read

  /**
   * The states of the namespace's checkpoints from the head back, newest first, as far
   * as checkpoint `stop` (included) when given, else to the root; at most `depth`.
   */
  private async walk(runId: string, head: RunCheckpoint, stop?: string, depth?: number): Promise<State[]> {
    const states: State[] = [];
    let state: State | undefined = stateOf(head);
    while (state && state.checkpoint_id !== undefined && state.checkpoint_id !== null) {
      states.push(state);
      if (stop !== undefined && state.checkpoint_id === stop) break;
      if (depth !== undefined && states.length >= depth) break;
      const parentVersion = state.parent_version;
      if (!parentVersion) break;
      state = stateOf(await this.version(runId, Number(parentVersion)));
    }
    return states;
  }

  private async tuple(
    runId: string,
    threadId: string,
    checkpointNs: string,
    state: State,
    newer: State[],
  ): Promise<CheckpointTuple> {
    const checkpoint = (await this.unpack(state.checkpoint as Blob)) as Checkpoint;
    const metadata = (await this.unpack(state.metadata as Blob)) as CheckpointMetadata;
    const pendingWrites: CheckpointPendingWrite[] = [];
    for (const [taskId, , channel, blob] of sortWrites(pendingOf(state, newer))) {
      pendingWrites.push([taskId, channel, await this.unpack(blob)]);
    }
    const parent = state.parent_checkpoint_id ?? undefined;
    if (checkpoint.v < 4 && parent !== undefined) {
      await this.migratePendingSends(runId, checkpoint, state, newer);
    }
    const found: CheckpointTuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, checkpoint_id: state.checkpoint_id } },
      checkpoint,
      metadata,
      pendingWrites,
    };
    if (parent !== undefined) {
      found.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, checkpoint_id: parent } };
    }
    return found;
  }

  /** A checkpoint of format < 4: its parent's pending sends become its TASKS channel. */
  private async migratePendingSends(runId: string, checkpoint: Checkpoint, state: State, newer: State[]): Promise<void> {
    if (!state.parent_version) return;
    const parent = stateOf(await this.version(runId, Number(state.parent_version)));
    const sends: unknown[] = [];
    for (const [, , channel, blob] of sortWrites(pendingOf(parent, [state, ...newer]))) {
      if (channel === TASKS) sends.push(await this.unpack(blob));
    }
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions ??= {};
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] =
      versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const conf = config.configurable ?? {};
    if (conf["thread_id"] === undefined || conf["thread_id"] === null || conf["thread_id"] === "") return undefined;
    const threadId = String(conf["thread_id"]);
    const checkpointNs = nsOf(conf);
    const wanted = getCheckpointId(config) || undefined;
    const generation = await this.generation(threadId);
    const runId = await MemvaultSaver.checkpointRunId(threadId, checkpointNs, generation);
    const head = await this.read(runId);
    if (!head || stateOf(head).checkpoint_id == null) return undefined;
    const states = await this.walk(runId, head, wanted);
    const last = states[states.length - 1];
    if (!last || (wanted && last.checkpoint_id !== wanted)) return undefined;
    const at = wanted ? states.length - 1 : 0;
    return this.tuple(runId, threadId, checkpointNs, states[at] as State, states.slice(0, at));
  }

  override async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const conf = config?.configurable ?? {};
    const { before, limit, filter } = options;
    const threads =
      conf["thread_id"] === undefined || conf["thread_id"] === null || conf["thread_id"] === ""
        ? await this.listedThreads()
        : [String(conf["thread_id"])];
    const only = getCheckpointId(config ?? {}) || undefined;
    const beforeId = before ? getCheckpointId(before) || undefined : undefined;
    type Found = { cid: string; threadId: string; ns: string; runId: string; state: State; newer: State[] };
    const perThread = await Promise.all(
      threads.map(async (threadId): Promise<Found[]> => {
        // One read of the registry: the thread's generation and its namespaces.
        const registry = await this.read(await MemvaultSaver.registryRunId(threadId));
        if (!registry) return [];
        const generation = Number(stateOf(registry)["generation"] ?? 0);
        const namespaces =
          conf["checkpoint_ns"] !== undefined && conf["checkpoint_ns"] !== null
            ? [String(conf["checkpoint_ns"])]
            : [...((stateOf(registry)["namespaces"] as string[] | undefined) ?? [])];
        const perNs = await Promise.all(
          namespaces.map(async (ns): Promise<Found[]> => {
            const runId = await MemvaultSaver.checkpointRunId(threadId, ns, generation);
            const head = await this.read(runId);
            if (!head) return [];
            const states = await this.walk(runId, head);
            const out: Found[] = [];
            states.forEach((state, at) => {
              const cid = String(state.checkpoint_id);
              if (only !== undefined && cid !== only) return;
              if (beforeId !== undefined && cid >= beforeId) return;
              out.push({ cid, threadId, ns, runId, state, newer: states.slice(0, at) });
            });
            return out;
          }),
        );
        return perNs.flat();
      }),
    );
    const found = perThread.flat().sort((x, y) => (x.cid < y.cid ? 1 : x.cid > y.cid ? -1 : 0));
    let yielded = 0;
    for (const item of found) {
      if (limit !== undefined && yielded >= limit) return;
      if (filter && Object.keys(filter).length > 0) {
        const metadata = (await this.unpack(item.state.metadata as Blob)) as Record<string, unknown>;
        if (!matches(metadata, filter)) continue;
      }
      yielded += 1;
      yield await this.tuple(item.runId, item.threadId, item.ns, item.state, item.newer);
    }
  }

  // ----------------------------------------------------------------- delete

  override async deleteThread(threadId: string): Promise<void> {
    const thread = String(threadId);
    const registryId = await MemvaultSaver.registryRunId(thread);
    let registry = await this.read(registryId);
    if (!registry) return;
    await this.unlistThread(thread);
    const generation = Number(stateOf(registry)["generation"] ?? 0);
    const artifacts = new Set<string>();
    for (const ns of (stateOf(registry)["namespaces"] as string[] | undefined) ?? []) {
      const runId = await MemvaultSaver.checkpointRunId(thread, ns, generation);
      for (let attempt = 0; attempt < 5; attempt += 1) {
        const head = await this.read(runId);
        if (!head || TERMINAL.has(head.status)) break;
        for (const state of await this.walk(runId, head)) for (const a of artifactsOf(state)) artifacts.add(a);
        try {
          await this.advance(runId, head.version, "CANCELLED", "langgraph thread deleted", {});
        } catch (error) {
          if (error instanceof VersionConflict) continue;
          throw error;
        }
        break;
      }
    }
    for (;;) {
      try {
        await this.advance(registryId, registry.version, "RUNNING", "langgraph thread", {
          v: LAYOUT,
          generation: generation + 1,
          namespaces: [],
        });
      } catch (error) {
        if (!(error instanceof VersionConflict)) throw error;
        registry = await this.readOrCreate(registryId);
        if (Number(stateOf(registry)["generation"] ?? 0) > generation) break; // deleted concurrently
        continue;
      }
      break;
    }
    for (const artifactId of [...artifacts].sort()) {
      try {
        // The artifact goes with its last reference; best effort.
        await this.client.deleteArtifact(this.subjectId, artifactId);
      } catch (error) {
        if (!(error instanceof MemvaultError)) throw error;
      }
    }
  }
}
