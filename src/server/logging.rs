//! Process-wide logging for `serve`. JSON by default because the logs end up
//! in a cluster's log pipeline; each admission is one event carrying its
//! span's fields (uid, namespace, name, ...).

use super::error::ServeError;
use crate::server::args::{LogFormat, LoggingFlags};
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. `--log` uses RUST_LOG syntax; without
/// it RUST_LOG applies, else "info".
pub(super) fn init(logging: &LoggingFlags) -> Result<(), ServeError> {
    let (format, filter) = (logging.log_format, logging.log_filter.as_deref());
    let filter = match filter {
        Some(text) => EnvFilter::try_new(text).map_err(|source| ServeError::LogFilter {
            filter: text.to_string(),
            source,
        })?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let installed = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => (builder.with_ansi(false))
            .fmt_fields(crate::log_text::EscapedFields::default())
            .try_init(),
    };
    installed.map_err(ServeError::Logging)
}

/// Routes panic reports through the logger (so they arrive as JSON with the
/// rest) instead of raw stderr text.
pub(super) fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = panic_message(info.payload());
        let panic = crate::log_text::bounded(message);
        tracing::error!(%panic, %location, "panic");
    }));
}

/// The text a panic was raised with (`panic!` with a literal or a format).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    let text = payload.downcast_ref::<String>().map(String::as_str);
    text.or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default()
}
