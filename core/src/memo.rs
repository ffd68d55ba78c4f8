//! A value derived from its owner's other fields, computed on first use and
//! kept with the owner. It takes no part in the owner's identity: it compares
//! equal to any other memo, and a clone starts empty, so a config cloned and
//! then changed never carries text derived from the fields it had before.
//! Users still check that what they read fits the owner as it is now (an
//! `Arc::make_mut` on a sole owner changes fields in place).

use std::fmt;
use std::sync::OnceLock;

#[derive(Default)]
pub(crate) struct Memo<T>(OnceLock<T>);

impl<T> Memo<T> {
    /// The kept value, computing it with `init` on first use.
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        self.0.get_or_init(init)
    }
}

impl<T> Clone for Memo<T> {
    fn clone(&self) -> Self {
        Memo(OnceLock::new())
    }
}

impl<T> PartialEq for Memo<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Memo<T> {}

impl<T> fmt::Debug for Memo<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.0.get().is_some() {
            "kept"
        } else {
            "empty"
        };
        write!(f, "Memo({state})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_starts_empty_and_memos_never_decide_equality() {
        let kept = Memo::default();
        assert_eq!(*kept.get_or_init(|| 1), 1);
        assert_eq!(*kept.get_or_init(|| 2), 1, "computed once");
        let copy = kept.clone();
        assert_eq!(format!("{copy:?}"), "Memo(empty)");
        assert_eq!(*copy.get_or_init(|| 3), 3);
        assert_eq!(kept, copy);
    }
}
