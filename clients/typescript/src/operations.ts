/**
 * Every API operation by name: its method and path template. The same table as the
 * server's (`memvault_wire.operations`, the routes of docs/api.md), so the names match the Python
 * SDK and the direct function's. A test checks it against the served OpenAPI document.
 */
export const OPERATIONS = {
  "memory.write": ["POST", "/v1/subjects/{subject_id}/memories"],
  "memory.write_batch": ["POST", "/v1/subjects/{subject_id}/memories/batch"],
  "memory.list": ["GET", "/v1/subjects/{subject_id}/memories"],
  "memory.get": ["GET", "/v1/subjects/{subject_id}/memories/{memory_id}"],
  "memory.correct": ["PATCH", "/v1/subjects/{subject_id}/memories/{memory_id}"],
  "memory.history": ["GET", "/v1/subjects/{subject_id}/memories/{memory_id}/history"],
  "memory.delete": ["DELETE", "/v1/subjects/{subject_id}/memories/{memory_id}"],
  "memory.recall": ["POST", "/v1/subjects/{subject_id}/recall"],
  "memory.trace": ["GET", "/v1/subjects/{subject_id}/memories/{memory_id}/trace"],
  "recall.get": ["GET", "/v1/recalls/{recall_id}"],
  "feedback.give": ["POST", "/v1/subjects/{subject_id}/feedback"],
  "feedback.list": ["GET", "/v1/subjects/{subject_id}/feedback"],
  "subject.forget": ["DELETE", "/v1/subjects/{subject_id}/memories"],
  "subject.export": ["GET", "/v1/subjects/{subject_id}/export"],
  "deletion.get": ["GET", "/v1/deletions/{deletion_id}"],
  "session.append": ["POST", "/v1/subjects/{subject_id}/sessions/{session_id}/messages"],
  "session.get": ["GET", "/v1/subjects/{subject_id}/sessions/{session_id}"],
  "session.summarize": ["PUT", "/v1/subjects/{subject_id}/sessions/{session_id}/summary"],
  "session.end": ["DELETE", "/v1/subjects/{subject_id}/sessions/{session_id}"],
  "run.create": ["PUT", "/v1/runs/{run_id}"],
  "run.get": ["GET", "/v1/runs/{run_id}"],
  "run.version": ["GET", "/v1/runs/{run_id}/versions/{version}"],
  "run.advance": ["POST", "/v1/runs/{run_id}/checkpoints"],
  "run.operation": ["PUT", "/v1/runs/{run_id}/operations/{operation_id}"],
  "run.event": ["POST", "/v1/runs/{run_id}/events"],
  "run.events": ["GET", "/v1/runs/{run_id}/events"],
  "context.assemble": ["POST", "/v1/subjects/{subject_id}/context"],
  "context.reproduce": ["POST", "/v1/subjects/{subject_id}/context/reproduce"],
  "artifact.start": ["POST", "/v1/subjects/{subject_id}/artifacts"],
  "artifact.commit": ["POST", "/v1/subjects/{subject_id}/artifacts/{artifact_id}/commit"],
  "artifact.get": ["GET", "/v1/subjects/{subject_id}/artifacts/{artifact_id}"],
  "artifact.delete": ["DELETE", "/v1/subjects/{subject_id}/artifacts/{artifact_id}"],
  health: ["GET", "/v1/health"],
} as const satisfies Record<string, readonly [string, string]>;

export type OperationName = keyof typeof OPERATIONS;

/** The path of `operation` with `params` filled in (each percent-encoded). */
export function pathOf(operation: OperationName, params: Record<string, string | number> = {}): string {
  const template: string = OPERATIONS[operation][1];
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined || value === "") {
      throw new TypeError(`${operation}: the path parameter ${name} is missing`);
    }
    return encodeURIComponent(String(value));
  });
}
