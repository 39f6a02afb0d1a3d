"""A key that holds a secret in its own name (Debezium's `column.mask.hash.<alg>.with.salt.<salt>`):
shown with the salt masked, and the salt hidden by value in any text once the config is known."""

from __future__ import annotations

from connect_core.runtime.security import MASK, SecretMasker

SALT = "CzQMA0cB5K"


def test_the_salt_is_masked_in_the_key_and_its_value_kept() -> None:
    masker = SecretMasker()
    shown = masker.config(
        {
            f"column.mask.hash.SHA-256.with.salt.{SALT}": "inventory.customers.email",
            f"column.mask.hash.SHA-256.with.salt.{SALT}2": "inventory.orders.email",  # only the salt differs
            "column.mask.with.4.chars": "inventory.customers.ssn",
        }
    )
    assert shown == {
        f"column.mask.hash.SHA-256.with.salt.{MASK}": "inventory.customers.email",
        f"column.mask.hash.SHA-256.with.salt.{MASK}*": "inventory.orders.email",
        "column.mask.with.4.chars": "inventory.customers.ssn",
    }


def test_a_known_config_teaches_the_masker_its_salts() -> None:
    masker = SecretMasker()
    plan = f"Project [sha2(concat({SALT}, email#12), 256) AS email#20]"
    assert SALT in masker.text(plan)
    masker.add_config({f"column.mask.hash.v2.MD5.with.salt.{SALT}": "db.t.c"})
    assert SALT not in masker.text(plan) and SALT.lower() not in masker.text(plan.lower())
    assert SALT.encode().hex() not in masker.text(f"salt bytes {SALT.encode().hex()}")


def test_a_key_written_in_another_case_or_nearly_is_shown_masked_and_teaches_its_salt() -> None:
    """A store may hold such a key from before it was refused, and the refusal itself shows it."""
    masker = SecretMasker()
    shown = masker.config(
        {
            f"Column.Mask.Hash.SHA-256.with.salt.{SALT}": "a.b.c",
            f"column.mask.hash.SHA-256.with_salt.{SALT}": "a.b.d",
            f"column_mask_hash_MD5_with_salt_{SALT}": "a.b.e",
        }
    )
    assert shown == {
        f"Column.Mask.Hash.SHA-256.with.salt.{MASK}": "a.b.c",
        f"column.mask.hash.SHA-256.{MASK}": "a.b.d",
        f"column_mask{MASK}": "a.b.e",
    }
    line = f"refused: {SALT}"
    assert SALT in masker.text(line)
    masker.add_config({f"COLUMN.MASK.HASH.SHA-256.WITH.SALT.{SALT}": "a.b.c"})
    assert SALT not in masker.text(line)
