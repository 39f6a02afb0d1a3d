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
