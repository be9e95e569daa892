"""Signed policies: a detached Ed25519 signature beside a policy file, checked
against the public keys the operator trusts before the policy is loaded.

`FILE.sig` is `{"alg":"ed25519","key":"sha256:<hex>","sig":"<base64>"}`: `key`
is the hex sha256 of the signer's public key as SubjectPublicKeyInfo DER,
`sig` the padded base64 of the Ed25519 (RFC 8032) signature over the exact
bytes of FILE. The checks and their order are the Rust and Node hosts'
(docs/signing.md; pinned by tests/vectors/signing/).

The crypto is the `cryptography` package's (`pip install 'agent-recovery[signing]'`),
imported on first use; nothing here is hand-written.

    from agent_recovery import PolicyHandle
    from agent_recovery.signing import read_trusted_key

    keys = [read_trusted_key("ops.pub")]
    handle = PolicyHandle.load("policy.wasm", require_signature=keys)  # reads policy.wasm.sig
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional, Sequence, Tuple, Union

from .errors import PolicyRuntimeError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

#: Why a signature is refused, in the order the checks run.
SIGNATURE_PROBLEMS: Final = ("missing", "malformed", "unsupported-alg", "unknown-key", "bad-signature")

#: A trusted key: PEM text or bytes (SubjectPublicKeyInfo), or an `Ed25519PublicKey`.
TrustedKey = Union[str, bytes, "Ed25519PublicKey"]

ALG: Final = "ed25519"
_KEY_ID = re.compile(r"sha256:[0-9a-f]{64}")
_MAX_SIG_BYTES: Final = 64 << 10


class SignatureError(PolicyRuntimeError):
    """A signature was required and refused: `code` and `kind` are `signature`,
    `problem` one of `SIGNATURE_PROBLEMS`; the message names the file and ends
    with a hint."""

    problem: str

    def __init__(self, problem: str, message: str) -> None:
        super().__init__("signature", message, code="signature")
        self.problem = problem


def _crypto() -> None:
    """Fails with a hint when the `cryptography` package is not installed."""
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise PolicyRuntimeError(
            "invalid_argument",
            "signed policies need the `cryptography` package; install it with "
            "`pip install 'agent-recovery[signing]'`",
        ) from None


def _public_key(key: TrustedKey) -> "Ed25519PublicKey":
    _crypto()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.public_key()
    try:
        loaded = serialization.load_pem_public_key(key.encode() if isinstance(key, str) else bytes(key))
    except (ValueError, TypeError) as e:
        raise PolicyRuntimeError(
            "invalid_argument",
            f"a trusted key must be an Ed25519 public key in PEM ({e}); pass the .pub file "
            "written by `agent-recovery policy keygen`",
        ) from None
    if not isinstance(loaded, ed25519.Ed25519PublicKey):
        raise PolicyRuntimeError(
            "invalid_argument",
            f"a trusted key must be an Ed25519 public key, got {type(loaded).__name__}; pass the "
            ".pub file written by `agent-recovery policy keygen`",
        )
    return loaded


def key_id(key: TrustedKey) -> str:
    """`sha256:` and the hex sha256 of the key's SubjectPublicKeyInfo DER."""
    from cryptography.hazmat.primitives import serialization

    der = _public_key(key).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "sha256:" + hashlib.sha256(der).hexdigest()


def read_trusted_key(path: "Union[str, os.PathLike[str]]") -> "Ed25519PublicKey":
    """Reads an Ed25519 public key PEM file (as `agent-recovery policy keygen` writes KEY.pub)."""
    try:
        return _public_key(Path(path).read_bytes())
    except OSError as e:
        raise PolicyRuntimeError("io", f"cannot read trusted key {str(path)!r} ({e.strerror}); check the path") from None


def generate_signing_key() -> Tuple[str, str, str]:
    """A new key pair: (private PKCS#8 PEM, public SubjectPublicKeyInfo PEM, key id)."""
    _crypto()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    private = ed25519.Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    return private_pem, public_pem, key_id(private.public_key())


