//! `audit --upgrade-to`: the objects read as for `audit`, then each pod's
//! template compared under the release the cluster runs and the target
//! release ([`kserve_injector_core::audit::upgrade`]).

use super::UnknownRelease;
use super::{cluster_config, dump_namespace, read_objects, AuditArgs, Inventory, RunError};
use crate::files;
use kserve_injector_core::audit::{Side, Upgrade, UpgradeReport};
use kserve_injector_core::config::ConfigMapData;
use kserve_injector_core::config::{release_of_images, Config};
use kserve_injector_core::release::Release;

/// Reads the objects and compares every pod under both releases.
pub(crate) fn run_upgrade(args: &AuditArgs, target: Release) -> Result<UpgradeReport, RunError> {
    let mut inventory = Inventory::default();
    read_objects(args, &mut inventory)?;
    let flags = &args.inputs;
    let settings = flags.settings()?;
    let current_data = match &flags.config {
        Some(path) => files::load_data(path)?,
        None => cluster_config(&inventory, &args.controller_namespace)?.clone(),
    };
    let current = match flags.given_release(&settings) {
        Some(release) => release,
        None => running_release(&current_data)?,
    };
    let target_data = match &args.upgrade_config {
        Some(path) => files::load_data(path)?,
        None => current_data.clone(),
    };
    let mut inputs = flags.inputs(Config::default(), &settings);
    inputs.controller_namespace = args.controller_namespace.clone();
    let upgrade = Upgrade::new(
        Side::new(current, current_data),
        Side::new(target, target_data),
        &inputs,
        &settings.storage_initializer,
    )
    .map_err(|source| RunError::AsRelease {
        release: current,
        source,
    })?;
    let mut report = inventory.upgrade(&upgrade);
    if let Some(ns) = dump_namespace(args) {
        report.pods.retain(|p| p.namespace == ns);
        report = UpgradeReport::new(report.from, report.to, report.config, report.pods);
    }
    Ok(report)
}

/// The release the cluster runs, as its ConfigMap's agent and
/// storage-initializer image tags name it (the reading behind `serve`'s
/// warning about a `--kserve-version` the images disagree with): the
/// release of that exact tag; a tag this build does not model
/// (`v0.15.3`) is no release, and the flag is asked for.
fn running_release(data: &ConfigMapData) -> Result<Release, RunError> {
    let needed = |why| RunError::UnknownRelease { why };
    let config = Config::from_data(data).map_err(|e| needed(UnknownRelease::Unreadable(e)))?;
    release_of_images(&config).map_err(|e| needed(UnknownRelease::Images(e)))
}
