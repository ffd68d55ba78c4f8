//! The offline subcommands (`mutate`, `certs`, `audit`, `default-config`)
//! as the binary runs them: flags in, output on stdout, an exit code out.

use super::{
    mutate_stream_within, AuditArgs, CertsArgs, CheckArgs, CliError, DefaultConfigArgs, InputError,
    LiveCluster, MutateArgs, MutateOutput, MutateSource, PolicyArgs,
};
use crate::files::Accept;
use crate::flag_values::ReportFormat;
use crate::log_text::bounded;
use crate::lookups::load_objects_within;
use kserve_injector_core::{cluster::ClusterSnapshot, config::Config};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::process::ExitCode;

/// Whether fd 1 was closed when the process started. Rust's runtime
/// reopens a closed fd 0/1/2 on /dev/null before `main` runs, so output to a
/// closed stdout (`mutate pod.yaml 1>&-`) would vanish with exit 0; an ELF
/// constructor runs before that and is the one place that can still see it:
/// the binary registers [`note_closed_stdout`] as one.
static STDOUT_WAS_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[allow(unsafe_code)]
pub extern "C" fn note_closed_stdout() {
    // SAFETY: fcntl(F_GETFD) only queries the descriptor table.
    if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
        STDOUT_WAS_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

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
pub(crate) fn write_stdout(text: &str) -> ExitCode {
    let written = stdout_file().and_then(|mut out| {
        out.write_all(text.as_bytes())?;
        out.flush()
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&CliError::from_write(e)),
    }
}

/// Prints the shipped ConfigMap of the release asked for, HEAD's by default.
pub fn default_config(args: &DefaultConfigArgs) -> ExitCode {
    let release = args.release.kserve_version.unwrap_or_default();
    write_stdout(kserve_injector_core::config::Config::shipped_manifest(
        release,
    ))
}

/// Writes the MutatingAdmissionPolicy and its binding for the inputs
/// `mutate` takes (the core renders them, `kserve_injector_core::policy`),
/// and says the policy's size on stderr: the API server stores it in etcd
/// and compiles its CEL on every API server.
pub fn policy(args: &PolicyArgs) -> ExitCode {
    let flags = &args.inputs;
    let loaded = flags.settings().and_then(|settings| {
        let config =
            crate::files::load_config(flags.config.as_deref(), &settings, flags.kserve_version())?;
        Ok((config, settings))
    });
    let inputs = match loaded {
        Ok((config, settings)) => flags.inputs(config, &settings),
        Err(e) => {
            eprintln!("error: {}", bounded(e));
            return ExitCode::from(2);
        }
    };
    let rendered = match kserve_injector_core::policy::render(&inputs) {
        Ok(rendered) => rendered,
        Err(e) => {
            eprintln!("error: {}", bounded(e));
            return ExitCode::from(2);
        }
    };
    let yaml = |value| {
        kserve_injector_core::reader::to_yaml(value)
            .map_err(|e| CliError::from(InputError::Yaml(e)))
    };
    let text = match (yaml(&rendered.policy), yaml(&rendered.binding)) {
        (Ok(policy), Ok(binding)) => format!("{policy}---\n{binding}"),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    eprintln!(
        "policy: {} bytes as JSON (the MutatingAdmissionPolicy)",
        rendered.policy.to_string().len()
    );
    write_stdout(&text)
}

/// Prints why the command failed: a denial as `denied: ` and KServe's
/// message (which may itself begin with "error"), an AdmissionReview's
/// denial as the document's answer, anything else as `error: `.
fn fail(e: &CliError) -> ExitCode {
    match e {
        CliError::ReaderGone => {}
        CliError::Denied(super::Denial::Injector(_)) => eprintln!("denied: {}", bounded(e)),
        CliError::Denied(super::Denial::Review { .. }) => eprintln!("{}", bounded(e)),
        _ => eprintln!("error: {}", bounded(e)),
    }
    ExitCode::from(e.exit_code() as u8)
}

/// Standard input, with a hint on stderr when it is a terminal: without a
/// file `mutate` waits for a document there, which looks like a hang.
fn stdin_input() -> std::io::StdinLock<'static> {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("kserve-injector: reading a document from standard input (end it with Ctrl-D); to read a file, name it: kserve-injector mutate pod.yaml");
    }
    stdin.lock()
}

