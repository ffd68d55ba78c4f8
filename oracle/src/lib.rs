//! The test oracle: a second editor of the pod ([`TreeDoc`], the whole pod
//! as a JSON tree, edited in place, its values written by serde_json), held
//! to the product's [`WorkingSet`] (the borrowed view, typed, its values
//! written by the core's own JSON writers) by the tests. The injectors
//! reach the pod only through the working set's calls, so a working set
//! that reads and writes as the tree does on every sequence of those calls,
//! from any pod, gives the injectors' decisions and patch the tree would.
//! [`compare`] runs one sequence ([`Call`]s) on both and says where they
//! part; the property test over generated pods and scripts is
//! `the_working_set_edits_as_the_oracle_does` (tests/core/reinvocation).
//!
//! Beside the tests only: a dev-dependency, with no signature in the core
//! made for it. [`Edit`] is the calls both editors answer, so one test
//! closure runs on either ([`EitherDoc`]).
//!
//! [`WorkingSet`]: kserve_injector_core::internals::WorkingSet

mod edit;
mod either;
mod script;
mod tree;

pub use edit::{Edit, EditContainer};
pub use either::{EitherContainer, EitherDoc};
pub use script::{compare, script, Call, ContainerCall, Target};
pub use tree::{TreeContainer, TreeDoc};
