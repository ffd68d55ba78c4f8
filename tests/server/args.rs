//! `serve`'s flags: durations (humantime, bare seconds), defaults, and the
//! docs' table of them.

use kserve_injector::flag_values::parse_duration;
use kserve_injector::server::args::{ServeArgs, DEFAULT_CERT_DIR};
use std::path::Path;
use std::time::Duration;

#[test]
fn durations() {
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
    assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("1s 500ms"), Ok(Duration::from_millis(1500)));
    assert!(parse_duration("fast").is_err());
    assert!(parse_duration("5 parsecs").is_err());
    assert!(parse_duration("-1s").is_err());
}

#[test]
fn defaults_match_the_issue() -> Result<(), clap::Error> {
    let args = ServeArgs::try_parse_from(Vec::<String>::new())?;
    assert_eq!(args.addr().port(), 9443);
    assert_eq!(args.admin_addr().port(), 8081);
    assert_eq!(
        args.tls.cert_file(),
        Path::new(DEFAULT_CERT_DIR).join("tls.crt")
    );
    assert_eq!(
        args.tls.key_file(),
        Path::new(DEFAULT_CERT_DIR).join("tls.key")
    );
    assert!(args.tls.cert_watch);
    assert_eq!(args.shutdown.shutdown_delay, Duration::from_secs(5));
    assert_eq!(args.shutdown.drain_timeout, Duration::from_secs(20));
    assert_eq!(args.limits.request_timeout, Duration::from_secs(5));
    let args = ServeArgs::try_parse_from(["--cert-watch=false", "--cert-poll-interval", "250ms"])?;
    assert!(!args.tls.cert_watch);
    assert_eq!(args.tls.cert_poll_interval, Duration::from_millis(250));
    Ok(())
}

/// In a pod the listeners take every interface; the local try-out
/// (`--self-signed`, no client authentication) keeps them on loopback
/// unless an address is given.
#[test]
fn self_signed_listens_on_loopback_unless_told_otherwise() -> Result<(), clap::Error> {
    let listen = |flags: &[&str]| -> Result<_, clap::Error> {
        let args = ServeArgs::try_parse_from(flags)?;
        Ok((args.addr(), args.admin_addr()))
    };
    let pod = listen(&[])?;
    assert_eq!(pod.0.to_string(), "0.0.0.0:9443");
    assert_eq!(pod.1.to_string(), "0.0.0.0:8081");
    let try_out = listen(&["--self-signed"])?;
    assert_eq!(try_out.0.to_string(), "127.0.0.1:9443");
    assert_eq!(try_out.1.to_string(), "127.0.0.1:8081");
    let told = listen(&["--self-signed", "--addr", "0.0.0.0:9443"])?;
    assert_eq!(told.0.to_string(), "0.0.0.0:9443");
    assert_eq!(told.1.to_string(), "127.0.0.1:8081");
    Ok(())
}

#[test]
fn zero_limits_and_timeouts_are_refused_with_a_plain_reason() {
    let refused = |flags: &[&str]| match ServeArgs::try_parse_from(flags) {
        Ok(_) => format!("{flags:?} accepted"),
        Err(e) => e.to_string(),
    };
    for flag in [
        "--max-connections",
        "--max-concurrent-requests",
        "--http2-max-concurrent-streams",
        "--secret-cache-entries",
    ] {
        let message = refused(&[flag, "0"]);
        assert!(
            message.contains("must be a whole number, at least 1"),
            "{message}"
        );
        let message = refused(&[flag, "many"]);
        assert!(
            message.contains("must be a whole number, at least 1"),
            "{message}"
        );
    }
    for flag in [
        "--request-timeout",
        "--idle-timeout",
        "--cert-poll-interval",
        "--secret-ttl",
    ] {
        let message = refused(&[flag, "0s"]);
        assert!(message.contains("must be greater than zero"), "{message}");
    }
    let args = ServeArgs::try_parse_from(["--max-connections", "1", "--shutdown-delay", "0s"]);
    assert!(args.is_ok_and(|a| a.limits.max_connections == Some(1)));
}

#[test]
fn secrets_are_fetched_by_default_and_namespaces_are_checked() {
    use kserve_injector::lookups::{Kind, OutsideNamespaces};
    let args = ServeArgs::try_parse_from(Vec::<&str>::new()).unwrap();
    let options = args.lookups.options();
    assert!(!options.watched.contains(&Kind::Secrets));
    assert_eq!(options.secret_ttl, std::time::Duration::from_secs(30));
    assert_eq!(options.secret_cache_entries.get(), 1000);
    assert!(options.namespaces.is_empty());
    let args = ServeArgs::try_parse_from([
        "--namespaces",
        "models-a,models-b",
        "--outside-namespaces",
        "allow",
        "--secret-ttl",
        "5s",
    ])
    .unwrap();
    let options = args.lookups.options();
    assert_eq!(
        options.namespaces.iter().collect::<Vec<_>>(),
        ["models-a", "models-b"]
    );
    assert_eq!(options.outside, OutsideNamespaces::Allow);
    assert_eq!(options.secret_ttl, std::time::Duration::from_secs(5));
    let refused = ServeArgs::try_parse_from(["--namespaces", "Models_A"]).unwrap_err();
    assert!(
        refused.to_string().contains("is not a namespace name"),
        "{refused}"
    );
}

