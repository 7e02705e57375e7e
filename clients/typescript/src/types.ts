/**
 * The API's request and answer types, by name, from the generated OpenAPI types
 * (`./generated/openapi.ts`). Request bodies leave out what has a server-side default,
 * and a write's `request_id` (the SDK makes one, kept on every retry).
 */
import type { components, defaulted, paths } from "./generated/openapi.js";

export type { components, paths, operations } from "./generated/openapi.js";

type Schemas = components["schemas"];
/** One schema of the API by name, as the server answers it. */
export type Schema<N extends keyof Schemas> = Schemas[N];

/** A request body: the schema with its defaulted properties optional. */
export type Input<N extends keyof Schemas> = N extends keyof defaulted
  ? Omit<Schemas[N], defaulted[N] & keyof Schemas[N]> & Partial<Pick<Schemas[N], defaulted[N] & keyof Schemas[N]>>
  : Schemas[N];

/** A write body whose `request_id` the SDK fills in when absent. */
export type WithRequestId<T> = T extends { request_id: string }
  ? Omit<T, "request_id"> & { request_id?: string }
  : T;

type Method = "get" | "put" | "post" | "patch" | "delete";
/** The query parameters of a route (from the generated `paths`). */
export type QueryOf<P extends keyof paths, M extends Method> = paths[P][M] extends {
  parameters: { query?: infer Q };
}
  ? NonNullable<Q>
  : never;

// ------------------------------------------------------------------ answers
export type Memory = Schemas["MemoryOut"];
export type MemoryList = Schemas["MemoryListOut"];
export type MemoryBatch = Schemas["MemoryBatchOut"];
export type MemoryBatchItem = Schemas["BatchItemOut"];
export type History = Schemas["HistoryOut"];
export type Deletion = Schemas["DeletionOut"];
export type Export = Schemas["ExportOut"];
export type Recalled = Schemas["RecallOut"];
export type RecalledItem = Schemas["RecalledItemOut"];
export type RecallTrace = Schemas["RecallTraceOut"];
export type MemoryTrace = Schemas["MemoryTraceOut"];
export type Feedback = Schemas["FeedbackOut"];
export type FeedbackList = Schemas["FeedbackListOut"];
export type Session = Schemas["Session"];
export type SessionEnded = Schemas["SessionEnded"];
export type Checkpoint = Schemas["Checkpoint"];
export type Operation = Schemas["Operation"];
export type EventReceipt = Schemas["EventOut"];
export type RunEvent = Schemas["RunEventOut"];
export type RunEventList = Schemas["RunEventListOut"];
export type AssembledContext = Schemas["AssembledContext"];
export type Manifest = Schemas["Manifest"];
export type Artifact = Schemas["ArtifactOut"];
export type Health = Schemas["HealthOut"];

// ------------------------------------------------------------------ enums
export type MemoryKind = Schemas["MemoryKind"];
export type MemoryStatus = Schemas["MemoryStatus"];
export type Sensitivity = Schemas["Sensitivity"];
export type SourceType = Schemas["SourceType"];
export type RunStatus = Schemas["RunStatus"];
export type DeletionState = Schemas["DeletionState"];

// ------------------------------------------------------------------ request bodies
export type MemoryWrite = WithRequestId<Input<"MemoryWrite">>;
export type MemoryPatch = Input<"MemoryPatch">;
export type RecallRequest = Input<"RecallRequest">;
export type FeedbackRequest = Input<"FeedbackRequest">;
export type AppendMessage = WithRequestId<Input<"AppendMessage">>;
export type PutSummary = Input<"PutSummary">;
export type CreateRun = Input<"CreateRun">;
export type Advance = Input<"Advance">;
export type RecordOperation = Input<"RecordOperation">;
export type RunEventIn = Input<"RunEvent">;
export type ContextRequest = Input<"ContextRequest">;
export type StartUpload = WithRequestId<Input<"StartUpload">>;

// ------------------------------------------------------------------ query parameters
export type ListMemoriesQuery = QueryOf<"/v1/subjects/{subject_id}/memories", "get">;
export type ListRunEventsQuery = QueryOf<"/v1/runs/{run_id}/events", "get">;
