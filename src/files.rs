//! Adapter: the one reader of on-disk sources, used by the CLI (`mutate
//! --config`) and by `reload` (`serve`'s config and certificates). A source
//! is a file, or a directory laid out the way kubelet projects a ConfigMap or
//! Secret: one file per key, dot-entries (`..data`, `..2024_…`) skipped.
//! Every file is opened without blocking and must be a regular file (for
//! the one-shot commands, or a pipe; see [`Accept`]) before a byte is read.

mod open;

pub(crate) use open::check_pipe_delivered;
pub use open::{open, Accept};

use kserve_injector_core::config::{Config, ConfigError, ConfigMapData, Resources};
use kserve_injector_core::release::Release;
use kserve_injector_core::{AnyError, SharedError};
use kserve_injector_core::{Settings, SettingsError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The settings file (`--config-file`) could not be read.
    #[error("cannot read --config-file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file of the snapshot read for `path` (the file itself, or one of
    /// the directory's). The file is named only when it is not `path`.
    #[error("cannot read config {path}: {}", source.detail_under(path))]
    Unreadable { path: PathBuf, source: Unreadable },
    #[error("cannot read config {path}: {file}: not UTF-8 text")]
    NotUtf8 {
        path: PathBuf,
        file: PathBuf,
        source: std::string::FromUtf8Error,
    },
    #[error("config {path}: {source}")]
    Invalid { path: PathBuf, source: ConfigError },
    #[error("--config-file {path}: {source}")]
    Settings {
        path: PathBuf,
        source: SettingsError,
    },
    /// A Kubernetes object (such as KServe's ConfigMap) given as the
    /// settings file: the hint names the flag that reads the ConfigMap.
    #[error("--config-file {path}: {source}: this is a Kubernetes object, not a settings file; KServe's inferenceservice-config ConfigMap is read with --config")]
    ObjectAsSettings {
        path: PathBuf,
        source: SettingsError,
    },
}

/// Why a file of a snapshot has no bytes. Errors that say the same thing
/// compare equal, so an unchanged failure is not a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: SharedError<std::io::Error>,
    },
    /// The read was given up before it reached the file.
    #[error("cannot read {path}: {why}")]
    Stopped { path: PathBuf, why: AnyError },
    /// The snapshot holds no such file.
    #[error("{path}: not read")]
    NotRead { path: PathBuf },
}

impl Unreadable {
    /// Why, naming the file only when it is not `source` (the path the
    /// message already names): a directory's file, not the file itself.
    fn detail_under(&self, source: &Path) -> String {
        let (path, why) = match self {
            Unreadable::Io { path, source } => (path, source.to_string()),
            Unreadable::Stopped { path, why } => (path, why.to_string()),
            Unreadable::NotRead { path } => (path, "not read".to_string()),
        };
        if path == source {
            why
        } else {
            format!("{}: {why}", path.display())
        }
    }
}

/// One read of every source: each file's bytes, or why it could not be
/// read. Comparing two snapshots tells a reloader whether anything changed,
/// and parsing the snapshot (not the path again) means the bytes compared
/// are the bytes used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub entries: Vec<(PathBuf, Result<Vec<u8>, Unreadable>)>,
}

impl Snapshot {
    pub fn read(sources: &[PathBuf], accept: Accept) -> Self {
        let mut entries = Vec::new();
        for source in sources {
            if !source.is_dir() {
                entries.push((source.clone(), read(source, accept)));
                continue;
            }
            match dir_files(source) {
                Ok(files) => entries.extend(files.into_iter().map(|f| {
                    let bytes = read(&f, accept);
                    (f, bytes)
                })),
                Err(e) => entries.push((source.clone(), Err(e))),
            }
        }
        Self { entries }
    }

    /// Every source as unreadable, for `why` (a read that did not finish).
    pub(crate) fn unreadable(sources: &[PathBuf], why: AnyError) -> Self {
        let entries = sources
            .iter()
            .map(|p| {
                let why = why.clone();
                (
                    p.clone(),
                    Err(Unreadable::Stopped {
                        path: p.clone(),
                        why,
                    }),
                )
            })
            .collect();
        Self { entries }
    }

    /// The bytes of one file source, or why it has none.
    pub(crate) fn file(&self, path: &Path) -> Result<&[u8], Unreadable> {
        match self.entries.iter().find(|(p, _)| p == path) {
            Some((_, Ok(bytes))) => Ok(bytes),
            Some((_, Err(e))) => Err(e.clone()),
            None => Err(Unreadable::NotRead {
                path: path.to_path_buf(),
            }),
        }
    }
}

