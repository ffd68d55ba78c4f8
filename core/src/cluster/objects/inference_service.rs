//! An InferenceService as the logger rule keeps it.

use super::{heap, map_bytes};
use crate::cluster::packed::heap_len;
use crate::cluster::ObjectRef;
use crate::config::LoggerStorage;
use std::sync::Arc;

/// What KServe reads of `spec.predictor.logger` (the values that override
/// the `logger` config); `None` fields were not set on the object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IsvcLogger {
    pub storage: Option<Box<LoggerStorage>>,
    pub marshaller_url: Option<Box<str>>,
    pub batch_size: Option<i64>,
    pub batch_interval: Option<Box<str>>,
}

/// An `InferenceService` (`serving.kserve.io/v1beta1`): only what the
/// agent's logger storage needs.
#[derive(Debug, Clone)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct InferenceService {
    pub(crate) namespace: Arc<str>,
    pub(crate) name: Box<str>,
    pub predictor_logger: Option<Box<IsvcLogger>>,
}

impl InferenceService {
    /// What holding it costs, as [`ServiceAccount::kept_bytes`](crate::cluster::ServiceAccount::kept_bytes) counts.
    pub fn kept_bytes(&self) -> usize {
        let logger = self.predictor_logger.as_ref().map_or(0, |l| {
            let storage = l.storage.as_ref().map_or(0, |s| {
                heap_len(std::mem::size_of::<LoggerStorage>())
                    + heap(&s.path)
                    + heap(&s.key)
                    + heap(&s.service_account_name)
                    + s.parameters.as_ref().map_or(0, |p| map_bytes(p.iter()))
            });
            heap_len(std::mem::size_of::<IsvcLogger>())
                + storage
                + l.marshaller_url.as_deref().map_or(0, heap)
                + l.batch_interval.as_deref().map_or(0, heap)
        });
        std::mem::size_of::<Self>() + heap(&self.name) + logger
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(self.namespace(), self.name())
    }
}
