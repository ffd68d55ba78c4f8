//! The test oracle, compiled only for tests and under the `oracle` feature
//! (the property tests enable it as a dev-dependency): the pipeline as it
//! was before the borrowed view, on the whole pod as a JSON tree
//! ([`TreeDoc`]), so every injector's result and every recorded operation of
//! the working set can be checked against an independent editor.
//! [`EitherDoc`] runs one test closure on either document.

mod either;
mod tree;

pub use either::{EitherContainer, EitherDoc};
pub use tree::{TreeContainer, TreeDoc};