/// Most bytes read from one file of a source. Kubernetes keeps a ConfigMap
/// or a Secret (the usual origin of these files) under 1 MiB; a file over
/// the cap is refused after reading one byte past it, so a huge file costs
/// no more memory than the cap.
pub(crate) const MAX_FILE_BYTES: u64 = 4 << 20;

fn read(path: &Path, accept: Accept) -> Result<Vec<u8>, Unreadable> {
    read_capped(path, accept).map_err(|e| unreadable(path, e))
}

fn unreadable(path: &Path, e: std::io::Error) -> Unreadable {
    Unreadable::Io {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// The bytes of `path`, refused past [`MAX_FILE_BYTES`].
fn read_capped(path: &Path, accept: Accept) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let file = open(path, accept)?;
    (&file).take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    check_pipe_delivered(&file, bytes.len())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_FILE_BYTES} bytes (4 MiB)"),
        ));
    }
    Ok(bytes)
}

/// Regular files (symlinks through `..data` are followed), sorted, without
/// kubelet's dot-named bookkeeping. A FIFO or device among them is passed
/// over here, and a file swapped for one after this listing is refused
/// when opened.
fn dir_files(dir: &Path) -> Result<Vec<PathBuf>, Unreadable> {
    let err = |e| unreadable(dir, e);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let path = entry.path();
        if !entry.file_name().to_string_lossy().starts_with('.') && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Parses a snapshot of `path` (a ConfigMap manifest file, or a mounted
/// ConfigMap directory whose file names are the data keys).
pub fn parse(path: &Path, snap: &Snapshot) -> Result<Config, LoadError> {
    parse_with(path, snap, &Resources::default(), Release::Head)
}

/// [`parse`], with our settings file's storage-initializer defaults for the
/// keys the ConfigMap leaves out ([`Config::from_data_with`]), read as
/// `release` reads the ConfigMap.
pub(crate) fn parse_with(
    path: &Path,
    snap: &Snapshot,
    defaults: &Resources,
    release: Release,
) -> Result<Config, LoadError> {
    let data = snapshot_data(path, snap)?;
    Config::from_data_with(&data, defaults, release).map_err(|source| LoadError::Invalid {
        path: path.to_path_buf(),
        source,
    })
}

/// Loads from a ConfigMap manifest file or a mounted ConfigMap directory,
/// as the one-shot commands read it.
pub fn load(path: &Path) -> Result<Config, LoadError> {
    let snap = Snapshot::read(&[path.to_path_buf()], Accept::RegularFileOrPipe);
    parse(path, &snap)
}

/// The inferenceservice-config as `--config`, `--config-file` and
/// `--kserve-version` (`release`, which wins over the settings file's
/// `kserveVersion`) give it: without `--config`, the values that release
/// shipped ([`Config::shipped`]).
pub fn load_config(
    config: Option<&Path>,
    settings: &Settings,
    release: Option<Release>,
) -> Result<Config, LoadError> {
    let release = settings.release(release);
    match config {
        Some(path) => parse_with(
            path,
            &Snapshot::read(&[path.to_path_buf()], Accept::RegularFileOrPipe),
            &settings.storage_initializer,
            release,
        ),
        None => Ok(Config::shipped(release)),
    }
}

/// The data of a ConfigMap manifest file or a mounted ConfigMap directory,
/// unparsed (`audit --upgrade-config`, which reads it as two releases).
pub(crate) fn load_data(path: &Path) -> Result<ConfigMapData, LoadError> {
    let snap = Snapshot::read(&[path.to_path_buf()], Accept::RegularFileOrPipe);
    snapshot_data(path, &snap)
}

/// The data at `path` in a snapshot: a ConfigMap manifest's `data`, or a
/// mounted ConfigMap directory's files by name.
fn snapshot_data(path: &Path, snap: &Snapshot) -> Result<ConfigMapData, LoadError> {
    let unreadable = |source| LoadError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let text = |file: &Path, bytes: &[u8]| {
        String::from_utf8(bytes.to_vec()).map_err(|source| LoadError::NotUtf8 {
            path: path.to_path_buf(),
            file: file.to_path_buf(),
            source,
        })
    };
    if !path.is_dir() {
        let bytes = snap.file(path).map_err(unreadable)?;
        return kserve_injector_core::config::manifest_data(&text(path, bytes)?).map_err(
            |source| LoadError::Invalid {
                path: path.to_path_buf(),
                source,
            },
        );
    }
    let mut data = BTreeMap::new();
    for (file, bytes) in &snap.entries {
        let bytes = bytes.as_ref().map_err(|e| unreadable(e.clone()))?;
        let key = file.file_name().map(|n| n.to_string_lossy().into_owned());
        data.insert(key.unwrap_or_default(), text(file, bytes)?);
    }
    Ok(data)
}

/// Loads our own settings file (`--config-file`) as the one-shot commands
/// read it; none given is no settings.
pub fn load_settings(path: Option<&Path>) -> Result<Settings, LoadError> {
    let Some(path) = path else {
        return Ok(Settings::default());
    };
    let bytes = read_capped(path, Accept::RegularFileOrPipe).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    settings_from(path, &bytes)
}

/// Parses the settings file `path` of a snapshot (`serve` reads it within
/// the reloader's bounds).
pub(crate) fn parse_settings(path: &Path, snap: &Snapshot) -> Result<Settings, LoadError> {
    let bytes = snap.file(path).map_err(|source| LoadError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    settings_from(path, bytes)
}

/// The top-level keys of a Kubernetes object, which a settings file has not.
const OBJECT_KEYS: [&str; 4] = ["apiVersion", "kind", "metadata", "data"];

fn settings_from(path: &Path, bytes: &[u8]) -> Result<Settings, LoadError> {
    let invalid = |source: SettingsError| match &source {
        SettingsError::UnknownKey(key) if OBJECT_KEYS.contains(&key.as_str()) => {
            LoadError::ObjectAsSettings {
                path: path.to_path_buf(),
                source,
            }
        }
        _ => LoadError::Settings {
            path: path.to_path_buf(),
            source,
        },
    };
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(SettingsError::NotUtf8(e)))?;
    Settings::from_text(text).map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kubelet_projected_layout() {
        let dir = tempfile::tempdir().unwrap();
        let version = dir.path().join("..2026_11_22_00_00_00.1");
        std::fs::create_dir(&version).unwrap();
        let manifest =
            kserve_injector_core::reader::documents(&mut Config::default_manifest().as_bytes())
                .and_then(|mut docs| docs.next().unwrap())
                .unwrap();
        for (k, v) in manifest["data"].as_object().unwrap() {
            std::fs::write(version.join(k), v.as_str().unwrap()).unwrap();
        }
        std::os::unix::fs::symlink("..2026_11_22_00_00_00.1", dir.path().join("..data")).unwrap();
        for k in manifest["data"].as_object().unwrap().keys() {
            std::os::unix::fs::symlink(format!("..data/{k}"), dir.path().join(k)).unwrap();
        }
        std::fs::write(dir.path().join(".hidden"), "not: a key").unwrap();
        assert_eq!(load(dir.path()).unwrap(), Config::default());
        let snap = Snapshot::read(&[dir.path().to_path_buf()], Accept::RegularFile);
        assert_eq!(
            snap.entries.len(),
            manifest["data"].as_object().unwrap().len()
        );
        let missing = Snapshot::read(&[dir.path().join("nope")], Accept::RegularFile);
        assert!(missing.file(&dir.path().join("nope")).is_err());
    }

    #[test]
    fn a_file_over_the_cap_is_refused_and_one_at_the_cap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("tls.crt");
        std::fs::write(&big, "-----BEGIN CERTIFICATE-----\n").unwrap();
        // Sparse: 120 MB on paper, no disk used.
        let file = std::fs::OpenOptions::new().append(true).open(&big).unwrap();
        file.set_len(120_000_000).unwrap();
        let snap = Snapshot::read(std::slice::from_ref(&big), Accept::RegularFile);
        let err = snap.file(&big).unwrap_err().to_string();
        assert!(err.ends_with("larger than 4194304 bytes (4 MiB)"), "{err}");
        file.set_len(MAX_FILE_BYTES).unwrap();
        let snap = Snapshot::read(std::slice::from_ref(&big), Accept::RegularFile);
        assert_eq!(snap.file(&big).unwrap().len() as u64, MAX_FILE_BYTES);
    }

    #[test]
    fn a_settings_file_that_is_not_utf8_keeps_the_utf8_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.yaml");
        std::fs::write(&path, b"kserveVersion: \xff\n").unwrap();
        let err = load_settings(Some(&path)).unwrap_err();
        assert!(err.to_string().ends_with(": not UTF-8 text"), "{err}");
        let chain: Vec<&dyn std::error::Error> =
            std::iter::successors(std::error::Error::source(&err), |e| e.source()).collect();
        assert!(
            chain.iter().any(|e| e.is::<std::str::Utf8Error>()),
            "{err}: {} sources",
            chain.len()
        );
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
