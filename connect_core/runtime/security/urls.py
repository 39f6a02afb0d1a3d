"""URL credentials masked for display: `spark://u:pw@host:7077` → `spark://u:***@host:7077`.

A Spark master or probe URL may carry a password in its userinfo, also nested
(`k8s://https://u:pw@host:443`). What is stored keeps it (the runtime needs it); what is shown,
returned or logged goes through `mask_url_credentials`. A plain scan (no regex over the input):
linear in its length whatever it holds.
"""

from __future__ import annotations

__all__ = ["URL_MASK", "mask_url_credentials"]

URL_MASK = "***"
_AUTHORITY_ENDS = frozenset("/?#") | frozenset(" \t\r\n\f\v")


def mask_url_credentials(text: str) -> str:
    """`text` with the password of every `scheme://user:password@host` in it replaced by `***`."""
    out: list[str] = []
    start = 0
    # from one before `start`: a nested URL's `://` begins at the `:` that ended the outer authority
    while (found := text.find("://", max(start - 1, 0))) >= 0:
        begin = found + 3
        end = begin
        while end < len(text) and text[end] not in _AUTHORITY_ENDS:
            end += 1
        authority = text[begin:end]
        at = authority.rfind("@")
        out.append(text[start:begin])
        if at >= 0 and ":" in authority[:at]:
            user = authority[:at].partition(":")[0]
            out.append(f"{user}:{URL_MASK}{authority[at:]}")
        else:
            out.append(authority)
        start = end
    out.append(text[start:])
    return "".join(out)
