use std::sync::{Arc, PoisonError, RwLock};

/// A value that readers take a cheap snapshot of and a reloader replaces
/// whole, so a request or handshake always sees one consistent version.
#[derive(Debug)]
pub(crate) struct Swap<T: ?Sized> {
    current: RwLock<Arc<T>>,
}

impl<T: ?Sized> Swap<T> {
    pub(crate) fn new(value: Arc<T>) -> Self {
        Self {
            current: RwLock::new(value),
        }
    }

    /// The lock only guards an `Arc` clone or assignment, which cannot leave
    /// it half-written, so a poisoned lock still holds a valid value.
    pub(crate) fn load(&self) -> Arc<T> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn store(&self, value: Arc<T>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = value;
    }
}
