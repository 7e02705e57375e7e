"""``/v1/subjects/{subject_id}/sessions/{session_id}``: session memory."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault.api.access import caller
from memvault.api.deps import deps
from memvault.api.errors import documented
from memvault.api.routes.params import SessionPath, SubjectPath
from memvault_wire.schemas import SessionEnded
from memvault_wire.session import AppendMessage, PutSummary, Session

router = APIGatewayRouter()
BASE = "/v1/subjects/<subject_id>/sessions/<session_id>"
TAGS = ["sessions"]


@router.post(
    f"{BASE}/messages",
    status_code=201,
    summary="Append a message; renews the idle expiry (scope sessions:write)",
    description="Refused with 410 session_expired after the idle or absolute lifetime. A replay "
    "of the same request_id returns the session with the header Idempotent-Replay: true. A "
    "token with an agent_role appends assistant and tool messages only: role user (the "
    "subject's own words) needs a token without one, role system the tenant's service "
    "(403 provenance_not_allowed otherwise).",
    responses=documented(201, Session, 403, 409, 410),
    tags=TAGS,
)
def append_message(
    subject_id: SubjectPath, session_id: SessionPath, body: AppendMessage
) -> Response[Session]:
    session, created = deps.services_for(router.current_event).sessions.append(
        caller(router.current_event), subject_id, session_id, body
    )
    return Response(
        status_code=201,
        content_type="application/json",
        body=session,
        headers={"Idempotent-Replay": "false" if created else "true"},
    )


@router.get(
    BASE,
    summary="Recent messages and summary; reading never renews the session "
    "(scope sessions:write or memory:read)",
    responses=documented(200, Session, 403, 404),
    tags=TAGS,
)
def read_session(subject_id: SubjectPath, session_id: SessionPath) -> Session:
    return deps.services_for(router.current_event).sessions.read(
        caller(router.current_event), subject_id, session_id
    )


@router.put(
    f"{BASE}/summary",
    summary="Keep a summary of a message range; it dies with the session (scope sessions:write)",
    responses=documented(200, Session, 403, 404),
    tags=TAGS,
)
def put_summary(subject_id: SubjectPath, session_id: SessionPath, body: PutSummary) -> Session:
    return deps.services_for(router.current_event).sessions.put_summary(
        caller(router.current_event), subject_id, session_id, body
    )


@router.delete(
    BASE,
    summary="End the session: deleted at once (scope sessions:write)",
    responses=documented(200, SessionEnded, 403, 404),
    tags=TAGS,
)
def end_session(subject_id: SubjectPath, session_id: SessionPath) -> SessionEnded:
    removed = deps.services_for(router.current_event).sessions.end(
        caller(router.current_event), subject_id, session_id
    )
    return SessionEnded(session_id=session_id, deleted_items=removed)
