"""Signed policies: the shared vectors (tests/vectors/signing/cases.json), and a
real component refused by load and swap when it is tampered with after signing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.rsa import generate_private_key

from agent_recovery import Policy, PolicyHandle, PolicyRuntimeError, SwapError
from agent_recovery.signing import (
    SIGNATURE_PROBLEMS,
    SignatureError,
    generate_signing_key,
    key_id,
    read_signed,
    read_trusted_key,
    sign,
    signature_path,
    verify,
)

VECTORS: Dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[2] / "tests" / "vectors" / "signing" / "cases.json").read_text()
)


def pem(name: str) -> str:
    return str(VECTORS["keys"][name]["public_pem"])


def verdict(content: str, sig: Optional[str], trusted: List[str]) -> Dict[str, Any]:
    try:
        return {"ok": True, "key": verify(content.encode(), sig, [pem(n) for n in trusted], "policy.yaml")}
    except SignatureError as e:
        assert e.code == "signature" and "policy.yaml" in e.message
        return {"error": e.code, "problem": e.problem}


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_signing_vector(case: Dict[str, Any]) -> None:
    assert verdict(case["content"], case["sig"], case["trusted"]) == case["expect"]


def test_the_vectors_cover_every_problem() -> None:
    problems = {c["expect"]["problem"] for c in VECTORS["cases"] if "problem" in c["expect"]}
    assert problems == set(SIGNATURE_PROBLEMS)


def test_key_ids_and_signatures_agree_with_the_vectors() -> None:
    for name, key in VECTORS["keys"].items():
        assert key_id(key["public_pem"]) == key["id"], name
    s = VECTORS["sign"]
    assert sign(s["content"].encode(), VECTORS["keys"][s["key"]]["private_pem"]) == s["sig"]


def test_a_tampered_signed_component_is_refused_by_load_and_swap(tmp_path: Path, reference_bytes: bytes) -> None:
    private, public, kid = generate_signing_key()
    assert kid == key_id(public)
    (tmp_path / "ops.pub").write_text(public)
    keys = [read_trusted_key(tmp_path / "ops.pub")]
    path = tmp_path / "policy.wasm"
    path.write_bytes(reference_bytes)
    signature_path(path).write_text(sign(reference_bytes, private) + "\n")
    handle = PolicyHandle.load(path, require_signature=keys)
    signed = handle.describe()["sha256"]

    tampered = bytearray(reference_bytes)
    tampered[-1] ^= 0x01
    path.write_bytes(bytes(tampered))
    with pytest.raises(SignatureError) as refused:
        Policy.load(path, require_signature=keys)
    assert refused.value.code == "signature" and refused.value.problem == "bad-signature"
    assert f"{path}: bad signature" in refused.value.message
    with pytest.raises(SwapError) as swap:
        handle.swap(path, require_signature=keys)
    assert swap.value.code == "signature" and swap.value.problem == "bad-signature"
    assert handle.describe()["sha256"] == signed and handle.describe()["swaps"] == 0
    assert handle.decide({"source": "http", "status": 503}, {"attempt": 1, "seed": 1})["action"] == "retry"

    path.write_bytes(reference_bytes)
    signature_path(path).unlink()
    with pytest.raises(SwapError) as missing:
        handle.swap(path, require_signature=keys)
    assert missing.value.problem == "missing"
    signature_path(path).write_text(sign(reference_bytes, Ed25519PrivateKey.generate()))
    with pytest.raises(SwapError) as unknown:
        handle.swap(path, require_signature=keys)
    assert unknown.value.problem == "unknown-key"
    # Bytes carry their .sig text in `signature`.
    with pytest.raises(SwapError) as no_sig:
        handle.swap(reference_bytes, require_signature=keys)
    assert no_sig.value.problem == "missing"
    assert handle.swap(reference_bytes, require_signature=keys, signature=sign(reference_bytes, private))["sha256"] == signed
    handle.swap(path)  # without require_signature nothing is checked, as before
    assert handle.describe()["swaps"] == 2


def test_a_signed_policy_document_is_read_only_when_its_signature_holds(tmp_path: Path) -> None:
    private, public, _ = generate_signing_key()
    doc = tmp_path / "checkout.yaml"
    text = VECTORS["sign"]["content"].encode()
    doc.write_bytes(text)
    signature_path(doc).write_text(sign(text, private))
    assert read_signed(doc, [public]) == text
    doc.write_bytes(text.replace(b"max_attempts: 2", b"max_attempts: 9"))
    with pytest.raises(SignatureError) as refused:
        read_signed(doc, [public])
    assert refused.value.problem == "bad-signature"


def test_a_trusted_key_that_is_not_ed25519_is_an_invalid_argument() -> None:
    rsa = (
        generate_private_key(public_exponent=65537, key_size=1024)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    for key in ("not a key", rsa):
        with pytest.raises(PolicyRuntimeError) as bad:
            verify(b"x", VECTORS["sign"]["sig"], [key])
        assert bad.value.code == "invalid-argument"
