//! The inferenceservice-config in use, replaced whole when the mounted
//! ConfigMap changes. A request takes one snapshot, so it never sees half of
//! an old config and half of a new one.

use super::args::ServeArgs;
use super::error::ServeError;
use super::metrics::Metrics;
use super::reload::{self, Snapshot, Trigger};
use super::swap::Swap;
use crate::config::Config;
use crate::config_file::LoadError;
use crate::Env;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tracing::{error, info};

pub(crate) type EnvStore = Swap<Env>;

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Parses the snapshot the same way `config_file::load` parses the path,
/// so the bytes compared are the bytes used.
fn parse(path: &Path, snap: &Snapshot) -> Result<Config, LoadError> {
    let io = |message: String| LoadError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(message),
    };
    let invalid = |source| LoadError::Invalid {
        path: path.to_path_buf(),
        source,
    };
    let text = |file: &Path, bytes: &[u8]| {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| io(format!("{}: not UTF-8 text", file.display())))
    };
    if path.is_dir() {
        let mut data = BTreeMap::new();
        for (file, bytes) in &snap.entries {
            let bytes = bytes.as_ref().map_err(|e| io(e.clone()))?;
            let key = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            data.insert(key, text(file, bytes)?);
        }
        Config::from_data(&data).map_err(invalid)
    } else {
        let bytes = snap.file(path).map_err(io)?;
        Config::from_manifest(&text(path, bytes)?).map_err(invalid)
    }
}

pub(crate) struct ConfigState {
    pub env: Arc<EnvStore>,
    pub reloader: Option<tokio::task::JoinHandle<()>>,
}

pub(crate) fn load(
    args: &ServeArgs,
    metrics: &Arc<Metrics>,
    stop: &watch::Receiver<bool>,
) -> Result<ConfigState, ServeError> {
    let namespace = args.resolved_controller_namespace();
    let make_env = {
        let namespace = namespace.clone();
        move |config: Config| Env {
            controller_namespace: namespace.clone(),
            ..Env::new(config)
        }
    };
    let Some(path) = args.config.clone() else {
        info!(controller_namespace = %namespace, "using KServe's default inferenceservice-config");
        metrics.config_last_reload.set(unix_now());
        return Ok(ConfigState {
            env: Arc::new(Swap::new(Arc::new(make_env(Config::default())))),
            reloader: None,
        });
    };
    let sources: Vec<PathBuf> = vec![path.clone()];
    let initial = Snapshot::read(&sources);
    let config = parse(&path, &initial)?;
    metrics.config_last_reload.set(unix_now());
    info!(config = %path.display(), controller_namespace = %namespace, "inferenceservice-config loaded");
    let env = Arc::new(Swap::new(Arc::new(make_env(config))));
    let target = env.clone();
    let metrics = metrics.clone();
    let trigger = Trigger {
        watch: args.config_watch,
        poll: args.config_poll_interval,
    };
    let reloader = reload::spawn(
        "config",
        sources,
        initial,
        trigger,
        stop.clone(),
        move |snap| match parse(&path, snap) {
            Ok(config) => {
                target.store(Arc::new(make_env(config)));
                metrics.config_reloads.inc();
                metrics.config_last_reload.set(unix_now());
                info!(config = %path.display(), "inferenceservice-config reloaded");
            }
            Err(e) => {
                metrics.config_reload_errors.inc();
                error!(error = %e, "inferenceservice-config not reloaded; the previous one stays in use");
            }
        },
    );
    Ok(ConfigState {
        env,
        reloader: Some(reloader),
    })
}
