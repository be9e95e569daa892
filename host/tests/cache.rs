//! The on-disk cache of compiled components.

use std::path::PathBuf;

use agent_recovery::Policy;

const OBS: &str = r#"{"source":"http","status":503}"#;

fn fresh_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn entries(dir: &PathBuf) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

#[test]
fn a_cached_component_loads_and_answers_the_same() {
    let dir = fresh_dir("cache-roundtrip");
    let bytes = Policy::reference_bytes();
    let compiled = Policy::loader()
        .cache_dir(&dir)
        .bytes(bytes)
        .expect("compiles");
    let files = entries(&dir);
    assert_eq!(files.len(), 1, "one entry: {files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&compiled.sha256()) && name.ends_with(".cwasm"),
        "{name}"
    );

    let cached = Policy::loader()
        .cache_dir(&dir)
        .bytes(bytes)
        .expect("loads from the cache");
    assert_eq!(cached.sha256(), compiled.sha256());
    assert_eq!(
        cached
            .decide_json(OBS, r#"{"attempt":1,"seed":5}"#)
            .unwrap(),
        compiled
            .decide_json(OBS, r#"{"attempt":1,"seed":5}"#)
            .unwrap()
    );
    assert_eq!(entries(&dir).len(), 1);
}

#[test]
fn a_corrupt_entry_is_recompiled_and_rewritten() {
    let dir = fresh_dir("cache-corrupt");
    let bytes = Policy::reference_bytes();
    Policy::loader()
        .cache_dir(&dir)
        .bytes(bytes)
        .expect("compiles");
    let entry = entries(&dir).pop().expect("an entry");
    std::fs::write(&entry, b"not a compiled component").unwrap();

    let policy = Policy::loader()
        .cache_dir(&dir)
        .bytes(bytes)
        .expect("recompiles");
    assert!(policy.classify_json(OBS).is_ok());
    let size = std::fs::metadata(&entry).unwrap().len();
    assert!(size > 1000, "the entry was rewritten ({size} bytes)");
}

#[test]
fn an_unwritable_cache_is_skipped() {
    let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cache-is-a-file");
    std::fs::write(&file, b"x").unwrap();
    let policy = Policy::loader()
        .cache_dir(file.join("sub"))
        .bytes(Policy::reference_bytes())
        .expect("loads without a usable cache");
    assert!(policy.classify_json(OBS).is_ok());
}
