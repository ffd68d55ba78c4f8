//! Values KServe loads without a word but that spoil every pod made with
//! them: a negative request or limit, and a `runAsUser` outside 0 to
//! 2147483647, which the API server refuses in every storage-initializer
//! or modelcar container given them; a quantity larger than Kubernetes
//! counts (memory in bytes, CPU in millicores, in 64 bits: `1e999999`);
//! and a quantity written longer than any quantity needs (a 1 MB
//! `cpuModelcar`). Checked once KServe's own checks have passed, so a
//! config KServe refuses keeps KServe's message.

use super::{fields::Fields, ConfigError, StorageInitializerConfig, STORAGE_INITIALIZER_KEY};
use crate::quantity;
use serde_json::Value;
use std::cmp::Ordering;

/// The longest quantity accepted, as written: `0.000000001Gi` and
/// `9223372036854775807` are far shorter.
const MAX_QUANTITY_LEN: usize = 64;
const MAX_USER_ID: i64 = i32::MAX as i64;
/// 2^63 - 1, the most a Kubernetes quantity counts in its unit.
const MOST: &str = "9223372036854775807";

/// Why a value is out of the range every pod made with it needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutOfRange {
    #[error("{value:?} is negative, which the API server refuses")]
    Negative { value: String },
    #[error("{value:?} is more than Kubernetes counts ({MOST} {unit})")]
    TooLarge { value: String, unit: &'static str },
    #[error("{len} characters long, more than the {MAX_QUANTITY_LEN} a quantity may have here")]
    TooLong { len: usize },
    #[error("{value} is not a user ID (0 to {MAX_USER_ID}), which the API server refuses")]
    UserId { value: i64 },
}

/// A quantity as written (`written`; empty when it came from elsewhere)
/// and its canonical form, of the resource `resource` (`cpu`, `memory`).
pub(crate) fn check_quantity(
    resource: &str,
    written: &str,
    canonical: &str,
) -> Result<(), OutOfRange> {
    check_length(written)?;
    let value = || {
        if written.is_empty() {
            canonical
        } else {
            written
        }
        .to_string()
    };
    if quantity::compare(canonical, "0") == Ok(Ordering::Less) {
        return Err(OutOfRange::Negative { value: value() });
    }
    // CPU is counted in millicores (the kubelet, the scheduler).
    let (most, unit) = match resource {
        "cpu" => (format!("{MOST}m"), "millicores"),
        _ => (MOST.to_string(), "bytes"),
    };
    if quantity::compare(canonical, &most) == Ok(Ordering::Greater) {
        return Err(OutOfRange::TooLarge {
            value: value(),
            unit,
        });
    }
    Ok(())
}

/// A quantity as written, before it is parsed.
pub(crate) fn check_length(written: &str) -> Result<(), OutOfRange> {
    if written.len() > MAX_QUANTITY_LEN {
        return Err(OutOfRange::TooLong { len: written.len() });
    }
    Ok(())
}

/// The `storageInitializer` values a loaded config would put in pods,
/// `section` being the key's JSON (for the quantities as written).
pub(super) fn check(section: &Value, config: &StorageInitializerConfig) -> Result<(), ConfigError> {
    const INIT: &str = "storage-initializer";
    const MODELCAR: &str = "modelcar";
    let written = Fields::new(STORAGE_INITIALIZER_KEY, section)?;
    let r = &config.resources;
    let quantities = [
        ("memoryRequest", "memory", INIT, &r.memory_request),
        ("memoryLimit", "memory", INIT, &r.memory_limit),
        ("cpuRequest", "cpu", INIT, &r.cpu_request),
        ("cpuLimit", "cpu", INIT, &r.cpu_limit),
        ("cpuModelcar", "cpu", MODELCAR, &config.cpu_modelcar),
        (
            "memoryModelcar",
            "memory",
            MODELCAR,
            &config.memory_modelcar,
        ),
    ];
    let refused = |key, container, source| ConfigError::OutOfRange {
        section: STORAGE_INITIALIZER_KEY,
        key,
        container,
        source,
    };
    for (key, resource, container, canonical) in quantities {
        if canonical.is_empty() {
            continue;
        }
        check_quantity(resource, &written.string(key)?, canonical)
            .map_err(|e| refused(key, container, e))?;
    }
    match config.uid_modelcar {
        Some(value) if !(0..=MAX_USER_ID).contains(&value) => Err(refused(
            "uidModelcar",
            MODELCAR,
            OutOfRange::UserId { value },
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_refused_below_zero_past_64_bits_and_past_64_characters() {
        for (resource, written) in [
            ("memory", "0"),
            ("memory", "-0"),
            ("memory", "15Mi"),
            ("memory", "8Ei"),
            ("memory", MOST),
            ("cpu", "9223372036854775807m"),
            ("cpu", "10m"),
        ] {
            let canonical = quantity::canonicalize(written).unwrap();
            assert_eq!(
                check_quantity(resource, written, &canonical),
                Ok(()),
                "{written}"
            );
        }
        let refused = |resource, written: &str| {
            let canonical = quantity::canonicalize(written).unwrap();
            check_quantity(resource, written, &canonical)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refused("memory", "-1"),
            "\"-1\" is negative, which the API server refuses"
        );
        assert_eq!(
            refused("cpu", "-100m"),
            "\"-100m\" is negative, which the API server refuses"
        );
        assert_eq!(
            refused("memory", "1e999999"),
            "\"1e999999\" is more than Kubernetes counts (9223372036854775807 bytes)"
        );
        assert_eq!(
            refused("memory", "9223372036854775808"),
            "\"9223372036854775808\" is more than Kubernetes counts (9223372036854775807 bytes)"
        );
        assert_eq!(
            refused("cpu", "9223372036854776"),
            "\"9223372036854776\" is more than Kubernetes counts (9223372036854775807 millicores)"
        );
        let long = format!("0.{}1", "0".repeat(1 << 20));
        assert_eq!(
            refused("cpu", &long),
            "1048579 characters long, more than the 64 a quantity may have here"
        );
    }
}
