/**
 * `MemvaultClient`: every operation of the memvault HTTP API (the routes of docs/api.md),
 * on `fetch`, with no runtime dependency.
 *
 * - a token, or a token provider called before every attempt (so it can refresh);
 * - 429 and 503 answers retried with exponential backoff and full jitter, honouring
 *   `Retry-After`; connection errors, attempt timeouts and a gateway's 502/504 retried
 *   when repeating cannot do a thing twice ({@link RetryPolicy});
 * - a write's `request_id` made once per call (when the caller gave none) and sent
 *   unchanged on every attempt, so a retried write stores one memory;
 * - a typed error per error code ({@link MemvaultError} subclasses);
 * - per call: an `AbortSignal` and a timeout per attempt;
 * - pagination as async iterators (`iterMemories`, `iterRunEvents`).
 */
import {
  ArtifactNotCommitted,
  BadResponse,
  ConnectionFailed,
  MemvaultError,
  errorFromAnswer,
} from "./errors.js";
import { OPERATIONS, type OperationName, pathOf } from "./operations.js";
import { RetryPolicy, type RetryOptions, sleep } from "./retry.js";
import type {
  Advance,
  AppendMessage,
  Artifact,
  AssembledContext,
  Checkpoint,
  ContextRequest,
  CreateRun,
  Deletion,
  EventReceipt,
  Export,
  Feedback,
  FeedbackList,
  FeedbackRequest,
  Health,
  History,
  ListMemoriesQuery,
  ListRunEventsQuery,
  Manifest,
  Memory,
  MemoryBatch,
  MemoryList,
  MemoryPatch,
  MemoryTrace,
  MemoryWrite,
  Operation,
  PutSummary,
  RecallRequest,
  RecallTrace,
  Recalled,
  RecordOperation,
  RunEvent,
  RunEventIn,
  RunEventList,
  Session,
  SessionEnded,
  Sensitivity,
  StartUpload,
} from "./types.js";

export const VERSION = "0.1.0";
const USER_AGENT = `memvault-typescript/${VERSION}`;
const IN_BROWSER = typeof (globalThis as { document?: unknown }).document !== "undefined";

/** A bearer token, or a function that returns one: called before every attempt. */
export type TokenProvider = string | (() => string | undefined | Promise<string | undefined>);

export interface ClientOptions {
  /** The API's base URL, such as `http://127.0.0.1:8787`. */
  endpoint: string;
  token?: TokenProvider;
  /** A {@link RetryPolicy}, or its options. */
  retry?: RetryPolicy | RetryOptions;
  /** How long one attempt may take, in milliseconds (default 30000). */
  timeoutMs?: number;
  /** The `fetch` to use (default `globalThis.fetch`). */
  fetch?: typeof fetch;
  /** Headers sent with every request (never instead of `Authorization`). */
  headers?: Record<string, string>;
}

export interface CallOptions {
  /** Aborts the call: the current attempt and any wait before the next. */
  signal?: AbortSignal;
  /** How long one attempt may take, in milliseconds; the client's when absent. */
  timeoutMs?: number;
}

/** One API request, built once per call and sent unchanged on every attempt. */
export interface Request {
  operation: OperationName;
  params?: Record<string, string | number>;
  query?: Record<string, string | number | boolean | null | undefined>;
  body?: unknown;
  /**
   * Whether sending it twice has the effect of sending it once: only then is it
   * repeated after a connection error (a 429 or 503 answer is always safe to retry).
   */
  idempotent?: boolean;
}

/** An answer: its status, headers and JSON body (undefined when empty). */
export interface Answer<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

/** A new request id: 32 hex characters (a random UUID without dashes). */
export function newRequestId(): string {
  return globalThis.crypto.randomUUID().replace(/-/g, "");
}

function withRequestId<T extends { request_id?: string | null }>(body: T): T & { request_id: string } {
  return { ...body, request_id: body.request_id ?? newRequestId() };
}

