from connect_core.runtime.security import MASK, SecretMasker, mask_config, mask_text


def test_secret_keys_and_url_passwords_are_masked() -> None:
    masked = mask_config(
        {
            "connection.password": "s3cret",
            "aws.secret.access.key": "AKIA",
            "connection.url": "postgresql://app:pw123@db:5432/x",
            "filename": "in.txt",
            "nested": {"api_key": "k"},
        }
    )
    assert masked["connection.password"] == MASK
    assert masked["aws.secret.access.key"] == MASK
    assert "pw123" not in masked["connection.url"]
    assert masked["filename"] == "in.txt"
    assert masked["nested"]["api_key"] == MASK


def test_mask_text_keeps_user_and_host() -> None:
    assert mask_text("jdbc:mysql://root:pw@h/db") == f"jdbc:mysql://root:{MASK}@h/db"


def test_masking_is_linear_in_the_input() -> None:
    """A 40 KB value took 16.7 s with a backtracking URL regex; hostile shapes must cost milliseconds."""
    import time

    from connect_core.runtime.security import SecretMasker

    masker = SecretMasker()
    for hostile in ("a" * 400_000, "://" * 130_000, "x:" * 200_000 + "@", ("password" + " " * 90) * 4000):
        started = time.perf_counter()
        masker.config({"v": hostile, "nested": {"password": hostile}})
        assert time.perf_counter() - started < 2.0


def test_secrets_masked_by_key_shape_and_value() -> None:
    from connect_core.runtime.security import SecretMasker

    masker = SecretMasker()
    config = {
        "connection.url": "jdbc:postgresql://db:5432/x?user=app&password=url-s3cret-1",
        "connection.pwd": "pwd-s3cret-2",
        "sasl.jaas.config": 'PlainLoginModule required username="u" password="jaas-s3cret-3";',
        "fs.s3a.secret.key": "s3a-s3cret-4",
        "other.url": "mysql://root:userinfo-s3cret-5@h/db",
        "private.key": "-----BEGIN KEY-----\nline-one-s3cret-6\nline-two-s3cret-7\n-----END KEY-----",
        "key.fields": "id",
    }
    masked = masker.config(config)
    shown = repr(masked)
    for n in range(1, 8):
        assert f"s3cret-{n}" not in shown
    assert masked["key.fields"] == "id"
    assert "user=app" in masked["connection.url"]
    # By value: once a config is known, its secrets are hidden in any text, a line at a time.
    masker.add_config(config)
    log = "connecting with pwd-s3cret-2\nkey part: line-two-s3cret-7 (split across lines)"
    assert "s3cret" not in masker.text(log)


def test_a_known_value_is_masked_in_its_usual_encodings() -> None:
    """A `${env:…}` value reached a status trace lower-cased by a JDBC driver, and hex-encoded by SQL
    `hex()`: each known value is masked in every letter case and common encoding."""
    import base64
    import json
    from urllib.parse import quote

    from connect_core.runtime.security import SecretMasker

    secret = "Tr0ub4dor&3/Horse Battery"
    masker = SecretMasker()
    masker.add(secret)
    raw = secret.encode()
    forms = {
        "lower": secret.lower(),
        "upper": secret.upper(),
        "mixed": secret.swapcase(),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode(),
        "percent": quote(secret, safe=""),
        "percent-lower": quote(secret, safe="").lower(),
        "json": json.dumps(secret)[1:-1],
    }
    for name, form in forms.items():
        masked = masker.text(f"error: jdbc:postgresql://h/db?x={form} at line 1")
        assert form not in masked and MASK in masked, (name, masked)
    # Inside a longer base64 text, at each of the three byte alignments.
    for prefix in (b"", b"a", b"ab", b"abc"):
        encoded = base64.b64encode(prefix + b"url=" + raw + b"&more").decode()
        masked = masker.text(f"payload {encoded}")
        assert MASK in masked, (prefix, masked)
        assert base64.b64decode(encoded) and secret not in masked
    # Nothing else is touched.
    assert masker.text("a plain line with nothing secret") == "a plain line with nothing secret"


def test_short_values_and_masking_cost() -> None:
    import time

    from connect_core.runtime.security import SecretMasker

    masker = SecretMasker()
    masker.add("abc")  # under the minimum: not masked at all
    masker.add("Pa55")
    assert masker.text("abc") == "abc"
    assert masker.text("PA55 pa55") == f"{MASK} {MASK}"
    assert masker.text("hex 50613535") == f"hex {MASK}"  # 8 hex digits: rare enough to mask
    assert masker.text("b64 UGE1") == "b64 UGE1"  # a 4-character piece of base64 is not
    for n in range(200):
        masker.add(f"secret-value-number-{n:04d}-xyz")
    text = ("an ordinary log line of a long run, with numbers 0123456789 and ünïcödé\n" * 15_000)[:1_000_000]
    started = time.perf_counter()
    assert masker.text(text) == text
    assert time.perf_counter() - started < 2.0
    assert MASK in masker.text("…SECRET-VALUE-NUMBER-0042-XYZ…")


def test_a_composite_resolved_value_is_a_secret_whole() -> None:
    """`jdbc:…?password=${env:PW}` resolved: the URL the driver gets is masked whole, in any case."""
    from connect_core.runtime.security import ConfigProviders, SecretMasker

    masker = SecretMasker()
    providers = ConfigProviders({"env"}, secret_masker=masker, environ={"PW": "hunter2hunter2", "HOST": "dbhost"})
    resolved = providers.resolve({"connection.url": "jdbc:postgresql://${env:HOST}:5432/db?password=${env:PW}"})
    url = resolved["connection.url"]
    trace = f"org.postgresql.util.PSQLException: bad url {url.upper()} / {url.lower()} / {url.encode().hex()}"
    masked = masker.text(trace)
    assert "HUNTER2" not in masked.upper() and url.encode().hex() not in masked


def test_the_pieces_of_a_long_secret_a_pydantic_error_shows_are_masked() -> None:
    """A resolved value that fails validation where the task runs is shown by pydantic as the ends of
    its repr: neither piece may stand in a trace."""
    from pydantic import BaseModel, field_validator

    secret = "jdbc:postgresql://127.0.0.1:5432/" + "L0ngSecretValue" * 6

    class Model(BaseModel):
        url: str

        @field_validator("url")
        @classmethod
        def _no(cls, value: str) -> str:
            raise ValueError("refused")

    masker = SecretMasker()
    masker.add(secret)
    try:
        Model(url=secret)
    except ValueError as exc:
        shown = str(exc)
    assert secret[-23:] in shown and secret[:24] in shown  # what pydantic shows …
    masked = masker.text(shown)
    assert secret[-23:].lower() not in masked.lower() and secret[:24].lower() not in masked.lower(), masked
