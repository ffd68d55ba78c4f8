//! `admission::prepare` then `answer` in a loop over one of `benches/inputs/`, for
//! instruction counts, which unlike wall time do not swing with the
//! machine's load:
//!
//! ```text
//! cargo build --release --example review_loop
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!   ./target/release/examples/review_loop typical 300        # the review
//! valgrind ... ./target/release/examples/review_loop typical 300 pass   # one IgnoredAny pass
//! ```
//!
//! Divide valgrind's `I refs` by the iterations. Without valgrind it prints
//! the wall time per iteration.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use kserve_injector_core::admission::{prepare, Mode, ReviewError, Reviewed};
use kserve_injector_core::Inputs;
use serde::de::IgnoredAny;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

/// One body answered as the webhook answers it: prepared, then answered in
/// mutate mode.
fn review(body: &[u8], inputs: &Inputs) -> Result<Reviewed, ReviewError> {
    prepare(body, Mode::Mutate)?.answer(inputs)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(name), Some(Ok(iterations))) = (args.next(), args.next().map(|n| n.parse::<u32>()))
    else {
        eprintln!("usage: review_loop <input in benches/inputs, e.g. typical> <iterations> [pass]");
        return ExitCode::from(2);
    };
    let pass = args.next().as_deref() == Some("pass");
    let path = format!("{}/benches/inputs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let body = match std::fs::read(&path) {
        Ok(body) => body,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let inputs = Inputs::default();
    let start = Instant::now();
    let mut bytes = 0;
    for _ in 0..iterations {
        bytes += if pass {
            usize::from(serde_json::from_slice::<IgnoredAny>(black_box(&body)).is_ok())
        } else {
            match review(black_box(&body), &inputs) {
                Ok(reviewed) => reviewed.body.len(),
                Err(e) => {
                    eprintln!("{name}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        };
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations.max(1));
    println!("{name}: {per:.2} µs per iteration ({bytes} bytes out)");
    ExitCode::SUCCESS
}
