//! `serve`'s flags: durations (humantime, bare seconds) and defaults.

use kserve_injector::cli::{parse_duration, ServeArgs, DEFAULT_CERT_DIR};
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
    assert_eq!(args.listen.addr.port(), 9443);
    assert_eq!(args.listen.admin_addr.port(), 8081);
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
    ] {
        let message = refused(&[flag, "0s"]);
        assert!(message.contains("must be greater than zero"), "{message}");
    }
    let args = ServeArgs::try_parse_from(["--max-connections", "1", "--shutdown-delay", "0s"]);
    assert!(args.is_ok_and(|a| a.limits.max_connections == Some(1)));
}
