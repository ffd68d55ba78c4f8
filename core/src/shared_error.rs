//! A source error kept by an error type that is a value (`Clone`, `Eq`):
//! the core's errors are compared in tests and cloned into answers and
//! caches, and most library errors (serde_json's) are neither.

use std::fmt;
use std::sync::Arc;

/// `E`, shared between clones. It displays as `E` and its source is `E`'s,
/// so it stands in the chain where `E` would; two are equal when they say
/// the same thing. `E` may be `dyn Error` ([`AnyError`]).
pub struct SharedError<E: ?Sized>(Arc<E>);

/// A source of any type.
pub type AnyError = SharedError<dyn std::error::Error + Send + Sync>;

impl<E> SharedError<E> {
    pub fn new(error: E) -> Self {
        Self(Arc::new(error))
    }
}

impl<E: ?Sized> SharedError<E> {
    pub fn get(&self) -> &E {
        &self.0
    }
}

impl AnyError {
    /// `error`, its type forgotten.
    pub fn any(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }
}

impl<E> From<E> for SharedError<E> {
    fn from(error: E) -> Self {
        Self::new(error)
    }
}

impl<E: ?Sized> Clone for SharedError<E> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<E: fmt::Display + ?Sized> PartialEq for SharedError<E> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl<E: fmt::Display + ?Sized> Eq for SharedError<E> {}

impl<E: fmt::Debug + ?Sized> fmt::Debug for SharedError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: fmt::Display + ?Sized> fmt::Display for SharedError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: std::error::Error + ?Sized> std::error::Error for SharedError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

#[cfg(test)]
mod tests {
    use super::SharedError;
    use std::error::Error;

    fn json_error(text: &str) -> serde_json::Error {
        serde_json::from_str::<serde_json::Value>(text).unwrap_err()
    }

    #[test]
    fn it_reads_as_the_error_it_holds_and_compares_by_what_it_says() {
        let shared = SharedError::new(json_error("{"));
        assert_eq!(shared.to_string(), json_error("{").to_string());
        assert_eq!(format!("{shared:?}"), format!("{:?}", json_error("{")));
        assert!(shared.source().is_none());
        assert_eq!(shared, shared.clone());
        assert_eq!(shared, SharedError::new(json_error("{")));
        assert_ne!(shared, SharedError::new(json_error("[")));
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] SharedError<serde_json::Error>);

    #[test]
    fn any_error_reads_as_its_error_and_keeps_its_source() {
        let inner = SharedError::new(json_error("{"));
        let any = super::AnyError::any(Outer(inner.clone()));
        assert_eq!(any.to_string(), "outer");
        assert_eq!(
            any.source().map(ToString::to_string),
            Some(inner.to_string())
        );
        assert_eq!(any, any.clone());
        assert_ne!(any, super::AnyError::any(inner));
    }
}
