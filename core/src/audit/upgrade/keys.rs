//! The ConfigMap keys one release reads and the other reads differently,
//! or not at all: each is governed by a behaviour switch (the config
//! parser reads it through that switch), so the keys to show are those of
//! the switches that differ between the two releases. The unit tests find
//! the governed keys again by parsing ConfigMaps with each switch flipped.

use super::Side;
use crate::release::{Release, Switch};
use serde::Serialize;
use serde_json::Value;

/// How one key is read with its switch off (the older behaviour) and on.
pub(super) struct Governed {
    pub switch: Switch,
    pub key: &'static str,
    pub off: &'static str,
    pub on: &'static str,
}

const NOT_READ: &str = "not read";

pub(super) const GOVERNED: [Governed; 11] = [
    Governed {
        switch: Switch::DirectPvcAlways,
        key: "storageInitializer.enableDirectPvcVolumeMount",
        off: "read: false or not set copies a pvc:// model through a storage-initializer",
        on: "not read: a pvc:// model is always mounted directly",
    },
    Governed {
        switch: Switch::OciModeKeys,
        key: "storageInitializer.ociModelMode",
        off: NOT_READ,
        on: "read: the OCI mode (modelcar, native or fetch)",
    },
    Governed {
        switch: Switch::OciModelModeValidated,
        key: "storageInitializer.ociModelMode",
        off: "not validated",
        on: "validated: anything but modelcar, native or fetch refuses the ConfigMap",
    },
    Governed {
        switch: Switch::OciModeKeys,
        key: "storageInitializer.enableOciModelSupport",
        off: NOT_READ,
        on: "read: true turns OCI models on, as enableModelcar does",
    },
    Governed {
        switch: Switch::OciInsecureRegistryKey,
        key: "storageInitializer.ociInsecureRegistry",
        off: NOT_READ,
        on: "read: fetch mode's KSERVE_OCI_INSECURE_REGISTRY",
    },
    Governed {
        switch: Switch::ModelcarQuantitiesOptional,
        key: "storageInitializer.cpuModelcar",
        off: "required: not set refuses the ConfigMap",
        on: "optional",
    },
    Governed {
        switch: Switch::ModelcarQuantitiesOptional,
        key: "storageInitializer.memoryModelcar",
        off: "required: not set refuses the ConfigMap",
        on: "optional",
    },
    Governed {
        switch: Switch::LoggerStorage,
        key: "logger.storage",
        off: NOT_READ,
        on: "read: the agent's --log-store-path and --log-store-format",
    },
    Governed {
        switch: Switch::LoggerMarshaller,
        key: "logger.marshallerUrl",
        off: NOT_READ,
        on: "read: the agent's --log-marshaller-url",
    },
    Governed {
        switch: Switch::LoggerMarshaller,
        key: "logger.batchSize",
        off: NOT_READ,
        on: "read: the agent's --log-batch-size",
    },
    Governed {
        switch: Switch::LoggerMarshaller,
        key: "logger.batchInterval",
        off: NOT_READ,
        on: "read: the agent's --log-batch-interval",
    },
];

/// A key the two releases read differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyReading {
    /// `section.field` of `inferenceservice-config`.
    pub key: &'static str,
    /// Its value in the current ConfigMap; `None`: not set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_value: Option<Value>,
    /// Its value in the target's ConfigMap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_value: Option<Value>,
    /// How the current release reads it.
    pub current: &'static str,
    /// How the target release reads it.
    pub target: &'static str,
    pub rows: &'static [&'static str],
}

/// The keys of the switches that differ between the two releases.
pub(super) fn readings(current: &Side, target: &Side) -> Vec<KeyReading> {
    let reading = |g: &Governed, release: Release| {
        if g.switch.in_release(release) {
            g.on
        } else {
            g.off
        }
    };
    (GOVERNED.iter())
        .filter(|g| g.switch.in_release(current.release) != g.switch.in_release(target.release))
        .map(|g| KeyReading {
            key: g.key,
            current_value: value_of(current, g.key),
            target_value: value_of(target, g.key),
            current: reading(g, current.release),
            target: reading(g, target.release),
            rows: g.switch.rows(),
        })
        .collect()
}

/// The value at `section.field…`; field names match in any case, as Go's
/// `encoding/json` matches them.
fn value_of(side: &Side, key: &str) -> Option<Value> {
    let mut parts = key.split('.');
    let section = side.data.get(parts.next()?)?;
    let mut here: Value = serde_json::from_str(section).ok()?;
    for part in parts {
        let map = here.as_object()?;
        let found = (map.iter())
            .find(|(k, _)| *k == part)
            .or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(part)))?;
        here = found.1.clone();
    }
    Some(here)
}
