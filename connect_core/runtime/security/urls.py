"""Credentials of HTTP requests: URL userinfo found and masked in one scan (`spark://u:pw@host:7077`
→ `spark://u:***@host:7077`), and bearer tokens checked before they go in a header.

A Spark master, a probe URL, a JDBC URL or a log line may carry a password in a URL's userinfo,
also nested (`k8s://https://u:pw@host:443`). What is stored keeps it (the runtime needs it); what
is shown, returned or logged goes through `mask_url_credentials` (the log masker too). A plain
scan (no regex over the input): linear in its length whatever it holds.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["URL_MASK", "mask_url_credentials", "token_problem", "url_passwords"]

URL_MASK = "***"
_AUTHORITY_ENDS = frozenset("/?#") | frozenset(" \t\r\n\f\v")


def _authorities(text: str) -> Iterator[tuple[int, int, str | None]]:
    """`(begin, end, password)` of each URL authority in `text` (`password` None without one)."""
    start = 0
    # from one before `start`: a nested URL's `://` begins at the `:` that ended the outer authority
    while (found := text.find("://", max(start - 1, 0))) >= 0:
        begin = end = found + 3
        while end < len(text) and text[end] not in _AUTHORITY_ENDS:
            end += 1
        authority = text[begin:end]
        at = authority.rfind("@")
        _user, colon, password = authority[:at].partition(":") if at >= 0 else ("", "", "")
        yield begin, end, password if colon and password else None
        start = end


def url_passwords(text: str) -> list[str]:
    """The password of every `scheme://user:password@host` in `text`."""
    return [password for _begin, _end, password in _authorities(text) if password is not None]


def mask_url_credentials(text: str, mask: str = URL_MASK) -> str:
    """`text` with the password of every `scheme://user:password@host` in it replaced by `mask`."""
    out: list[str] = []
    start = 0
    for begin, end, password in _authorities(text):
        out.append(text[start:begin])
        authority = text[begin:end]
        if password is None:
            out.append(authority)
        else:
            at = authority.rfind("@")
            out.append(f"{authority[:at].partition(':')[0]}:{mask}{authority[at:]}")
        start = end
    out.append(text[start:])
    return "".join(out)


def token_problem(token: object) -> str | None:
    """What keeps `token` from going in an `Authorization: Bearer <token>` header, in words that do
    not show it (`is empty`, `has a blank`); None when it can go: a non-empty string of printable
    ASCII without blanks (every character of RFC 6750's token and of a JWT is one)."""
    if not isinstance(token, str):
        return "is not a string"
    if not token:
        return "is empty"
    if token.isascii() and token.isprintable() and " " not in token:
        return None
    at = next(i for i, c in enumerate(token) if not (c.isascii() and c.isprintable()) or c == " ")
    where = "at its end" if at == len(token) - 1 else "at its start" if at == 0 else "inside"
    return f"has {_kind(token[at])} {where}, which an HTTP header cannot carry"


def _kind(character: str) -> str:
    """What a character a header cannot carry is, in words."""
    if character in "\r\n":
        return "a line break (CR or LF)"
    if character.isspace():
        return "a blank"
    return "a control character" if character.isascii() else "a non-ASCII character"
