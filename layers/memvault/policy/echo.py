"""Whether a name the caller chose may be repeated in an answer.

Refusals name where the problem is: a field, a scope key, a key given twice. Those names
are the caller's own bytes, and a caller may put a credential or personal data in one (a
Slack token as a scope key, a phone number as an unknown field); an answer, and every log
and proxy that keeps it, would then hold it. A name that is or holds one is shown by its
place instead."""

from __future__ import annotations

from memvault.policy.pii import find_pii
from memvault.policy.secret_views import shown_key
from memvault.policy.secrets import find_secrets


def echoable(name: str) -> bool:
    """A short plain name that holds no credential and no personal data."""
    named = [("name", name)]
    return shown_key(name, 0) == name and not find_secrets(named) and not find_pii(named)
