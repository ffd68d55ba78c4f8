//! Adapter: reads the ConfigMap from disk, as a manifest file or as the
//! directory kubelet projects a mounted ConfigMap into.

use crate::config::{Config, ConfigError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read config {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path}: {source}")]
    Invalid { path: PathBuf, source: ConfigError },
}

/// Loads from a ConfigMap manifest file or a mounted ConfigMap directory.
pub fn load(path: &Path) -> Result<Config, LoadError> {
    let invalid = |source| LoadError::Invalid {
        path: path.to_path_buf(),
        source,
    };
    if path.is_dir() {
        Config::from_data(&read_projected_dir(path)?).map_err(invalid)
    } else {
        let text = read(path)?;
        Config::from_manifest(&text).map_err(invalid)
    }
}

fn read(path: &Path) -> Result<String, LoadError> {
    std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// One file per key. Kubelet's bookkeeping entries (`..data`, `..2024_…`)
/// start with dots and are skipped; the key files are symlinks through
/// `..data`, which reading follows.
pub fn read_projected_dir(dir: &Path) -> Result<BTreeMap<String, String>, LoadError> {
    let io = |source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut data = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        data.insert(name, read(&path)?);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kubelet_projected_layout() {
        let dir = tempfile::tempdir().unwrap();
        let version = dir.path().join("..2026_11_22_00_00_00.1");
        std::fs::create_dir(&version).unwrap();
        let manifest: serde_yaml::Value = serde_yaml::from_str(Config::default_manifest()).unwrap();
        for (k, v) in manifest["data"].as_mapping().unwrap() {
            std::fs::write(version.join(k.as_str().unwrap()), v.as_str().unwrap()).unwrap();
        }
        std::os::unix::fs::symlink("..2026_11_22_00_00_00.1", dir.path().join("..data")).unwrap();
        for k in manifest["data"].as_mapping().unwrap().keys() {
            let k = k.as_str().unwrap();
            std::os::unix::fs::symlink(format!("..data/{k}"), dir.path().join(k)).unwrap();
        }
        assert_eq!(load(dir.path()).unwrap(), Config::default());
    }

    #[test]
    fn reads_a_manifest_file_and_reports_invalid_ones() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("cm.yaml");
        std::fs::write(&good, Config::default_manifest()).unwrap();
        assert_eq!(load(&good).unwrap(), Config::default());
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "kind: ConfigMap\ndata:\n  agent: '{}'\n").unwrap();
        let err = load(&bad).unwrap_err().to_string();
        assert!(
            err.contains("failed to parse resource configuration"),
            "{err}"
        );
        assert!(load(&dir.path().join("missing.yaml")).is_err());
    }
}
