//! The release's behaviour switches as data: each switch of [`Release`]
//! is a [`Switch`], with the docs/compatibility.md rows that describe it,
//! and a [`Behaviour`] is the set of switch values the mutator runs with.
//! A release's own behaviour (`Behaviour::from(release)`) is what
//! `--kserve-version` gives; `audit --upgrade-to` also runs behaviours with
//! some switches set to another release's value, to find which switch
//! causes which difference between two releases (`audit::upgrade`).
//!
//! [`Release`]'s methods stay the one truth table: a switch's value in a
//! release is that method's answer, so the two cannot drift apart.

use super::Release;
use std::fmt;

macro_rules! switches {
    ($($variant:ident => $method:ident [$($row:literal),+];)+) => {
        /// One behaviour of KServe's pod mutator that changed between
        /// releases: on is HEAD's behaviour, off the older one.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        pub enum Switch {
            $($variant,)+
        }

        impl Switch {
            /// Every switch, in the order [`Release`] declares them.
            pub const ALL: &'static [Switch] = &[$(Switch::$variant,)+];

            /// The switch's value in `release`'s mutator.
            pub fn in_release(self, release: Release) -> bool {
                match self {
                    $(Switch::$variant => release.$method(),)+
                }
            }

            /// The rows of docs/compatibility.md that describe the older
            /// behaviour (each table row's `#`).
            pub fn rows(self) -> &'static [&'static str] {
                match self {
                    $(Switch::$variant => &[$($row),+],)+
                }
            }

            /// The name of [`Release`]'s method for it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Switch::$variant => stringify!($method),)+
                }
            }
        }

        impl Behaviour {
            $(
                #[doc = concat!("[`Release::", stringify!($method), "`], unless flipped.")]
                pub(crate) fn $method(self) -> bool {
                    self.get(Switch::$variant)
                }
            )+
        }
    };
}

// One row each, the row of the release that had the older behaviour
// (15.x: the v0.15 line before v0.16.0; 15.0.x: v0.15.0 before v0.15.1); a
// row that restates another for a kind of pod (15.5: 15.4 for a LocalModel
// pod; 19.3: 19.1 and 19.2 for native mode) is not a switch of its own.
// 15.12 and 15.16 are one change of `InjectStorageInitializer` (where the
// ClusterStorageContainer is looked up, and with which URI).
switches! {
    LocalModelByHash => local_model_by_hash ["17.1"];
    DirectPvcAlways => direct_pvc_always ["15.4"];
    ModelMountsByName => model_mounts_by_name ["15.19"];
    DirectPvcMountCompletes => direct_pvc_mount_completes ["15.20"];
    StorageContainerLookupFirst => storage_container_lookup_first ["15.12", "15.16"];
    CaBundleAfterMerge => ca_bundle_after_merge ["15.13"];
    HfDefaultEnv => hf_default_env ["15.7"];
    HfSecretTokenOnly => hf_secret_token_only ["15.6"];
    S3SecretData => s3_secret_data ["15.8"];
    S3EndpointResolved => s3_endpoint_resolved ["15.9"];
    AzureAccessToken => azure_access_token ["15.11"];
    AzureEnvOfPresentKeys => azure_env_of_present_keys ["15.10"];
    ExplicitStorageContainer => explicit_storage_container ["19.5"];
    ConfidentialEnv => confidential_env ["19.7"];
    ModelscopeCredentials => modelscope_credentials ["20.3"];
    S3EndpointScheme => s3_endpoint_scheme ["16.3"];
    OciModeSchemes => oci_mode_schemes ["19.2"];
    OciModeKeys => oci_mode_keys ["19.1"];
    OciModelModeValidated => oci_model_mode_validated ["19.4"];
    OciFetch => oci_fetch ["20.1"];
    OciInsecureRegistryKey => oci_insecure_registry_key ["20.2"];
    ModelcarWorkerFallback => modelcar_worker_fallback ["16.2"];
    ModelcarQuantitiesOptional => modelcar_quantities_optional ["16.4"];
    ModelcarTransformerEnv => modelcar_transformer_env ["15.15"];
    StorageInitializerErrorNamesKey => storage_initializer_error_names_key ["15.17"];
    LoggerStorage => logger_storage ["15.1"];
    LoggerStorageCredentials => logger_storage_credentials ["15.3"];
    LoggerMetadataAnnotations => logger_metadata_annotations ["15.0.1"];
    LoggerMarshaller => logger_marshaller ["16.1"];
}

