"""Property tests of config handling: whatever JSON a client sends, the answer is never a 5xx,
the store stays readable, and no secret value comes back."""

from __future__ import annotations

import string
from pathlib import Path
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connect_core.runtime.security import MASK, SecretMasker
from tests.rest.conftest import Served

_text = st.text(st.characters(codec="utf-8"), max_size=40)  # any code point Postgres may or may not hold
_keys = st.one_of(
    st.sampled_from(["connector.class", "tasks.max", "file", "topic", "topics", "schedule", "name", "password"]),
    _text,
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)
_configs = st.dictionaries(_keys, _json, max_size=6).map(
    lambda c: {"connector.class": "FileSourceConnector", **c} if len(c) % 2 else c
)
_names = st.one_of(st.sampled_from(["ok", "a b", "a#b", "x" * 300, "", "dup"]), _text)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_names, config=_configs, how=st.sampled_from(["kafka", "put", "patch", "rocketmq", "validate"]))
def test_no_config_gets_a_server_error(api: Served, tmp_path: Path, name: str, config: dict, how: str) -> None:
    url = api.url
    try:
        quoted = "/connectors/" + quote(name or "n", safe="")
        if how == "kafka":
            answer = httpx.post(f"{url}/connectors", json={"name": name, "config": config})
        elif how == "put":
            answer = httpx.put(f"{url}{quoted}/config", json=config)
        elif how == "patch":
            answer = httpx.patch(f"{url}{quoted}/config", json=config)
        elif how == "rocketmq":
            answer = httpx.post(f"{url}/rocketmq{quoted}", json=config)
        else:
            answer = httpx.put(f"{url}/connector-plugins/FileSourceConnector/config/validate", json=config)
    except UnicodeEncodeError:
        return  # the client cannot even send it (a lone surrogate)
    assert answer.status_code < 500, answer.text
    for read in ("/connectors?expand=status&expand=info", "/connectors/list"):
        assert httpx.get(f"{url}{read}").status_code == 200
    password = config.get("password")
    if isinstance(password, str) and len(password) >= 8 and answer.status_code < 300:
        assert password not in answer.text


_pw_chars = string.ascii_letters + string.digits + "!$%^*()-_=+[]{}|;,.<>~"


@given(
    user=st.text(string.ascii_letters, min_size=1, max_size=10),
    password=st.text(_pw_chars, min_size=1, max_size=30),
    secret=st.text(min_size=1, max_size=50),
    noise=st.text(max_size=200),
)
def test_masking_hides_every_credential(user: str, password: str, secret: str, noise: str) -> None:
    masker = SecretMasker()
    url = f"jdbc:postgresql://{user}:{password}@db.example:5432/app"
    masked = masker.config({"connection.url": url, "db.password": secret, "note": noise})
    assert masked["connection.url"] == f"jdbc:postgresql://{user}:{MASK}@db.example:5432/app"
    assert masked["db.password"] == MASK
    query = masker.text(f"{noise} jdbc:mysql://h/db?user={user}&password={password}&ssl=true")
    assert f"password={MASK}&ssl=true" in query


def test_a_url_user_named_like_a_key_keeps_the_url_and_hides_the_rest() -> None:
    """Found by the property above: a user `JAAS` (or `auth`, `token`) looked like a secret key."""
    masker = SecretMasker()
    for user in ("JAAS", "auth", "token"):
        url = f"jdbc:postgresql://{user}:s3cr3t-pw@db.example:5432/app"
        assert masker.config({"connection.url": url})["connection.url"] == url.replace("s3cr3t-pw", MASK)
    text = masker.text("jdbc:mysql://auth:s3cr3t-pw@h/db?password=other-secret&ssl=true")
    assert text == f"jdbc:mysql://auth:{MASK}@h/db?password={MASK}&ssl=true"
