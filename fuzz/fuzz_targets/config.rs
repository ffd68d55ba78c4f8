//! Config parsing through today's public readers, in both forms:
//! manifest text (`Config::from_manifest`, `files::load` on a file) and
//! key → value data (`Config::from_data`, `files::load` on a
//! kubelet-projected directory). Never panics; each file form agrees with its
//! in-memory form. (At merge: re-point these calls at the one config reader.)
#![no_main]

use kserve_injector::files;
use kserve_injector_core::config::Config;
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::path::Path;

/// `key \0 value \0 key \0 value …`: a ConfigMap's data.
fn data_map(text: &str) -> BTreeMap<String, String> {
    let mut parts = text.split('\0');
    let mut data = BTreeMap::new();
    while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
        data.insert(k.to_string(), v.to_string());
    }
    data
}

/// A key kubelet could project as a file name.
fn projectable(key: &str) -> bool {
    !key.is_empty()
        && key.len() < 200
        && !key.starts_with('.')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

fn project(dir: &Path, data: &BTreeMap<String, String>) {
    let version = dir.join("..2026_01_01_00_00_00.1");
    std::fs::create_dir(&version).unwrap();
    for (k, v) in data {
        std::fs::write(version.join(k), v).unwrap();
        std::os::unix::fs::symlink(format!("..data/{k}"), dir.join(k)).unwrap();
    }
    std::os::unix::fs::symlink("..2026_01_01_00_00_00.1", dir.join("..data")).unwrap();
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match mode % 4 {
        0 => {
            let _ = Config::from_manifest(text);
        }
        1 => {
            let _ = Config::from_data(&data_map(text));
        }
        2 => {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("cm.yaml");
            std::fs::write(&file, text).unwrap();
            let from_file = files::load(&file).map_err(|e| e.to_string());
            let in_memory = Config::from_manifest(text);
            assert_eq!(from_file.is_ok(), in_memory.is_ok(), "{from_file:?}");
            if let (Ok(a), Ok(b)) = (from_file, in_memory) {
                assert_eq!(a, b);
            }
        }
        _ => {
            let mut data = data_map(text);
            data.retain(|k, _| projectable(k));
            let dir = tempfile::tempdir().unwrap();
            project(dir.path(), &data);
            let from_dir = files::load(dir.path()).map_err(|e| e.to_string());
            let in_memory = Config::from_data(&data);
            assert_eq!(from_dir.is_ok(), in_memory.is_ok(), "{from_dir:?}");
            if let (Ok(a), Ok(b)) = (from_dir, in_memory) {
                assert_eq!(a, b);
            }
        }
    }
});
