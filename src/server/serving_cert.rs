//! The serving certificate and the client CA: loaded at startup, then kept
//! current by the reloader.

use super::conn::Shutdown;
use super::error::ServeError;
use super::metrics::{Metrics, CLIENT_CA, SERVING};
use super::tls::policy::TlsPolicy;
use super::tls::{Tls, TlsConfigError};
use crate::certs::{self, ServingPair};
use crate::files::Snapshot;
use crate::reload::{Source, Trigger};
use crate::server::args::TlsFlags;
use std::sync::Arc;
use tracing::info;

/// The TLS configuration, kept current until `shutdown.kill`, and
/// `--self-signed`'s CA (written by the caller once both ports are bound).
pub(crate) fn load(
    tls_args: &TlsFlags,
    policy: &TlsPolicy,
    metrics: &Arc<Metrics>,
    shutdown: &Shutdown,
) -> Result<(Arc<Tls>, Option<String>), ServeError> {
    let provider = &policy.provider;
    let trigger = Trigger {
        watch: tls_args.cert_watch,
        poll: tls_args.cert_poll_interval,
    };
    // Taken even when nothing is reloaded, so the series exist at 0 from the
    // start and an alert on their rate works before the first rotation.
    let counters = metrics.cert_reloads(SERVING);
    let (pair, serving_watch, self_signed_ca) = if tls_args.self_signed {
        let made = certs::self_signed(&tls_args.dns_names, provider)?;
        info!(names = ?made.names, "serving a self-signed certificate");
        (made.pair, None, Some(made.ca_pem))
    } else {
        let (cert, key) = (tls_args.cert_file(), tls_args.key_file());
        let paths = vec![cert.clone(), key.clone()];
        let what = "serving certificate";
        let source = Source {
            what,
            paths,
            trigger,
            counters,
        };
        let provider = provider.clone();
        let parse = move |snap: &Snapshot| certs::load_pair(snap, &cert, &key, &provider);
        let (pair, loaded) = source.load(parse).map_err(|source| {
            if tls_args.tls_cert_file.is_none() && !tls_args.cert_dir.exists() {
                ServeError::NoServingCert {
                    cert_dir: tls_args.cert_dir.clone(),
                    source: Box::new(source),
                }
            } else {
                ServeError::Cert(source)
            }
        })?;
        info!(not_after = pair.not_after, "serving certificate loaded");
        (pair, Some(loaded), None)
    };
    metrics.cert_loaded(SERVING, pair.not_after);
    let client_ca = match tls_args.client_ca_file.clone() {
        None => None,
        Some(path) => {
            let (paths, what) = (vec![path.clone()], "client CA");
            let counters = metrics.cert_reloads(CLIENT_CA);
            let source = Source {
                what,
                paths,
                trigger,
                counters,
            };
            let provider = provider.clone();
            let parse = move |snap: &Snapshot| certs::client_verifier(snap, &path, &provider);
            let ((verifier, not_after), loaded) = source.load(parse)?;
            metrics.cert_loaded(CLIENT_CA, not_after);
            info!("client certificates required");
            Some((verifier, loaded))
        }
    };
    let (verifier, client_watch) = client_ca.unzip();
    let tls = Arc::new(Tls::new(policy.clone(), pair, verifier)?);
    let (stop, tasks) = (&shutdown.kill, &shutdown.background);
    // The metrics follow only a pair or CA that was proven and put in use.
    if let Some(loaded) = serving_watch {
        let (tls, metrics) = (tls.clone(), metrics.clone());
        loaded.watch(stop, tasks, move |pair: ServingPair| {
            let not_after = pair.not_after;
            tls.set_pair(pair)?;
            metrics.cert_loaded(SERVING, not_after);
            Ok::<_, TlsConfigError>(())
        });
    }
    if let Some(loaded) = client_watch {
        let (tls, metrics) = (tls.clone(), metrics.clone());
        loaded.watch(stop, tasks, move |(verifier, not_after)| {
            tls.set_client_ca(verifier)?;
            metrics.cert_loaded(CLIENT_CA, not_after);
            Ok::<_, TlsConfigError>(())
        });
    }
    Ok((tls, self_signed_ca))
}
