"""The audit key ring: which key signs checkpoints now, and every key that may verify one.

A key ring is a YAML (or JSON) file, named by ``--keys`` or ``SIGNOFF_AUDIT_KEYS``::

    signing_key: k2026-12              # signs new checkpoints
    keys:
      - id: k2026-12
        algorithm: ed25519
        private_key_file: k2026-12.pem # PKCS#8 PEM; relative paths are beside the key ring
      - id: k2026-06                   # retired: still verifies the checkpoints it signed
        algorithm: ed25519
        public_key_file: k2026-06.pub.pem
      - id: shared
        algorithm: hmac-sha256
        secret_file: shared.key        # or secret: <base64>; at least 32 bytes

Rotation: add a new key, point ``signing_key`` at it, keep the old entry (a public key is enough
for Ed25519). Every checkpoint records the id of the key that signed it. An auditor verifies
Ed25519 checkpoints with public keys alone; HMAC needs the shared secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519 = "ed25519"
HMAC_SHA256 = "hmac-sha256"
ALGORITHMS = (ED25519, HMAC_SHA256)
ENV = "SIGNOFF_AUDIT_KEYS"
_MIN_SECRET = 32


class KeyRingError(ValueError):
    code = "AUDIT_KEYS_INVALID"


@dataclass(frozen=True)
class AuditKey:
    id: str
    algorithm: str
    private: Ed25519PrivateKey | None = None
    public: Ed25519PublicKey | None = None
    secret: bytes | None = None

    @property
    def can_sign(self) -> bool:
        return self.private is not None or self.secret is not None

    def sign(self, message: bytes) -> str:
        if self.secret is not None:
            raw = hmac.new(self.secret, message, hashlib.sha256).digest()
        elif self.private is not None:
            raw = self.private.sign(message)
        else:
            raise KeyRingError(f"audit key {self.id!r} has no private part; it cannot sign")
        return base64.b64encode(raw).decode()

    def verify(self, message: bytes, signature: str) -> bool:
        try:
            raw = base64.b64decode(signature, validate=True)
        except (binascii.Error, ValueError):
            return False
        if self.secret is not None:
            expected = hmac.new(self.secret, message, hashlib.sha256).digest()
            return hmac.compare_digest(expected, raw)
        assert self.public is not None
        try:
            self.public.verify(raw, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class KeyRing:
    keys: dict[str, AuditKey]
    signing_key: str | None = None

    @property
    def signer(self) -> AuditKey:
        if self.signing_key is None:
            raise KeyRingError("the audit key ring names no signing_key")
        return self.keys[self.signing_key]

    @classmethod
    def load(cls, path: Path) -> KeyRing:
        try:
            document = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise KeyRingError(f"cannot read the audit key ring {path}: {exc.strerror}") from None
        except yaml.YAMLError:
            raise KeyRingError(f"the audit key ring {path} is not valid YAML or JSON") from None
        return cls.parse(document, base=path.parent, name=str(path))

    @classmethod
    def parse(cls, document: Any, *, base: Path, name: str = "the audit key ring") -> KeyRing:
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise KeyRingError(f"{name}: expected a mapping with a 'keys' list")
        unknown = set(document) - {"signing_key", "keys"}
        if unknown:
            raise KeyRingError(f"{name}: unknown field {sorted(unknown)[0]!r}")
        keys: dict[str, AuditKey] = {}
        for index, entry in enumerate(document["keys"]):
            key = _key(entry, base, f"{name}: keys[{index}]")
            if key.id in keys:
                raise KeyRingError(f"{name}: key id {key.id!r} appears twice")
            keys[key.id] = key
        signing = document.get("signing_key")
        if signing is not None:
            if not isinstance(signing, str) or signing not in keys:
                raise KeyRingError(f"{name}: signing_key {signing!r} is not one of its keys")
            if not keys[signing].can_sign:
                raise KeyRingError(f"{name}: signing_key {signing!r} has no private key")
        return cls(keys, signing)


_FIELDS = {"id", "algorithm", "private_key_file", "public_key_file", "secret", "secret_file"}


def _key(entry: Any, base: Path, where: str) -> AuditKey:
    if not isinstance(entry, dict):
        raise KeyRingError(f"{where}: expected a mapping")
    unknown = set(entry) - _FIELDS
    if unknown:
        raise KeyRingError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    key_id, algorithm = entry.get("id"), entry.get("algorithm")
    if not isinstance(key_id, str) or not key_id or len(key_id) > 255:
        raise KeyRingError(f"{where}: 'id' must be a non-empty string")
    if algorithm not in ALGORITHMS:
        raise KeyRingError(f"{where}: 'algorithm' must be one of {', '.join(ALGORITHMS)}")
    if algorithm == HMAC_SHA256:
        secret = _secret(entry, base, where)
        return AuditKey(key_id, algorithm, secret=secret)
    if "private_key_file" in entry:
        pem = _read(base, entry["private_key_file"], where)
        try:
            loaded: object = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            loaded = None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise KeyRingError(f"{where}: private_key_file is not an unencrypted Ed25519 PEM key")
        return AuditKey(key_id, algorithm, private=loaded, public=loaded.public_key())
    if "public_key_file" in entry:
        try:
            public: object = serialization.load_pem_public_key(
                _read(base, entry["public_key_file"], where)
            )
        except (ValueError, UnsupportedAlgorithm):
            public = None
        if not isinstance(public, Ed25519PublicKey):
            raise KeyRingError(f"{where}: public_key_file is not an Ed25519 key")
        return AuditKey(key_id, algorithm, public=public)
    raise KeyRingError(f"{where}: an ed25519 key needs private_key_file or public_key_file")


def _secret(entry: dict[str, Any], base: Path, where: str) -> bytes:
    if "secret_file" in entry:
        text = _read(base, entry["secret_file"], where).decode(errors="replace").strip()
    elif isinstance(entry.get("secret"), str):
        text = entry["secret"]
    else:
        raise KeyRingError(f"{where}: an hmac-sha256 key needs secret or secret_file")
    try:
        secret = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise KeyRingError(f"{where}: the secret must be base64") from None
    if len(secret) < _MIN_SECRET:
        raise KeyRingError(f"{where}: the secret must be at least {_MIN_SECRET} bytes")
    return secret


def _read(base: Path, name: Any, where: str) -> bytes:
    if not isinstance(name, str):
        raise KeyRingError(f"{where}: a key file name must be a string")
    path = base / name
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyRingError(f"{where}: cannot read {path}: {exc.strerror}") from None


def keys_from_env(environ: Mapping[str, str]) -> KeyRing | None:
    """The key ring named by ``SIGNOFF_AUDIT_KEYS``; ``None`` when it is not set."""
    path = environ.get(ENV)
    return KeyRing.load(Path(path)) if path else None


def generate_ed25519(directory: Path, key_id: str) -> tuple[Path, Path]:
    """Write ``<id>.pem`` (private, mode 0600) and ``<id>.pub.pem``; return both paths."""
    private = Ed25519PrivateKey.generate()
    private_path = directory / f"{key_id}.pem"
    public_path = directory / f"{key_id}.pub.pem"
    private_path.touch(mode=0o600, exist_ok=False)
    private_path.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public_path.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_path, public_path
