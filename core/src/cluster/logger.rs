//! The logger configuration the agent uses: the `logger` config section,
//! overridden by the pod's InferenceService (KServe's `getLoggerConfigs`).

use super::objects::InferenceService;
use crate::config::{LoggerConfig, LoggerStorage};
use crate::constants::{DEFAULT_LOGGER_SERVICE_ACCOUNT, DEFAULT_LOGGER_STORAGE_KEY};

/// If the InferenceService has `spec.predictor.logger` (for every component's
/// pod, as in KServe), its `storage` replaces the config's, even when it has
/// none, and `marshallerUrl`, `batchSize`, `batchInterval` replace the
/// config's when set. A storage then left with an empty `key` gets
/// `credentials`, one with an empty `serviceAccountName` gets `logger-sa`.
/// No InferenceService (not found, or the pod's label is empty) leaves the
/// config as it is.
pub(crate) fn effective_logger(
    config: &LoggerConfig,
    isvc: Option<&InferenceService>,
) -> LoggerConfig {
    let mut out = config.clone();
    if let Some(logger) = isvc.and_then(|i| i.predictor_logger.as_ref()) {
        out.storage = logger.storage.as_deref().cloned();
        if let Some(url) = &logger.marshaller_url {
            out.marshaller_url = url.to_string();
        }
        if let Some(size) = logger.batch_size {
            out.batch_size = size;
        }
        if let Some(interval) = &logger.batch_interval {
            out.batch_interval = interval.to_string();
        }
    }
    out.storage = out.storage.map(with_defaults);
    out
}

fn with_defaults(mut storage: LoggerStorage) -> LoggerStorage {
    if storage.key.is_empty() {
        storage.key = DEFAULT_LOGGER_STORAGE_KEY.to_string();
    }
    if storage.service_account_name.is_empty() {
        storage.service_account_name = DEFAULT_LOGGER_SERVICE_ACCOUNT.to_string();
    }
    storage
}

/// The ServiceAccount whose Secrets the agent gets a second time, for the
/// logger's storage: only when the pod has a logger and storage is set.
pub(crate) fn logger_service_account(logger: &LoggerConfig) -> Option<&str> {
    logger
        .storage
        .as_ref()
        .map(|s| s.service_account_name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::objects::IsvcLogger;
    use std::collections::BTreeMap;

    fn a12_storage() -> LoggerStorage {
        LoggerStorage {
            path: "/logger".into(),
            parameters: Some(BTreeMap::from([
                ("type".to_string(), "s3".to_string()),
                ("region".to_string(), "us-west-2".to_string()),
                ("format".to_string(), "json".to_string()),
            ])),
            key: "logger-credentials".into(),
            service_account_name: "logger-sa".into(),
        }
    }

    fn isvc(logger: Option<IsvcLogger>) -> InferenceService {
        InferenceService {
            namespace: "default".into(),
            name: "sklearn".into(),
            predictor_logger: logger.map(Box::new),
        }
    }

    #[test]
    fn a12_config_storage_is_kept_without_an_isvc_logger() {
        let config = LoggerConfig {
            storage: Some(a12_storage()),
            ..LoggerConfig::default()
        };
        for isvc in [None, Some(&isvc(None))] {
            let got = effective_logger(&config, isvc);
            assert_eq!(got.storage, Some(a12_storage()));
            assert_eq!(logger_service_account(&got), Some("logger-sa"));
            let params = got.storage.unwrap().parameters.unwrap();
            assert_eq!(params["format"], "json");
        }
    }

    #[test]
    fn a18_isvc_logger_without_storage_clears_it() {
        let config = LoggerConfig {
            storage: Some(a12_storage()),
            marshaller_url: "http://cfg".into(),
            batch_size: 5,
            ..LoggerConfig::default()
        };
        let got = effective_logger(&config, Some(&isvc(Some(IsvcLogger::default()))));
        assert_eq!(got.storage, None);
        assert_eq!(logger_service_account(&got), None);
        assert_eq!(
            (got.marshaller_url.as_str(), got.batch_size),
            ("http://cfg", 5)
        );
    }

    #[test]
    fn a18_isvc_storage_gets_kserve_defaults_and_overrides() {
        let logger = IsvcLogger {
            storage: Some(Box::new(LoggerStorage {
                path: "/logs".into(),
                ..LoggerStorage::default()
            })),
            marshaller_url: Some("http://m".into()),
            batch_size: Some(10),
            batch_interval: Some("5s".into()),
        };
        let got = effective_logger(&LoggerConfig::default(), Some(&isvc(Some(logger))));
        let storage = got.storage.clone().unwrap();
        assert_eq!(storage.path, "/logs");
        assert_eq!(storage.key, "credentials");
        assert_eq!(storage.service_account_name, "logger-sa");
        assert_eq!(got.marshaller_url, "http://m");
        assert_eq!(got.batch_size, 10);
        assert_eq!(got.batch_interval, "5s");
    }

    #[test]
    fn isvc_service_account_is_used() {
        let logger = IsvcLogger {
            storage: Some(Box::new(LoggerStorage {
                service_account_name: "my-logger".into(),
                ..LoggerStorage::default()
            })),
            ..IsvcLogger::default()
        };
        let got = effective_logger(&LoggerConfig::default(), Some(&isvc(Some(logger))));
        assert_eq!(logger_service_account(&got), Some("my-logger"));
    }
}
