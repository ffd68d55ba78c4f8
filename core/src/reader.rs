//! The CLI's document reader: a byte stream in, one `serde_json::Value` per
//! document out, read lazily so memory follows the largest document rather
//! than the whole input.
//!
//! - Input whose first non-blank byte is `{` or `[` is JSON (a stream of JSON
//!   values, as `kubectl get -o json` or `jq -c` print) and goes through
//!   `serde_json`, so every JSON escape (surrogate pairs included) and every
//!   raw character (U+2028 included) reads exactly as JSON defines it.
//! - Anything else is YAML, read from `granit-parser`'s events by
//!   `yaml`: each scalar keeps its source text, so a number comes back as
//!   written (`memory: 1e9`, 2^64+1), and plain scalars resolve the way
//!   kubectl resolves them (go-yaml v2: `yes`/`on` are booleans, `0644` is
//!   octal), so the pod we mutate is the pod kubectl would send. Merge keys
//!   (`<<: *anchor`) are expanded as kubectl does.
//! - Numbers are `serde_json::Number`s holding their text (serde_json's
//!   `arbitrary_precision`), and both writers print that text.
//!
//! Both grammars are read within one [`Budget`] (see `budget`): bytes
//! of source text, nodes and bytes of scalar text per document (an alias
//! charged each time it is used), nesting depth, and nodes and text per
//! input, all charged as the values are produced.

use serde_json::Value;
use std::io::BufRead;
use std::rc::Rc;

pub use budget::{Budget, Meter};
pub use json::{JsonDocuments, ValueSeed};
pub use yaml::{YamlError, YamlProblem};

/// Deepest nesting accepted by default (mappings + sequences). A Pod, even
/// with `managedFields`, nests about 15 levels; 64 keeps the recursive
/// deserialisation well inside a 2 MiB thread stack even in debug builds.
pub(crate) const MAX_DEPTH: usize = 64;

/// Which grammar the input was read with, decided by its first byte.
#[derive(Debug)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
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
    #[error("document {document}: not valid YAML or JSON: {source}")]
    Yaml { document: usize, source: YamlError },
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

/// The documents of `input`, one at a time, within the default [`Budget`];
/// empty and `null` documents are skipped. After an error the iterator ends.
pub fn documents<'a, R: BufRead + 'a>(
    input: &'a mut R,
) -> Result<Box<dyn Iterator<Item = Result<Value, ReadError>> + 'a>, ReadError> {
    documents_within(input, Budget::default())
}

/// [`documents`] within `budget`: a document over it ends the read at the
/// place it went over, before the rest of it is read.
pub fn documents_within<'a, R: BufRead + 'a>(
    input: &'a mut R,
    budget: Budget,
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
        Syntax::Json => {
            let mut docs = JsonDocuments::new(input, Rc::new(Meter::new(budget)));
            Box::new(
                std::iter::from_fn(move || {
                    let item = docs.next_value()?;
                    Some(item.map_err(|e| json_error(e, docs.meter())))
                })
                .filter(|r| !matches!(r, Ok(Value::Null)))
                .map_while(numbered),
            )
        }
        Syntax::Yaml => Box::new(
            yaml::YamlDocuments::new(input, Meter::new(budget))
                .map(|r| {
                    r.map_err(|e| match e {
                        yaml::Stop::Io(e) => ReadError::Io(e),
                        yaml::Stop::Yaml(source) => ReadError::Yaml {
                            document: 0,
                            source,
                        },
                    })
                })
                .map_while(numbered),
        ),
    })
}

/// A JSON error as the reader reports it (worded by `json::message`).
pub fn json_error(e: serde_json::Error, meter: &Meter) -> ReadError {
    match json::message(&e, meter) {
        Some(message) => ReadError::Json {
            document: 0,
            message,
        },
        None => ReadError::Io(e.into()),
    }
}

impl ReadError {
    /// The error, placed in document `n` (counting from 1).
    pub fn at(self, n: usize) -> Self {
        match self {
            ReadError::Json { message, .. } => ReadError::Json {
                document: n,
                message,
            },
            ReadError::Yaml { source, .. } => ReadError::Yaml {
                document: n,
                source,
            },
            io => io,
        }
    }
}

/// Renders one document as YAML that kubectl (YAML 1.1) and YAML 1.2
/// readers both read back as the same value: strings such as `yes`, `on`,
/// `0755` or `null` come out quoted, numbers as their text.
pub fn to_yaml(value: &Value) -> Result<String, WriteError> {
    let numbers = Verbatim::for_value(value);
    let text = serde_saphyr::to_string(&Quoting(value, &numbers)).map_err(WriteError::Yaml)?;
    Ok(numbers.restore(text))
}

/// A value written so that it reads back the same.
///
/// - serde-saphyr leaves a string with leading or trailing non-ASCII
///   whitespace (`"\u{2002}8"`) plain, and YAML readers trim that
///   whitespace when resolving the scalar's type, so it came back as the
///   number 8 (found by the `reader` fuzz target). Such strings are written
///   double-quoted.
/// - A number is written as its text. serde-saphyr prints integers that fit
///   128 bits as written, but a float only as its shortest `f64` form
///   (`1e9` as `1000000000.0`), and it has no way to emit a plain scalar
///   verbatim; such a number is written as a placeholder word that
///   [`Verbatim::restore`] swaps for its text afterwards.
struct Quoting<'v>(&'v Value, &'v Verbatim);

