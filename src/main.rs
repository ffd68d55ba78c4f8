#![deny(unsafe_code)]
use clap::{Parser, Subcommand, ValueEnum};
use kserve_injector::cli::{
    load_objects_within, mutate_stream_within, BudgetArgs, CliError, ClusterSource, OutputFormat,
};
use kserve_injector::lookups::{
    resolve_client, ClusterLookups, Environment, Lookups, DEFAULT_GET_TIMEOUT,
};
use kserve_injector::{certs, config_file, server};
use kserve_injector_core::pod_facts::PodFacts;
use kserve_injector_core::ClusterData;
use kserve_injector_core::{Config, Inputs};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
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
    #[command(after_help = "Examples:
  kserve-injector mutate pod.yaml
  kserve-injector mutate --config inferenceservice-config.yaml -o patch pod.yaml
  kserve-injector mutate --objects cluster.yaml pod.yaml   # ServiceAccounts, Secrets, CSCs, ISVCs
  kserve-injector mutate --kubeconfig ~/.kube/config pod.yaml   # the same, read from a cluster
  kubectl get deploy my-predictor -o yaml | kserve-injector mutate -
  kserve-injector mutate review.json        # prints the AdmissionReview response

Input starting with { or [ is read as JSON, anything else as YAML the way
kubectl reads it (merge keys expanded; at most 64 levels of nesting; see
--max-document-bytes and the other input limits below).
Documents are processed and printed one at a time; the first one that fails
stops the run.

Exit codes: 0 mutated (or nothing to do; also when the reader of the output
stops reading, as with | head), 1 the webhook would deny a pod or denies an
AdmissionReview (whose response is still printed), 2 unreadable input or
config, or output that cannot be written.")]
    Mutate(MutateArgs),
    /// Serve the admission webhook over HTTPS.
    Serve(Box<kserve_injector::cli::ServeArgs>),
    /// Compare the InferenceService pods a cluster runs with what this
    /// webhook would make of their templates (before replacing KServe's mutator).
    Audit(Box<kserve_injector::audit::AuditArgs>),
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
    /// kserve-injector's own settings (YAML or JSON): what KServe's ConfigMap
    /// has no key for, as `serve --config-file`. Example: --config-file ./kserve-injector.yaml
    #[arg(long, value_name = "PATH")]
    config_file: Option<PathBuf>,
    /// Output: the mutated objects as yaml or json, or the JSON Patch the
    /// webhook would return. AdmissionReview input always prints the response as JSON.
    /// Example: -o patch
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    output: Format,
    /// Namespace the pods are created in (default: each object's own, else "default").
    /// Example: --namespace models
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Cluster objects the webhook would read from the API server: ServiceAccounts,
    /// Secrets, ClusterStorageContainers, InferenceServices (multi-document YAML/JSON
    /// or a List). Without it, every lookup is "not found". Example: --objects cluster.yaml
    #[arg(long, value_name = "FILE", conflicts_with = "kubeconfig")]
    objects: Option<PathBuf>,
    /// Read those objects from a live cluster instead, with direct GETs (as
    /// `istioctl kube-inject` reads its config). Example: --kubeconfig ~/.kube/config
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use. Example: --context kind-kserve
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    context: Option<String>,
    /// The modelcar's shape, as `serve --modelcar-mode`: classic or
    /// native-sidecar. Example: --modelcar-mode native-sidecar
    #[arg(long, value_name = "MODE", default_value = "classic",
          value_parser = kserve_injector::cli::modelcar_mode())]
    modelcar_mode: kserve_injector_core::inputs::ModelcarMode,
    /// The KServe release whose pod mutator to reproduce, as `serve
    /// --kserve-version`: v0.16 … v0.20 or head. Default: the --config-file's
    /// kserveVersion, else head. Example: --kserve-version v0.17
    #[arg(long, value_name = "VERSION", value_parser = kserve_injector::cli::kserve_version())]
    kserve_version: Option<kserve_injector_core::Release>,
    /// The security profile of the containers added, as `serve
    /// --security-profile`: baseline or restricted. Example: --security-profile restricted
    #[arg(long, value_name = "PROFILE", default_value = "baseline",
          value_parser = kserve_injector::cli::security_profile())]
    security_profile: kserve_injector_core::inputs::SecurityProfile,
    /// A Pod, a multi-document YAML, a v1 List, a workload with a pod template
    /// (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob) or an
    /// AdmissionReview; "-" or nothing reads standard input. Example: pod.yaml
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    budget: BudgetArgs,
}

