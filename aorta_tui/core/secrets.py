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

import functools
import os
from collections.abc import Iterable, Mapping

# What a masked value reads as. Loading a file that holds it back as a value is refused
# (see :func:`masked_names`): the real value was never written there.
MASK = "<masked: secret>"

_SUFFIX_WORDS = ("TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD",
                 "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "COOKIE", "COOKIES")
_KEY_WORDS = frozenset({"KEY", "KEYS", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY",
                        "AUTHKEY"})


@functools.lru_cache(maxsize=4096)  # a bundle asks about the same few names millions of times
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


def tool_env(user: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str | None]:
    """What the tool set in a child's environment ``env`` beyond the user's ``user`` (their
    environment and what they asked for), masked like every recorded value; None: removed.
    Recorded with each trial (``tool_env``) so a result says which variables were not the
    user's (the bytecode cache, core/bytecode.py)."""
    changed = {k: v for k, v in env.items() if user.get(k) != v}
    removed: dict[str, str | None] = {k: None for k in user if k not in env}
    return {**mask_env(changed), **removed}


def masked_names(env: Mapping[str, str]) -> list[str]:
    """Names whose value is :data:`MASK`: a recipe read back from a run directory lacks them."""
    return sorted(k for k, v in env.items() if v == MASK)


def secret_names(names: Iterable[str]) -> list[str]:
    return sorted(n for n in names if is_secret_name(n))


# -- the values the trials ran with, recognisable later without being stored ---------------
# A bundle must hide a secret a trial printed on its own even when it is made from a shell
# that does not hold the variable. The sweep keeps, in the run directory, a keyed hash of the
# value of every secret-named variable a trial's environment held (never the value), and the
# bundle hashes each file's tokens of those lengths with the same key.
SECRET_HASHES_FILE = "secret-hashes.json"
SECRET_HASHES_KIND = "aorta-tui/secret-hashes"
# Shorter values ("1", "yes") are not worth recognising on their own: they would match
# unrelated text (the bundle replaces them next to their name only).
MIN_SECRET_CHARS = 6
_SALT_BYTES = 16
_DIGEST_BYTES = 16


def secret_hash(salt: bytes, value: str) -> str:
    """The keyed hash of ``value`` (BLAKE2b keyed with the run's random salt, 128 bits)."""
    import hashlib

    data = value.encode("utf-8", "surrogateescape")
    return hashlib.blake2b(data, key=salt, digest_size=_DIGEST_BYTES).hexdigest()


class SecretHashes:
    """The run's salt and the keyed hashes (with each value's length and variable name)."""

    def __init__(self, salt: bytes, entries: dict[str, tuple[str, int]] | None = None) -> None:
        self.salt = salt
        self.entries: dict[str, tuple[str, int]] = dict(entries or {})  # hash -> (name, length)

    @property
    def lengths(self) -> set[int]:
        return {length for _name, length in self.entries.values()}

    def add_env(self, env: Mapping[str, str]) -> bool:
        """Add every secret-named variable's value; True when one was new."""
        new = False
        for name, value in env.items():
            if len(value) < MIN_SECRET_CHARS or value == MASK or not is_secret_name(name):
                continue
            digest = secret_hash(self.salt, value)
            if digest not in self.entries:
                self.entries[digest] = (name, len(value))
                new = True
        return new

    def name_of(self, value: str) -> str | None:
        """The variable whose value ``value`` is, or None."""
        hit = self.entries.get(secret_hash(self.salt, value))
        return hit[0] if hit else None

    def to_dict(self) -> dict[str, object]:
        return {"kind": SECRET_HASHES_KIND, "schema_version": 1,
                "algorithm": f"blake2b keyed by salt, {_DIGEST_BYTES * 8} bits",
                "note": "keyed hashes of the secret-named variables the trials ran with; the "
                        "values themselves are not stored; `bundle` uses them and never "
                        "puts this file in an archive",
                "salt": self.salt.hex(),
                "hashes": [{"hash": h, "name": n, "length": length}
                           for h, (n, length) in sorted(self.entries.items())]}


SECRET_HASHES_LIMIT = 4 << 20  # ~100 bytes a secret: far above any run's


def load_secret_hashes(run_dir: str | os.PathLike[str]) -> SecretHashes | None:
    """The run's hashes, or None when it has none (a run from before they were kept) or the
    file is not one this tool wrote (a damaged file recognises nothing, it fails nothing).
    Read through the run directory's file layer: a FIFO, ``/dev/zero`` or a link is no file."""
    from aorta_tui.core.rundir_fs import RunDirFS

    try:
        with RunDirFS(run_dir) as fs:
            doc = fs.read_json_or_none(SECRET_HASHES_FILE, limit=SECRET_HASHES_LIMIT)
        salt = bytes.fromhex(doc["salt"])
        entries = {str(e["hash"]): (str(e["name"]), int(e["length"])) for e in doc["hashes"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if doc.get("kind") != SECRET_HASHES_KIND or len(salt) != _SALT_BYTES:
        return None
    return SecretHashes(salt, entries)


_KEPT: dict[str, SecretHashes] = {}  # run dir -> what this process has written there


def record_secret_hashes(run_dir: str | os.PathLike[str], env: Mapping[str, str]) -> None:
    """Keep the keyed hashes of ``env``'s secret values in ``run_dir`` (mode 0600, rewritten
    atomically only when a value is new: one trial's environment after another)."""
    import json

    from aorta_tui.core.rundir_fs import RunDirFS

    key = os.path.abspath(os.fspath(run_dir))
    kept = _KEPT.get(key) or load_secret_hashes(key) or SecretHashes(os.urandom(_SALT_BYTES))
    _KEPT[key] = kept
    if kept.add_env(env):  # nothing secret-named: no file
        body = (json.dumps(kept.to_dict(), indent=2) + "\n").encode()
        with RunDirFS(key) as fs:
            fs.atomic_write_bytes(SECRET_HASHES_FILE, body, mode=0o600)


# -- secret values handed to a child in memory ---------------------------------------------
# `agent --env-candidate HF_TOKEN=...` keeps the value in memory only: each iteration's sweep
# (a child process) gets it through an inherited pipe, never a file or an argument or an
# environment variable the sweep and its trials would see and record. The sidecar the sweep
# loads holds MASK for it; the sweep fills those entries in from the pipe.
SECRET_PIPE_LIMIT = 1 << 20  # far above any environment's values (each string is < 128 KiB)


def send_secret_values(values: Mapping[str, Mapping[str, str]]) -> int:
    """A pipe holding ``{mitigation: {VAR: value}}`` as JSON: its read end's fd, for the child
    (``pass_fds``); the caller closes it once the child is started. A thread writes, so a
    payload larger than the pipe's buffer does not block the parent."""
    import json
    import threading

    read_fd, write_fd = os.pipe()
    body = json.dumps(values).encode("utf-8", "surrogatepass")

    def write() -> None:
        import contextlib

        view = memoryview(body)
        try:  # BrokenPipeError: the child left before reading; it says why itself
            with contextlib.suppress(BrokenPipeError):
                while view:
                    view = view[os.write(write_fd, view):]
        finally:
            os.close(write_fd)

    threading.Thread(target=write, name="secret-values", daemon=True).start()
    return read_fd


def receive_secret_values(fd: int) -> dict[str, dict[str, str]]:
    """What :func:`send_secret_values` sent on ``fd`` (read whole, then closed)."""
    import json

    from aorta_tui.core.errors import UsageError

    try:
        with open(fd, "rb", closefd=True) as pipe:
            body = pipe.read(SECRET_PIPE_LIMIT + 1)
    except OSError as exc:
        raise UsageError(f"--secret-values-fd {fd}: cannot read it ({exc.strerror or exc})",
                         hint="an internal option of `aorta-tui agent`; not for direct use") from None
    try:
        doc = json.loads(body) if len(body) <= SECRET_PIPE_LIMIT else None
    except ValueError:
        doc = None
    ok = isinstance(doc, dict) and all(
        isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())
        for v in doc.values())
    if not ok:  # never echoed: it holds secrets
        raise UsageError(f"--secret-values-fd {fd}: not the agent's secret values",
                         hint="an internal option of `aorta-tui agent`; not for direct use")
    return doc  # type: ignore[return-value]
