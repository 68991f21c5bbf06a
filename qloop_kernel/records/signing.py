"""Provenance of saved records, like Jupyter's notebook trust: each record this user's kernel writes is
signed with a secret kept outside the notebook (in the Jupyter data directory, readable only by the user).

A record whose signature does not verify with this user's secret was written by someone else, or edited
after it was written: it is *received*, and its replay always shows every step before anything runs.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

KEY_FILE_ENV = "QLOOP_SIGNING_KEY_FILE"  # tests and shared machines may point elsewhere
PREFIX = "hmac-sha256:"


def key_path() -> Path:
    """Where this user's signing secret lives (created on first use)."""
    configured = os.environ.get(KEY_FILE_ENV)
    if configured:
        return Path(configured)
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "qloop" / "record_signing_key"


_cache: dict[Path, bytes] = {}


def signing_key() -> bytes:
    """This user's secret, read once per path; written with mode 0600 when missing."""
    path = key_path()
    if path not in _cache:
        _cache[path] = _read_or_create(path)
    return _cache[path]


def _read_or_create(path: Path) -> bytes:
    try:
        return bytes.fromhex(path.read_text("ascii").strip())
    except (FileNotFoundError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    # Written whole aside, then linked into place: a kernel starting at the same moment sees either
    # no file or the whole key, never an empty file it would take for a key.
    fd, aside = tempfile.mkstemp(prefix=".key-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(key.hex())
        os.link(aside, path)
    except FileExistsError:  # another kernel wrote it first: use that one
        return bytes.fromhex(path.read_text("ascii").strip())
    finally:
        os.unlink(aside)
    return key


def sign(body: bytes) -> str:
    return PREFIX + hmac.new(signing_key(), body, hashlib.sha256).hexdigest()


def verify(signature: str, body: bytes) -> bool:
    """Whether ``signature`` is this user's signature of ``body`` (constant-time comparison)."""
    if not signature.startswith(PREFIX):
        return False
    return hmac.compare_digest(signature, sign(body))
