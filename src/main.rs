#![deny(unsafe_code)]
//! `kserve-injector`: parses the command line and hands each subcommand to
//! the library (`kserve_injector::cli::commands`, `kserve_injector::server`).

use clap::{Parser, Subcommand};
use kserve_injector::cli::{
    commands, AuditArgs, CertsArgs, CheckArgs, DefaultConfigArgs, MutateArgs, PolicyArgs,
};
use kserve_injector::server::args::ServeArgs;
use std::process::ExitCode;

/// A review makes many small short-lived allocations (the view's strings,
/// the patch text); mimalloc serves those faster than the system allocator
/// (compare with `cargo bench --bench review`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// KServe's pod mutator as a fast, idempotent admission webhook.
#[derive(Parser)]
#[command(name = "kserve-injector", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Mutate pods offline, exactly as the webhook would.
    Mutate(MutateArgs),
    /// Write the MutatingAdmissionPolicy (Kubernetes 1.36) that takes the
    /// pods needing no cluster lookup from the webhook, and its binding.
    Policy(PolicyArgs),
    /// Serve the admission webhook over HTTPS.
    Serve(Box<ServeArgs>),
    /// Compare the InferenceService pods a cluster runs with what this
    /// webhook would make of their templates (before replacing KServe's mutator).
    Audit(Box<AuditArgs>),
    /// Sleep, then exit 0: a preStop hook for images without a shell.
    #[command(after_help = "Example (preStop): command: [\"/kserve-injector\", \"sleep\", \"5\"]")]
    Sleep {
        /// Seconds to sleep, e.g. 5.
        seconds: u64,
    },
    /// Print the built-in inferenceservice-config ConfigMap: the defaults
    /// KServe HEAD, or the release --kserve-version names, shipped.
    DefaultConfig(DefaultConfigArgs),
    /// Write a CA and a serving certificate for the webhook's Service (no cert-manager needed).
    Certs(CertsArgs),
    /// Check an install against a live cluster: the webhook configuration,
    /// certificates, Deployment, RBAC and a dry-run pod through the API server.
    Check(CheckArgs),
}

// Why: Rust's runtime reopens a closed fd 1 on /dev/null before `main`,
// so `mutate pod.yaml 1>&-` would lose its output and exit 0; this entry
// sees fd 1 before that, and `tests/cli/reader.rs` runs the binary with fd
// 1 closed and expects exit 2. `.init_array` is an ELF section, run by the
// dynamic loader and glibc's or musl's start-up on Linux; on other systems
// there is no entry, and output to a closed stdout is lost with exit 0.
// SAFETY: an `.init_array` entry runs before Rust's runtime is set up, so
// it may only make raw system calls and touch statics that need no
// initialisation: `note_closed_stdout` does one fcntl and one atomic store.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STDOUT: extern "C" fn() = commands::note_closed_stdout;

fn main() -> ExitCode {
    kserve_injector::memory::small_pages();
    let cli = Cli::parse();
    if matches!(cli.command, Command::Mutate(_) | Command::Audit(_)) {
        kserve_injector::memory::purge_at_once();
        commands::stderr_logs_from_env();
    }
    match cli.command {
        Command::Mutate(args) => commands::mutate(args),
        Command::Serve(args) => match kserve_injector::server::run(*args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {}", kserve_injector::log_text::bounded(e));
                ExitCode::FAILURE
            }
        },
        Command::Sleep { seconds } => {
            std::thread::sleep(std::time::Duration::from_secs(seconds));
            ExitCode::SUCCESS
        }
        Command::Audit(args) => commands::audit(&args),
        Command::DefaultConfig(args) => commands::default_config(&args),
        Command::Certs(args) => commands::certs(&args),
        Command::Check(args) => commands::check(&args),
        Command::Policy(args) => commands::policy(&args),
    }
}
