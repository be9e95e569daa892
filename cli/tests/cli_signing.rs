//! Signed policies on the command line: `policy keygen`, `policy sign`,
//! `policy verify`, and `--require-signature --trusted-key` on the commands
//! that load a policy (`--policy` of any command, `check`, `serve`). A policy
//! changed after signing is refused (exit 1), with a message naming the file.

mod common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use common::cli::{OBS_429, fails, ok, path_str, run};

const OBS_409: &str = r#"{"source":"http","status":409}"#;
use common::fixtures::payments_wasm;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `policy keygen --out DIR/NAME`: the private key path, the public key path, the key id.
fn keygen(dir: &Path, name: &str) -> (String, String, String) {
    let out = dir.join(name);
    let printed = parsed(&ok(&run(
        &["policy", "keygen", "--out", path_str(&out)],
        b"",
    )));
    let public = format!("{}.pub", out.display());
    assert_eq!(
        printed,
        json!({"private": path_str(&out), "public": public, "key": printed["key"]})
    );
    let key = printed["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("sha256:") && key.len() == 71, "{key}");
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----")
    );
    assert!(
        std::fs::read_to_string(&public)
            .unwrap()
            .starts_with("-----BEGIN PUBLIC KEY-----")
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the private key is readable by its owner only"
        );
    }
    (path_str(&out).to_string(), public, key)
}

fn sign(file: &str, key: &str) -> Value {
    parsed(&ok(&run(&["policy", "sign", file, "--key", key], b"")))
}

#[test]
fn keygen_sign_verify_round_trip_on_a_policy_document_then_a_tampered_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public, key) = keygen(dir.path(), "ops");
    // A real, bare policy document: the payments example.
    let doc = dir.path().join("policy.yaml");
    let text = std::fs::read(repo("examples/payments-policy/policy.yaml")).unwrap();
    std::fs::write(&doc, &text).unwrap();
    let doc = path_str(&doc).to_string();
    let sig = format!("{doc}.sig");
    assert_eq!(
        sign(&doc, &private),
        json!({"file": doc, "signature": sig, "key": key})
    );
    let written = parsed(&std::fs::read_to_string(&sig).unwrap());
    assert_eq!(written["alg"], "ed25519");
    assert_eq!(written["key"], key.as_str());

    let verified = parsed(&ok(&run(
        &["policy", "verify", &doc, "--trusted-key", &public],
        b"",
    )));
    assert_eq!(
        verified,
        json!({"file": doc, "signature": sig, "key": key, "verified": true})
    );

    // The signed document decides as the unsigned one does: a 409 is
    // permanent there (the reference restores and retries).
    let decide = |extra: &[&str]| {
        let mut args = vec![
            "--policy",
            doc.as_str(),
            "decide",
            "-",
            "--seed",
            "7",
            "--json",
        ];
        args.extend_from_slice(extra);
        run(&args, OBS_409.as_bytes())
    };
    let unsigned = parsed(&ok(&decide(&[])));
    let signed = parsed(&ok(&decide(&[
        "--require-signature",
        "--trusted-key",
        &public,
    ])));
    assert_eq!(signed, unsigned);
    assert_eq!(signed["action"], "fail", "{signed}");

    // One byte changed after signing: every path refuses it.
    let mut tampered = text.clone();
    let at = tampered.iter().position(|&b| b.is_ascii_digit()).unwrap();
    tampered[at] ^= 0x01;
    std::fs::write(&doc, &tampered).unwrap();
    let err = fails(
        &run(&["policy", "verify", &doc, "--trusted-key", &public], b""),
        1,
    );
    assert!(
        err.contains(&format!("{doc}: bad signature: the signature by {key}")),
        "{err}"
    );
    let err = fails(
        &decide(&["--require-signature", "--trusted-key", &public]),
        1,
    );
    assert!(err.contains("bad signature") && err.contains(&doc), "{err}");
    let err = fails(
        &run(
            &[
                "policy",
                "pack",
                &doc,
                "-o",
                path_str(&dir.path().join("p.wasm")),
                "--require-signature",
                "--trusted-key",
                &public,
            ],
            b"",
        ),
        1,
    );
    assert!(err.contains("bad signature"), "{err}");
}

