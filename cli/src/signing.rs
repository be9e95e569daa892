//! Signed policies on the command line: `policy keygen`, `policy sign`,
//! `policy verify`, and `--require-signature --trusted-key PUB` on the
//! commands that load a policy file. The crypto is the library's
//! (`agent_recovery::signing`, Ed25519 from `ed25519-dalek`).

use std::path::Path;

use agent_recovery::signing::{self, SigningKey, TrustedKey};
use serde_json::json;

use crate::Usage;
use crate::args::{Global, PolicyKeygen, PolicySign, PolicyVerify};
use crate::commands::print;

/// The `--trusted-key` files, read.
fn trusted_keys(g: &Global) -> anyhow::Result<Vec<TrustedKey>> {
    g.trusted_key
        .iter()
        .map(|path| {
            TrustedKey::from_file(path).map_err(|e| Usage(format!("--trusted-key: {e}")).into())
        })
        .collect()
}

/// The keys a loaded policy must be signed by: `Some` with --require-signature.
pub fn required_keys(g: &Global) -> anyhow::Result<Option<Vec<TrustedKey>>> {
    if !g.require_signature {
        return Ok(None);
    }
    trusted_keys(g).map(Some)
}

/// The bytes of the policy file `path`: with --require-signature, only when
/// `path.sig` is a valid signature by a --trusted-key (the bytes checked are
/// the bytes returned, so the file cannot change in between).
pub fn read_policy(g: &Global, path: &str) -> anyhow::Result<Vec<u8>> {
    match required_keys(g)? {
        Some(keys) => Ok(signing::read_signed(path, &keys)?),
        None => std::fs::read(path).map_err(|e| {
            anyhow::Error::from(Usage(format!("cannot read {path}: {e}; check the path")))
        }),
    }
}

fn write(path: &Path, text: &str, private: bool) -> anyhow::Result<()> {
    let fail = |e: std::io::Error| {
        Usage(format!(
            "cannot write {}: {e}; check that the directory exists",
            path.display()
        ))
    };
    #[cfg(unix)]
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mode = if private { 0o600 } else { 0o644 };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)
            .map_err(fail)?;
        file.write_all(text.as_bytes()).map_err(fail)?;
    }
    #[cfg(not(unix))]
    {
        let _ = private;
        std::fs::write(path, text).map_err(fail)?;
    }
    Ok(())
}

/// `policy keygen --out KEY`: KEY (PKCS#8 PEM, mode 0600) and KEY.pub.
pub fn keygen(a: PolicyKeygen) -> anyhow::Result<()> {
    let private = Path::new(&a.out);
    let public = format!("{}.pub", a.out);
    for path in [private, Path::new(&public)] {
        if path.exists() && !a.force {
            return Err(Usage(format!(
                "{} exists; choose another --out, or pass --force to overwrite it",
                path.display()
            ))
            .into());
        }
    }
    let key = SigningKey::generate()?;
    write(private, &key.to_pem(), true)?;
    write(Path::new(&public), &key.public_pem(), false)?;
    print(
        &json!({
            "private": a.out,
            "public": public,
            "key": key.id(),
        })
        .to_string(),
    )
}

/// `policy sign FILE --key KEY`: writes FILE.sig.
pub fn sign(a: PolicySign) -> anyhow::Result<()> {
    let key = SigningKey::from_file(&a.key).map_err(|e| Usage(format!("--key: {e}")))?;
    let bytes = std::fs::read(&a.file)
        .map_err(|e| Usage(format!("cannot read {}: {e}; check the path", a.file)))?;
    let sig_path = signing::signature_path(&a.file);
    write(
        &sig_path,
        &format!("{}\n", signing::sign(&bytes, &key)),
        false,
    )?;
    print(
        &json!({
            "file": a.file,
            "signature": sig_path.display().to_string(),
            "key": key.id(),
        })
        .to_string(),
    )
}

/// `policy verify FILE --trusted-key PUB...`: exit 0 when FILE.sig holds, 1 when not.
pub fn verify(g: &Global, a: PolicyVerify) -> anyhow::Result<()> {
    if g.trusted_key.is_empty() {
        return Err(Usage(
            "policy verify needs --trusted-key PUB, the public key(s) the file may be signed with"
                .into(),
        )
        .into());
    }
    let keys = trusted_keys(g)?;
    let bytes = std::fs::read(&a.file)
        .map_err(|e| Usage(format!("cannot read {}: {e}; check the path", a.file)))?;
    let sig_path = signing::signature_path(&a.file);
    let sig = match std::fs::read(&sig_path) {
        Ok(sig) => Some(sig),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Usage(format!(
                "cannot read {}: {e}; check its permissions",
                sig_path.display()
            ))
            .into());
        }
    };
    let key = signing::verify(&bytes, sig.as_deref(), &keys, &a.file)
        .map_err(agent_recovery::Error::from)?;
    print(
        &json!({
            "file": a.file,
            "signature": sig_path.display().to_string(),
            "key": key,
            "verified": true,
        })
        .to_string(),
    )
}
