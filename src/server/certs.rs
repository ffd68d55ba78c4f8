//! The serving certificate and the client CA: loaded at startup, then kept
//! current by the reloader.

use super::args::ServeArgs;
use super::error::{CertError, ServeError};
use super::metrics::{Metrics, CLIENT_CA, SERVING};
use super::reload::{self, Source, Trigger};
use super::self_signed;
use super::tls::{self, ServingPair, Tls};
use crate::config_file::Snapshot;
use rustls::crypto::CryptoProvider;
use std::path::Path;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

fn file<'a>(snap: &'a Snapshot, path: &Path) -> Result<&'a [u8], CertError> {
    snap.file(path).map_err(|e| CertError::Read {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })
}

pub(crate) struct Certificates {
    pub tls: Arc<Tls>,
    /// `--self-signed`'s CA, written only once both ports are bound.
    pub self_signed_ca: Option<String>,
    pub reloaders: Vec<JoinHandle<()>>,
}

pub(crate) fn load(
    args: &ServeArgs,
    provider: &Arc<CryptoProvider>,
    metrics: &Arc<Metrics>,
    stop: &CancellationToken,
) -> Result<Certificates, ServeError> {
    let trigger = Trigger {
        watch: args.cert_watch,
        poll: args.cert_poll_interval,
    };
    metrics.register_cert(SERVING);
    let (pair, serving_watch, self_signed_ca) = if args.self_signed {
        let made = self_signed::generate(&args.dns_names, provider)?;
        info!(names = ?made.names, "serving a self-signed certificate");
        let pair = ServingPair {
            key: made.key,
            not_after: made.not_after,
        };
        (pair, None, Some(made.ca_pem))
    } else {
        let (cert, key) = (args.cert_file(), args.key_file());
        let source = Source {
            what: "serving certificate",
            paths: vec![cert.clone(), key.clone()],
            trigger: trigger.clone(),
            counters: metrics.reload_counters(SERVING),
        };
        let provider = provider.clone();
        let parse = move |snap: &Snapshot| {
            tls::load_pair(
                file(snap, &cert)?,
                &cert,
                file(snap, &key)?,
                &key,
                &provider,
            )
        };
        let (pair, loaded) = reload::load(source, parse).map_err(|e| {
            if args.tls_cert_file.is_none() && !args.cert_dir.exists() {
                ServeError::Args(format!(
                    "{e} (mount the serving certificate Secret at {}, point --cert-dir at it, or try --self-signed)",
                    args.cert_dir.display()
                ))
            } else {
                ServeError::Cert(e)
            }
        })?;
        info!(not_after = pair.not_after, "serving certificate loaded");
        (pair, Some(loaded), None)
    };
    metrics.cert_loaded(SERVING, pair.not_after);

    let client_ca = match &args.client_ca_file {
        None => None,
        Some(path) => {
            metrics.register_cert(CLIENT_CA);
            let source = Source {
                what: "client CA",
                paths: vec![path.clone()],
                trigger,
                counters: metrics.reload_counters(CLIENT_CA),
            };
            let (path, provider) = (path.clone(), provider.clone());
            let parse =
                move |snap: &Snapshot| tls::client_verifier(file(snap, &path)?, &path, &provider);
            let ((verifier, not_after), loaded) = reload::load(source, parse)?;
            metrics.cert_loaded(CLIENT_CA, not_after);
            info!("client certificates required");
            Some((verifier, loaded))
        }
    };
    let (verifier, client_watch) = client_ca.unzip();
    let tls = Arc::new(Tls::new(provider.clone(), pair, verifier)?);
    let mut reloaders = Vec::new();
    if let Some(loaded) = serving_watch {
        let (tls, metrics) = (tls.clone(), metrics.clone());
        reloaders.push(loaded.watch(stop.clone(), move |pair: ServingPair| {
            metrics.cert_loaded(SERVING, pair.not_after);
            tls.set_pair(pair);
        }));
    }
    if let Some(loaded) = client_watch {
        let (tls, metrics) = (tls.clone(), metrics.clone());
        reloaders.push(loaded.watch(stop.clone(), move |(verifier, not_after)| {
            metrics.cert_loaded(CLIENT_CA, not_after);
            tls.set_client_ca(verifier);
        }));
    }
    Ok(Certificates {
        tls,
        self_signed_ca,
        reloaders,
    })
}
