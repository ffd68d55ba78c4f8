//! `--cluster-lookups auto|on|off`: whether the server (and `mutate`)
//! reads ServiceAccounts, Secrets, ClusterStorageContainers and
//! InferenceServices from a cluster, and which cluster configuration it uses.

use crate::log_text::{bounded, causes};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a service account token is mounted in a pod.
pub(crate) const IN_CLUSTER_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// How long the startup probe of the API server may take.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LookupMode {
    /// On when a cluster configuration is found, off otherwise.
    #[default]
    Auto,
    /// Required: no configuration or no reachable API server is an error.
    On,
    /// Never: every lookup answers "not found".
    Off,
}

/// What the process can see of a cluster configuration; kept apart from the
/// process environment so `detect` is a pure function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeEnvironment {
    /// `--kubeconfig`.
    pub kubeconfig_flag: Option<PathBuf>,
    /// `KUBECONFIG` (may list several files, `:`-separated).
    pub kubeconfig_env: Option<OsString>,
    /// `KUBERNETES_SERVICE_HOST` is set and a token is mounted.
    pub in_cluster: bool,
}

/// The configuration used, in kubectl's order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KubeConfigSource {
    KubeconfigFlag(PathBuf),
    KubeconfigEnv(OsString),
    InCluster,
}

impl std::fmt::Display for KubeConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::KubeconfigFlag(p) => write!(f, "--kubeconfig {}", p.display()),
            Self::KubeconfigEnv(v) => write!(f, "KUBECONFIG={}", v.to_string_lossy()),
            Self::InCluster => write!(f, "the in-cluster service account"),
        }
    }
}

impl KubeEnvironment {
    /// Reads `KUBECONFIG`, `KUBERNETES_SERVICE_HOST` and the token mount.
    pub(crate) fn from_process(kubeconfig_flag: Option<PathBuf>) -> Self {
        Self {
            kubeconfig_flag,
            kubeconfig_env: std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()),
            in_cluster: std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|v| !v.is_empty())
                && Path::new(IN_CLUSTER_TOKEN).is_file(),
        }
    }

    pub(crate) fn detect(&self) -> Option<KubeConfigSource> {
        if let Some(p) = &self.kubeconfig_flag {
            return Some(KubeConfigSource::KubeconfigFlag(p.clone()));
        }
        if let Some(v) = &self.kubeconfig_env {
            return Some(KubeConfigSource::KubeconfigEnv(v.clone()));
        }
        self.in_cluster.then_some(KubeConfigSource::InCluster)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LookupModeError {
    #[error("--cluster-lookups on: no cluster configuration (no --kubeconfig, no KUBECONFIG, not running in a pod with a service account token)")]
    NoConfiguration,
    /// The configuration (a kubeconfig, the pod's service account) does
    /// not give a client.
    #[error("cluster lookups: cannot load {source_name}: {source}")]
    Config {
        source_name: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The text names the server's URL and every cause in the chain
    /// (kube's own text stops at "client error (Connect)").
    #[error(
        "cluster lookups: the API server of {source_name} ({server}) is not reachable: {}",
        causes(source)
    )]
    Unreachable {
        source_name: String,
        server: String,
        source: kube::Error,
    },
    #[error("cluster lookups: the API server of {source_name} ({server}) is not reachable: no answer within {after:?}")]
    NoAnswer {
        source_name: String,
        server: String,
        after: std::time::Duration,
    },
}