def sign(data: bytes, private_key: "Union[str, bytes, Ed25519PrivateKey]") -> str:
    """Signs `data` with an Ed25519 private key (PKCS#8 PEM or key object); returns the `.sig` JSON text."""
    _crypto()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key: Any = private_key
    if isinstance(key, (str, bytes)):
        key = serialization.load_pem_private_key(key.encode() if isinstance(key, str) else key, password=None)
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise PolicyRuntimeError("invalid_argument", "a signing key must be an Ed25519 private key")
    sig = base64.b64encode(key.sign(bytes(data))).decode()
    return json.dumps({"alg": ALG, "key": key_id(key.public_key()), "sig": sig}, separators=(",", ":"))


def signature_path(path: "Union[str, os.PathLike[str]]") -> Path:
    """Where the signature of `path` is: `path` with `.sig` appended."""
    return Path(os.fspath(path) + ".sig")


def verify(
    data: bytes,
    signature: "Union[str, bytes, None]",
    trusted_keys: Sequence[TrustedKey],
    label: str = "the policy",
) -> str:
    """Checks `signature` (the `.sig` text; None: none) over `data` against
    `trusted_keys`; returns the signer's key id or raises `SignatureError`."""
    _crypto()
    from cryptography.exceptions import InvalidSignature

    keys = {key_id(k): _public_key(k) for k in trusted_keys}
    if signature is None:
        raise SignatureError(
            "missing",
            f"{label}: no signature ({label}.sig); sign it with `agent-recovery policy sign "
            f"{label} --key KEY`, or load it without require_signature",
        )

    def malformed(what: str) -> SignatureError:
        return SignatureError(
            "malformed",
            f"{label}.sig is malformed: {what}; expected "
            '{"alg":"ed25519","key":"sha256:<hex>","sig":"<base64>"} as written by '
            "`agent-recovery policy sign`",
        )

    try:
        value = json.loads(signature)
    except (ValueError, UnicodeDecodeError) as e:
        raise malformed(f"not JSON ({e})") from None

    def field(name: str) -> str:
        v = value.get(name) if isinstance(value, dict) else None
        if not isinstance(v, str):
            raise malformed(f'no string member "{name}"')
        return v

    alg, key, sig = field("alg"), field("key"), field("sig")
    if alg != ALG:
        raise SignatureError(
            "unsupported-alg",
            f'{label}.sig: unsupported alg {json.dumps(alg[:40])}; only "ed25519" is accepted, '
            "re-sign with `agent-recovery policy sign`",
        )
    if not _KEY_ID.fullmatch(key):
        raise malformed('"key" is not sha256: and 64 lowercase hex digits')
    try:
        raw = base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 64 or base64.b64encode(raw).decode() != sig:
        raise malformed('"sig" is not the base64 of 64 bytes')
    public = keys.get(key)
    if public is None:
        raise SignatureError(
            "unknown-key",
            f"{label}: signed by key {key}, which is not trusted; trust its public key "
            "(require_signature), or re-sign the file with a trusted key",
        )
    try:
        public.verify(raw, bytes(data))
    except InvalidSignature:
        raise SignatureError(
            "bad-signature",
            f"{label}: bad signature: the signature by {key} does not match its content; the file "
            "or its .sig changed after signing, restore the signed file or sign it again",
        ) from None
    return key


def read_signature(path: "Union[str, os.PathLike[str]]") -> Optional[bytes]:
    """The `.sig` of `path`, or None when there is none."""
    sig_path = signature_path(path)
    try:
        with open(sig_path, "rb") as f:
            return f.read(_MAX_SIG_BYTES)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PolicyRuntimeError(
            "io", f"cannot read signature {str(sig_path)!r} ({e.strerror}); check its permissions"
        ) from None


def read_signed(path: "Union[str, os.PathLike[str]]", trusted_keys: Sequence[TrustedKey]) -> bytes:
    """Reads the policy file at `path` (a component or a policy document) and
    its `.sig`, checks the signature, and returns the verified bytes (load
    those: reading the file again could read other bytes)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise PolicyRuntimeError("io", f"cannot read policy {str(path)!r} ({e.strerror}); check the path") from None
    verify(data, read_signature(path), trusted_keys, os.fspath(path))
    return data


__all__ = [
    "SIGNATURE_PROBLEMS",
    "SignatureError",
    "TrustedKey",
    "generate_signing_key",
    "key_id",
    "read_signature",
    "read_signed",
    "read_trusted_key",
    "sign",
    "signature_path",
    "verify",
]