/** Not an answer: the request failed before one came (network error, attempt timeout). */
class NoAnswer extends Error {
  constructor(
    readonly kind: string,
    readonly original: unknown,
  ) {
    super(kind);
  }
}

const FINAL_DELETION_STATES = new Set(["COMPLETED", "FAILED"]);

/** Lowercase hex of the SHA-256 of `data` (Web Crypto: Node 20+, browsers, workers). */
export async function sha256Hex(data: Uint8Array): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", data as BufferSource);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

export class MemvaultClient {
  readonly endpoint: string;
  readonly retry: RetryPolicy;
  readonly timeoutMs: number;
  private readonly token: TokenProvider | undefined;
  private readonly fetchImpl: typeof fetch;
  private readonly extraHeaders: Record<string, string>;

  constructor(options: ClientOptions) {
    if (!/^https?:\/\//.test(options.endpoint)) {
      throw new TypeError("the endpoint must be an http(s) URL");
    }
    this.endpoint = options.endpoint.replace(/\/+$/, "");
    this.retry = options.retry instanceof RetryPolicy ? options.retry : new RetryPolicy(options.retry);
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.token = options.token;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: pass one in the options");
    this.fetchImpl = f;
    this.extraHeaders = { ...(options.headers ?? {}) };
  }

  /** Never the token. */
  toString(): string {
    return `MemvaultClient(${this.endpoint})`;
  }

  toJSON(): string {
    return this.toString();
  }

  // ------------------------------------------------------------------ the exchange

  private async bearer(): Promise<string | undefined> {
    return typeof this.token === "function" ? await this.token() : this.token;
  }

