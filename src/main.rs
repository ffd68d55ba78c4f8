use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use kserve_injector::cli::{run_mutate, OutputFormat};
use kserve_injector::{certs, config_file, server, Config, Env};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// The admission path allocates a JSON tree per request; mimalloc cuts its
/// cost by about a quarter against the system allocator (benches/review.rs).
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
    #[command(after_help = "Examples:
  kserve-injector mutate pod.yaml
  kserve-injector mutate --config inferenceservice-config.yaml -o patch pod.yaml
  kubectl get deploy my-predictor -o yaml | kserve-injector mutate -
  kserve-injector mutate review.json        # prints the AdmissionReview response

Exit codes: 0 mutated (or nothing to do), 1 the webhook would deny the pod, 2 unreadable input or config.")]
    Mutate(MutateArgs),
    /// Serve the admission webhook over HTTPS.
    Serve(Box<server::ServeArgs>),
    /// Sleep, then exit 0: a preStop hook for images without a shell.
    #[command(after_help = "Example (preStop): command: [\"/kserve-injector\", \"sleep\", \"5\"]")]
    Sleep {
        /// Seconds to sleep, e.g. 5.
        seconds: u64,
    },
    /// Print the built-in inferenceservice-config ConfigMap (KServe's defaults).
    DefaultConfig,
    /// Write a CA and a serving certificate for the webhook's Service (no cert-manager needed).
    #[command(after_help = "Example (the static-certs overlay reads this directory):
  kserve-injector certs --service kserve-injector --namespace kserve --out manifests/overlays/static-certs/certs

Writes ca.crt, ca.key, tls.crt and tls.key (keys mode 0600). A ca.crt + ca.key already in
--out are reused, so a renewed serving certificate keeps the webhook's caBundle unchanged.
Exit codes: 0 written, 2 invalid names or unreadable/unwritable files.")]
    Certs(CertsArgs),
}

#[derive(clap::Args)]
struct CertsArgs {
    /// The webhook's Service name. Example: --service kserve-injector
    #[arg(long)]
    service: String,
    /// The Service's namespace. Example: --namespace kserve
    #[arg(long)]
    namespace: String,
    /// Directory to write the files into (created if missing). Example: --out ./certs
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Days the serving certificate is valid. Example: --days 90
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    days: u32,
    /// Make a new CA even if --out holds one (the caBundle changes).
    #[arg(long)]
    new_ca: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Yaml,
    Json,
    Patch,
}

#[derive(clap::Args)]
struct MutateArgs {
    /// KServe's inferenceservice-config: a ConfigMap manifest (YAML or JSON) or
    /// a directory where the ConfigMap is mounted. Default: KServe's shipped values.
    /// Example: --config ./inferenceservice-config.yaml
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Output: the mutated objects as yaml or json, or the JSON Patch the
    /// webhook would return. AdmissionReview input always prints the response as JSON.
    /// Example: -o patch
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    output: Format,
    /// Namespace the pods are created in (default: each object's own, else "default").
    /// Example: --namespace models
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// A Pod, a multi-document YAML, a v1 List, a workload with a pod template
    /// (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob) or an
    /// AdmissionReview; "-" or nothing reads standard input. Example: pod.yaml
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

fn read_input(file: Option<&PathBuf>) -> anyhow::Result<String> {
    let mut text = String::new();
    match file {
        Some(path) if path.as_os_str() != "-" => {
            text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?
        }
        _ => {
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read standard input")?;
        }
    }
    Ok(text)
}

/// Writes the result; a reader that went away (`| head`) is not an error,
/// any other write failure is reported instead of panicking like `print!`.
fn write_stdout(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write output: {e}");
            ExitCode::from(2)
        }
    }
}

fn mutate_command(args: MutateArgs) -> ExitCode {
    let config = match &args.config {
        Some(path) => match config_file::load(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => Config::default(),
    };
    let text = match read_input(args.file.as_ref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let format = match args.output {
        Format::Yaml => OutputFormat::Yaml,
        Format::Json => OutputFormat::Json,
        Format::Patch => OutputFormat::Patch,
    };
    match run_mutate(&text, format, args.namespace.as_deref(), &Env::new(config)) {
        Ok(out) => write_stdout(&out),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn certs_command(args: &CertsArgs) -> ExitCode {
    let request = certs::CertsRequest {
        service: &args.service,
        namespace: &args.namespace,
        out: &args.out,
        days: args.days,
        new_ca: args.new_ca,
        now: time::OffsetDateTime::now_utc(),
    };
    match certs::write_certs(&request) {
        Ok(done) => {
            let ca = if done.reused_ca { "reused" } else { "new" };
            eprintln!(
                "wrote {} and {} for {} (valid until {}), CA {} ({ca})",
                done.files.cert.display(),
                done.files.key.display(),
                done.names.join(", "),
                done.not_after,
                done.files.ca_cert.display(),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Mutate(args) => mutate_command(args),
        Command::Serve(args) => match server::run(*args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Sleep { seconds } => {
            std::thread::sleep(std::time::Duration::from_secs(seconds));
            ExitCode::SUCCESS
        }
        Command::DefaultConfig => write_stdout(Config::default_manifest()),
        Command::Certs(args) => certs_command(&args),
    }
}
