//! Published WIT versions are frozen.
//!
//! Each version lives in a folder of its own, `wit/agent-recovery@X.Y.Z/`, and
//! the guest, the hosts and every policy build from those folders (there are no
//! copies). A published version is never edited: a change is a new folder with
//! a new version. This test pins the sha256 of every file of every published
//! version, and checks that each folder declares the package its name says.
//! See docs/wit.md.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every published version: its folder, and the sha256 of each of its files.
const PUBLISHED: &[(&str, &[(&str, &str)])] = &[
    (
        "agent-recovery@0.1.0",
        &[
            (
                "policy.wit",
                "c75b681682103d20f8b803fb18a5488d34f27390704faf7d5676c179ae3f4c31",
            ),
            (
                "types.wit",
                "0f08fec36e84cb055d5ad1828d42ee58edef636c59c9655a99e2587cb5a7eb7b",
            ),
        ],
    ),
    (
        "agent-recovery@0.2.0",
        &[(
            "runtime.wit",
            "84d1b88c4518a6962ea7277782e51f4056f2b74ca9c845e519c5ef813adf8f38",
        )],
    ),
    (
        "agent-recovery@0.3.0",
        &[
            (
                "dead-letters.wit",
                "7593316f1c7cb6e708a896a3449b4914e4e9b3d4dbb5d0393bfc66f35280f478",
            ),
            (
                "runtime.wit",
                "e045c0c49409c3638af6478d517600cf33a37309f2e4f7fa3fdceaea19cf2ce3",
            ),
            (
                "scenario.wit",
                "7cd2b140d54cf0e4c0636d12426a63894c90e63dc44e15f06de65795f8c02e21",
            ),
            (
                "telemetry.wit",
                "cac74817360daa672d5c00bbd26f9a316cec62caf8519d08fa357783d4dbd8b7",
            ),
        ],
    ),
];

fn wit_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit")
}

fn wit_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wit"))
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap_or_default();
            (n, bytes)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn published_versions_are_unchanged() {
    for (folder, pinned) in PUBLISHED {
        let live = wit_files(&wit_root().join(folder));
        let names: Vec<&str> = live.keys().map(String::as_str).collect();
        let pinned_names: Vec<&str> = pinned.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names, pinned_names,
            "the files of the published wit/{folder}/ changed; a published WIT version is never \
             edited: put new interfaces in a new version folder"
        );
        for (name, digest) in *pinned {
            assert_eq!(
                hex(&live[*name]),
                *digest,
                "wit/{folder}/{name} differs from the published version; a published WIT version \
                 is never edited: revert the change and put it in a new version folder"
            );
        }
    }
}

#[test]
fn each_folder_declares_its_version() {
    let mut folders: Vec<String> = std::fs::read_dir(wit_root())
        .expect("wit/")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    assert!(!folders.is_empty(), "wit/ holds no version folder");
    for folder in &folders {
        let version = folder.strip_prefix("agent-recovery@").unwrap_or_else(|| {
            panic!("wit/{folder}/: a version folder is named agent-recovery@X.Y.Z")
        });
        let package = format!("package agent:recovery@{version};");
        let files = wit_files(&wit_root().join(folder));
        assert!(!files.is_empty(), "wit/{folder}/ holds no .wit file");
        let mut declared = 0;
        for (name, bytes) in files {
            let text = String::from_utf8(bytes).expect("WIT is UTF-8");
            for line in text.lines().filter(|l| l.starts_with("package ")) {
                assert_eq!(
                    line, package,
                    "wit/{name} in wit/{folder}/ must declare `{package}` (the folder names the version)"
                );
                declared += 1;
            }
        }
        assert!(
            declared > 0,
            "no file of wit/{folder}/ declares `{package}`"
        );
    }
    let runtime = std::fs::read_to_string(wit_root().join("agent-recovery@0.2.0/runtime.wit"))
        .unwrap_or_default();
    assert!(
        runtime.contains("include agent:recovery/recovery-policy@0.1.0;"),
        "the 0.2 world must include the 0.1 world unchanged, so 0.1 hosts keep working with the reference"
    );
    let typed = std::fs::read_to_string(wit_root().join("agent-recovery@0.3.0/runtime.wit"))
        .unwrap_or_default();
    assert!(
        typed.contains("include agent:recovery/recovery-runtime@0.2.0;"),
        "the 0.3 world must include the 0.2 world unchanged, so 0.1 and 0.2 hosts keep working with the reference"
    );
}