/// The client the lookups use, or `None` when they are off. `auto` without
/// a configuration logs why lookups are off and returns `None`; a found
/// configuration (either mode) must load and its API server must answer a
/// version request within `PROBE_TIMEOUT`, else the error says which.
pub async fn resolve_client(
    mode: LookupMode,
    env: &KubeEnvironment,
    context: Option<&str>,
) -> Result<Option<Client>, LookupModeError> {
    if mode == LookupMode::Off {
        tracing::info!("cluster lookups off (--cluster-lookups off): ServiceAccounts, Secrets, ClusterStorageContainers and InferenceServices are treated as not found");
        return Ok(None);
    }
    let Some(source) = env.detect() else {
        if mode == LookupMode::On {
            return Err(LookupModeError::NoConfiguration);
        }
        tracing::info!("cluster lookups off: no --kubeconfig, KUBECONFIG or in-cluster service account found (--cluster-lookups auto); ServiceAccounts, Secrets, ClusterStorageContainers and InferenceServices are treated as not found");
        return Ok(None);
    };
    let config = config_for(&source, context).await?;
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| LookupModeError::Config {
        source_name: source.to_string(),
        source: e.into(),
    })?;
    let probe = tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await;
    match probe {
        Ok(Ok(version)) => {
            let (config, server) = (bounded(&source), bounded(&version.git_version));
            tracing::info!(%config, %server, "cluster lookups on");
            Ok(Some(client))
        }
        Ok(Err(e)) => Err(LookupModeError::Unreachable {
            source_name: source.to_string(),
            server,
            source: e,
        }),
        Err(_) => Err(LookupModeError::NoAnswer {
            source_name: source.to_string(),
            server,
            after: PROBE_TIMEOUT,
        }),
    }
}

/// The client configuration `source` (and `context`) gives.
async fn config_for(
    source: &KubeConfigSource,
    context: Option<&str>,
) -> Result<kube::Config, LookupModeError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let failed = |e: Box<dyn std::error::Error + Send + Sync>| LookupModeError::Config {
        source_name: source.to_string(),
        source: e,
    };
    let config = match source {
        KubeConfigSource::KubeconfigFlag(path) => {
            let file = Kubeconfig::read_from(path).map_err(|e| failed(e.into()))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| failed(e.into()))?
        }
        KubeConfigSource::KubeconfigEnv(_) => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| failed(e.into()))?,
        KubeConfigSource::InCluster => kube::Config::incluster().map_err(|e| failed(e.into()))?,
    };
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_is_flag_then_env_then_in_cluster() {
        let mut env = KubeEnvironment {
            kubeconfig_flag: Some("/k".into()),
            kubeconfig_env: Some("/e".into()),
            in_cluster: true,
        };
        assert_eq!(
            env.detect(),
            Some(KubeConfigSource::KubeconfigFlag("/k".into()))
        );
        env.kubeconfig_flag = None;
        assert_eq!(
            env.detect(),
            Some(KubeConfigSource::KubeconfigEnv("/e".into()))
        );
        env.kubeconfig_env = None;
        assert_eq!(env.detect(), Some(KubeConfigSource::InCluster));
        env.in_cluster = false;
        assert_eq!(env.detect(), None);
    }

    #[tokio::test]
    async fn auto_without_configuration_is_off_and_on_is_an_error() {
        let none = KubeEnvironment::default();
        assert!(resolve_client(LookupMode::Auto, &none, None)
            .await
            .unwrap()
            .is_none());
        assert!(resolve_client(LookupMode::Off, &none, None)
            .await
            .unwrap()
            .is_none());
        let err = resolve_client(LookupMode::On, &none, None)
            .await
            .err()
            .expect("an error");
        assert!(matches!(err, LookupModeError::NoConfiguration), "{err}");
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_file_is_an_error_naming_it() {
        let env = KubeEnvironment {
            kubeconfig_flag: Some("/nonexistent/kubeconfig".into()),
            ..KubeEnvironment::default()
        };
        let err = resolve_client(LookupMode::Auto, &env, None)
            .await
            .err()
            .expect("an error");
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn an_unreachable_api_server_is_an_error() {
        // A port nothing listens on: connection refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n")).unwrap();
        let env = KubeEnvironment {
            kubeconfig_flag: Some(path),
            ..KubeEnvironment::default()
        };
        let err = resolve_client(LookupMode::On, &env, Some("x"))
            .await
            .err()
            .expect("an error");
        assert!(matches!(err, LookupModeError::Unreachable { .. }), "{err}");
    }
}
