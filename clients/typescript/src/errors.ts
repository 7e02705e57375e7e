/**
 * The SDK's errors: one class per error code of the API contract (docs/api.md).
 *
 * Every error is a {@link MemvaultError} carrying `code`, `message`, `details` and
 * `status` (the HTTP status; undefined when no answer came), and `retryAfter` (seconds)
 * when the answer had a `Retry-After` header. {@link errorFromAnswer} turns an error
 * answer into the class of its code; a code this module does not know is a plain
 * `MemvaultError` with that code.
 */

export type ErrorDetails = Record<string, unknown>;

export interface MemvaultErrorOptions {
  code?: string;
  status?: number;
  details?: ErrorDetails;
  retryAfter?: number;
  cause?: unknown;
}

export class MemvaultError extends Error {
  static readonly CODE: string | undefined = undefined;
  static readonly STATUS: number | undefined = undefined;

  /** The API's error code (`not_found`, `version_conflict`, ...). */
  readonly code: string;
  /** The HTTP status; undefined when the request got no answer. */
  readonly status: number | undefined;
  /** The error body's `details`: never memory content. */
  readonly details: ErrorDetails;
  /** Seconds a `Retry-After` header asked for. */
  readonly retryAfter: number | undefined;

  constructor(message: string, options: MemvaultErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const own = this.constructor as typeof MemvaultError;
    this.name = own.name;
    this.code = options.code ?? own.CODE ?? "unknown";
    this.status = options.status ?? own.STATUS;
    this.details = { ...(options.details ?? {}) };
    this.retryAfter = options.retryAfter;
  }

  /** The error as the API writes it. */
  toBody(): { error: { code: string; message: string; details: ErrorDetails } } {
    return { error: { code: this.code, message: this.message, details: this.details } };
  }
}

export class Unauthorized extends MemvaultError {
  static override readonly CODE = "unauthorized";
  static override readonly STATUS = 401;
}
export class Forbidden extends MemvaultError {
  static override readonly CODE: string = "forbidden";
  static override readonly STATUS = 403;
}
export class ProvenanceNotAllowed extends MemvaultError {
  static override readonly CODE = "provenance_not_allowed";
  static override readonly STATUS = 403;
}
export class NotFound extends MemvaultError {
  static override readonly CODE = "not_found";
  static override readonly STATUS = 404;
}
export class ValidationFailed extends MemvaultError {
  static override readonly CODE = "validation_failed";
  static override readonly STATUS = 422;
}
export class ConsentRequired extends MemvaultError {
  static override readonly CODE = "consent_required";
  static override readonly STATUS = 422;
}
export class SecretDetected extends MemvaultError {
  static override readonly CODE = "secret_detected";
  static override readonly STATUS = 422;
}

/**
 * A compare-and-set lost: the memory (or run) changed since it was read. Re-read it and
 * decide; `currentVersion` is the version it is at now, when the server said.
 */
export class VersionConflict extends MemvaultError {
  static override readonly CODE: string = "version_conflict";
  static override readonly STATUS = 409;

  /** The version the caller expected. */
  get expectedVersion(): number | undefined {
    const v = this.details["expected_version"];
    return typeof v === "number" ? v : undefined;
  }

  /**
   * The current version: a memory conflict's `details.current_version`, or the version
   * of a run conflict's `details.current` checkpoint.
   */
  get currentVersion(): number | undefined {
    const v = this.details["current_version"];
    if (typeof v === "number") return v;
    const current = this.details["current"];
    if (current && typeof current === "object") {
      const version = (current as Record<string, unknown>)["version"];
      if (typeof version === "number") return version;
    }
    return undefined;
  }