#[test]
fn modelcar_mode_is_classic_unless_asked_and_names_its_choices() -> Result<(), clap::Error> {
    use kserve_injector_core::ModelcarMode;
    let default = ServeArgs::try_parse_from(Vec::<String>::new())?;
    assert_eq!(
        default.inference_config.inputs.modelcar_mode,
        ModelcarMode::Classic
    );
    let native = ServeArgs::try_parse_from(["--modelcar-mode", "native-sidecar"])?;
    assert_eq!(
        native.inference_config.inputs.modelcar_mode,
        ModelcarMode::NativeSidecar
    );
    let message = match ServeArgs::try_parse_from(["--modelcar-mode", "native"]) {
        Ok(_) => "accepted".to_string(),
        Err(e) => e.to_string(),
    };
    assert!(
        message.contains("classic") && message.contains("native-sidecar"),
        "{message}"
    );
    Ok(())
}

#[test]
fn kserve_version_is_unset_unless_asked_and_refuses_what_is_not_modelled() -> Result<(), clap::Error>
{
    use kserve_injector_core::release::Release;
    let default = ServeArgs::try_parse_from(Vec::<String>::new())?;
    assert_eq!(default.inference_config.inputs.kserve_version(), None);
    let v0_17 = ServeArgs::try_parse_from(["--kserve-version", "v0.17.0"])?;
    assert_eq!(
        v0_17.inference_config.inputs.kserve_version(),
        Some(Release::V0_17_0)
    );
    let v0_15 = ServeArgs::try_parse_from(["--kserve-version", "v0.15"])?;
    assert_eq!(
        v0_15.inference_config.inputs.kserve_version(),
        Some(Release::V0_15_2)
    );
    let v0_15_0 = ServeArgs::try_parse_from(["--kserve-version", "v0.15.0"])?;
    assert_eq!(
        v0_15_0.inference_config.inputs.kserve_version(),
        Some(Release::V0_15_0)
    );
    let v0_18_1 = ServeArgs::try_parse_from(["--kserve-version", "0.18.1"])?;
    assert_eq!(
        v0_18_1.inference_config.inputs.kserve_version(),
        Some(Release::V0_18_1)
    );
    for (spelling, says) in [
        ("v0.14", "\"v0.14\" is not a KServe version"),
        ("v0.15.3", "\"v0.15.3\" is not a KServe version"),
    ] {
        let message = match ServeArgs::try_parse_from(["--kserve-version", spelling]) {
            Ok(_) => "accepted".to_string(),
            Err(e) => e.to_string(),
        };
        assert!(
            message.contains(says) && message.contains("v0.15.0, v0.15.1, v0.15.2, v0.16.0"),
            "{message}"
        );
    }
    Ok(())
}

#[test]
fn security_profile_is_baseline_unless_asked_and_config_file_is_optional() -> Result<(), clap::Error>
{
    use kserve_injector_core::SecurityProfile;
    let default = ServeArgs::try_parse_from(Vec::<String>::new())?;
    assert_eq!(
        default.inference_config.inputs.security_profile,
        SecurityProfile::Baseline
    );
    assert_eq!(default.inference_config.inputs.config_file, None);
    let set = ServeArgs::try_parse_from([
        "--security-profile",
        "restricted",
        "--config-file",
        "/etc/kserve-injector/settings/settings.yaml",
    ])?;
    assert_eq!(
        set.inference_config.inputs.security_profile,
        SecurityProfile::Restricted
    );
    assert!(set.inference_config.inputs.config_file.is_some());
    let message = match ServeArgs::try_parse_from(["--security-profile", "strict"]) {
        Ok(_) => "accepted".to_string(),
        Err(e) => e.to_string(),
    };
    assert!(
        message.contains("baseline") && message.contains("restricted"),
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn serve_refuses_to_start_with_a_bad_config_file_naming_it_and_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("settings.yaml");
    std::fs::write(&bad, "modelVolume:\n  hostPth: {path: /x}\n").expect("written");
    let path = bad.to_string_lossy().into_owned();
    let error = match crate::support::start(&["--self-signed", "--config-file", &path]).await {
        Ok(server) => {
            server.shutdown();
            panic!("serve started with a bad --config-file");
        }
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains(&path) && error.contains("\"hostPth\" is not a volume source"),
        "{error}"
    );
}

/// `--self-signed` told to listen beyond loopback says so in its log, once
/// per such listener, right after "listening".
#[test]
fn self_signed_beyond_loopback_is_a_warning_in_the_log() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args(["serve", "--self-signed", "--cluster-lookups", "off"])
        .args(["--addr", "0.0.0.0:0", "--admin-addr", "127.0.0.1:0"])
        .args(["--shutdown-delay", "0s", "--log-format", "json"])
        .arg("--self-signed-ca-file")
        .arg(dir.path().join("ca.crt"))
        .env_remove("RUST_LOG")
        .env_remove("KSERVE_INJECTOR_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let warned = line.contains("beyond loopback");
            if tx.send(line).is_err() || warned {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
        seen.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    let warning = seen.iter().find(|l| l.contains("beyond loopback"));
    let warning: serde_json::Value =
        serde_json::from_str(warning.unwrap_or_else(|| panic!("no warning in {seen:?}"))).unwrap();
    assert_eq!(warning["level"], "WARN", "{warning}");
    assert_eq!(warning["flag"], "--addr", "{warning}");
}