#[test]
fn a_signed_component_is_checked_and_served_and_refused_once_tampered() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public, _) = keygen(dir.path(), "ops");
    let bytes = std::fs::read(payments_wasm()).unwrap();
    let wasm = dir.path().join("payments.wasm");
    std::fs::write(&wasm, &bytes).unwrap();
    let wasm = path_str(&wasm).to_string();
    sign(&wasm, &private);
    let required = ["--require-signature", "--trusted-key", public.as_str()];

    let mut args = vec!["check", wasm.as_str()];
    args.extend_from_slice(&required);
    assert_eq!(parsed(&ok(&run(&args, b"")))["name"], "payments-strict");
    let mut serve = vec!["serve", "--policy", wasm.as_str()];
    serve.extend_from_slice(&required);
    let out = run(
        &serve,
        format!("{{\"observation\":{OBS_429}}}\n").as_bytes(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = parsed(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    );
    assert_eq!(line["policy"]["name"], "payments-strict", "{line}");

    let mut tampered = bytes.clone();
    *tampered.last_mut().unwrap() ^= 0x01;
    std::fs::write(&wasm, &tampered).unwrap();
    for args in [args, serve] {
        let err = fails(&run(&args, b""), 1);
        assert!(
            err.contains(&format!("{wasm}: bad signature")),
            "{args:?}: {err}"
        );
    }
    let mut decide = vec!["--policy", wasm.as_str(), "decide", "-"];
    decide.extend_from_slice(&required);
    let err = fails(&run(&decide, OBS_429.as_bytes()), 1);
    assert!(err.contains("bad signature"), "{err}");
    // Without --require-signature nothing is checked: the flipped byte (in
    // the component's last custom section) may load or fail to load, but it
    // is never a signature refusal.
    let out = run(&["check", &wasm], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("signature"), "{err}");
}

#[test]
fn an_unsigned_or_foreign_signed_policy_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (_, public, _) = keygen(dir.path(), "ops");
    let (outsider, _, outsider_id) = keygen(dir.path(), "outsider");
    let doc = dir.path().join("policy.yaml");
    std::fs::copy(repo("examples/payments-policy/policy.yaml"), &doc).unwrap();
    let doc = path_str(&doc).to_string();
    let verify = |doc: &str| run(&["policy", "verify", doc, "--trusted-key", &public], b"");

    let err = fails(&verify(&doc), 1);
    assert!(
        err.contains(&format!("{doc}: no signature ({doc}.sig)")),
        "{err}"
    );
    sign(&doc, &outsider);
    let err = fails(&verify(&doc), 1);
    assert!(
        err.contains(&format!(
            "signed by key {outsider_id}, which is not trusted"
        )),
        "{err}"
    );
    std::fs::write(format!("{doc}.sig"), "{\"alg\":\"ed25519\"").unwrap();
    let err = fails(&verify(&doc), 1);
    assert!(
        err.contains(&format!("{doc}.sig is malformed: not JSON")),
        "{err}"
    );
    std::fs::write(
        format!("{doc}.sig"),
        format!(r#"{{"alg":"rsa","key":"{outsider_id}","sig":""}}"#),
    )
    .unwrap();
    let err = fails(&verify(&doc), 1);
    assert!(err.contains("unsupported alg \"rsa\""), "{err}");
}

#[test]
fn policy_sign_writes_the_signature_the_shared_vectors_have() {
    let vectors =
        parsed(&std::fs::read_to_string(repo("tests/vectors/signing/cases.json")).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("first.pem");
    std::fs::write(
        &key,
        vectors["keys"]["first"]["private_pem"].as_str().unwrap(),
    )
    .unwrap();
    let file = dir.path().join("checkout.yaml");
    std::fs::write(&file, vectors["sign"]["content"].as_str().unwrap()).unwrap();
    sign(path_str(&file), path_str(&key));
    let written = std::fs::read_to_string(dir.path().join("checkout.yaml.sig")).unwrap();
    assert_eq!(written.trim_end(), vectors["sign"]["sig"].as_str().unwrap());
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (private, _, _) = keygen(dir.path(), "ops");
    let err = fails(&run(&["policy", "keygen", "--out", &private], b""), 2);
    assert!(
        err.contains("exists; choose another --out, or pass --force"),
        "{err}"
    );
    let doc = path_str(&repo("examples/payments-policy/policy.yaml")).to_string();
    let err = fails(&run(&["policy", "verify", &doc], b""), 2);
    assert!(err.contains("needs --trusted-key"), "{err}");
    let err = fails(
        &run(
            &["--policy", &doc, "--require-signature", "decide", "-"],
            b"",
        ),
        2,
    );
    assert!(err.contains("--trusted-key <PUB>"), "{err}");
    // A private key is not a trusted key.
    let err = fails(
        &run(&["policy", "verify", &doc, "--trusted-key", &private], b""),
        2,
    );
    assert!(err.contains("not an Ed25519 public key"), "{err}");
    let err = fails(
        &run(&["policy", "sign", &doc, "--key", "missing.pem"], b""),
        2,
    );
    assert!(err.contains("cannot read signing key missing.pem"), "{err}");
}
