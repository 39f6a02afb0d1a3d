"""`RestClient`'s token: whitespace around it dropped (a CRLF env file), anything else a header
cannot carry refused in words that do not show it, and the token known to the log masker."""

from __future__ import annotations

import httpx
import pytest

from connect_core.rest.client import RestClient
from connect_core.runtime.security import MASK, mask_text
from connect_core.sdk.errors import ConfigError, RetriableError
from tests.runtime.test_airflow_client_hostile import TokenServer, json_reply


def test_whitespace_around_the_token_is_dropped_and_the_token_masked() -> None:
    token = "rest-Tok3n-for-the-masker"
    server = TokenServer()
    try:
        server.replies["GET", "/connectors"] = json_reply([])
        client = RestClient(server.url, f"  {token}\r\n")
        try:
            assert client.names() == []
        finally:
            client.close()
        assert server.requests == [("GET", "/connectors", f"Bearer {token}")]
    finally:
        server.close()
    assert mask_text(f"a log line with {token} in it") == f"a log line with {MASK} in it"


@pytest.mark.parametrize(
    ("token", "says"),
    [
        ("tok-Secret-ä-123", "has a non-ASCII character inside"),
        ("tok-Secret 123", "has a blank inside"),
        ("tok-Secret\r\n123", "has a line break (CR or LF) inside"),
        ("tok-Secret\x00123", "has a control character inside"),
        (" \r\n", "is empty"),
    ],
)
def test_a_token_a_header_cannot_carry_is_refused_unshown(token: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        RestClient("http://127.0.0.1:9", token)
    message = str(raised.value)
    assert message.startswith(f"the REST API's token (--token, CONNECT_REST_TOKEN) {says}"), message
    assert message.endswith("; give the token alone"), message
    assert "Secret" not in message and "123" not in message


def test_an_unreachable_server_shows_neither_token_nor_url_password() -> None:
    token = "rest-Tok3n-unreachable"
    client = RestClient("http://user:UrlPw-77@127.0.0.1:9", token, timeout=2)
    try:
        with pytest.raises(RetriableError) as raised:
            client.names()
    finally:
        client.close()
    message = str(raised.value)
    assert "UrlPw-77" not in message and token not in message
    assert message.startswith("cannot reach the Connect REST API at `http://user:***@127.0.0.1:9`"), message
    assert isinstance(raised.value.__cause__, httpx.HTTPError)
