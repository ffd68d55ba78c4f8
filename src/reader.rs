//! The CLI's document reader: a byte stream in, one `serde_json::Value` per
//! document out, read lazily so memory follows the largest document rather
//! than the whole input.
//!
//! - Input whose first non-blank byte is `{` or `[` is JSON (a stream of JSON
//!   values, as `kubectl get -o json` or `jq -c` print) and goes through
//!   `serde_json`, so every JSON escape (surrogate pairs included) and every
//!   raw character (U+2028 included) reads exactly as JSON defines it.
//! - Anything else is YAML, read with `serde-saphyr`. Of `serde_yaml`'s
//!   successors it is the one written in Rust end to end (no libyaml port,
//!   no `unsafe-libyaml`), actively released, built to never panic on input,
//!   and it streams a multi-document `Read` one document at a time while
//!   enforcing a budget (nesting depth, node and event counts, alias
//!   expansion) as it parses, so hostile input fails in milliseconds instead
//!   of after building a tree. It expands merge keys (`<<: *anchor`) as
//!   kubectl does. The forks that keep `serde_yaml`'s code (`serde_yaml_ng`,
//!   `serde_norway`) keep its libyaml port and its whole-document loading.
//!   Scalars resolve the way kubectl resolves them (YAML 1.1: `yes`/`on` are
//!   booleans, `0644` is octal), so the pod we mutate is the pod kubectl
//!   would send.
//!
//! Limits per YAML document: [`MAX_DEPTH`] levels of nesting, [`MAX_NODES`]
//! nodes, 64 MiB of scalar text. JSON: serde_json's 128 levels.

use serde_json::Value;
use std::io::BufRead;

/// Deepest nesting accepted in YAML (mappings + sequences). A Pod, even with
/// `managedFields`, nests about 15 levels; 64 keeps the recursive
/// deserialisation well inside a 2 MiB thread stack even in debug builds.
/// (JSON stops at serde_json's own limit, 128.)
pub const MAX_DEPTH: usize = 64;

/// Most nodes (mappings, sequences, scalars) in one YAML document.
pub const MAX_NODES: usize = 1_000_000;

/// Which grammar the input was read with, decided by its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    Json,
    Yaml,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read input: {0}")]
    Io(#[from] std::io::Error),
    /// `document` counts from 1 over the documents read so far.
    #[error("document {document}: not valid JSON: {message}")]
    Json { document: usize, message: String },
    #[error("document {document}: not valid YAML or JSON: {message}")]
    Yaml { document: usize, message: String },
}

/// Looks at the first non-blank byte (after an optional UTF-8 byte order
/// mark) without consuming anything but that blank prefix.
pub fn sniff(input: &mut impl BufRead) -> std::io::Result<Syntax> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(Syntax::Yaml);
        }
        let skip = if buf.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            buf.iter()
                .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
                .count()
        };
        if skip == 0 {
            return Ok(match buf[0] {
                b'{' | b'[' => Syntax::Json,
                _ => Syntax::Yaml,
            });
        }
        input.consume(skip);
    }
}

fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    // The stream is read incrementally; size is bounded per document below.
    budget.max_reader_input_bytes = None;
    budget.max_depth = MAX_DEPTH;
    budget.flow_nesting_limit = MAX_DEPTH;
    budget.max_nodes = MAX_NODES;
    budget.max_events = 4 * MAX_NODES;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    // Scalars resolve as kubectl reads them (go-yaml v2, YAML 1.1): `yes`,
    // `on` are booleans and `0644` is octal (a volume's defaultMode).
    options.strict_booleans = false;
    options.legacy_octal_numbers = true;
    options.emit_comments = false;
    options
}

