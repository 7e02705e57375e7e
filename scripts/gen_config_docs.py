"""Generate the parts of the docs that the code already knows, so that they cannot drift.

    python scripts/gen_config_docs.py --write   # rewrite the generated sections
    python scripts/gen_config_docs.py --check   # exit 1 when a generated section is stale

What it generates, each between a pair of marker comments
(``<!-- BEGIN GENERATED: name ... -->`` and ``<!-- END GENERATED: name -->``):

- ``docs/configuration.md``: ``settings``, one row per field of ``memvault.config.Settings``
  (field, environment variable, default, allowed values, the field's doc), and
  ``tenant-policy``, the per-tenant overrides (``TenantPolicy``);
- ``docs/api.md``: ``errors``, every error code with its HTTP status (``memvault_wire.errors``),
  and ``routes``, the route table built from the OpenAPI document the API serves at
  ``GET /v1/openapi.json`` (``memvault.api.app.openapi_json``, no server needed), with each
  route's direct-invocation operation (``memvault_wire.operations``).

A field's doc is its ``Field(description=...)`` or else the ``#:`` comment right above it
in ``config.py``; a field with neither stops the generator (document it there). Text
outside the markers is never touched. ``tests/unit/test_config_docs.py`` runs the check.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
# The checkout's own code, not whatever memvault another environment installed.
for _path in (ROOT / "local", ROOT / "wire", ROOT / "layers"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402

CONFIG_PAGE = ROOT / "docs" / "configuration.md"
API_PAGE = ROOT / "docs" / "api.md"
SCRIPT = "scripts/gen_config_docs.py"
ENV_PREFIX = "MEMVAULT_"

#: What each error code means, for the classes of ``memvault_wire.errors`` without a docstring
#: of their own (a docstring, where there is one, is used instead). A code the server gains
#: without a line here or a docstring stops the generator.
ERROR_NOTES: dict[str, str] = {
    "unauthorized": "No token, or one that is expired, badly signed, from another issuer or "
    "audience, living longer than `jwt_max_lifetime_seconds`, or with missing or malformed "
    "claims.",
    "forbidden": "The token lacks the operation's scope, is bound to another subject (and has "
    "no `subjects:any`), or may not change what it asks to (a session above its ceiling).",
    "not_found": "No such resource for this caller: also another tenant's resource, one the "
    "caller may not read, a deleted or forgotten one, and an unknown route.",
    "validation_failed": "The request does not match the contract: malformed JSON, wrong types, "
    "missing or unknown fields, out-of-range values. `details.errors` lists each problem's "
    "location, never the input's value.",
    "consent_required": "Personal data (or a long-term memory) without `consent: true`; the "
    "details name the fields, never the values.",
    "secret_detected": "A credential in a stored text field (or `sensitivity: secret`); the "
    "finding names the field and the kind, never the value.",
    "version_conflict": "A compare-and-set lost: the expected version is stale (the details "
    "carry the current one), or the subject was forgotten meanwhile (reason "
    "`subject_forgotten`).",
    "idempotency_key_reused": "A `request_id` already used with another payload, or a run "
    "event id delivered again with another type or approval id; nothing is written.",
    "payload_too_large": "A body over `max_body_bytes`, or an artifact over its size limit.",
    "session_expired": "An append to a session past its idle or absolute expiry, or of a "
    "forgotten subject.",
    "illegal_transition": "A run move the state machine does not allow, or any move of a "
    "finished run.",
    "operation_conflict": "An operation record that may not move to the status sent (`COMMITTED` "
    "and `FAILED` are final), or recorded again with another result.",
    "media_type_not_allowed": "A request body sent as another media type than "
    "`application/json`, or an artifact's media type outside the tenant's allowed list.",
    "checksum_mismatch": "An artifact commit whose stored bytes differ from the declared size "
    "or sha256; the upload is removed and nothing is committed.",
    "upload_incomplete": "An artifact commit before any object arrived.",
    "artifact_not_committed": "A memory or checkpoint naming an artifact that is not committed "
    "(or not the same subject's).",
    "artifact_referenced": "Deleting an artifact a live memory or checkpoint still references.",
    "throttled": "The store, API Gateway's throttle or the tenant's quota refused the request "
    "for now; retry (the SDK does, with backoff).",
}


# ---------------------------------------------------------------------------------------
# Formatting


def cell(text: str) -> str:
    """Text fit for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def code(value: object) -> str:
    return f"`{value}`"


