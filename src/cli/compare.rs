//! `mutate --compare-to`: every pod of the input (a Pod, a workload's pod
//! template, a List's items) compared under two releases with the core's
//! [`Upgrade`], into the report `audit --upgrade-to` prints.

use super::{describe, template_pointer, CliError, InputError, MutateSource};
use kserve_injector_core::audit::{Form, PodRow, Upgrade, UpgradeError, UpgradeReport};
use kserve_injector_core::reader;
use serde_json::Value;
use std::io::BufRead;

/// Compares every pod of `input` under both releases of `upgrade`.
pub(super) fn compare_stream(
    input: &mut impl BufRead,
    upgrade: &Upgrade,
    namespace: Option<&str>,
    cluster: &mut dyn MutateSource,
    budget: reader::Budget,
) -> Result<UpgradeReport, CliError> {
    let read_error = |e: reader::ReadError| CliError::from(InputError::Read(e));
    let mut rows = Vec::new();
    for (index, doc) in reader::documents_within(input, budget)
        .map_err(read_error)?
        .enumerate()
    {
        let doc = doc.map_err(read_error)?;
        let label = describe(&doc, index);
        match doc.get("kind").and_then(Value::as_str).unwrap_or_default() {
            "AdmissionReview" => return Err(CliError::from(InputError::ReviewToCompare { label })),
            kind if kind == "List" || kind.ends_with("List") => {
                let items = (doc.get("items").and_then(Value::as_array)).ok_or_else(|| {
                    CliError::from(InputError::NoItems {
                        label: label.clone(),
                    })
                })?;
                for (i, item) in items.iter().enumerate() {
                    let item_label = format!("{label} item {}", i + 1);
                    rows.push(compare_object(
                        item,
                        &item_label,
                        upgrade,
                        namespace,
                        cluster,
                    )?);
                }
            }
            _ => rows.push(compare_object(&doc, &label, upgrade, namespace, cluster)?),
        }
    }
    if rows.is_empty() {
        return Err(CliError::from(InputError::Empty));
    }
    let keys = upgrade.config_keys();
    Ok(UpgradeReport::new(
        upgrade.current(),
        upgrade.target(),
        keys,
        rows,
    ))
}

fn compare_object(
    doc: &Value,
    label: &str,
    upgrade: &Upgrade,
    namespace: Option<&str>,
    cluster: &mut dyn MutateSource,
) -> Result<PodRow, CliError> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    let ns = namespace
        .or_else(|| doc.pointer("/metadata/namespace").and_then(Value::as_str))
        .unwrap_or("default");
    let name = (doc.pointer("/metadata/name"))
        .or_else(|| doc.pointer("/metadata/generateName"))
        .and_then(Value::as_str)
        .unwrap_or(label);
    let (object, form, owner) = if kind == "Pod" {
        (doc, Form::Pod, String::new())
    } else {
        let pointer = template_pointer(kind).ok_or_else(|| {
            CliError::from(InputError::KindToCompare {
                label: label.to_string(),
                kind: kind.to_string(),
            })
        })?;
        let template = doc.pointer(pointer).ok_or_else(|| {
            CliError::from(InputError::NoTemplate {
                label: label.to_string(),
                pointer,
            })
        })?;
        (template, Form::Template, format!("{kind}/{name}"))
    };
    let lookup = |facts: &_, config: &_| cluster.snapshot(facts, config);
    match upgrade.pod(object, form, ns, lookup) {
        Ok(found) => Ok(PodRow::compared(ns, name, owner, found)),
        Err(UpgradeError::Decode(source)) => Err(CliError::from(InputError::Decode {
            label: label.to_string(),
            source,
        })),
        Err(UpgradeError::Lookup(source)) => Err(CliError::from(InputError::CompareLookup {
            label: label.to_string(),
            source,
        })),
    }
}
