//! Signed policies: the shared vectors (tests/vectors/signing/cases.json,
//! made with Python's `cryptography`), and a real component refused by every
//! validated entry point when it is tampered with after signing.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_recovery::signing::{self, SigningKey, TrustedKey};
use agent_recovery::{ErrorKind, Policy, PolicyHandle, SwapOptions, SwapStage};
use serde_json::{Value, json};

use common::handle::{CTX_409, OBS_409, payments_wasm, reference_handle};

fn vectors() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/signing/cases.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the signing vectors")).unwrap()
}

fn trusted(vectors: &Value, name: &str) -> TrustedKey {
    TrustedKey::from_pem(vectors["keys"][name]["public_pem"].as_str().unwrap()).expect(name)
}

#[test]
fn every_signing_vector_gets_its_verdict() {
    let vectors = vectors();
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    let mut problems = std::collections::BTreeSet::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let keys: Vec<TrustedKey> = case["trusted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| trusted(&vectors, n.as_str().unwrap()))
            .collect();
        let content = case["content"].as_str().unwrap().as_bytes();
        let sig = case["sig"].as_str().map(str::as_bytes);
        let got = match signing::verify(content, sig, &keys, "policy.yaml") {
            Ok(key) => json!({"ok": true, "key": key}),
            Err(e) => {
                assert!(e.message().contains("policy.yaml"), "{name}: {e}");
                let error: agent_recovery::Error = e.clone().into();
                assert_eq!(error.kind(), ErrorKind::Signature, "{name}");
                json!({"error": error.kind().as_str(), "problem": e.problem().as_str()})
            }
        };
        assert_eq!(got, case["expect"], "{name}");
        if let Some(problem) = case["expect"]["problem"].as_str() {
            problems.insert(problem.to_string());
        }
    }
    assert_eq!(
        problems.into_iter().collect::<Vec<_>>(),
        [
            "bad-signature",
            "malformed",
            "missing",
            "unknown-key",
            "unsupported-alg"
        ]
    );
}

#[test]
fn key_ids_and_signatures_agree_with_the_vectors_byte_for_byte() {
    let vectors = vectors();
    for (name, key) in vectors["keys"].as_object().unwrap() {
        assert_eq!(
            trusted(&vectors, name).id(),
            key["id"].as_str().unwrap(),
            "{name}"
        );
    }
    let sign = &vectors["sign"];
    let private = vectors["keys"][sign["key"].as_str().unwrap()]["private_pem"]
        .as_str()
        .unwrap();
    let key = SigningKey::from_pem(private).unwrap();
    let content = sign["content"].as_str().unwrap().as_bytes();
    assert_eq!(signing::sign(content, &key), sign["sig"].as_str().unwrap());
    // The private key round-trips through PEM, and its public key too.
    assert_eq!(SigningKey::from_pem(&key.to_pem()).unwrap().id(), key.id());
    assert_eq!(
        TrustedKey::from_pem(&key.public_pem()).unwrap(),
        key.trusted()
    );
}

/// A signed copy of the payments component in a temporary directory.
fn signed_payments(dir: &Path, key: &SigningKey) -> (PathBuf, Vec<u8>) {
    let bytes = std::fs::read(payments_wasm()).unwrap();
    let path = dir.join("payments.wasm");
    std::fs::write(&path, &bytes).unwrap();
    std::fs::write(
        signing::signature_path(&path),
        signing::sign(&bytes, key) + "\n",
    )
    .unwrap();
    (path, bytes)
}

/// A refusal at the signature check whose message says `what`.
fn refused(result: Result<Arc<agent_recovery::PolicyId>, agent_recovery::SwapError>, what: &str) {
    let error = result.expect_err(what);
    assert_eq!(error.stage(), SwapStage::Signature, "{error}");
    assert_eq!(error.kind(), ErrorKind::Signature, "{error}");
    assert!(error.message().contains(what), "{what}: {error}");
}

