"""Pages of the connector lists: the `limit`, `offset` and `after` query parameters (an extension of
both APIs), checked once for both dialects, and the `Link` header that points at the next page.

Without any of them a list is whole, as Kafka's and RocketMQ's are. `after=<name>` is a keyset
cursor: the page starts after that connector in name order, so a client walking the list with the
`Link: <…>; rel="next"` header neither skips nor repeats a connector while others are created or
deleted, and each page reads only its own rows. `offset` skips rows (simple, but a connector created
or deleted meanwhile shifts the rest by one); both can be combined.
"""

from __future__ import annotations

from starlette.datastructures import URL

from connect_core.runtime.store.connectors import Page
from connect_core.runtime.store.db import check_storable
from connect_core.sdk.errors import ConfigError

__all__ = ["MAX_LIMIT", "MAX_OFFSET", "next_link", "page_of"]

#: The largest page: a few hundred kilobytes of JSON with status and info.
MAX_LIMIT = 1000
#: Postgres takes a 64-bit OFFSET; past the connectors there is nothing to skip anyway.
MAX_OFFSET = 2**31 - 1
#: A cursor is a connector name; longer values cannot name one (Airflow's dag ids stop at 250).
_MAX_AFTER = 1000
#: The digits of MAX_OFFSET: a longer number is refused before it is converted.
_MAX_DIGITS = len(str(MAX_OFFSET))

LIMIT_DOC = f"Extension: at most this many connectors (1 to {MAX_LIMIT}); the whole list when absent."
OFFSET_DOC = f"Extension: skip this many connectors first (0 to {MAX_OFFSET})."
AFTER_DOC = "Extension: start after this connector name (a cursor; the `Link` header's next page uses it)."


def page_of(limit: str | None, offset: str | None, after: str | None) -> Page | None:
    """The page the query parameters ask for, or None (the whole list) when they ask for none.

    Raises ConfigError (400) naming the parameter for anything but whole numbers in range.
    """
    if limit is None and offset is None and after is None:
        return None
    if after is not None:
        check_storable(after, "query parameter `after`")
        if not 1 <= len(after) <= _MAX_AFTER:
            raise ConfigError(
                f"`after` must be a connector name (1 to {_MAX_AFTER} characters)", {"after": ["a connector name"]}
            )
    return Page(
        limit=None if limit is None else _whole("limit", limit, 1, MAX_LIMIT),
        offset=0 if offset is None else _whole("offset", offset, 0, MAX_OFFSET),
        after=after,
    )


def _whole(param: str, value: str, low: int, high: int) -> int:
    # Digits only: no sign, blank, `_`, exponent or non-ASCII digit (int() takes `٣` and ` 3_0`).
    number = int(value) if value.isascii() and value.isdigit() and len(value) <= _MAX_DIGITS else None
    if number is None or not low <= number <= high:
        shown = value if len(value) <= 20 else value[:20] + "…"
        raise ConfigError(
            f"`{param}` must be a whole number from {low} to {high}, not {shown!r}",
            {param: [f"a whole number from {low} to {high}"]},
        )
    return number


def next_link(url: URL, last: str) -> str:
    """A `Link` header to the page after `last`: the same request, its cursor moved, no offset.

    A relative reference (RFC 8288 resolves it against the request's URL): it names no host,
    so it is right behind a proxy or under the mount path inside Airflow."""
    following = url.remove_query_params(["after", "offset"]).include_query_params(after=last)
    return f'<{following.path}?{following.query}>; rel="next"'
