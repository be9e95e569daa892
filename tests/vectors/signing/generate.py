"""Writes tests/vectors/signing/cases.json, the signed-policy vectors every
host runs (run it from the repository root):

    python3 tests/vectors/signing/generate.py           # write it
    python3 tests/vectors/signing/generate.py --check   # fail if it is not what this writes

A signed policy `FILE` has a detached `FILE.sig`:

    {"alg":"ed25519","key":"sha256:<hex>","sig":"<base64>"}

`key` is `sha256:` and the hex sha256 of the signer's public key as
SubjectPublicKeyInfo DER; `sig` the standard, padded base64 of the Ed25519
(RFC 8032) signature over the exact bytes of FILE. The signatures here are
made with the `cryptography` package (OpenSSL), not with any host's code, from
keys with fixed seeds (Ed25519 is deterministic, so the file is reproducible).
RFC 8032's test 1 is checked first, so the library agrees with the RFC.

Each case gives the file's content (UTF-8 text), the `.sig` text (null: none),
the names of the trusted keys, and the verdict: `{"ok": true, "key": ID}`, or
`{"error": "signature", "problem": P}` with P the first failing check, in this
order: `missing` (no .sig), `malformed` (not that JSON shape: members `alg`,
`key`, `sig` strings; `key` `sha256:` and 64 lowercase hex digits; `sig` the
canonical base64 of 64 bytes), `unsupported-alg` (alg not `ed25519`),
`unknown-key` (key id not trusted), `bad-signature` (does not verify with that
key over these bytes).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

HERE = Path(__file__).resolve().parent
OUT = HERE / "cases.json"

# RFC 8032, section 7.1, TEST 1 (an empty message).
RFC8032_SECRET = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
RFC8032_PUBLIC = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
RFC8032_SIGNATURE = (
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)


def key_from_seed(seed: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(seed)


def key_id(private: Ed25519PrivateKey) -> str:
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "sha256:" + hashlib.sha256(der).hexdigest()


def public_pem(private: Ed25519PrivateKey) -> str:
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def private_pem(private: Ed25519PrivateKey) -> str:
    return private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def sig_text(alg: str, key: str, sig: str) -> str:
    return json.dumps({"alg": alg, "key": key, "sig": sig}, separators=(",", ":"))


def sign(private: Ed25519PrivateKey, content: bytes, *, key: str | None = None) -> str:
    raw = private.sign(content)
    return sig_text("ed25519", key or key_id(private), base64.b64encode(raw).decode())


def rfc8032() -> Ed25519PrivateKey:
    """The RFC's key; fails unless the library makes the RFC's signature."""
    private = key_from_seed(bytes.fromhex(RFC8032_SECRET))
    public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert public.hex() == RFC8032_PUBLIC, "the library derives another public key than RFC 8032"
    assert private.sign(b"").hex() == RFC8032_SIGNATURE, "the library signs unlike RFC 8032"
    return private


def build() -> dict:
    content = (HERE / "checkout.yaml").read_bytes()
    rfc = rfc8032()
    keys = {
        "first": key_from_seed(bytes([1]) * 32),
        "second": key_from_seed(bytes([2]) * 32),
        "outsider": key_from_seed(bytes([3]) * 32),
        "rfc8032": rfc,
    }
    first, second, outsider = keys["first"], keys["second"], keys["outsider"]
    valid = sign(first, content)
    valid_fields = json.loads(valid)
    # One bit of one byte flipped: "max_attempts: 2" becomes "max_attempts: 3".
    at = content.index(b"max_attempts: 2") + len(b"max_attempts: ")
    tampered = content[:at] + bytes([content[at] ^ 0x01]) + content[at + 1 :]
    raw = bytearray(base64.b64decode(valid_fields["sig"]))
    raw[10] ^= 0x01
    flipped_sig = base64.b64encode(bytes(raw)).decode()
    text = content.decode()
    trusted = ["first", "second"]

    def ok(key: Ed25519PrivateKey) -> dict:
        return {"ok": True, "key": key_id(key)}

    def refused(problem: str) -> dict:
        return {"error": "signature", "problem": problem}

    cases = [
        ("valid", text, valid, trusted, ok(first)),
        ("valid, signed by the second trusted key", text, sign(second, content), trusted, ok(second)),
        ("valid, members beyond alg, key and sig are ignored",
         text, valid[:-1] + ',"signed_at":"2026-01-01T00:00:00Z"}', trusted, ok(first)),
        ("RFC 8032 test 1 (an empty file)", "",
         sig_text("ed25519", key_id(rfc), base64.b64encode(bytes.fromhex(RFC8032_SIGNATURE)).decode()),
         ["rfc8032"], ok(rfc)),
        ("tampered content: one byte flipped", tampered.decode(), valid, trusted, refused("bad-signature")),
        ("tampered signature: one bit flipped", text,
         sig_text("ed25519", key_id(first), flipped_sig), trusted, refused("bad-signature")),
        ("signed by a key that is not trusted", text, sign(outsider, content), trusted, refused("unknown-key")),
        ("no trusted keys at all", text, valid, [], refused("unknown-key")),
        ("key id mismatch: signed by the second key, naming the first", text,
         sign(second, content, key=key_id(first)), trusted, refused("bad-signature")),
        ("missing .sig", text, None, trusted, refused("missing")),
        ("malformed .sig: not JSON", text, valid[: len(valid) // 2], trusted, refused("malformed")),
        ("malformed .sig: a JSON array", text, "[]", trusted, refused("malformed")),
        ("malformed .sig: no sig member", text,
         json.dumps({"alg": "ed25519", "key": key_id(first)}, separators=(",", ":")), trusted, refused("malformed")),
        ("malformed .sig: key is not a sha256 id", text,
         sig_text("ed25519", key_id(first).upper(), valid_fields["sig"]), trusted, refused("malformed")),
        ("malformed .sig: sig is not base64 of 64 bytes", text,
         sig_text("ed25519", key_id(first), valid_fields["sig"][:-4]), trusted, refused("malformed")),
        ("malformed .sig: sig base64 without padding", text,
         sig_text("ed25519", key_id(first), valid_fields["sig"].rstrip("=")), trusted, refused("malformed")),
        ("wrong alg", text, sig_text("rsa-pss-sha256", key_id(first), valid_fields["sig"]), trusted,
         refused("unsupported-alg")),
        ("wrong alg: the right name in another case", text, sig_text("Ed25519", key_id(first), valid_fields["sig"]),
         trusted, refused("unsupported-alg")),
    ]
    return {
        "description": "Signed policies: the verdict on FILE and FILE.sig for the trusted keys named; "
        "written by tests/vectors/signing/generate.py, run by the Rust, Node and Python hosts.",
        "keys": {
            name: {"id": key_id(key), "public_pem": public_pem(key)}
            | ({"private_pem": private_pem(key)} if name == "first" else {})
            for name, key in keys.items()
        },
        "sign": {"key": "first", "content": text, "sig": valid},
        "cases": [
            {"name": name, "content": content_text, "sig": sig, "trusted": names, "expect": expect}
            for name, content_text, sig, names, expect in cases
        ],
    }


def main() -> int:
    text = json.dumps(build(), indent=2, ensure_ascii=False) + "\n"
    if "--check" in sys.argv[1:]:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is not what generate.py writes; run python3 tests/vectors/signing/generate.py")
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