/// The offline commands log (what a pod asked of an older KServe release,
/// what an object dump held that was passed over) to stderr, only when
/// `RUST_LOG` asks: their stdout is the result.
pub fn stderr_logs_from_env() {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .fmt_fields(crate::log_text::EscapedFields::default())
            .try_init();
    }
}

/// `--objects`: a regular file or a pipe that delivers something.
fn open_objects(path: &std::path::Path) -> std::io::Result<BufReader<File>> {
    use std::io::BufRead;
    let mut input = BufReader::new(crate::files::open(path, Accept::RegularFileOrPipe)?);
    let delivered = input.fill_buf()?.len();
    crate::files::check_pipe_delivered(input.get_ref(), delivered)?;
    Ok(input)
}

/// The cluster objects `mutate` reads: `--objects`, `--kubeconfig`, or none.
fn mutate_source(
    args: &MutateArgs,
    budget: kserve_injector_core::reader::Budget,
) -> Result<Box<dyn MutateSource>, CliError> {
    match (&args.objects, &args.kubeconfig) {
        (Some(path), _) => open_objects(path)
            .map_err(|source| {
                CliError::from(InputError::ObjectsUnreadable {
                    path: path.clone(),
                    source,
                })
            })
            .and_then(|mut input| {
                load_objects_within(&mut input, budget).map_err(|source| {
                    CliError::from(InputError::Objects {
                        path: path.clone(),
                        source,
                    })
                })
            })
            .map(|loaded| {
                for line in loaded.ignored_lines() {
                    eprintln!(
                        "kserve-injector: --objects {}: {}",
                        path.display(),
                        bounded(line)
                    );
                }
                Box::new(loaded.data) as Box<dyn MutateSource>
            }),
        (None, Some(path)) => LiveCluster::connect(path, args.context.as_deref())
            .map(|live| Box::new(live) as Box<dyn MutateSource>),
        (None, None) => Ok(Box::new(ClusterSnapshot::default())),
    }
}

/// The input file, or standard input for none or "-".
fn with_input<T>(
    args: &MutateArgs,
    read: impl FnOnce(&mut dyn std::io::BufRead) -> Result<T, CliError>,
) -> Result<T, CliError> {
    match args.file.as_ref().filter(|p| p.as_os_str() != "-") {
        Some(path) => match File::open(path) {
            Ok(file) => read(&mut BufReader::new(file)).map_err(|e| e.reading(path)),
            Err(source) => Err(CliError::from(InputError::Open {
                path: path.clone(),
                source,
            })),
        },
        None => read(&mut stdin_input()),
    }
}

