"""Remove a benchmark's indexes from the local OpenSearch when it is done."""

from __future__ import annotations

import contextlib
import urllib.request


def drop_indexes(url: str, alias: str) -> None:
    request = urllib.request.Request(f"{url}/{alias}--*", method="DELETE")  # noqa: S310
    with contextlib.suppress(OSError):
        urllib.request.urlopen(request, timeout=30).close()  # noqa: S310
