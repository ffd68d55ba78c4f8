#![deny(unsafe_code)]
#![deny(unreachable_pub)]
//! Layer: the adapters around `kserve-injector-core`: the HTTPS webhook
//! ([`server`]), the CLI ([`cli`]), the cluster caches ([`lookups`]), the
//! config and certificate sources ([`files`], `reload`, [`certs`]).
//! The core is named `kserve_injector_core::…` wherever an adapter uses it,
//! so a path says whose module it is; `kserve_injector_core::mutate` is the
//! core function the CLI and the webhook both call.
//!
//! What is public here is what the binary, the tests, the benches, the fuzz
//! targets and the examples call, and nothing else (`unreachable_pub` is
//! denied, and `.ci/public_unused.py --crate kserve_injector` fails on a
//! public item none of them names): the audit, the check, the reloader and
//! the input flags are reached through `cli` and `server`.

mod audit;
pub mod certs;
mod check;
pub mod cli;
pub mod files;
pub mod flag_values;
mod input_flags;
pub mod limits;
pub mod log_text;
pub mod lookups;
pub mod memory;
mod reload;
pub mod server;

/// The unit tests' allocator: the system's, counting what each thread
/// allocates, so a test can show what one call costs in memory
/// (`test_alloc::allocated_by`).
#[cfg(test)]
#[global_allocator]
static COUNTING: test_alloc::Counting = test_alloc::Counting;

#[cfg(test)]
mod test_alloc;