pub fn mutate(args: MutateArgs) -> ExitCode {
    if let Some(target) = args.compare_to {
        return compare(&args, target);
    }
    let format = match MutateOutput::objects(args.output) {
        Ok(format) => format,
        Err(e) => return fail(&CliError::from(InputError::OutputChoice(e))),
    };
    let stdout = match stdout_file() {
        Ok(f) => f,
        Err(e) => return fail(&CliError::from_write(e)),
    };
    let flags = &args.inputs;
    let loaded = flags.settings().and_then(|settings| {
        let config =
            crate::files::load_config(flags.config.as_deref(), &settings, flags.kserve_version())?;
        Ok((config, settings))
    });
    let (config, settings) = match loaded {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {}", bounded(e));
            return ExitCode::from(2);
        }
    };
    let budget = args.budget.budget();
    let mut cluster = match mutate_source(&args, budget) {
        Ok(cluster) => cluster,
        Err(e) => return fail(&e),
    };
    let inputs = flags.inputs(config, &settings);
    let namespace = args.namespace.as_deref();
    let mut out = BufWriter::new(stdout);
    let result = match args.file.as_ref().filter(|p| p.as_os_str() != "-") {
        Some(path) => match File::open(path) {
            Ok(file) => {
                let mut input = BufReader::new(file);
                let cluster = &mut *cluster;
                mutate_stream_within(
                    &mut input, &mut out, format, namespace, &inputs, cluster, budget,
                )
                .map_err(|e| e.reading(path))
            }
            Err(source) => Err(CliError::from(InputError::Open {
                path: path.clone(),
                source,
            })),
        },
        None => mutate_stream_within(
            &mut stdin_input(),
            &mut out,
            format,
            namespace,
            &inputs,
            &mut *cluster,
            budget,
        ),
    };
    match result.and_then(|()| out.flush().map_err(CliError::from_write)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// `mutate --compare-to`: each pod under `--kserve-version`'s release and
/// `target`, both reading `--config`, else each its shipped ConfigMap.
fn compare(args: &MutateArgs, target: kserve_injector_core::release::Release) -> ExitCode {
    use kserve_injector_core::audit::{Side, Upgrade};
    let output = match MutateOutput::difference(args.output) {
        Ok(output) => output,
        Err(e) => return fail(&CliError::from(InputError::OutputChoice(e))),
    };
    let config_error = |e: crate::files::LoadError| CliError::from(InputError::Config(e));
    let flags = &args.inputs;
    let prepared = (flags.settings())
        .map_err(config_error)
        .and_then(|settings| {
            let current = flags.release(&settings);
            let sides = match &flags.config {
                Some(path) => {
                    let data = crate::files::load_data(path).map_err(config_error)?;
                    (Side::new(current, data.clone()), Side::new(target, data))
                }
                None => (Side::shipped(current), Side::shipped(target)),
            };
            let inputs = flags.inputs(Config::default(), &settings);
            Upgrade::new(sides.0, sides.1, &inputs, &settings.storage_initializer).map_err(
                |source| {
                    CliError::from(InputError::AsRelease {
                        release: current,
                        source,
                    })
                },
            )
        });
    let upgrade = match prepared {
        Ok(upgrade) => upgrade,
        Err(e) => return fail(&e),
    };
    let budget = args.budget.budget();
    let report = mutate_source(args, budget).and_then(|mut cluster| {
        let namespace = args.namespace.as_deref();
        with_input(args, |input| {
            let mut input = input;
            super::compare::compare_stream(&mut input, &upgrade, namespace, &mut *cluster, budget)
        })
    });
    let report = match report {
        Ok(report) => report,
        Err(e) => return fail(&e),
    };
    let text = match output {
        MutateOutput::Summary => report.summary(),
        MutateOutput::Json => match serde_json::to_string_pretty(&report) {
            Ok(json) => json + "\n",
            Err(e) => return fail(&CliError::Report(e)),
        },
        _ => report.table(),
    };
    match write_stdout(&text) {
        code if code != ExitCode::SUCCESS => code,
        _ if report.flagged() => ExitCode::from(1),
        ok => ok,
    }
}

pub fn certs(args: &CertsArgs) -> ExitCode {
    let request = crate::certs::CertsRequest {
        service: &args.service,
        namespace: &args.namespace,
        out: &args.out,
        days: args.days,
        new_ca: args.new_ca,
        now: time::OffsetDateTime::now_utc(),
    };
    match crate::certs::write_certs(&request) {
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
            eprintln!("error: {}", bounded(e));
            ExitCode::from(2)
        }
    }
}

/// An audit report as a table or JSON on stdout; exit 1 when `flagged`
/// (differences, or credentials found), 2 when the audit could not run.
fn print_report<R: serde::Serialize, E: std::fmt::Display>(
    report: Result<R, E>,
    output: ReportFormat,
    table: impl Fn(&R) -> String,
    flagged: impl Fn(&R) -> bool,
) -> ExitCode {
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {}", bounded(e));
            return ExitCode::from(2);
        }
    };
    let text = match output {
        ReportFormat::Table => table(&report),
        ReportFormat::Json => match serde_json::to_string_pretty(&report) {
            Ok(json) => json + "\n",
            Err(e) => return fail(&CliError::Report(e)),
        },
    };
    match write_stdout(&text) {
        code if code != ExitCode::SUCCESS => code,
        _ if flagged(&report) => ExitCode::from(1),
        ok => ok,
    }
}

pub fn audit(args: &AuditArgs) -> ExitCode {
    use crate::audit::{run, run_credentials, run_upgrade};
    if let Some(target) = args.upgrade_to {
        return print_report(
            run_upgrade(args, target),
            args.output,
            |r| r.table(),
            |r| r.flagged(),
        );
    }
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

/// `check`: a line per check (or JSON); exit code 1 when one failed, 2
/// when none could run.
pub fn check(args: &CheckArgs) -> ExitCode {
    let report = match crate::check::run(args) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let text = match args.output {
        ReportFormat::Table => report.text(),
        ReportFormat::Json => report.json(),
    };
    match write_stdout(&text) {
        code if code != ExitCode::SUCCESS => code,
        _ if report.failed() => ExitCode::from(1),
        ok => ok,
    }
}
