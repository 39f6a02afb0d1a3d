"""Masking secrets in configs and in free text, in time linear in the input.

Three mechanisms, as Airflow's `secrets_masker` and Kafka's `Password` type combine them:

* by key: values of keys that look secret (`password`, `secret`, `token`, `sasl.jaas.config`,
  `*.key` …) are replaced whole in configs; a key that holds a secret in its own name (Debezium's
  `column.mask.hash.<algorithm>.with.salt.<salt>`) is shown with that part masked, and the part
  becomes a known value;
* by shape, in text: URL credentials (`scheme://user:pw@host`) and `key=value` / `"key": "value"`
  pairs whose key looks secret (`?password=…`, `password="…"` in a JAAS line);
* by value: every secret value the process has seen (config values of secret keys, passwords in
  URLs, values resolved by config providers) is hidden wherever it appears later, line by line
  for a value that spans lines, and in the encodings a driver, a query or a web stack may turn it
  into (`encoded_forms`): any letter case (a JDBC driver that lower-cases its URL), hex and UTF-16
  hex (SQL `hex()`, SQL Server's N'…'), base64 (standard and URL-safe, also inside a longer base64
  text: one form per alignment), percent-encoding, JSON / Python / MySQL string escapes, SQL-doubled
  quotes, HTML and XML escapes, Python's bytes repr, other Unicode normalisations and UTF-8 read as
  Latin-1.

Known values are found in one pass over a case-folded copy of the text (`_fold`, as long as the
text): forms are grouped by their longest run of characters no escaping changes (`_key`), which a
value's escaped forms share, so one test rules out a group and more forms cost little. Keys are
found by a C-speed substring scan each when they are few, else by looking up each 4-character
piece of the text (time linear in the text, whatever the number of secrets); then one test per
form of the groups found, and `str.find` gives the places of those present.

Every pattern here starts with a literal (`://`, a key word) and ends in a character class with
nothing after it, so the regex engine never backtracks over user data: a 40 KB value costs
microseconds, not seconds.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

from connect_core.runtime.security.urls import mask_url_credentials, url_passwords
from connect_core.sdk._keys import salt_of, shown_key

__all__ = [
    "MASK",
    "SecretMasker",
    "encoded_forms",
    "is_secret_key",
    "mask_config",
    "mask_text",
    "masker",
]

MASK = "********"

#: Parts of a key that make its value a secret. `.key` at the end (`fs.s3a.secret.key`,
#: `ssl.key`) counts; `key.fields` or `key.converter` do not.
_SECRET_WORDS = r"password|passwd|pwd|secret|token|credential|jaas|api[._-]?key|private[._-]?key|access[._-]?key|auth"
_SECRET_KEY = re.compile(rf"(?:{_SECRET_WORDS})|(?:^|[._-])key$", re.IGNORECASE)

# `password=…`, `"password": "…"`, `pwd = …`: a secret word, then `=` or `:`, then the value up to a
# blank, a quote or `&` (a URL query's separator). The word may be the end of a longer key
# (`connection.password`). `;` and `,` may be part of a password, so the mask runs past them:
# `;password=x;db=y` hides `x;db=y` — more than the secret, never less.
# Not a URL's user named like a key (`://auth:********@host`, its password masked already): the
# search goes on past it, to a `?password=` later in the same URL.
_KEY_VALUE = re.compile(
    rf"(?:{_SECRET_WORDS})[\"']?[ \t]*[:=][ \t]*(?P<q>[\"']?)(?!{re.escape(MASK)}@)(?P<value>[^\s\"'&]+)",
    re.IGNORECASE,
)

#: Cheap substring tests before the key/value regex runs at all (most text has no secret word).
_HINTS = ("pass", "pwd", "secret", "token", "credential", "jaas", "key", "auth")

#: Values shorter than this are not masked by value: `1`, `on`, `app` would blank out half a log.
_MIN_VALUE_LENGTH = 4
#: Encoded forms shorter than this are not masked: a 4-character piece of base64 or hex is in
#: every other identifier; a secret that short is masked as it is and in its letter cases.
_MIN_ENCODED_LENGTH = 8
#: The longest input pydantic's errors show whole.
_PYDANTIC_SHOWN = 50


#: Forms are grouped by their longest run of the characters no escaping changes (ASCII letters,
#: digits, `-._~`: percent-encoding leaves those alone, and every other escape more) when it is
#: this long; a form without one is a group of its own.
_MIN_KEY = _MIN_VALUE_LENGTH
_PLAIN_RUN = re.compile(r"[a-z0-9._~-]+")
#: The length of the pieces of a text looked up by their first characters (every key is as long).
_GRAM = _MIN_KEY
#: Rough costs, in ns, that choose how keys are looked for (`_Index.keys_in`): a substring scan per key
#: (a fixed part, and a part per character of the text), or one set of the text's `_GRAM`-long
#: pieces (per character). Few keys in a long text: scans; many keys, or a short text: the pieces.
_SCAN_NS, _SCAN_NS_PER_CHAR, _GRAM_NS_PER_CHAR = 50, 0.3, 100
#: How HTML and XML escapers write `'` and `"` (`&`, `<` and `>` they all write `&amp;`, `&lt;`,
#: `&gt;`): Python's `html.escape` (Django), markupsafe (Jinja) and Go's `html/template`, PHP, XML
#: (`&apos;`), and escapers that leave one or both quotes as they are (ElementTree's text).
_MARKUP_QUOTES = (
    ("&#x27;", "&quot;"),
    ("&#39;", "&#34;"),
    ("&#39;", "&quot;"),
    ("&#039;", "&quot;"),
    ("&apos;", "&quot;"),
    ("'", "&quot;"),
    ("'", '"'),
)


def encoded_forms(value: str) -> set[str]:
    """The forms `value` takes when a driver, a query, a serializer or a web page echoes it (letter
    case aside: forms are matched ignoring case). Each is one encoding of the whole value (a few
    are two in a row, as stacks write them: HTML then numeric references, JSON in JSON), never every
    combination: their number stays bounded, a few dozen at most, and only those that change the
    value count:

    * bytes: hex of its UTF-8 and UTF-16 (both byte orders), base64 (whole, and the part made only
      of its bytes at each of the three alignments inside a longer base64 text);
    * escapes: percent-encoded, JSON (also JSON inside JSON), Python (`repr`, `ascii`,
      unicode-escape, a bytes repr: `\\xc3\\xa4`), MySQL backslashes, SQL-doubled quotes
      (`O''Brien`), HTML and XML (`&#x27;`, `&#39;`, `&quot;`, `&amp;`, `&#228;`);
    * Unicode: the other normalisation (NFC / NFD) and its UTF-8 read as Latin-1 or cp1252;
    * the pieces of a long value pydantic's errors show.

    Forms of bytes shorter than `_MIN_ENCODED_LENGTH` are left out (a short piece of hex or base64
    is in every other identifier); an escaped form is as telling as the value, so it counts from
    `_MIN_VALUE_LENGTH`."""
    raw = value.encode("utf-8", "surrogatepass")
    forms = {f for f in _byte_forms(value, raw) if len(f) >= _MIN_ENCODED_LENGTH}
    forms |= {f for f in _escaped_forms(value, raw) | _markup_forms(value) if len(f) >= _MIN_VALUE_LENGTH}
    if not value.isascii():
        forms |= {f for f in _unicode_forms(value, raw) if len(f) >= _MIN_VALUE_LENGTH}
    if len(value) > _PYDANTIC_SHOWN:
        # pydantic shows a long input by the ends of its repr (`input_value='<24>...<23>'`)
        forms |= {value[:24], value[-23:]}
    forms.discard(value)
    return forms


def _byte_forms(value: str, raw: bytes) -> set[str]:
    forms = {raw.hex()}
    for utf16 in ("utf-16-le", "utf-16-be"):  # SQL Server's N'…' as varbinary, Java's chars
        forms.add(value.encode(utf16, "surrogatepass").hex())
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        forms |= {whole, whole.rstrip("=")}
        for start in range(3):
            chunk = raw[start:]
            forms.add(encode(chunk[: len(chunk) // 3 * 3]).decode())
    return forms


def _escaped_forms(value: str, raw: bytes) -> set[str]:
    as_json = json.dumps(value)[1:-1]
    return {
        quote(value, safe="", errors="surrogatepass"),  # a lone surrogate (JSON's "\ud800") is no error
        quote(value, errors="surrogatepass"),
        quote_plus(value, errors="surrogatepass"),
        as_json,
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(as_json)[1:-1],  # a JSON text held in a JSON string (a log line's payload)
        repr(value)[1:-1],
        ascii(value)[1:-1],
        value.encode("unicode_escape").decode("ascii"),
        repr(raw)[2:-1],  # b'P\xc3\xa4ss': a driver that shows the bytes it sent
        value.replace("'", "''"),  # a SQL literal, as a driver echoes the statement
        value.replace('"', '""'),  # a SQL identifier, a CSV field
        _backslashed(value, "'"),
        _backslashed(value, '"'),
        _backslashed(value, "'\""),  # MySQL's mysql_real_escape_string, PHP's addslashes
    }


def _backslashed(value: str, quotes: str) -> str:
    escaped = value.replace("\\", "\\\\")
    for mark in quotes:
        escaped = escaped.replace(mark, "\\" + mark)
    return escaped


def _markup_forms(value: str) -> set[str]:
    """`value` escaped for HTML or XML, in each way escapers write quotes; past ASCII, also with
    numeric character references (`&#228;`, `&#xe4;`), as an ASCII page or an XML writer has it."""
    if any(c in value for c in "&<>'\""):
        bare = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        forms = {bare.replace("'", apostrophe).replace('"', quotation) for apostrophe, quotation in _MARKUP_QUOTES}
    else:
        forms = set()
    if not value.isascii():
        forms |= {
            value.encode("ascii", "xmlcharrefreplace").decode("ascii"),
            html.escape(value).encode("ascii", "xmlcharrefreplace").decode("ascii"),
            "".join(c if c.isascii() else f"&#x{ord(c):x};" for c in value),
        }
    return forms


def _unicode_forms(value: str, raw: bytes) -> set[str]:
    """A non-ASCII `value` as another normalisation writes it (a macOS path is NFD, most input NFC),
    and its UTF-8 read as Latin-1 or cp1252 (a driver that gets the encoding wrong)."""
    forms = {unicodedata.normalize("NFC", value), unicodedata.normalize("NFD", value), raw.decode("latin-1")}
    try:
        forms.add(raw.decode("cp1252"))
    except UnicodeDecodeError:  # cp1252 leaves five bytes undefined
        pass
    return forms


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


@dataclass(frozen=True)
class _Index:
    """The forms of the known values, found in a text through their keys."""

    #: the forms by their `_key`
    groups: dict[str, frozenset[str]]
    #: the keys by their first `_GRAM` characters
    by_gram: dict[str, tuple[str, ...]]

    def keys_in(self, folded: str) -> list[str]:
        """The keys in a (folded) text, found the cheaper way (`_SCAN_NS`): a C-speed substring
        scan per key, or a look-up of each of the text's `_GRAM`-long pieces."""
        length = len(folded)
        if len(self.groups) * (_SCAN_NS + _SCAN_NS_PER_CHAR * length) < _GRAM_NS_PER_CHAR * length:
            return [key for key in self.groups if key in folded]
        pieces = {folded[at : at + _GRAM] for at in range(length - _GRAM + 1)}
        return [key for piece in pieces & self.by_gram.keys() for key in self.by_gram[piece] if key in folded]