/// The documents of `input`, one at a time; empty and `null` documents are
/// skipped. After an error the iterator ends.
pub fn documents<'a, R: BufRead + 'a>(
    input: &'a mut R,
) -> Result<Box<dyn Iterator<Item = Result<Value, ReadError>> + 'a>, ReadError> {
    let syntax = sniff(input)?;
    let mut count = 0;
    let mut failed = false;
    let numbered = move |item: Result<Value, ReadError>| {
        if failed {
            return None;
        }
        count += 1;
        failed = item.is_err();
        Some(item.map_err(|e| e.at(count)))
    };
    Ok(match syntax {
        Syntax::Json => Box::new(
            serde_json::Deserializer::from_reader(input)
                .into_iter::<Value>()
                .map(|r| r.map_err(json_error))
                .filter(|r| !matches!(r, Ok(Value::Null)))
                .map_while(numbered),
        ),
        Syntax::Yaml => Box::new(
            serde_saphyr::read_with_options::<_, Value>(input, yaml_options())
                .map(|r| {
                    r.map_err(|e| ReadError::Yaml {
                        document: 0,
                        message: e.to_string(),
                    })
                })
                .map_while(numbered),
        ),
    })
}

fn json_error(e: serde_json::Error) -> ReadError {
    if e.is_io() {
        return ReadError::Io(e.into());
    }
    ReadError::Json {
        document: 0,
        message: e.to_string(),
    }
}

impl ReadError {
    fn at(self, n: usize) -> Self {
        match self {
            ReadError::Json { message, .. } => ReadError::Json {
                document: n,
                message,
            },
            ReadError::Yaml { message, .. } => ReadError::Yaml {
                document: n,
                message,
            },
            io => io,
        }
    }
}

/// Renders one document as YAML that kubectl (YAML 1.1) and YAML 1.2
/// readers both read back as the same value: strings such as `yes`, `on`,
/// `0755` or `null` come out quoted.
pub fn to_yaml(value: &Value) -> Result<String, String> {
    serde_saphyr::to_string(&Quoting(value)).map_err(|e| e.to_string())
}

/// A value written so that it reads back the same: serde-saphyr leaves a
/// string with leading or trailing non-ASCII whitespace (`"\u{2002}8"`)
/// plain, and its reader trims that whitespace when resolving the scalar's
/// type, so it came back as the number 8 (found by the `reader` fuzz
/// target). Such strings are written double-quoted.
struct Quoting<'v>(&'v Value);

/// serde-saphyr quotes ASCII whitespace at the ends itself.
fn non_ascii_space_at_an_end(text: &str) -> bool {
    let odd = |c: Option<char>| c.is_some_and(|c| c.is_whitespace() && !c.is_ascii());
    odd(text.chars().next()) || odd(text.chars().next_back())
}

impl serde::Serialize for Quoting<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::String(text) if non_ascii_space_at_an_end(text) => {
                serde_saphyr::DoubleQuoted(text.as_str()).serialize(s)
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Quoting(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut out = s.serialize_map(Some(map.len()))?;
                for (key, item) in map {
                    out.serialize_entry(key, &Quoting(item))?;
                }
                out.end()
            }
            other => other.serialize(s),
        }
    }
}

/// Why YAML could not be written.
#[derive(Debug)]
pub enum WriteError {
    /// The output failed (a closed pipe, a full disk).
    Io(std::io::Error),
    /// The value has no YAML form.
    Yaml(String),
}

/// [`to_yaml`] streamed into `out`, so a large document is not held twice.
pub fn write_yaml(out: &mut impl std::io::Write, value: &Value) -> Result<(), WriteError> {
    /// Keeps the io::Error that fmt::Write has no room for.
    struct Adapter<'w, W> {
        out: &'w mut W,
        failed: Option<std::io::Error>,
    }
    impl<W: std::io::Write> std::fmt::Write for Adapter<'_, W> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.out.write_all(s.as_bytes()).map_err(|e| {
                self.failed = Some(e);
                std::fmt::Error
            })
        }
    }
    let mut adapter = Adapter { out, failed: None };
    match serde_saphyr::to_fmt_writer(&mut adapter, &Quoting(value)) {
        Ok(()) => Ok(()),
        Err(e) => Err(match adapter.failed.take() {
            Some(io) => WriteError::Io(io),
            None => WriteError::Yaml(e.to_string()),
        }),
    }
}

#[cfg(test)]
mod tests;
