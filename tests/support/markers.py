"""Unique marker words for test content.

Letters only: the write policy scans every stored text for personal data, and a random
hex marker is sometimes all digits with a leading zero ("07747991"), which reads as a
phone number. The memory is then classified ``pii`` and an internal-ceiling reader never
sees it, so a test would fail about once in 500 writes for a reason of its own making.
"""

from __future__ import annotations

import secrets
import string


def marker(length: int = 12) -> str:
    """A random word of ``length`` lowercase letters (26**12 is about 10**17)."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(length))
