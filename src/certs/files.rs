//! `kserve-injector certs`: writes `ca.crt`, `ca.key`, `tls.crt` and
//! `tls.key` into a directory, where the `static-certs` overlay reads them.
//! A CA already in the directory is reused, so renewing the serving
//! certificate leaves the webhook's `caBundle` unchanged.

use super::{service_dns_names, Authority, CertGenError, Validity};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// The CA lives ten years; renewing the serving certificate reuses it.
const CA_DAYS: u32 = 3650;

/// What `kserve-injector certs` was asked for.
#[derive(Debug)]
pub(crate) struct CertsRequest<'a> {
    pub service: &'a str,
    pub namespace: &'a str,
    pub out: &'a Path,
    /// Validity of the serving certificate.
    pub days: u32,
    /// Make a new CA even if the directory holds one.
    pub new_ca: bool,
    pub now: OffsetDateTime,
}

/// The four files, by role.
#[derive(Debug)]
pub(crate) struct CertFiles {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    fn in_dir(dir: &Path) -> Self {
        CertFiles {
            ca_cert: dir.join("ca.crt"),
            ca_key: dir.join("ca.key"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }
}

/// What was written.
#[derive(Debug)]
pub(crate) struct Written {
    pub files: CertFiles,
    pub reused_ca: bool,
    pub names: Vec<String>,
    pub not_after: OffsetDateTime,
}

pub(crate) fn write_certs(request: &CertsRequest<'_>) -> Result<Written, CertGenError> {
    let names = service_dns_names(request.service, request.namespace)?;
    let files = CertFiles::in_dir(request.out);
    std::fs::create_dir_all(request.out).map_err(|source| CertGenError::Io {
        path: request.out.to_owned(),
        source,
    })?;
    let (ca, reused_ca) = match existing_ca(&files, request.new_ca)? {
        Some(ca) => (ca, true),
        None => {
            let validity = Validity::from(request.now, CA_DAYS);
            (Authority::generate("kserve-injector CA", validity)?, false)
        }
    };
    let validity = Validity::from(request.now, request.days);
    if ca.not_after() < validity.not_after {
        return Err(CertGenError::CaExpiresFirst {
            path: files.ca_cert,
            ca_not_after: ca.not_after(),
            not_after: validity.not_after,
        });
    }
    let common_name = format!("{}.{}.svc", request.service, request.namespace);
    let leaf = ca.issue_serving(&common_name, &names, validity)?;
    if !reused_ca {
        write_file(&files.ca_key, ca.key_pem().as_bytes(), true)?;
        write_file(&files.ca_cert, ca.cert_pem().as_bytes(), false)?;
    }
    // The key first: a reader that sees the new certificate finds its key.
    write_file(&files.key, leaf.key_pem.as_bytes(), true)?;
    write_file(&files.cert, leaf.cert_pem.as_bytes(), false)?;
    Ok(Written {
        files,
        reused_ca,
        names,
        not_after: validity.not_after,
    })
}

fn existing_ca(files: &CertFiles, new_ca: bool) -> Result<Option<Authority>, CertGenError> {
    if new_ca {
        return Ok(None);
    }
    match (files.ca_cert.exists(), files.ca_key.exists()) {
        (false, false) => Ok(None),
        (true, false) => Err(CertGenError::HalfCa {
            present: files.ca_cert.clone(),
            missing: files.ca_key.clone(),
        }),
        (false, true) => Err(CertGenError::HalfCa {
            present: files.ca_key.clone(),
            missing: files.ca_cert.clone(),
        }),
        (true, true) => {
            let cert = read(&files.ca_cert)?;
            let key = read(&files.ca_key)?;
            Authority::from_pem(&cert, &key).map(Some)
        }
    }
}

fn read(path: &Path) -> Result<String, CertGenError> {
    std::fs::read_to_string(path).map_err(|source| CertGenError::Io {
        path: path.to_owned(),
        source,
    })
}

/// A certificate or key file; keys are readable by the owner only.
fn write_file(path: &Path, contents: &[u8], secret: bool) -> Result<(), CertGenError> {
    let mode = if secret { 0o600 } else { 0o644 };
    write_atomically(path, contents, mode).map_err(|source| CertGenError::Io {
        path: path.to_owned(),
        source,
    })
}

/// `serve --self-signed`'s CA, where `curl --cacert` will read it.
pub(crate) fn write_ca(path: &Path, pem: &str) -> std::io::Result<()> {
    write_atomically(path, pem.as_bytes(), 0o644)
}

/// Written to a temporary file beside the target (named after the process,
/// so two writers never share it), synced, then renamed over the target, so
/// a reader never sees half a file; the temporary file is removed on failure.
fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    // A leftover from an interrupted run would keep its old permissions.
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let written = options.open(&tmp).and_then(|mut file| {
        file.write_all(contents)?;
        file.sync_all()
    });
    written
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| drop(std::fs::remove_file(&tmp)))
}
