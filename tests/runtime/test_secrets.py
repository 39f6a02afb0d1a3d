from connect_core.runtime.secrets import MASK, mask_config, mask_text


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