def rst_to_markdown(text: str) -> str:
    """``literal`` (reStructuredText, as the code's comments write it) to `literal`."""
    return re.sub(r"``(.+?)``", r"`\1`", text)


_UNITS = (("days", 86_400), ("h", 3_600), ("min", 60))


def humane(name: str, value: object) -> str:
    """A number, with what it means for a ``*_seconds`` or ``*_bytes`` field."""
    if isinstance(value, bool) or not isinstance(value, int):
        return str(value)
    if name.endswith("_seconds") and value >= 60:
        for unit, size in _UNITS:
            if value % size == 0:
                count = value // size
                label = "day" if unit == "days" and count == 1 else unit
                return f"{value} ({count} {label})"
    if name.endswith("_bytes") and value >= 1024:
        for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
            if value % size == 0:
                return f"{value} ({value // size} {unit})"
    return str(value)


# ---------------------------------------------------------------------------------------
# Settings


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True  # noqa: UP007
    return annotation, False


def _kind(annotation: Any) -> str:
    """The value's shape, as the environment variable spells it."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(code(a) for a in args)
    if annotation is bool:
        return "`true` or `false`"
    if annotation is int:
        return "integer"
    if annotation is float:
        return "number"
    if annotation is str:
        return "text"
    if origin in (list, tuple):
        return "JSON list of text"
    if origin is dict:
        value = args[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            fields = ", ".join(value.model_fields)
            return f"JSON object: tenant → `{{{fields}}}`"
        return "JSON object: text → text"
    return str(annotation)


def _bounds(name: str, info: FieldInfo) -> list[str]:
    found: list[str] = []
    for item in info.metadata:
        if isinstance(item, Ge):
            found.append(f"≥ {humane(name, item.ge)}")
        elif isinstance(item, Gt):
            found.append(f"> {humane(name, item.gt)}")
        elif isinstance(item, Le):
            found.append(f"≤ {humane(name, item.le)}")
        elif isinstance(item, Lt):
            found.append(f"< {humane(name, item.lt)}")
        elif isinstance(item, MinLen):
            found.append(f"at least {item.min_length} long")
        elif isinstance(item, MaxLen):
            found.append(f"at most {item.max_length} long")
        elif getattr(item, "pattern", None):
            found.append(f"matching `{item.pattern}`")
    return found


def allowed(name: str, info: FieldInfo) -> str:
    annotation, optional = _unwrap_optional(info.annotation)
    if annotation is str and any(getattr(m, "pattern", None) for m in info.metadata):
        parts = ["text " + ", ".join(_bounds(name, info))]
    else:
        parts = [", ".join([_kind(annotation), *_bounds(name, info)])]
    if optional:
        parts.append("or unset")
    return "; ".join(parts)


def default(name: str, info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, str):
        return code(value) if value else '`""`'
    if isinstance(value, int | float):
        return humane(name, value)
    if isinstance(value, list | tuple | dict):
        return code(json.dumps(value if not isinstance(value, tuple) else list(value)))
    return code(value)


def comment_docs(model: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comment block right above each field, in the source of each class of
    ``model``'s hierarchy that declares fields (nearest class first)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            lines, _ = inspect.getsourcelines(cls)
        except (OSError, TypeError):
            continue
        source = textwrap.dedent("".join(lines))
        tree = ast.parse(source)
        node = tree.body[0]
        if not isinstance(node, ast.ClassDef):
            continue
        plain = [line.strip() for line in source.splitlines()]
        for statement in node.body:
            if not (
                isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
            ):
                continue
            above: list[str] = []
            index = statement.lineno - 2
            while index >= 0 and plain[index].startswith("#:"):
                above.insert(0, plain[index][2:].strip())
                index -= 1
            if above:
                docs[statement.target.id] = " ".join(above)
    return docs


def field_docs(model: type[BaseModel]) -> dict[str, str | None]:
    """Each field's doc: its ``description`` or its ``#:`` comment; ``None`` when neither."""
    comments = comment_docs(model)
    return {
        name: info.description or comments.get(name) for name, info in model.model_fields.items()
    }


