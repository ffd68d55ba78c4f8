//! `--modelcar-mode native-sidecar` against the cluster's API server. An API
//! server older than 1.29 does not know an init container's
//! `restartPolicy` and drops it without a word: the modelcar would become a
//! plain init container that never ends, and every such pod would hang in
//! `Init`. So `serve` refuses to start instead. Without cluster lookups
//! there is no API server to ask and the flag is trusted.

use kserve_injector_core::ModelcarMode;
use std::time::Duration;

/// How long the version request may take; the lookups' own probe has just
/// reached the same API server.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Why native sidecars cannot be used with this API server.
#[derive(Debug, thiserror::Error)]
pub enum Unsupported {
    #[error("--modelcar-mode native-sidecar needs Kubernetes {}.{} or newer (native sidecar containers), but the API server is {version}: it would drop the modelcar's restartPolicy and leave each pod waiting on an init container that never ends; use --modelcar-mode classic on this cluster", .min.0, .min.1)]
    TooOld { version: String, min: (u32, u32) },
    #[error("--modelcar-mode native-sidecar: cannot read the API server's version ({0}); it needs Kubernetes 1.29 or newer")]
    Unreadable(#[source] kube::Error),
    #[error("--modelcar-mode native-sidecar: cannot read the API server's version (no answer within {0:?}); it needs Kubernetes 1.29 or newer")]
    NoAnswer(Duration),
    #[error("--modelcar-mode native-sidecar: cannot read the API server's version (major {major:?}, minor {minor:?}, gitVersion {git_version:?}); it needs Kubernetes 1.29 or newer")]
    Unknown {
        major: String,
        minor: String,
        git_version: String,
    },
}

/// Checks the API server behind `client` when native sidecars are on.
pub(super) async fn check(client: &kube::Client, mode: ModelcarMode) -> Result<(), Unsupported> {
    if mode != ModelcarMode::NativeSidecar {
        return Ok(());
    }
    let info = match tokio::time::timeout(VERSION_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(info)) => info,
        Ok(Err(e)) => return Err(Unsupported::Unreadable(e)),
        Err(_) => return Err(Unsupported::NoAnswer(VERSION_TIMEOUT)),
    };
    let min = ModelcarMode::NATIVE_SIDECAR_MIN_VERSION;
    let version =
        version_of(&info.major, &info.minor).or_else(|| git_version_of(&info.git_version));
    match version {
        Some(version) if version >= min => {
            let server = crate::log_text::bounded(&info.git_version);
            tracing::info!(%server, "native-sidecar modelcars: the API server supports them");
            Ok(())
        }
        Some(_) => Err(Unsupported::TooOld {
            version: info.git_version,
            min,
        }),
        None => Err(Unsupported::Unknown {
            major: info.major,
            minor: info.minor,
            git_version: info.git_version,
        }),
    }
}

/// `major`/`minor` as `/version` gives them; managed clusters add a suffix
/// to the minor (`"29+"`), which is ignored.
pub(super) fn version_of(major: &str, minor: &str) -> Option<(u32, u32)> {
    let number = |text: &str| {
        let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    };
    Some((number(major)?, number(minor)?))
}

/// `gitVersion` (`v1.20.2`, `v1.29.3-gke.1`), for an API server built
/// without `major`/`minor` (a source build leaves them empty).
pub(super) fn git_version_of(git_version: &str) -> Option<(u32, u32)> {
    let mut parts = git_version.strip_prefix('v')?.splitn(3, '.');
    version_of(parts.next()?, parts.next()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_number_with_a_vendor_suffix_ignored() {
        let min = ModelcarMode::NATIVE_SIDECAR_MIN_VERSION;
        assert_eq!(version_of("1", "20"), Some((1, 20)));
        assert!(version_of("1", "20").is_some_and(|v| v < min));
        assert!(version_of("1", "28+").is_some_and(|v| v < min));
        assert!(version_of("1", "29+").is_some_and(|v| v >= min));
        assert!(version_of("1", "100").is_some_and(|v| v >= min));
        assert_eq!(version_of("", "29"), None);
        assert_eq!(version_of("1", "x"), None);
        assert_eq!(git_version_of("v1.20.2"), Some((1, 20)));
        assert_eq!(git_version_of("v1.29.3-gke.1"), Some((1, 29)));
        assert_eq!(git_version_of("1.29"), None);
        assert_eq!(git_version_of("v0.0.0-master+$Format:%H$"), Some((0, 0)));
    }

    #[test]
    fn the_refusal_names_the_version_and_the_way_out() {
        let e = Unsupported::TooOld {
            version: "v1.20.15".into(),
            min: (1, 29),
        };
        let text = e.to_string();
        assert!(text.contains("v1.20.15"), "{text}");
        assert!(text.contains("1.29 or newer"), "{text}");
        assert!(text.contains("--modelcar-mode classic"), "{text}");
    }
}
