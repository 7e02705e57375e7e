"""Every API operation by name: its method and path template. The direct function
(``memvault.api.direct``) takes these names in its envelope, and the SDK
(``memvault_client``) sends them, over HTTP or direct invocation: one table, so the two
cannot drift. Data only: importing it loads nothing else."""

from __future__ import annotations

OPERATIONS: dict[str, tuple[str, str]] = {
    "memory.write": ("POST", "/v1/subjects/{subject_id}/memories"),
    "memory.write_batch": ("POST", "/v1/subjects/{subject_id}/memories/batch"),
    "memory.list": ("GET", "/v1/subjects/{subject_id}/memories"),
    "memory.get": ("GET", "/v1/subjects/{subject_id}/memories/{memory_id}"),
    "memory.correct": ("PATCH", "/v1/subjects/{subject_id}/memories/{memory_id}"),
    "memory.history": ("GET", "/v1/subjects/{subject_id}/memories/{memory_id}/history"),
    "memory.delete": ("DELETE", "/v1/subjects/{subject_id}/memories/{memory_id}"),
    "memory.recall": ("POST", "/v1/subjects/{subject_id}/recall"),
    "memory.trace": ("GET", "/v1/subjects/{subject_id}/memories/{memory_id}/trace"),
    "recall.get": ("GET", "/v1/recalls/{recall_id}"),
    "feedback.give": ("POST", "/v1/subjects/{subject_id}/feedback"),
    "feedback.list": ("GET", "/v1/subjects/{subject_id}/feedback"),
    "subject.forget": ("DELETE", "/v1/subjects/{subject_id}/memories"),
    "subject.export": ("GET", "/v1/subjects/{subject_id}/export"),
    "deletion.get": ("GET", "/v1/deletions/{deletion_id}"),
    "session.append": ("POST", "/v1/subjects/{subject_id}/sessions/{session_id}/messages"),
    "session.get": ("GET", "/v1/subjects/{subject_id}/sessions/{session_id}"),
    "session.summarize": ("PUT", "/v1/subjects/{subject_id}/sessions/{session_id}/summary"),
    "session.end": ("DELETE", "/v1/subjects/{subject_id}/sessions/{session_id}"),
    "run.create": ("PUT", "/v1/runs/{run_id}"),
    "run.get": ("GET", "/v1/runs/{run_id}"),
    "run.version": ("GET", "/v1/runs/{run_id}/versions/{version}"),
    "run.advance": ("POST", "/v1/runs/{run_id}/checkpoints"),
    "run.operation": ("PUT", "/v1/runs/{run_id}/operations/{operation_id}"),
    "run.event": ("POST", "/v1/runs/{run_id}/events"),
    "run.events": ("GET", "/v1/runs/{run_id}/events"),
    "context.assemble": ("POST", "/v1/subjects/{subject_id}/context"),
    "context.reproduce": ("POST", "/v1/subjects/{subject_id}/context/reproduce"),
    "artifact.start": ("POST", "/v1/subjects/{subject_id}/artifacts"),
    "artifact.commit": ("POST", "/v1/subjects/{subject_id}/artifacts/{artifact_id}/commit"),
    "artifact.get": ("GET", "/v1/subjects/{subject_id}/artifacts/{artifact_id}"),
    "artifact.delete": ("DELETE", "/v1/subjects/{subject_id}/artifacts/{artifact_id}"),
    "health": ("GET", "/v1/health"),
}
