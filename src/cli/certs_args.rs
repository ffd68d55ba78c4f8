//! Flags of `kserve-injector certs`.

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Example (the static-certs overlay reads this directory):
  kserve-injector certs --service kserve-injector --namespace kserve --out manifests/overlays/static-certs/certs

Writes ca.crt, ca.key, tls.crt and tls.key (keys mode 0600). A ca.crt + ca.key already in
--out are reused, so a renewed serving certificate keeps the webhook's caBundle unchanged.
Exit codes: 0 written, 2 invalid names or unreadable/unwritable files.")]
pub struct CertsArgs {
    /// The webhook's Service name. Example: --service kserve-injector
    #[arg(long)]
    pub service: String,
    /// The Service's namespace. Example: --namespace kserve
    #[arg(long)]
    pub namespace: String,
    /// Directory to write the files into (created if missing). Example: --out ./certs
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Days the serving certificate is valid. Example: --days 90
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub days: u32,
    /// Make a new CA even if --out holds one (the caBundle changes).
    #[arg(long)]
    pub new_ca: bool,
}