#[test]
fn a_tampered_signed_component_is_refused_and_the_active_policy_stays() {
    let dir = tempfile::tempdir().unwrap();
    let ops = SigningKey::from_seed([9; 32]);
    let options = SwapOptions::default().require_signature([ops.trusted()]);
    let (path, bytes) = signed_payments(dir.path(), &ops);
    let (handle, _) = reference_handle();
    let reference = handle.active().id().clone();

    let mut tampered = bytes.clone();
    *tampered.last_mut().unwrap() ^= 0x01;
    std::fs::write(&path, &tampered).unwrap();
    let error = handle.swap_file(&path, &options).expect_err("tampered");
    assert_eq!(
        (error.stage(), error.kind()),
        (SwapStage::Signature, ErrorKind::Signature)
    );
    assert_eq!(
        error.message(),
        format!(
            "{}: bad signature: the signature by {} does not match its content; the file or its .sig changed after signing, restore the signed file or sign it again",
            path.display(),
            ops.id()
        )
    );
    assert_eq!(
        error.to_string(),
        format!("refused at signature: {}", error.message())
    );
    assert_eq!(*handle.active().id(), reference);
    assert_eq!(handle.stats().refusals, 1);
    let err = PolicyHandle::builder()
        .file(&path, &options)
        .expect_err("a handle from a tampered file");
    assert_eq!(err.kind(), ErrorKind::Signature);

    // The signed bytes are accepted, from the file and from bytes with their .sig.
    std::fs::write(&path, &bytes).unwrap();
    let id = handle.swap_file(&path, &options).expect("the signed file");
    assert_eq!(id.name, "payments-strict");
    assert!(
        handle
            .decide_json(OBS_409, CTX_409)
            .unwrap()
            .json
            .contains(r#""action":"fail""#)
    );
    let sig = std::fs::read(signing::signature_path(&path)).unwrap();
    handle
        .swap_signed_bytes(&bytes, &sig, &options)
        .expect("bytes and their signature");
    refused(
        handle.swap_signed_bytes(&tampered, &sig, &options),
        "the candidate: bad signature",
    );
    refused(
        handle.swap_bytes(&bytes, &options),
        "the candidate: no signature",
    );
    let loaded = Arc::new(Policy::from_bytes(&bytes).unwrap());
    refused(handle.swap_policy(loaded, &options), "carries no signature");

    // Signed by a key that is not trusted; then no .sig at all.
    let outsider = SigningKey::from_seed([10; 32]);
    std::fs::write(
        signing::signature_path(&path),
        signing::sign(&bytes, &outsider),
    )
    .unwrap();
    refused(handle.swap_file(&path, &options), "which is not trusted");
    std::fs::remove_file(signing::signature_path(&path)).unwrap();
    refused(handle.swap_file(&path, &options), "no signature");
    // Without require_signature nothing is checked, as before.
    handle
        .swap_file(&path, &SwapOptions::default())
        .expect("unsigned, not required");
}

#[test]
fn a_signed_policy_document_is_read_only_when_its_signature_holds() {
    let dir = tempfile::tempdir().unwrap();
    let ops = SigningKey::generate().unwrap();
    let text = vectors()["sign"]["content"].as_str().unwrap().to_string();
    let doc = dir.path().join("checkout.yaml");
    std::fs::write(&doc, &text).unwrap();
    std::fs::write(
        signing::signature_path(&doc),
        signing::sign(text.as_bytes(), &ops),
    )
    .unwrap();
    assert_eq!(
        signing::read_signed(&doc, &[ops.trusted()]).unwrap(),
        text.as_bytes()
    );
    std::fs::write(&doc, text.replace("max_attempts: 2", "max_attempts: 9")).unwrap();
    let error = signing::read_signed(&doc, &[ops.trusted()]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Signature);
    assert!(error.message().contains("bad signature"), "{error}");
}

#[test]
fn a_trusted_key_that_is_not_an_ed25519_public_key_is_an_invalid_argument() {
    let private = SigningKey::from_seed([1; 32]).to_pem();
    for bad in ["not a key", private.as_str()] {
        let error = TrustedKey::from_pem(bad).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    }
}