  /** A memory conflict's `details.current_memory_id`: the id of the current version. */
  get currentMemoryId(): string | undefined {
    const v = this.details["current_memory_id"];
    return typeof v === "string" ? v : undefined;
  }
}
export class FactNotWritable extends MemvaultError {
  static override readonly CODE = "fact_not_writable";
  static override readonly STATUS = 409;
}
export class IdempotencyKeyReused extends MemvaultError {
  static override readonly CODE = "idempotency_key_reused";
  static override readonly STATUS = 409;
}
export class PayloadTooLarge extends MemvaultError {
  static override readonly CODE = "payload_too_large";
  static override readonly STATUS = 413;
}
export class SessionExpired extends MemvaultError {
  static override readonly CODE = "session_expired";
  static override readonly STATUS = 410;
}
export class IllegalTransition extends MemvaultError {
  static override readonly CODE = "illegal_transition";
  static override readonly STATUS = 422;
}
export class OperationConflict extends MemvaultError {
  static override readonly CODE = "operation_conflict";
  static override readonly STATUS = 409;
}
export class MediaTypeNotAllowed extends MemvaultError {
  static override readonly CODE = "media_type_not_allowed";
  static override readonly STATUS = 415;
}
export class ChecksumMismatch extends MemvaultError {
  static override readonly CODE = "checksum_mismatch";
  static override readonly STATUS = 422;
}
export class UploadIncomplete extends MemvaultError {
  static override readonly CODE = "upload_incomplete";
  static override readonly STATUS = 409;
}
export class ArtifactNotCommitted extends MemvaultError {
  static override readonly CODE = "artifact_not_committed";
  static override readonly STATUS = 422;
}
export class ArtifactReferenced extends MemvaultError {
  static override readonly CODE = "artifact_referenced";
  static override readonly STATUS = 409;
}
export class Throttled extends MemvaultError {
  static override readonly CODE = "throttled";
  static override readonly STATUS = 429;
}
export class SearchUnavailable extends MemvaultError {
  static override readonly CODE = "search_unavailable";
  static override readonly STATUS = 503;
}
export class InternalError extends MemvaultError {
  static override readonly CODE = "internal";
  static override readonly STATUS = 500;
}

/** API Gateway's timeout: the request may or may not have been done (writes are idempotent by request_id). */
export class GatewayTimeout extends MemvaultError {
  static override readonly CODE = "gateway_timeout";
  static override readonly STATUS = 504;
}

/** No answer came (refused, reset, timed out), after any retries. */
export class ConnectionFailed extends MemvaultError {
  static override readonly CODE = "connection_failed";
}

/** An answer that is not the API's (an error without its envelope, a body that is not JSON). */
export class BadResponse extends MemvaultError {
  static override readonly CODE = "bad_response";
}

type ErrorClass = new (message: string, options?: MemvaultErrorOptions) => MemvaultError;

/** Every error code of the API, with the class the SDK throws for it. */
export const ERRORS_BY_CODE: Readonly<Record<string, ErrorClass>> = Object.freeze(
  Object.fromEntries(
    [
      Unauthorized,
      Forbidden,
      ProvenanceNotAllowed,
      NotFound,
      ValidationFailed,
      ConsentRequired,
      SecretDetected,
      VersionConflict,
      FactNotWritable,
      IdempotencyKeyReused,
      PayloadTooLarge,
      SessionExpired,
      IllegalTransition,
      OperationConflict,
      MediaTypeNotAllowed,
      ChecksumMismatch,
      UploadIncomplete,
      ArtifactNotCommitted,
      ArtifactReferenced,
      Throttled,
      SearchUnavailable,
      InternalError,
      GatewayTimeout,
    ].map((cls) => [cls.CODE as string, cls as ErrorClass]),
  ),
);

/** Seconds from a `Retry-After` header: delay-seconds or an HTTP date; undefined if neither. */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value == null) return undefined;
  const text = value.trim();
  if (text === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.max(0, Number(text));
  const when = Date.parse(text);
  if (Number.isNaN(when)) return undefined;
  return Math.max(0, (when - now) / 1000);
}

/** The error for an error answer: its code's class, or the base class for an unknown code. */
export function errorFromAnswer(status: number, body: unknown, headers?: Headers): MemvaultError {
  const retryAfter = parseRetryAfter(headers?.get("retry-after"));
  const error =
    body && typeof body === "object" ? (body as Record<string, unknown>)["error"] : undefined;
  if (!error || typeof error !== "object" || typeof (error as Record<string, unknown>)["code"] !== "string") {
    return new BadResponse(`the server answered ${status} without memvault's error body`, {
      status,
      retryAfter,
    });
  }
  const e = error as Record<string, unknown>;
  const code = e["code"] as string;
  const details = e["details"];
  const Cls: ErrorClass = ERRORS_BY_CODE[code] ?? MemvaultError;
  return new Cls(String(e["message"] ?? ""), {
    code,
    status,
    details: details && typeof details === "object" && !Array.isArray(details) ? (details as ErrorDetails) : undefined,
    retryAfter,
  });
}
