"""Secret detection with detect-secrets' pattern and keyword plugins.

Entropy plugins are off: prose and ids trip them constantly. ``IPPublicDetector`` is
off too: an address is not a credential. Findings carry the secret's *type* and the
field it was found in, never the secret itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.core.scan import scan_line
from detect_secrets.settings import cache_bust, configure_settings_from_baseline, get_plugins

_DISABLED = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
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
    classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
    names = sorted(cls.__name__ for cls in classes)
    return tuple({"name": name} for name in names if name not in _DISABLED)


def find_secrets(fields: Iterable[tuple[str, str]]) -> list[SecretFinding]:
    """Scan each ``(field name, text)`` line by line; return one finding per type and field."""
    findings: list[SecretFinding] = []
    seen: set[tuple[str, str]] = set()
    # No filters: detect-secrets' heuristics exist to cut noise in source code,
    # and here a false negative stores a credential.
    _configure()
    for field, text in fields:
        for line in text.splitlines() or [text]:
            for secret in scan_line(line):
                key = (field, str(secret.type))
                if key not in seen:
                    seen.add(key)
                    findings.append(SecretFinding(field=field, secret_type=str(secret.type)))
    return findings
