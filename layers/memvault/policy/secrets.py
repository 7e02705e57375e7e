"""Secret detection: detect-secrets' pattern and keyword plugins, and memvault's own
patterns for prose, unquoted assignments and token formats it lacks
(``secret_patterns``), all run on normalised text (NFKC, no zero-width characters).

Entropy plugins are off: prose and ids trip them constantly. ``IPPublicDetector`` is
off too: an address is not a credential. Findings carry the secret's *type* and the
field it was found in, never the secret itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memvault.errors import SecretDetected
from memvault.policy.secret_patterns import matches, normalise

_DISABLED = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
#: The file name detect-secrets' own ad hoc scan (``scan_line``) reports; the keyword
#: plugin chooses its patterns by it (no extension: quotes required around the value).
_ADHOC = "adhoc-string-scan"
#: detect-secrets keeps its settings (the plugins a scan uses) in one process-wide global.
#: Swapping them per scan (``transient_settings``) costs milliseconds and races: two
#: threads scanning at once see each other's restore, and a scan can run with no plugin at
#: all (a missed credential). memvault is the only user of detect-secrets in its process,
#: so the settings are configured once, under this lock, and never swapped again.
_SETTINGS_LOCK = threading.Lock()
_configured = threading.Event()


def _configure() -> None:
    if _configured.is_set():
        return
    with _SETTINGS_LOCK:
        if _configured.is_set():
            return
        # detect-secrets (with requests, which it imports) loads on the first scan, not
        # with this module: the services import it, and most of their callers never scan.
        # Under the lock: its plugin modules import one another, and threads importing
        # them at once can see a module half initialised (an ImportError, a 500).
        import detect_secrets.util.code_snippet  # noqa: F401 (loaded here, used below)
        from detect_secrets.settings import (
            cache_bust,
            configure_settings_from_baseline,
            get_plugins,
        )

        cache_bust()
        configure_settings_from_baseline({"plugins_used": list(_plugins()), "filters_used": []})
        get_plugins()  # build the plugin cache before any scan reads it
        _configured.set()


@dataclass(frozen=True)
class SecretFinding:
    field: str
    secret_type: str


@lru_cache(maxsize=1)
def _plugins() -> tuple[dict[str, str], ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
    names = sorted(cls.__name__ for cls in classes)
    return tuple({"name": name} for name in names if name not in _DISABLED)


def _types_in(line: str) -> Iterator[str]:
    """The secret types the plugins find in one line.

    What detect-secrets' ``scan_line`` does, less its per-call costs: it re-reads every
    plugin's signature to inject arguments and clears a global filter cache on every line
    (about 2 ms per memory). Its filters are not used here (see ``find_secrets``), and the
    plugins kept take exactly these arguments.
    """
    from detect_secrets.settings import get_plugins
    from detect_secrets.util.code_snippet import get_code_snippet

    context = get_code_snippet(lines=[line], line_number=1)
    for plugin in get_plugins():
        for secret in plugin.analyze_line(
            filename=_ADHOC, line=line, line_number=0, context=context
        ):
            yield str(secret.type)


def find_secrets(fields: Iterable[tuple[str, str]]) -> list[SecretFinding]:
    """Scan each ``(field name, text)`` line by line; return one finding per type and field."""
    findings: list[SecretFinding] = []
    seen: set[tuple[str, str]] = set()
    # No filters: detect-secrets' heuristics exist to cut noise in source code,
    # and here a false negative stores a credential.
    _configure()
    for field, text in fields:
        for line in normalise(text).splitlines() or [text]:
            for secret_type in (*_types_in(line), *matches(line)):
                key = (field, secret_type)
                if key not in seen:
                    seen.add(key)
                    findings.append(SecretFinding(field=field, secret_type=secret_type))
    return findings


def text_fields(value: Any, path: str) -> list[tuple[str, str]]:
    """Every string of a JSON-like value, keys included, named by where it sits
    (``state.notes[2]``): what a run's state or budget stores."""
    out: list[tuple[str, str]] = []
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            out.append((f"{path} (key)", str(key)))
            out += text_fields(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            out += text_fields(item, f"{path}[{i}]")
    return out


def refuse_secrets(fields: Iterable[tuple[str, str | None]], what: str) -> None:
    """Raise ``secret_detected`` naming the fields (never the value) when any holds a
    credential; ``what`` says what is being written ("the checkpoint")."""
    findings = find_secrets((name, text) for name, text in fields if text)
    if findings:
        raise SecretDetected(
            f"{what} contains what looks like a credential; it is not kept. Remove it "
            "(store a reference to a secret manager instead) and send it again",
            {"findings": [{"field": f.field, "type": f.secret_type} for f in findings]},
        )