/// The switch values a mutation runs with: a release's, with any switch
/// flipped to the other value. Read by the injectors and the config
/// parser in place of the release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(Default))]
pub(crate) struct Behaviour {
    release: Release,
    /// Bit `i`: [`Switch::ALL`]`[i]` has the other value than in `release`.
    flipped: u32,
}

const _: () = assert!(Switch::ALL.len() <= 32, "one bit per switch");

fn bit(switch: Switch) -> u32 {
    1 << switch as u32
}

impl Behaviour {
    /// The release whose switches these are, before any flip.
    pub(crate) fn release(self) -> Release {
        self.release
    }

    /// The value of `switch`.
    pub(crate) fn get(self, switch: Switch) -> bool {
        switch.in_release(self.release) != (self.flipped & bit(switch) != 0)
    }

    /// This behaviour with `switch` set to `on`.
    pub(crate) fn with(mut self, switch: Switch, on: bool) -> Self {
        if on == switch.in_release(self.release) {
            self.flipped &= !bit(switch);
        } else {
            self.flipped |= bit(switch);
        }
        self
    }

    /// The switches flipped from the release's own values.
    pub(crate) fn flipped(self) -> impl Iterator<Item = Switch> {
        (Switch::ALL.iter().copied()).filter(move |s| self.flipped & bit(*s) != 0)
    }
}

impl From<Release> for Behaviour {
    fn from(release: Release) -> Self {
        Self {
            release,
            flipped: 0,
        }
    }
}

/// The release whose switches these are, before any flip.
impl From<Behaviour> for Release {
    fn from(behaviour: Behaviour) -> Self {
        behaviour.release
    }
}

impl PartialEq<Release> for Behaviour {
    fn eq(&self, release: &Release) -> bool {
        *self == Behaviour::from(*release)
    }
}

/// The release, and the switches flipped from it.
impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.release)?;
        for (i, switch) in self.flipped().enumerate() {
            let sep = if i == 0 { " with " } else { ", " };
            let value = if self.get(switch) { "on" } else { "off" };
            write!(f, "{sep}{} {value}", switch.name())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::ALL;

    #[test]
    fn a_release_behaviour_is_its_methods_and_a_flip_changes_one_switch() {
        for release in ALL {
            let own = Behaviour::from(release);
            assert_eq!(own, release);
            assert_eq!(Release::from(own), release);
            for &switch in Switch::ALL {
                assert_eq!(own.get(switch), switch.in_release(release));
                let flipped = own.with(switch, !own.get(switch));
                assert_ne!(flipped, release, "{switch:?}");
                for &other in Switch::ALL {
                    let want = own.get(other) != (other == switch);
                    assert_eq!(flipped.get(other), want, "{switch:?} then {other:?}");
                }
                assert_eq!(flipped.flipped().collect::<Vec<_>>(), [switch]);
                assert_eq!(flipped.with(switch, own.get(switch)), release);
            }
        }
        assert_eq!(
            Behaviour::from(Release::V0_17_0).local_model_by_hash(),
            Release::V0_17_0.local_model_by_hash()
        );
    }

    #[test]
    fn the_display_names_the_release_and_each_flip() {
        let b = Behaviour::from(Release::V0_15_0)
            .with(Switch::HfDefaultEnv, true)
            .with(Switch::LocalModelByHash, false);
        assert_eq!(b.to_string(), "v0.15.0 with hf_default_env on");
        let b = Behaviour::from(Release::Head)
            .with(Switch::LocalModelByHash, false)
            .with(Switch::OciFetch, false);
        assert_eq!(
            b.to_string(),
            "head with local_model_by_hash off, oci_fetch off"
        );
    }

    #[test]
    fn every_switch_is_head_behaviour_at_head_and_every_older_one_has_a_row() {
        for &switch in Switch::ALL {
            assert!(switch.in_release(Release::Head), "{switch:?}");
            assert!(
                ALL.iter().any(|r| !switch.in_release(*r)),
                "{switch:?} is on in every release: not a difference"
            );
            assert!(!switch.rows().is_empty());
        }
        let mut names: Vec<&str> = Switch::ALL.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Switch::ALL.len());
    }
}
