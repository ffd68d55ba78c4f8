//! Loading the serving certificate and the client CA at startup, and keeping
//! them current afterwards. At startup a bad file is fatal (better than
//! serving nothing); later, a bad file is logged and counted and the pair
//! already in use keeps serving.

use super::args::ServeArgs;
use super::error::{CertError, ServeError};
use super::metrics::{Metrics, CLIENT_CA, SERVING};
use super::reload::{self, Snapshot, Trigger};
use super::self_signed;
use super::tls::{self, ClientCaVerifier, ServingCert};
use rustls::crypto::CryptoProvider;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::watch;
use tracing::{error, info};

fn read_error(path: &Path, message: String) -> CertError {
    CertError::Read {
        path: path.to_path_buf(),
        source: std::io::Error::other(message),
    }
}

fn pair_from(
    snap: &Snapshot,
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<tls::ServingPair, CertError> {
    let cert_pem = snap.file(cert).map_err(|e| read_error(cert, e))?;
    let key_pem = snap.file(key).map_err(|e| read_error(key, e))?;
    tls::load_pair(cert_pem, cert, key_pem, key, provider)
}

pub(crate) struct Certificates {
    pub serving: Arc<ServingCert>,
    pub client_ca: Option<Arc<ClientCaVerifier>>,
    /// Where `--self-signed` wrote its CA, when it did.
    pub ca_file: Option<PathBuf>,
    pub reloaders: Vec<tokio::task::JoinHandle<()>>,
}

pub(crate) fn load(
    args: &ServeArgs,
    provider: &Arc<CryptoProvider>,
    metrics: &Arc<Metrics>,
    stop: &watch::Receiver<bool>,
) -> Result<Certificates, ServeError> {
    let trigger = Trigger {
        watch: args.cert_watch,
        poll: args.cert_poll_interval,
    };
    let mut reloaders = Vec::new();
    metrics.register_cert(SERVING);
    let (serving, ca_file) = if args.self_signed {
        let made = self_signed::generate(&args.dns_names, provider)?;
        let path = args.ca_out_file();
        std::fs::write(&path, &made.ca_pem).map_err(|source| ServeError::Write {
            path: path.clone(),
            source,
        })?;
        metrics.cert_loaded(SERVING, made.not_after);
        info!(
            ca_file = %path.display(),
            names = ?made.names,
            "serving a self-signed certificate; trust it with: curl --cacert {}",
            path.display()
        );
        (Arc::new(ServingCert::new(made.key)), Some(path))
    } else {
        let (cert, key) = (args.cert_file(), args.key_file());
        let sources = vec![cert.clone(), key.clone()];
        let initial = Snapshot::read(&sources);
        let pair = pair_from(&initial, &cert, &key, provider).map_err(|e| {
            if args.tls_cert_file.is_none() && !args.cert_dir.exists() {
                ServeError::Args(format!(
                    "{e} (mount the serving certificate Secret at {}, point --cert-dir at it, or try --self-signed)",
                    args.cert_dir.display()
                ))
            } else {
                ServeError::Cert(e)
            }
        })?;
        metrics.cert_loaded(SERVING, pair.not_after);
        info!(cert = %cert.display(), key = %key.display(), not_after = pair.not_after, "serving certificate loaded");
        let serving = Arc::new(ServingCert::new(pair.key));
        let target = serving.clone();
        let (provider, metrics) = (provider.clone(), metrics.clone());
        reloaders.push(reload::spawn(
            "serving certificate",
            sources,
            initial,
            trigger.clone(),
            stop.clone(),
            move |snap| match pair_from(snap, &cert, &key, &provider) {
                Ok(pair) => {
                    target.replace(pair.key);
                    metrics.cert_reloaded(SERVING, pair.not_after);
                    info!(cert = %cert.display(), not_after = pair.not_after, "serving certificate reloaded");
                }
                Err(e) => {
                    metrics.cert_reload_failed(SERVING);
                    error!(error = %e, "serving certificate not reloaded; the previous one stays in use");
                }
            },
        ));
        (serving, None)
    };

    let client_ca = match &args.client_ca_file {
        None => None,
        Some(path) => {
            metrics.register_cert(CLIENT_CA);
            let sources = vec![path.clone()];
            let initial = Snapshot::read(&sources);
            let load = |snap: &Snapshot, provider: &Arc<CryptoProvider>| {
                let pem = snap.file(path).map_err(|e| read_error(path, e))?;
                tls::client_verifier(pem, path, provider)
            };
            let (verifier, not_after) = load(&initial, provider)?;
            metrics.cert_loaded(CLIENT_CA, not_after);
            info!(client_ca = %path.display(), "client certificates required");
            let current = Arc::new(ClientCaVerifier::new(verifier));
            let target = current.clone();
            let (provider, metrics, path) = (provider.clone(), metrics.clone(), path.clone());
            reloaders.push(reload::spawn(
                "client CA",
                sources,
                initial,
                trigger,
                stop.clone(),
                move |snap| {
                    let loaded = snap
                        .file(&path)
                        .map_err(|e| read_error(&path, e))
                        .and_then(|pem| tls::client_verifier(pem, &path, &provider));
                    match loaded {
                        Ok((verifier, not_after)) => {
                            target.replace(verifier);
                            metrics.cert_reloaded(CLIENT_CA, not_after);
                            info!(client_ca = %path.display(), "client CA reloaded");
                        }
                        Err(e) => {
                            metrics.cert_reload_failed(CLIENT_CA);
                            error!(error = %e, "client CA not reloaded; the previous one stays in use");
                        }
                    }
                },
            ));
            Some(current)
        }
    };
    Ok(Certificates {
        serving,
        client_ca,
        ca_file,
        reloaders,
    })
}