def undocumented(model: type[BaseModel]) -> list[str]:
    return [name for name, doc in field_docs(model).items() if not doc]


def settings_section(model: type[BaseModel] | None = None) -> str:
    if model is None:
        from memvault.config import Settings

        model = Settings
    missing = undocumented(model)
    if missing:
        raise SystemExit(
            f"{', '.join(missing)}: no description and no `#:` comment in config.py; "
            "document each field where it is declared, then run this again"
        )
    docs = field_docs(model)
    rows = [
        "| field | environment variable | default | allowed values | what it does |",
        "|---|---|---|---|---|",
    ]
    for name, info in model.model_fields.items():
        doc = rst_to_markdown(docs[name] or "")
        rows.append(
            "| "
            + " | ".join(
                cell(part)
                for part in (
                    code(name),
                    code(ENV_PREFIX + name.upper()),
                    default(name, info),
                    allowed(name, info),
                    doc,
                )
            )
            + " |"
        )
    return "\n".join(rows)


def tenant_policy_section() -> str:
    from memvault.config import Settings, TenantPolicy

    rows = [
        "| key | overrides (the deployment's default) | allowed values |",
        "|---|---|---|",
    ]
    for name, info in TenantPolicy.model_fields.items():
        base = Settings.model_fields.get(name)
        overrides = (
            f"{code(ENV_PREFIX + name.upper())}, default {default(name, base)}" if base else "—"
        )
        rows.append(f"| {code(name)} | {cell(overrides)} | {cell(allowed(name, info))} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------
# The API: errors and routes


def errors_section() -> str:
    from memvault_wire.errors import ALL_ERRORS

    rows = [
        "| code | HTTP status | class (server and SDK) | when |",
        "|---|---|---|---|",
    ]
    for error in sorted(ALL_ERRORS, key=lambda e: (e.status, e.code)):
        note = inspect.getdoc(error) if error.__doc__ else ERROR_NOTES.get(error.code)
        if not note:
            raise SystemExit(
                f"error code {error.code!r} has no docstring and no line in ERROR_NOTES "
                f"({SCRIPT}); say when it is answered"
            )
        rows.append(
            f"| {code(error.code)} | {error.status} | {code(error.__name__)} | "
            f"{cell(rst_to_markdown(note))} |"
        )
    return "\n".join(rows)


def _ref_name(schema: dict[str, Any] | None) -> str | None:
    if not schema:
        return None
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if schema.get("type") == "array" and "$ref" in schema.get("items", {}):
        return f"list of {str(schema['items']['$ref']).rsplit('/', 1)[-1]}"
    return str(schema.get("type", "")) or None


def _json_schema(part: dict[str, Any] | None) -> dict[str, Any] | None:
    if not part:
        return None
    content = part.get("content", {}).get("application/json", {})
    schema = content.get("schema")
    return schema if isinstance(schema, dict) else None


def openapi_document() -> dict[str, Any]:
    from memvault.api.app import openapi_json

    document: dict[str, Any] = json.loads(openapi_json())
    return document


def routes_section(document: dict[str, Any] | None = None) -> str:
    from memvault_wire.operations import OPERATIONS

    document = document if document is not None else openapi_document()
    by_route = {(method, path): name for name, (method, path) in OPERATIONS.items()}
    groups: dict[str, list[str]] = {}
    notes: list[str] = []
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            verb = method.upper()
            route = f"{verb} {path}"
            request: list[str] = []
            query = [p["name"] for p in op.get("parameters", []) if p.get("in") == "query"]
            if query:
                request.append("query " + ", ".join(code(q) for q in query))
            body = _ref_name(_json_schema(op.get("requestBody")))
            if body:
                request.append(f"body {code(body)}")
            if op.get("security") == []:
                request.append("no token")
            statuses = sorted(op.get("responses", {}), key=int)
            success = [s for s in statuses if int(s) < 400]
            answer = "; ".join(
                f"{s} {code(name)}" if (name := _ref_name(_json_schema(op["responses"][s]))) else s
                for s in success
            )
            errors = ", ".join(s for s in statuses if int(s) >= 400)
            operation = by_route.get((verb, path))
            row = " | ".join(
                cell(part)
                for part in (
                    code(route),
                    code(operation) if operation else "—",
                    op.get("summary", ""),
                    "; ".join(request) or "—",
                    answer,
                    errors,
                )
            )
            tag = (op.get("tags") or ["other"])[0]
            groups.setdefault(tag, []).append(f"| {row} |")
            if op.get("description"):
                notes.append(f"- {code(route)}: {' '.join(op['description'].split())}")
    out: list[str] = []
    header = (
        "| route | direct operation | what it does | request | success | errors |\n"
        "|---|---|---|---|---|---|"
    )
    for tag, rows in groups.items():
        out += [f"### {tag} routes", "", header, *rows, ""]
    if notes:
        out += ["### What the document adds to some routes", "", *notes, ""]
    return "\n".join(out).rstrip("\n")


# ---------------------------------------------------------------------------------------
# Sections in files

Renderer = Callable[[], str]

SECTIONS: dict[Path, dict[str, Renderer]] = {
    CONFIG_PAGE: {"settings": settings_section, "tenant-policy": tenant_policy_section},
    API_PAGE: {"errors": errors_section, "routes": routes_section},
}


def begin_marker(name: str) -> str:
    return f"<!-- BEGIN GENERATED: {name} (python {SCRIPT} --write; do not edit by hand) -->"


def end_marker(name: str) -> str:
    return f"<!-- END GENERATED: {name} -->"


def replace_section(text: str, name: str, body: str) -> str:
    pattern = re.compile(
        re.escape(f"<!-- BEGIN GENERATED: {name} ") + r".*?-->\n.*?" + re.escape(end_marker(name)),
        re.DOTALL,
    )
    matches = pattern.findall(text)
    if len(matches) != 1:
        raise SystemExit(f"expected one generated section {name!r}, found {len(matches)}")
    block = f"{begin_marker(name)}\n{body}\n{end_marker(name)}"
    return pattern.sub(lambda _: block, text)


def rendered(path: Path, renderers: dict[str, Renderer] | None = None) -> str:
    """The file as it should be: its text with every generated section rendered afresh."""
    text = path.read_text(encoding="utf-8")
    for name, render in (renderers or SECTIONS[path]).items():
        text = replace_section(text, name, render())
    return text


def stale(paths: Iterable[Path] | None = None) -> list[Path]:
    """The files whose generated sections differ from what the code renders now."""
    files = SECTIONS if paths is None else paths
    return [p for p in files if rendered(p) != p.read_text(encoding="utf-8")]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the generated sections")
    mode.add_argument("--check", action="store_true", help="exit 1 if any is stale")
    args = parser.parse_args(argv)
    if args.write:
        for path in SECTIONS:
            fresh = rendered(path)
            if fresh != path.read_text(encoding="utf-8"):
                path.write_text(fresh, encoding="utf-8")
                print(f"wrote {_shown(path)}")
        return 0
    behind = stale()
    for path in behind:
        print(
            f"{_shown(path)}: generated sections are stale; run python {SCRIPT} --write",
            file=sys.stderr,
        )
    return 1 if behind else 0


if __name__ == "__main__":
    sys.exit(main())
