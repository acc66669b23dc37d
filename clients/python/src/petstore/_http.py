"""Small pieces of HTTP the contract's conventions need: query styles, Link headers, Retry-After."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from urllib.parse import quote


def query_string(query: Mapping[str, object], arrays: Mapping[str, bool]) -> str:
    """A query in the style the contract declares: form, arrays exploded (``id=1&id=2``) unless
    ``arrays`` says not (``id=1,2``)."""
    pairs: list[str] = []

    def encode(value: object) -> str:
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return quote(text, safe="")

    for name, value in query.items():
        if isinstance(value, (list, tuple)):
            if arrays.get(name, True):
                pairs.extend(f"{quote(name, safe='')}={encode(item)}" for item in value)
            else:
                pairs.append(f"{quote(name, safe='')}={','.join(encode(item) for item in value)}")
        else:
            pairs.append(f"{quote(name, safe='')}={encode(value)}")
    return "&".join(pairs)


_LINK = re.compile(r"<([^>]*)>([^<]*)")
_REL = re.compile(r';\s*rel\s*=\s*(?:"([^"]*)"|([^;,\s]+))', re.IGNORECASE)


def next_link(header: str | None) -> str | None:
    """The URL of a ``Link`` header's ``rel="next"`` link (RFC 8288), if it has one."""
    # A URL may hold commas (?id=1,2): links are found by their <...>, not by splitting on commas.
    for url, parameters in _LINK.findall(header or ""):
        rel = _REL.search(parameters)
        relations = ((rel.group(1) or rel.group(2)) if rel else "").lower().split()
        if "next" in relations:
            return str(url)
    return None


def retry_after_seconds(header: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds: delay-seconds or an HTTP date (RFC 9110); None when absent or unreadable."""
    if header is None or header.strip() == "":
        return None
    if header.strip().isdigit():
        return float(header.strip())
    try:
        date = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return max(0.0, date.timestamp() - (time.time() if now is None else now))
