//! The values the flags of several subcommands share: their parsers, and
//! the report format of `audit` and `check`. A module of its own so that
//! the server's, the audit's and the check's flags never import the CLI.

use kserve_injector_core::release::Release;
use kserve_injector_core::{ModelcarMode, SecurityProfile};
use std::time::Duration;

/// How `audit` and `check` print their report (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
}

/// A flag's value that its parser refuses; clap prints it after the
/// flag's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlagValueError {
    #[error("{text:?} is not a duration ({source}; examples: 500ms, 5s, 2m)")]
    NotADuration {
        text: String,
        source: humantime::DurationError,
    },
    #[error("must be greater than zero")]
    Zero,
    #[error("{0:?} is not a namespace name (lower-case letters, digits and '-', at most 63)")]
    NotANamespace(String),
    /// The namespace pattern itself does not compile.
    #[error(transparent)]
    Pattern(regex::Error),
    #[error("must be a whole number, at least 1")]
    NotAtLeastOne,
}

/// `--kserve-version`'s parser (`serve`, `mutate`, `audit`, `default-config`): a release whose
/// differences are all modelled, or an error naming the supported ones.
pub(crate) fn kserve_version() -> impl clap::builder::TypedValueParser<Value = Release> {
    |text: &str| text.parse::<Release>()
}

/// `--security-profile`'s parser (`serve`, `mutate`, `audit`), listing the profiles in `--help`.
pub(crate) fn security_profile() -> impl clap::builder::TypedValueParser<Value = SecurityProfile> {
    use clap::builder::TypedValueParser;
    // The possible values are exactly the names, so every one parses.
    clap::builder::PossibleValuesParser::new(SecurityProfile::NAMES)
        .map(|name| name.parse::<SecurityProfile>().unwrap_or_default())
}

/// `--modelcar-mode`'s parser (`serve` and `mutate`), listing the modes in `--help`.
pub(crate) fn modelcar_mode() -> impl clap::builder::TypedValueParser<Value = ModelcarMode> {
    use clap::builder::TypedValueParser;
    // The possible values are exactly the names, so every one parses.
    clap::builder::PossibleValuesParser::new(ModelcarMode::NAMES)
        .map(|name| name.parse::<ModelcarMode>().unwrap_or_default())
}

/// humantime's durations (`500ms`, `5s`, `2m`, `1h 30m`); a bare number
/// means seconds, as it always has for these flags.
pub fn parse_duration(text: &str) -> Result<Duration, FlagValueError> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text).map_err(|source| FlagValueError::NotADuration {
        text: text.to_string(),
        source,
    })
}

/// [`parse_duration`], refusing zero: a zero timeout or interval would make
/// the server useless rather than merely slow.
pub(crate) fn nonzero_duration(text: &str) -> Result<Duration, FlagValueError> {
    match parse_duration(text)? {
        zero if zero.is_zero() => Err(FlagValueError::Zero),
        duration => Ok(duration),
    }
}

/// A namespace name as the API accepts it (a DNS label).
pub(crate) fn namespace_name(text: &str) -> Result<String, FlagValueError> {
    let text = text.trim();
    let label = regex::Regex::new("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
        .map_err(FlagValueError::Pattern)?;
    if label.is_match(text) {
        Ok(text.to_string())
    } else {
        Err(FlagValueError::NotANamespace(text.to_string()))
    }
}

/// A count that must be at least 1 (a limit of zero would refuse everything).
pub(crate) fn at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(
    text: &str,
) -> Result<T, FlagValueError> {
    match text.trim().parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err(FlagValueError::NotAtLeastOne),
    }
}