  private url(request: Request): string {
    let url = this.endpoint + pathOf(request.operation, request.params);
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(request.query ?? {})) {
      if (v !== undefined && v !== null) query.set(k, String(v));
    }
    const text = query.toString();
    if (text) url += `?${text}`;
    return url;
  }

  private async attempt(request: Request, body: string | undefined, options: CallOptions): Promise<Answer> {
    const token = await this.bearer();
    const headers: Record<string, string> = { ...this.extraHeaders, Accept: "application/json" };
    // A browser sends its own (and a header of ours would need CORS to allow it).
    if (!IN_BROWSER) headers["User-Agent"] = USER_AGENT;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (token) headers["Authorization"] = `Bearer ${token}`;

    const controller = new AbortController();
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error("attempt timed out"));
    }, timeoutMs);
    const onAbort = (): void => controller.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    if (options.signal?.aborted) onAbort(); // while the token was fetched
    try {
      const response = await this.fetchImpl(this.url(request), {
        method: OPERATIONS[request.operation][0],
        headers,
        body,
        signal: controller.signal,
      });
      const text = await response.text();
      let parsed: unknown = undefined;
      if (text) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined; // an error answer says so; a success answer is refused below
        }
      }
      if (response.ok && text && parsed === undefined) {
        throw new BadResponse(`the answer to ${request.operation} is not JSON`, { status: response.status });
      }
      return { status: response.status, headers: response.headers, body: parsed };
    } catch (error) {
      if (error instanceof MemvaultError) throw error;
      if (options.signal?.aborted) throw options.signal.reason;
      throw new NoAnswer(timedOut ? "timeout" : errorKind(error), error);
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Send `request` until it is answered with success, retrying as the policy says; the
   * answer, or the error to give up with. Exposed for operations this client does not
   * name yet.
   */
  async send<T = unknown>(request: Request, options: CallOptions = {}): Promise<Answer<T>> {
    const body = request.body === undefined ? undefined : JSON.stringify(request.body);
    const idempotent = request.idempotent ?? true;
    for (let attempt = 1; ; attempt += 1) {
      if (options.signal?.aborted) throw options.signal.reason;
      let delay: number | undefined;
      try {
        const answer = await this.attempt(request, body, options);
        if (answer.status >= 200 && answer.status < 300) return answer as Answer<T>;
        const error = errorFromAnswer(answer.status, answer.body, answer.headers);
        delay = this.retry.afterAnswer(attempt, answer.status, error.retryAfter, idempotent);
        if (delay === undefined) throw error;
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error;
        delay = this.retry.afterNoAnswer(attempt, idempotent);
        if (delay === undefined) {
          throw new ConnectionFailed(
            `no answer to ${request.operation} (${error.kind}) after ${attempt} attempt(s)`,
            { details: { operation: request.operation, attempts: attempt }, cause: error.original },
          );
        }
      }
      await sleep(delay, options.signal);
    }
  }

  private async call<T>(request: Request, options?: CallOptions): Promise<T> {
    return (await this.send<T>(request, options)).body;
  }

  // -------------------------------------------------------------- long-term memory

  /** Write a memory; a body without `request_id` gets a new one, kept on every retry. */
  writeMemory(subjectId: string, body: MemoryWrite, options?: CallOptions): Promise<Memory> {
    return this.call(
      { operation: "memory.write", params: { subject_id: subjectId }, body: withRequestId(body) },
      options,
    );
  }

  /**
   * Write up to 25 memories in one request, each as {@link writeMemory} would (a body
   * without `request_id` gets one, kept on every retry). A refused write is an item with
   * its `status` and `error`, not a thrown error: the others are written.
   */
  writeMemories(subjectId: string, bodies: MemoryWrite[], options?: CallOptions): Promise<MemoryBatch> {
    return this.call(
      {
        operation: "memory.write_batch",
        params: { subject_id: subjectId },
        body: { memories: bodies.map((b) => withRequestId(b)) },
      },
      options,
    );
  }

  getMemory(subjectId: string, memoryId: string, options?: CallOptions): Promise<Memory> {
    return this.call({ operation: "memory.get", params: { subject_id: subjectId, memory_id: memoryId } }, options);
  }

  /** One page of the subject's current memories; see {@link iterMemories}. */
  listMemories(subjectId: string, query: ListMemoriesQuery = {}, options?: CallOptions): Promise<MemoryList> {
    return this.call({ operation: "memory.list", params: { subject_id: subjectId }, query }, options);
  }

  /**
   * Every current memory that matches, page after page: a page is fetched only when the
   * one before is used up.
   */
  async *iterMemories(
    subjectId: string,
    filters: Omit<ListMemoriesQuery, "limit" | "next_token"> & { pageSize?: number } = {},
    options?: CallOptions,
  ): AsyncGenerator<Memory, void, undefined> {
    const { pageSize = 50, ...query } = filters;
    let next: string | null | undefined = undefined;
    do {
      const page: MemoryList = await this.listMemories(
        subjectId,
        { ...query, limit: pageSize, next_token: next ?? undefined },
        options,
      );
      yield* page.items;
      next = page.next_token;
    } while (next);
  }

  memoryHistory(subjectId: string, memoryId: string, options?: CallOptions): Promise<History> {
    return this.call(
      { operation: "memory.history", params: { subject_id: subjectId, memory_id: memoryId } },
      options,
    );
  }

  /** A new version at `expected_version + 1`; {@link VersionConflict} when stale. */
  correctMemory(subjectId: string, memoryId: string, patch: MemoryPatch, options?: CallOptions): Promise<Memory> {
    // Compare-and-set: a repeat after a lost answer would read as a version conflict.
    return this.call(
      {
        operation: "memory.correct",
        params: { subject_id: subjectId, memory_id: memoryId },
        body: patch,
        idempotent: false,
      },
      options,
    );
  }

  /** `promptedBy`: the feedback or recall id of this subject that prompted it. */
  deleteMemory(
    subjectId: string,
    memoryId: string,
    options: CallOptions & { promptedBy?: string } = {},
  ): Promise<Deletion> {
    const { promptedBy, ...call } = options;
    return this.call(
      {
        operation: "memory.delete",
        params: { subject_id: subjectId, memory_id: memoryId },
        query: { prompted_by: promptedBy },
        idempotent: false,
      },
      call,
    );
  }

  /** Why the memory exists, its versions, last use, recalls, feedback, deletion. */
  memoryTrace(subjectId: string, memoryId: string, options?: CallOptions): Promise<MemoryTrace> {
    return this.call({ operation: "memory.trace", params: { subject_id: subjectId, memory_id: memoryId } }, options);
  }

  recallTrace(recallId: string, options: CallOptions & { subjectId?: string } = {}): Promise<RecallTrace> {
    const { subjectId, ...call } = options;
    return this.call({ operation: "recall.get", params: { recall_id: recallId }, query: { subject_id: subjectId } }, call);
  }

  giveFeedback(subjectId: string, body: FeedbackRequest, options?: CallOptions): Promise<Feedback> {
    return this.call(
      { operation: "feedback.give", params: { subject_id: subjectId }, body, idempotent: false },
      options,
    );
  }

  listFeedback(subjectId: string, query: { limit?: number } = {}, options?: CallOptions): Promise<FeedbackList> {
    return this.call({ operation: "feedback.list", params: { subject_id: subjectId }, query }, options);
  }

  /** Forget the subject: every memory of theirs; `202` with a deletion id. */
  forgetSubject(subjectId: string, options?: CallOptions): Promise<Deletion> {
    return this.call({ operation: "subject.forget", params: { subject_id: subjectId }, idempotent: false }, options);
  }

  exportSubject(subjectId: string, options?: CallOptions): Promise<Export> {
    return this.call({ operation: "subject.export", params: { subject_id: subjectId } }, options);
  }

  /** Recall by a query (a string, or the full request). */
  recall(subjectId: string, body: RecallRequest | string, options?: CallOptions): Promise<Recalled> {
    const request = typeof body === "string" ? { query: body } : body;
    return this.call({ operation: "memory.recall", params: { subject_id: subjectId }, body: request }, options);
  }

  deletionStatus(deletionId: string, options?: CallOptions): Promise<Deletion> {
    return this.call({ operation: "deletion.get", params: { deletion_id: deletionId } }, options);
  }

  /** The deletion job once it is COMPLETED or FAILED, or as it stands at the timeout. */
  async waitForDeletion(
    deletionId: string,
    options: CallOptions & { waitMs?: number; intervalMs?: number } = {},
  ): Promise<Deletion> {
    const { waitMs = 60_000, intervalMs = 250, ...call } = options;
    const deadline = Date.now() + waitMs;
    for (;;) {
      const job = await this.deletionStatus(deletionId, call);
      if (FINAL_DELETION_STATES.has(job.status) || Date.now() >= deadline) return job;
      await sleep(intervalMs, call.signal);
    }
  }

  // ---------------------------------------------------------------- session memory

  /** Append a message; a body without `request_id` gets a new one. */
  appendMessage(subjectId: string, sessionId: string, body: AppendMessage, options?: CallOptions): Promise<Session> {
    return this.call(
      {
        operation: "session.append",
        params: { subject_id: subjectId, session_id: sessionId },
        body: withRequestId(body),
      },
      options,
    );
  }

  readSession(subjectId: string, sessionId: string, options?: CallOptions): Promise<Session> {
    return this.call({ operation: "session.get", params: { subject_id: subjectId, session_id: sessionId } }, options);
  }

  putSummary(subjectId: string, sessionId: string, body: PutSummary, options?: CallOptions): Promise<Session> {
    return this.call(
      { operation: "session.summarize", params: { subject_id: subjectId, session_id: sessionId }, body },
      options,
    );
  }

  endSession(subjectId: string, sessionId: string, options?: CallOptions): Promise<SessionEnded> {
    return this.call(
      { operation: "session.end", params: { subject_id: subjectId, session_id: sessionId }, idempotent: false },
      options,
    );
  }

  // --------------------------------------------------------------------- run state

  /** Create a run; the same payload again answers the run (safe to repeat). */
  createRun(runId: string, body: CreateRun, options?: CallOptions): Promise<Checkpoint> {
    return this.call({ operation: "run.create", params: { run_id: runId }, body }, options);
  }

  getRun(runId: string, options: CallOptions & { subjectId?: string } = {}): Promise<Checkpoint> {
    const { subjectId, ...call } = options;
    return this.call({ operation: "run.get", params: { run_id: runId }, query: { subject_id: subjectId } }, call);
  }

  /** One past checkpoint (version `version`), exactly as it was written. */
  getRunVersion(runId: string, version: number, options: CallOptions & { subjectId?: string } = {}): Promise<Checkpoint> {
    const { subjectId, ...call } = options;
    return this.call(
      { operation: "run.version", params: { run_id: runId, version }, query: { subject_id: subjectId } },
      call,
    );
  }

  /** A checkpoint by compare-and-set on `expected_version`; {@link VersionConflict} when stale. */
  advanceRun(runId: string, body: Advance, options: CallOptions & { subjectId?: string } = {}): Promise<Checkpoint> {
    const { subjectId, ...call } = options;
    return this.call(
      {
        operation: "run.advance",
        params: { run_id: runId },
        query: { subject_id: subjectId },
        body,
        idempotent: false,
      },
      call,
    );
  }

  recordOperation(
    runId: string,
    operationId: string,
    body: RecordOperation,
    options: CallOptions & { subjectId?: string } = {},
  ): Promise<Operation> {
    const { subjectId, ...call } = options;
    return this.call(
      {
        operation: "run.operation",
        params: { run_id: runId, operation_id: operationId },
        query: { subject_id: subjectId },
        body,
      },
      call,
    );
  }

  /** Deliver an event; its `event_id` makes a duplicate change nothing. */
  deliverEvent(runId: string, body: RunEventIn, options: CallOptions & { subjectId?: string } = {}): Promise<EventReceipt> {
    const { subjectId, ...call } = options;
    return this.call(
      { operation: "run.event", params: { run_id: runId }, query: { subject_id: subjectId }, body },
      call,
    );
  }

  /** One page of the run's event receipts; see {@link iterRunEvents}. */
  listRunEvents(
    runId: string,
    query: ListRunEventsQuery = {},
    options?: CallOptions,
  ): Promise<RunEventList> {
    return this.call({ operation: "run.events", params: { run_id: runId }, query }, options);
  }

  /** Every event receipt of the run, page after page. */
  async *iterRunEvents(
    runId: string,
    filters: { subjectId?: string; pageSize?: number } = {},
    options?: CallOptions,
  ): AsyncGenerator<RunEvent, void, undefined> {
    let next: string | null | undefined = undefined;
    do {
      const page: RunEventList = await this.listRunEvents(
        runId,
        { subject_id: filters.subjectId, limit: filters.pageSize ?? 50, next_token: next ?? undefined },
        options,
      );
      yield* page.items;
      next = page.next_token;
    } while (next);
  }

  // ---------------------------------------------------------------- working memory

  assembleContext(subjectId: string, body: ContextRequest, options?: CallOptions): Promise<AssembledContext> {
    return this.call({ operation: "context.assemble", params: { subject_id: subjectId }, body }, options);
  }

  reproduceContext(subjectId: string, manifest: Manifest, options?: CallOptions): Promise<AssembledContext> {
    return this.call({ operation: "context.reproduce", params: { subject_id: subjectId }, body: manifest }, options);
  }

  // --------------------------------------------------------------------- artifacts

  /** Stage an upload; a body without `request_id` gets a new one. */
  startUpload(subjectId: string, body: StartUpload, options?: CallOptions): Promise<Artifact> {
    return this.call(
      { operation: "artifact.start", params: { subject_id: subjectId }, body: withRequestId(body) },
      options,
    );
  }

  commitUpload(subjectId: string, artifactId: string, options?: CallOptions): Promise<Artifact> {
    return this.call(
      { operation: "artifact.commit", params: { subject_id: subjectId, artifact_id: artifactId } },
      options,
    );
  }

  getArtifact(subjectId: string, artifactId: string, options?: CallOptions): Promise<Artifact> {
    return this.call({ operation: "artifact.get", params: { subject_id: subjectId, artifact_id: artifactId } }, options);
  }

  deleteArtifact(subjectId: string, artifactId: string, options?: CallOptions): Promise<Deletion> {
    return this.call(
      { operation: "artifact.delete", params: { subject_id: subjectId, artifact_id: artifactId }, idempotent: false },
      options,
    );
  }

  /** Start, PUT the bytes to the presigned URL with its headers (never the token), commit. */
  async uploadArtifact(
    subjectId: string,
    data: Uint8Array | string,
    upload: {
      mediaType: string;
      name?: string;
      retentionDays?: number;
      sensitivity?: Sensitivity;
      requestId?: string;
    },
    options: CallOptions = {},
  ): Promise<Artifact> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const body: StartUpload = {
      media_type: upload.mediaType,
      size_bytes: bytes.byteLength,
      sha256: await sha256Hex(bytes),
    };
    if (upload.name !== undefined) body.name = upload.name;
    if (upload.retentionDays !== undefined) body.retention_days = upload.retentionDays;
    if (upload.sensitivity !== undefined) body.sensitivity = upload.sensitivity;
    if (upload.requestId !== undefined) body.request_id = upload.requestId;
    const started = await this.startUpload(subjectId, body, options);
    if (!started.upload) return started; // a replay of a committed upload
    await this.object("PUT", started.upload.url, options, started.upload.headers, bytes);
    return this.commitUpload(subjectId, started.artifact_id, options);
  }

  /** The committed bytes, through the short-lived download URL. */
  async downloadArtifact(subjectId: string, artifactId: string, options: CallOptions = {}): Promise<Uint8Array> {
    const artifact = await this.getArtifact(subjectId, artifactId, options);
    if (!artifact.download) {
      throw new ArtifactNotCommitted(`the artifact is ${artifact.state}, not committed`);
    }
    return this.object("GET", artifact.download.url, options);
  }

  private async object(
    method: "GET" | "PUT",
    url: string,
    options: CallOptions,
    headers: Record<string, string> = {},
    body?: Uint8Array,
  ): Promise<Uint8Array> {
    const signal = options.signal
      ? anySignal([options.signal, AbortSignal.timeout(options.timeoutMs ?? this.timeoutMs)])
      : AbortSignal.timeout(options.timeoutMs ?? this.timeoutMs);
    let response: Response;
    try {
      response = await this.fetchImpl(url, { method, headers, body: body as BodyInit | undefined, signal });
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      throw new ConnectionFailed(`the ${method === "PUT" ? "upload" : "download"} got no answer`, { cause: error });
    }
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (!response.ok) {
      throw new MemvaultError(`the object store answered ${response.status}`, {
        code: method === "PUT" ? "upload_failed" : "download_failed",
        status: response.status,
      });
    }
    return bytes;
  }

  // ------------------------------------------------------------------------ health

  health(options?: CallOptions): Promise<Health> {
    return this.call({ operation: "health" }, options);
  }
}

function errorKind(error: unknown): string {
  if (error && typeof error === "object") {
    const cause = (error as { cause?: { code?: unknown } }).cause;
    if (cause && typeof cause.code === "string") return cause.code; // undici: ECONNREFUSED, ...
    const name = (error as { name?: unknown }).name;
    if (typeof name === "string") return name;
  }
  return "error";
}

function anySignal(signals: AbortSignal[]): AbortSignal {
  const controller = new AbortController();
  for (const signal of signals) {
    if (signal.aborted) {
      controller.abort(signal.reason);
      break;
    }
    signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  }
  return controller.signal;
}