class SecretMasker:
    """Masks by key, shape and known value. Thread-safe; one per process (`masker`) serves logs."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()
        #: every form of every known value, case-folded (`_fold`), by its `_key`; replaced whole
        #: (never changed in place), so a reader needs no lock
        self._index = _Index({}, {})

    # -- what is secret -----------------------------------------------------

    def add(self, value: Any) -> None:
        """Remember a secret value: it is masked wherever it appears from now on (each line of it too)."""
        if not isinstance(value, str):
            return
        parts = {value.strip(), *(line.strip() for line in value.splitlines())}
        fresh = {p for p in parts if len(p) >= _MIN_VALUE_LENGTH and p != MASK} - self._values
        if not fresh:
            return
        new: dict[str, set[str]] = {}
        for form in {_fold(f) for p in fresh for f in (p, *encoded_forms(p))}:
            new.setdefault(_key(form), set()).add(form)
        with self._lock:
            self._values |= fresh
            groups, by_gram = dict(self._index.groups), dict(self._index.by_gram)
            for key, forms in new.items():
                if key not in groups:
                    by_gram[key[:_GRAM]] = (*by_gram.get(key[:_GRAM], ()), key)
                groups[key] = groups.get(key, frozenset()) | forms
            self._index = _Index(groups, by_gram)

    def add_config(self, config: Mapping[str, Any]) -> None:
        """Remember the secret values of a config: secret keys' values and URL passwords."""
        for key, value in _walk(config):
            self.add(salt_of(key))
            if is_secret_key(key):
                self.add(value if isinstance(value, str) else None)
            if isinstance(value, str) and "://" in value:
                for password in url_passwords(value):
                    self.add(password)

    # -- masking ------------------------------------------------------------

    def text(self, text: str) -> str:
        """`text` with URL credentials, secret `key=value` pairs and every known secret value hidden."""
        if not text:
            return text
        text = self._known_values(text)
        if "://" in text:
            text = mask_url_credentials(text, MASK)
        lowered = text.lower()
        if not any(hint in lowered for hint in _HINTS):
            return text
        return _KEY_VALUE.sub(_mask_pair, text)

    def _known_values(self, text: str) -> str:
        """`text` with every form of every known value masked, in any letter case."""
        index = self._index
        if not index.groups:
            return text
        folded = _fold(text)  # as long as `text`: a place in one is the same place in the other
        # a form is in the text only if its key is: one test rules out a value's many forms
        present = [f for key in index.keys_in(folded) for f in index.groups[key] if f in folded]
        if not present:
            return text
        spans: list[tuple[int, int]] = []
        for form in present:
            at = folded.find(form)
            while at >= 0:
                spans.append((at, at + len(form)))
                at = folded.find(form, at + len(form))
        return _masked_spans(text, spans)

    def config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of `config` with secret keys' values masked whole and every string value masked as text."""
        masked: dict[str, Any] = {}
        for key, value in config.items():
            shown = shown_key(key) if isinstance(key, str) else key
            while shown in masked:  # two hash keys that differ only by their salts: both shown
                shown = f"{shown}*"
            masked[shown] = self._value(str(key), value)
        return masked

    def _value(self, key: str, value: Any) -> Any:
        if is_secret_key(key) and value not in (None, "") and not isinstance(value, Mapping | list):
            return MASK
        if isinstance(value, Mapping):
            return self.config(value)
        if isinstance(value, list):
            return [self._value(key, v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def _key(form: str) -> str:
    """What is looked for before a (folded) form: its longest run of characters no escaping changes,
    which a value's escaped forms share (so they share one test, and a text without the run has
    none of them), or the whole form when that run is short."""
    run = max(_PLAIN_RUN.findall(form), key=len, default="")
    return run if len(run) >= _MIN_KEY else form


def _fold(text: str) -> str:
    """`text` lower-cased, and as long as it is: `İ` (U+0130) is the one character whose lower case
    is longer (`i` and U+0307); it folds to `i` (a secret with an `i` is then masked where the text
    has `İ` too: more than the secret, never less)."""
    return text.replace("\u0130", "i").lower()


def _masked_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each run of overlapping `(start, end)` spans replaced by one `MASK`."""
    spans.sort()
    out: list[str] = []
    done = 0
    for start, end in spans:
        if start < done:  # overlaps the span masked last: that mask covers it too
            done = max(done, end)
            continue
        out += (text[done:start], MASK)
        done = end
    out.append(text[done:])
    return "".join(out)


def _mask_pair(match: re.Match[str]) -> str:
    start, end = match.span("value") if match.group("value") != MASK else (0, 0)
    if start == end:
        return match.group(0)
    offset = match.start()
    whole = match.group(0)
    return whole[: start - offset] + MASK + whole[end - offset :]


def _walk(config: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """Every (key, leaf value) of a nested config, iteratively (a deep config must not recurse)."""
    stack: list[tuple[str, Any]] = [(str(k), v) for k, v in config.items()]
    while stack:
        key, value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((key, v) for v in value)
        else:
            yield key, value


#: The process's masker: its known values are masked in every log record (`MaskingFilter`).
masker = SecretMasker()


def mask_text(text: str) -> str:
    return masker.text(text)


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    return masker.config(config)


class MaskingFilter(logging.Filter):
    """A logging filter that masks every record's message (and its exception text) with `masker`."""

    def __init__(self, secret_masker: SecretMasker | None = None) -> None:
        super().__init__()
        self._masker = secret_masker or masker

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to the handler to report
            return True
        masked = self._masker.text(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._masker.text(record.exc_text)
        if masked != message or record.args:
            record.msg, record.args = masked, None
        return True


def install_log_masking(secret_masker: SecretMasker | None = None) -> None:
    """Mask every record that reaches the root logger's handlers (idempotent)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, MaskingFilter) for f in handler.filters):
            handler.addFilter(MaskingFilter(secret_masker))


__all__ += ["MaskingFilter", "install_log_masking"]
