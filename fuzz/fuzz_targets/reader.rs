//! Bytes → the CLI's document reader.
//!
//! - Never panics; every document read renders as YAML that reads back as
//!   the same value (what `mutate -o yaml` prints must survive the next
//!   tool in the pipe).
//! - Read again within a small budget (chosen from the first and last
//!   bytes), under an allocator that counts: whatever the input, the
//!   reader's peak allocation stays within what the budget allows (a few
//!   bytes per byte of text, a few hundred per node), and what it produces
//!   stays within the budget's counts. A crash check alone would not find
//!   an input that expands past its budget (aliases to a large scalar): it
//!   is only slow.
//! - The same bound for a document of anchors nested inside anchored nodes
//!   (`loadtest/hostile_yaml.py`'s shape), its sizes and budget chosen from
//!   the first bytes: random bytes seldom nest anchors 29 deep, and a
//!   reader that kept a copy of each anchored node held levels² times what
//!   the budget counts.
#![no_main]

use kserve_injector_core::reader::{documents, documents_within, to_yaml, Budget};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let live = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(live, Relaxed);
}

// SAFETY: every call is passed to the system allocator unchanged; the
// counters are only atomics beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Counted as a new block beside the old one, as a moving
            // realloc holds both for a moment.
            grew(new_size);
            LIVE.fetch_sub(layout.size(), Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes a node may cost once built: a `Value` in a `Vec` that grew by
/// doubling, or a key and value in a map's node (a B-tree leaf holds 11).
const PER_NODE: usize = 512;
/// Bytes a byte of text may cost: the scanner's buffer (doubling), the
/// string made of it, and the anchored node it is copied from.
const PER_TEXT_BYTE: usize = 4;
/// The parser's and reader's fixed buffers.
const FIXED: usize = 256 << 10;
/// A byte of input decoded to a `char` while it waits for the parser.
const PER_INPUT_BYTE: usize = 8;

fn nodes_and_text(value: &Value) -> (u64, u64) {
    match value {
        Value::String(s) => (1, s.len() as u64),
        Value::Number(n) => (1, n.to_string().len() as u64),
        Value::Array(items) => items.iter().fold((1, 0), |(n, t), v| {
            let (vn, vt) = nodes_and_text(v);
            (n + vn, t + vt)
        }),
        Value::Object(map) => map.iter().fold((1, 0), |(n, t), (k, v)| {
            let (vn, vt) = nodes_and_text(v);
            (n + vn + 1, t + vt + k.len() as u64)
        }),
        _ => (1, 0),
    }
}

fn round_trip(data: &[u8]) {
    let mut input = data;
    let Ok(docs) = documents(&mut input) else {
        return;
    };
    for doc in docs {
        let Ok(doc) = doc else {
            return;
        };
        let text = to_yaml(&doc).expect("a JSON value renders as YAML");
        let mut again = text.as_bytes();
        let back: Vec<_> = documents(&mut again)
            .expect("readable")
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("rendered YAML does not read back: {e}\n{text}"));
        let want: Vec<_> = Some(doc).into_iter().filter(|d| !d.is_null()).collect();
        assert_eq!(back, want, "rendered as\n{text}");
    }
}

fn within_budget(data: &[u8]) {
    let (Some(bytes), Some(nodes)) = (data.first(), data.last()) else {
        return;
    };
    let budget = Budget {
        document_bytes: 64 + 32 * u64::from(*bytes),
        document_nodes: 16 + u64::from(*nodes),
        ..Budget::default()
    };
    read_within_bound(data, budget);
}

/// `s: &s x…`, `e: &e [*s, …]`, then `levels` of `&aI {k: &bI {v: *e,
/// w: …}}`, and with `over` an alias of the outermost level, from sizes
/// in `data`, within a budget that most such documents fit.
fn nested_within_budget(data: &[u8]) {
    let [levels, aliases, scalar, budget, ..] = data else {
        return;
    };
    let levels = 1 + usize::from(*levels) % 29;
    let aliases = 1 + usize::from(*aliases % 8);
    let scalar = 1 + 16 * usize::from(*scalar);
    let mut node = "{v: *e}".to_string();
    for i in (1..=levels).rev() {
        if i < levels {
            node = format!("{{v: *e, w: {node}}}");
        }
        node = format!("&a{i} {{k: &b{i} {node}}}");
    }
    let mut text = format!(
        "s: &s {}\ne: &e [{}]\nn: {node}\n",
        "x".repeat(scalar),
        vec!["*s"; aliases].join(", ")
    );
    if budget & 1 == 1 {
        text.push_str("again: *a1\n");
    }
    // Nodes: about 6 + aliases per level, twice over with `again`; text:
    // up to 1 MiB, the most that 29 levels of 8 aliases of 4 KiB take.
    let budget = Budget {
        document_bytes: 4096 + 4096 * u64::from(*budget),
        document_nodes: 2 * (8 + aliases as u64) * (levels as u64 + 2),
        ..Budget::default()
    };
    read_within_bound(text.as_bytes(), budget);
}

/// Reads `input` within `budget` under the counting allocator: the peak
/// follows the budget, and what is produced stays within its counts.
fn read_within_bound(input: &[u8], budget: Budget) {
    let bound = PER_TEXT_BYTE * budget.document_bytes as usize
        + PER_NODE * budget.document_nodes as usize
        + PER_INPUT_BYTE * input.len()
        + FIXED;
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let mut reading = input;
    if let Ok(docs) = documents_within(&mut reading, budget) {
        for doc in docs {
            let Ok(doc) = doc else {
                break;
            };
            let (n, text) = nodes_and_text(&doc);
            assert!(n <= budget.document_nodes, "{n} nodes within {budget:?}");
            assert!(
                text <= budget.document_bytes,
                "{text} bytes of text within {budget:?}"
            );
        }
    }
    let peak = PEAK.load(Relaxed) - base;
    assert!(
        peak <= bound,
        "peak allocation {peak} B over the bound {bound} B for {budget:?} and {} bytes of input",
        input.len()
    );
}

fuzz_target!(|data: &[u8]| {
    round_trip(data);
    within_budget(data);
    nested_within_budget(data);
});
