"""What keeps secrets secret and hostile input harmless: masking, config providers, path confinement.

See docs/security.md for what is protected, from whom, and which setting changes it.
"""

from connect_core.runtime.security.masking import (
    MASK,
    MaskingFilter,
    SecretMasker,
    install_log_masking,
    is_secret_key,
    mask_config,
    mask_text,
    masker,
)
from connect_core.runtime.security.providers import ConfigProviders, placeholders

__all__ = [
    "MASK",
    "ConfigProviders",
    "MaskingFilter",
    "SecretMasker",
    "install_log_masking",
    "is_secret_key",
    "mask_config",
    "mask_text",
    "masker",
    "placeholders",
]
