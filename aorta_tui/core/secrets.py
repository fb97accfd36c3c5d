"""Which environment variables hold secrets, and their values masked wherever they are echoed.

A recipe's ``extra_env`` often carries a token (``HF_TOKEN``, ``WANDB_API_KEY``). The trial
needs the real value, so it is kept only where the trial reads it: the trial process's
environment, and ``probe.env`` (mode 0600) when the recipe asks for one. Everything that
*echoes* the environment (``plan.json``, ``recipe.resolved.yaml``, ``result.json``,
``matrix.json``, the recipe summary, messages) shows :data:`MASK` instead. Every writer calls
:func:`mask_env` from here, so there is one rule.

The rule (:func:`is_secret_name`), on the name upper-cased and split at ``_``:

- a word is, or ends with, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``PASSWD``, ``PASSPHRASE``,
  ``CREDENTIAL(S)`` or ``COOKIE`` (``HF_TOKEN``, ``GITHUBTOKEN``, ``AZURE_CLIENT_SECRET``,
  ``DB_PASSWORD``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``);
- a word is exactly ``KEY``/``KEYS``, or one of ``APIKEY``, ``ACCESSKEY``, ``SECRETKEY``,
  ``PRIVATEKEY``, ``AUTHKEY`` (``WANDB_API_KEY``, ``OPENAI_APIKEY``, ``AWS_ACCESS_KEY_ID``).

``KEYBOARD``, ``MONKEY`` or ``NCCL_IB_PKEY`` are not secrets: ``KEY`` must be a whole word.
Masking a non-secret costs a less readable report; leaking a secret costs more, so when in
doubt the rule masks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# What a masked value reads as. Loading a file that holds it back as a value is refused
# (see :func:`masked_names`): the real value was never written there.
MASK = "<masked: secret>"

_SUFFIX_WORDS = ("TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD",
                 "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "COOKIE", "COOKIES")
_KEY_WORDS = frozenset({"KEY", "KEYS", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY",
                        "AUTHKEY"})


def is_secret_name(name: str) -> bool:
    """True when the variable ``name`` looks like it holds a secret (see the module's rule)."""
    for word in name.upper().replace("-", "_").split("_"):
        if word in _KEY_WORDS or any(word.endswith(s) for s in _SUFFIX_WORDS):
            return True
    return False


def mask_value(name: str, value: str) -> str:
    """``value``, or :data:`MASK` when ``name`` is a secret's (an empty value stays empty)."""
    return MASK if value and is_secret_name(name) else value


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with every secret's value masked, for any file or message."""
    return {k: mask_value(k, v) for k, v in env.items()}


def masked_names(env: Mapping[str, str]) -> list[str]:
    """Names whose value is :data:`MASK`: a recipe read back from a run directory lacks them."""
    return sorted(k for k, v in env.items() if v == MASK)


def secret_names(names: Iterable[str]) -> list[str]:
    return sorted(n for n in names if is_secret_name(n))