/// Whether fd 1 was closed when the process started. Rust's runtime
/// reopens a closed fd 0/1/2 on /dev/null before `main` runs, so output to a
/// closed stdout (`mutate pod.yaml 1>&-`) would vanish with exit 0; an ELF
/// constructor runs before that and is the one place that can still see it.
static STDOUT_WAS_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[allow(unsafe_code)]
extern "C" fn note_closed_stdout() {
    // SAFETY: fcntl(F_GETFD) only queries the descriptor table.
    if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
        STDOUT_WAS_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

// SAFETY: an `.init_array` entry runs before Rust's runtime is set up, so
// it may only make raw system calls and touch statics that need no
// initialisation: `note_closed_stdout` does one fcntl and one atomic store.
// `tests/cli/reader.rs` runs the binary with fd 1 closed and expects exit 2.
#[allow(unsafe_code)]
#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STDOUT: extern "C" fn() = note_closed_stdout;

/// A handle of our own on fd 1: Rust's `stdout()` counts EBADF (fd 1 open
/// read-only) as written, a File reports it. The duplicate is close-on-exec.
fn stdout_file() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    if STDOUT_WAS_CLOSED.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(std::io::Error::other("standard output is closed"));
    }
    let fd = std::io::stdout().as_fd().try_clone_to_owned()?;
    Ok(std::fs::File::from(fd))
}

/// Writes the result; a reader that went away (`| head`) ends quietly, any
/// other write failure (closed stdout, full disk) is exit code 2.
fn write_stdout(text: &str) -> ExitCode {
    let written = stdout_file().and_then(|mut out| {
        out.write_all(text.as_bytes())?;
        out.flush()
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&CliError::from_write(e)),
    }
}

fn fail(e: &CliError) -> ExitCode {
    if *e != CliError::ReaderGone {
        eprintln!("error: {e}");
    }
    ExitCode::from(e.exit_code() as u8)
}

/// The offline commands log (what a pod asked of an older KServe release,
/// what an object dump held that was passed over) to stderr, only when
/// `RUST_LOG` asks: their stdout is the result.
fn stderr_logs_from_env() {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
    }
}