/// serde-saphyr quotes ASCII whitespace at the ends itself.
fn non_ascii_space_at_an_end(text: &str) -> bool {
    let odd = |c: Option<char>| c.is_some_and(|c| c.is_whitespace() && !c.is_ascii());
    odd(text.chars().next()) || odd(text.chars().next_back())
}

/// The numbers of one document that serde-saphyr cannot print as written,
/// each behind a placeholder word no string of the document contains.
struct Verbatim {
    marker: String,
    texts: std::cell::RefCell<Vec<String>>,
}

impl Verbatim {
    fn for_value(value: &Value) -> Self {
        let mut seed =
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
        loop {
            let marker = format!("kserve-injector-number-{seed:016x}-");
            if !contains_text(value, &marker) {
                return Self {
                    marker,
                    texts: Default::default(),
                };
            }
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        }
    }

    /// The placeholder for `text`.
    fn word(&self, text: String) -> String {
        let mut texts = self.texts.borrow_mut();
        texts.push(text);
        format!("{}{}x", self.marker, texts.len() - 1)
    }

    fn is_empty(&self) -> bool {
        self.texts.borrow().is_empty()
    }

    /// `yaml` with every placeholder replaced by its number's text.
    fn restore(&self, yaml: String) -> String {
        let texts = self.texts.borrow();
        if texts.is_empty() {
            return yaml;
        }
        let mut out = String::with_capacity(yaml.len());
        let mut rest = yaml.as_str();
        while let Some(at) = rest.find(&self.marker) {
            out.push_str(&rest[..at]);
            let after = &rest[at + self.marker.len()..];
            let end = after.find('x').unwrap_or(after.len());
            match after[..end]
                .parse::<usize>()
                .ok()
                .and_then(|i| texts.get(i))
            {
                Some(text) => out.push_str(text),
                None => out.push_str(&rest[at..at + self.marker.len() + end]),
            }
            rest = after.get(end + 1..).unwrap_or("");
        }
        out.push_str(rest);
        out
    }
}

/// Whether `needle` occurs in any key or string of `value`.
fn contains_text(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|v| contains_text(v, needle)),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.contains(needle) || contains_text(v, needle)),
        _ => false,
    }
}

impl serde::Serialize for Quoting<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::String(text) if non_ascii_space_at_an_end(text) => {
                serde_saphyr::DoubleQuoted(text.as_str()).serialize(s)
            }
            Value::Number(n) => {
                let text = n.to_string();
                if let Some(v) = text.parse::<u128>().ok().filter(|v| v.to_string() == text) {
                    s.serialize_u128(v)
                } else if let Some(v) = text.parse::<i128>().ok().filter(|v| v.to_string() == text)
                {
                    s.serialize_i128(v)
                } else {
                    s.serialize_str(&self.1.word(text))
                }
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Quoting(item, self.1))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut out = s.serialize_map(Some(map.len()))?;
                for (key, item) in map {
                    out.serialize_entry(key, &Quoting(item, self.1))?;
                }
                out.end()
            }
            other => other.serialize(s),
        }
    }
}

/// Why YAML could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The output failed (a closed pipe, a full disk).
    #[error(transparent)]
    Io(std::io::Error),
    /// The value has no YAML form.
    #[error(transparent)]
    Yaml(serde_saphyr::ser::Error),
}

/// [`to_yaml`] streamed into `out`, so a large document is not held twice
/// (unless it holds a number that needs a placeholder).
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
    let numbers = Verbatim::for_value(value);
    let mut buffered = String::new();
    let result = {
        let mut adapter = Adapter {
            out: &mut *out,
            failed: None,
        };
        let written = serde_saphyr::to_fmt_writer(
            &mut PlaceholderAware(&mut adapter, &mut buffered, &numbers),
            &Quoting(value, &numbers),
        );
        written.map_err(|e| match adapter.failed.take() {
            Some(io) => WriteError::Io(io),
            None => WriteError::Yaml(e),
        })
    };
    result?;
    if !buffered.is_empty() {
        out.write_all(numbers.restore(buffered).as_bytes())
            .map_err(WriteError::Io)?;
    }
    Ok(())
}

/// Streams to `.0` until the first placeholder is written; from then on
/// the rest of the document is kept in `.1`, to be restored and written
/// at the end.
struct PlaceholderAware<'a, W>(&'a mut W, &'a mut String, &'a Verbatim);

impl<W: std::fmt::Write> std::fmt::Write for PlaceholderAware<'_, W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.1.is_empty() && self.2.is_empty() {
            return self.0.write_str(s);
        }
        self.1.push_str(s);
        Ok(())
    }
}

pub(crate) mod budget;
mod json;
mod yaml;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod budget_tests;
