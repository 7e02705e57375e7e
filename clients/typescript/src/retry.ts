/** When to try a request again, and how long to wait first. */

/** Answers that mean "not now": the server did nothing and asks to be asked again. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503]);
/**
 * A gateway's "I lost the answer" (502, 504 `gateway_timeout`): the request may have been
 * done, so like a connection error it is repeated only when repeating is safe.
 */
export const GATEWAY_STATUSES: ReadonlySet<number> = new Set([502, 504]);

export interface RetryOptions {
  /** Attempts in all, the first included (1 never retries). Default 4. */
  maxAttempts?: number;
  /** The backoff's base in milliseconds. Default 250. */
  baseDelayMs?: number;
  /** The backoff's ceiling in milliseconds. Default 8000. */
  maxDelayMs?: number;
  /** A `Retry-After` longer than this (ms) is not waited: the error is thrown. Default 60000. */
  maxRetryAfterMs?: number;
  /** Statuses always retried. Default 429 and 503. */
  retryStatuses?: Iterable<number>;
  /** Statuses retried when the request is idempotent. Default 502 and 504. */
  gatewayStatuses?: Iterable<number>;
  /** The random source for the jitter, in [0, 1). Default `Math.random`. */
  random?: () => number;
}

/**
 * Bounded retries with exponential backoff and full jitter, as the Python SDK's
 * `RetryPolicy`: a request is tried at most `maxAttempts` times. It is tried again after
 * a 429 or 503 answer, waiting what `Retry-After` asks when the answer has one (a wait
 * longer than `maxRetryAfterMs` is not waited: the error is thrown with `retryAfter`
 * set), else a random time in [0, min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1))].
 * A request that got no answer at all (connection refused or reset, attempt timed out)
 * is tried again only if repeating it cannot do something twice; so is one a gateway
 * answered 502 or 504 (it may have reached the API). Any other error answer is thrown
 * at once.
 */
export class RetryPolicy {
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  readonly maxRetryAfterMs: number;
  readonly retryStatuses: ReadonlySet<number>;
  readonly gatewayStatuses: ReadonlySet<number>;
  private readonly random: () => number;

  constructor(options: RetryOptions = {}) {
    this.maxAttempts = options.maxAttempts ?? 4;
    this.baseDelayMs = options.baseDelayMs ?? 250;
    this.maxDelayMs = options.maxDelayMs ?? 8000;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
    this.retryStatuses = new Set(options.retryStatuses ?? RETRY_STATUSES);
    this.gatewayStatuses = new Set(options.gatewayStatuses ?? GATEWAY_STATUSES);
    this.random = options.random ?? Math.random;
    if (!Number.isInteger(this.maxAttempts) || this.maxAttempts < 1) {
      throw new RangeError("maxAttempts must be an integer of at least 1");
    }
    if (this.baseDelayMs < 0 || this.maxDelayMs < 0 || this.maxRetryAfterMs < 0) {
      throw new RangeError("delays must not be negative");
    }
  }

  /** Full jitter: uniform in [0, min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1))]. */
  backoffMs(attempt: number): number {
    const ceiling = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** Math.max(0, attempt - 1));
    return this.random() * ceiling;
  }

  /** Milliseconds to wait after attempt `attempt` got an error answer; undefined: throw. */
  afterAnswer(
    attempt: number,
    status: number,
    retryAfterSeconds: number | undefined,
    idempotent = true,
  ): number | undefined {
    if (attempt >= this.maxAttempts) return undefined;
    if (this.gatewayStatuses.has(status)) return idempotent ? this.backoffMs(attempt) : undefined;
    if (!this.retryStatuses.has(status)) return undefined;
    if (retryAfterSeconds !== undefined) {
      const ms = retryAfterSeconds * 1000;
      return ms <= this.maxRetryAfterMs ? ms : undefined;
    }
    return this.backoffMs(attempt);
  }

  /** Milliseconds to wait after attempt `attempt` got no answer; undefined: throw. */
  afterNoAnswer(attempt: number, idempotent: boolean): number | undefined {
    if (!idempotent || attempt >= this.maxAttempts) return undefined;
    return this.backoffMs(attempt);
  }
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