fn mutate_command(args: MutateArgs) -> ExitCode {
    let stdout = match stdout_file() {
        Ok(f) => f,
        Err(e) => return fail(&CliError::from_write(e)),
    };
    let loaded = config_file::load_settings(args.config_file.as_deref()).and_then(|settings| {
        let config =
            config_file::load_config(args.config.as_deref(), &settings, args.kserve_version)?;
        Ok((config, settings))
    });
    let (config, settings) = match loaded {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let budget = args.budget.budget();
    let format = match args.output {
        Format::Yaml => OutputFormat::Yaml,
        Format::Json => OutputFormat::Json,
        Format::Patch => OutputFormat::Patch,
    };
    let cluster: Result<Box<dyn ClusterSource>, CliError> = match (&args.objects, &args.kubeconfig)
    {
        (Some(path), _) => File::open(path)
            .map_err(|e| CliError::Input(format!("cannot read {}: {e}", path.display())))
            .and_then(|file| load_objects_within(&mut BufReader::new(file), budget))
            .map_err(|e| CliError::Input(format!("--objects {}: {e}", path.display())))
            .map(|loaded| {
                for line in loaded.ignored_lines() {
                    eprintln!("kserve-injector: --objects {}: {line}", path.display());
                }
                Box::new(loaded.data) as Box<dyn ClusterSource>
            }),
        (None, Some(path)) => LiveCluster::connect(path, args.context.as_deref())
            .map(|live| Box::new(live) as Box<dyn ClusterSource>),
        (None, None) => Ok(Box::new(ClusterData::default())),
    };
    let mut cluster = match cluster {
        Ok(cluster) => cluster,
        Err(e) => return fail(&e),
    };
    let mut env = Inputs::new(config);
    env.modelcar_mode = args.modelcar_mode;
    env.security_profile = args.security_profile;
    env.model_volume = settings.model_volume;
    let namespace = args.namespace.as_deref();
    let mut out = BufWriter::new(stdout);
    let result = match args.file.as_ref().filter(|p| p.as_os_str() != "-") {
        Some(path) => match File::open(path) {
            Ok(file) => {
                let mut input = BufReader::new(file);
                let cluster = &mut *cluster;
                mutate_stream_within(
                    &mut input, &mut out, format, namespace, &env, cluster, budget,
                )
            }
            Err(e) => Err(CliError::Input(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        },
        None => mutate_stream_within(
            &mut std::io::stdin().lock(),
            &mut out,
            format,
            namespace,
            &env,
            &mut *cluster,
            budget,
        ),
    };
    match result.and_then(|()| out.flush().map_err(CliError::from_write)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// `mutate --kubeconfig`: the objects each pod needs, read from a live
/// cluster with direct GETs (no watches for a one-shot command).
struct LiveCluster {
    // Dropped before the runtime its client was built on.
    lookups: Lookups,
    runtime: tokio::runtime::Runtime,
}

impl LiveCluster {
    fn connect(kubeconfig: &Path, context: Option<&str>) -> Result<Self, CliError> {
        let failed = |e: &dyn std::fmt::Display| CliError::Input(e.to_string());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failed(&e))?;
        let environment = Environment {
            kubeconfig_flag: Some(kubeconfig.to_path_buf()),
            ..Environment::default()
        };
        let client = runtime
            .block_on(resolve_client(ClusterLookups::On, &environment, context))
            .map_err(|e| failed(&e))?
            .ok_or_else(|| failed(&"no cluster configuration"))?;
        let lookups = Lookups::uncached(client, DEFAULT_GET_TIMEOUT);
        Ok(Self { lookups, runtime })
    }
}

impl ClusterSource for LiveCluster {
    fn snapshot(&mut self, facts: &PodFacts, config: &Config) -> Result<ClusterData, String> {
        (self.runtime.block_on(self.lookups.snapshot(facts, config))).map_err(|e| e.to_string())
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

/// An audit report as a table or JSON on stdout; exit 1 when `flagged`
/// (differences, or credentials found), 2 when the audit could not run.
fn print_report<R: serde::Serialize, E: std::fmt::Display>(
    report: Result<R, E>,
    output: kserve_injector::audit::AuditFormat,
    table: impl Fn(&R) -> String,
    flagged: impl Fn(&R) -> bool,
) -> ExitCode {
    use kserve_injector::audit::AuditFormat;
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let text = match output {
        AuditFormat::Table => table(&report),
        AuditFormat::Json => match serde_json::to_string_pretty(&report) {
            Ok(json) => json + "\n",
            Err(e) => return fail(&CliError::Output(e.to_string())),
        },
    };
    match write_stdout(&text) {
        code if code != ExitCode::SUCCESS => code,
        _ if flagged(&report) => ExitCode::from(1),
        ok => ok,
    }
}

fn audit_command(args: &kserve_injector::audit::AuditArgs) -> ExitCode {
    use kserve_injector::audit::{run, run_credentials};
    if args.credentials {
        return print_report(
            run_credentials(args),
            args.output,
            |r| r.table(),
            |r| r.found(),
        );
    }
    print_report(run(args), args.output, |r| r.table(), |r| r.differs())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Mutate(_) | Command::Audit(_)) {
        kserve_injector::memory::purge_at_once();
        stderr_logs_from_env();
    }
    match cli.command {
        Command::Mutate(args) => mutate_command(args),
        Command::Serve(args) => match server::run((*args).into()) {
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
        Command::Audit(args) => audit_command(&args),
        Command::DefaultConfig => write_stdout(Config::default_manifest()),
        Command::Certs(args) => certs_command(&args),
    }
}
