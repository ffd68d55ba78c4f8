//! Where the server's admissions get their cluster objects: nowhere (lookups
//! off), a fixed snapshot (`serve --objects FILE`, for trying the webhook
//! out and for tests), or the watch caches with a fallback GET.

use super::{LookupError, Lookups};
use crate::cluster::keys::PodFacts;
use crate::cluster::ClusterData;
use crate::config::Config;

pub enum ClusterObjects {
    /// Every object is "not found".
    Off,
    /// A snapshot loaded once; each pod gets the part it may read.
    Static(ClusterData),
    /// Watch caches; a miss is one bounded GET.
    Live(Box<Lookups>),
}

impl ClusterObjects {
    /// The objects one pod's mutation may read.
    pub async fn snapshot(
        &self,
        facts: &PodFacts,
        config: &Config,
    ) -> Result<ClusterData, LookupError> {
        match self {
            Self::Off => Ok(ClusterData::default()),
            Self::Static(data) => Ok(data.restrict(facts, config)),
            Self::Live(lookups) => lookups.snapshot(facts, config).await,
        }
    }

    /// False while a watch cache has not listed once (`/readyz` is 503).
    pub fn ready(&self) -> bool {
        match self {
            Self::Live(lookups) => lookups.ready(),
            Self::Off | Self::Static(_) => true,
        }
    }

    /// Whether a pod's facts are worth computing at all.
    pub fn is_off(&self) -> bool {
        matches!(self, Self::Off)
    }
}
