//! YAML documents as JSON values, built from `granit-parser`'s events.
//!
//! Why not `serde-saphyr`'s deserializer (which drives the same parser)?
//! It hands a typeless target a number as an `f64`, so `memory: 1e9` came
//! back as `1000000000.0`, `1.50` as `1.5` and 2^64+1 as
//! `1.8446744073709552e19`. Here every scalar keeps its source text, and a
//! number becomes a `serde_json::Number` holding that text (the crate is
//! built with `arbitrary_precision`), so the CLI writes back exactly what it
//! read.
//!
//! Plain scalars resolve as kubectl resolves them (go-yaml v2, which
//! `sigs.k8s.io/yaml` uses): its null, boolean, integer (`strconv.ParseInt`
//! with base prefixes, `_` ignored) and float forms. Where a number's text
//! is not valid JSON (`0644`, `0x1F`, `+5`, `1_000`, `.5`), it is written as
//! the decimal value kubectl sends; an integer too wide for 64 bits keeps
//! its digits, where go-yaml would round it to a float. `.inf` and `.nan`
//! stay strings (JSON has no such numbers). Merge keys (`<<`) merge as YAML
//! 1.1 defines; a duplicate key is an error, as in go-yaml.

use super::budget::{Meter, OverBudget};
use document::Builder;
use granit_parser::{
    ErrorKind, Event, FallibleBufferedInput, InputIoError, Parser, ScalarStyle, ScanError, Span,
    Tag,
};
use serde_json::{Number, Value};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::BufRead;
use std::rc::Rc;

mod document;

const CORE_TAG: &str = "tag:yaml.org,2002:";

/// Why the YAML reader stopped: the input failed, or a document is not
/// YAML the reader takes.
#[derive(Debug)]
pub(super) enum Stop {
    Io(std::io::Error),
    Yaml(YamlError),
}

/// Why a YAML document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The parser's own report, which says where.
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// What the reader refuses in a document the parser read, and where
    /// (1-based; columns in characters).
    #[error("{problem} at line {line} column {column}")]
    At {
        #[source]
        problem: YamlProblem,
        line: usize,
        column: usize,
    },
}

/// What the reader refuses in a YAML document.
#[derive(Debug, thiserror::Error)]
pub enum YamlProblem {
    #[error(transparent)]
    OverBudget(#[from] OverBudget),
    #[error("the input is not valid UTF-8")]
    NotUtf8,
    #[error("an alias to an unknown anchor")]
    UnknownAnchor,
    #[error("a mapping key must be a scalar")]
    KeyNotScalar,
    #[error("a collection ends that never started")]
    EndWithoutStart,
    #[error("mapping key {0:?} already defined")]
    DuplicateKey(String),
    #[error("a merge key's list may hold only mappings")]
    MergeListOfNonMappings,
    #[error("a merge key needs a mapping or a list of mappings")]
    MergeOfNonMapping,
    /// A scalar that its core-schema tag (`!!int`, `!!bool`) does not fit.
    #[error("{text:?} is not a valid !!{tag}")]
    NotOfTag { text: String, tag: &'static str },
    #[error("a !!binary scalar is not valid base64")]
    BinaryNotBase64(#[source] base64_simd::Error),
    #[error("a !!binary scalar does not decode to UTF-8 text")]
    BinaryNotText(#[source] std::string::FromUtf8Error),
}

/// The documents of a YAML stream, one at a time; empty and `null`
/// documents are skipped. After an error the iterator ends.
pub(super) struct YamlDocuments<R: BufRead> {
    parser: Parser<'static, FallibleBufferedInput<Utf8Chars<R>>>,
    shared: Rc<Shared>,
    done: bool,
}

/// What the character source and the document builder both see: the
/// budget, and why the source stopped (granit-parser reports an input
/// error at its own position, which is not where the input went wrong).
struct Shared {
    meter: Meter,
    failure: RefCell<Option<YamlError>>,
    handed: RefCell<Handed>,
}

/// How many characters went to the parser, and the byte length of the
/// latest ones: the source of a document that the scanner read ahead
/// before the parser reported the document's start.
#[derive(Default)]
struct Handed {
    chars: usize,
    recent: VecDeque<u8>,
}

/// Far more than the scanner reads ahead of a document's start (a few
/// characters past `---`, or the first key); older characters count one
/// byte each, the least they can cost.
const RECENT: usize = 4096;

impl Handed {
    fn push(&mut self, len: usize) {
        self.chars += 1;
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(len as u8);
    }

    /// Bytes of the characters handed from character `index` on.
    fn bytes_since(&self, index: usize) -> u64 {
        let count = self.chars.saturating_sub(index);
        let known = count.min(self.recent.len());
        let bytes: u64 = self
            .recent
            .iter()
            .rev()
            .take(known)
            .map(|&n| u64::from(n))
            .sum();
        bytes + (count - known) as u64
    }
}

impl<R: BufRead> YamlDocuments<R> {
    pub(super) fn new(input: R, meter: Meter) -> Self {
        let mut options = granit_parser::Options::default();
        // The builder refuses depth past the budget with a clear message;
        // the parser's own limits only bound its state stack.
        options.flow_nesting_limit = meter.budget().depth + 1;
        options.block_nesting_limit = meter.budget().depth + 1;
        // Comments are skipped, never buffered: with their events on (the
        // default wherever another crate enables granit-parser's `comments`
        // feature, as kube-client does through serde-saphyr), more than 96
        // comment lines before a collection's first entry were refused.
        options.set_emit_comments(false);
        let shared = Rc::new(Shared {
            meter,
            failure: RefCell::new(None),
            handed: RefCell::new(Handed::default()),
        });
        let chars = Utf8Chars {
            input,
            carry: Vec::new(),
            decoded: Vec::new().into_iter(),
            invalid: false,
            line: 1,
            column: 1,
            shared: shared.clone(),
        };
        Self {
            parser: Parser::new_from_fallible_iter_with_options(chars, options),
            shared,
            done: false,
        }
    }

    fn next_document(&mut self) -> Result<Option<Value>, Stop> {
        let mut doc = Builder::new(self.shared.clone());
        loop {
            let Some(event) = self.parser.next_event() else {
                return Ok(None);
            };
            let (event, span) = event.map_err(|e| match self.shared.failure.take() {
                Some(failure) => Stop::Yaml(failure),
                None => scan_error(e),
            })?;
            match event {
                Event::StreamEnd => return Ok(None),
                Event::DocumentStart(..) => {
                    let carried = self.shared.handed.borrow().bytes_since(span.start.index());
                    self.shared.meter.start_document_with(carried);
                    doc = Builder::new(self.shared.clone());
                }
                Event::DocumentEnd => match doc.finish() {
                    None | Some(Value::Null) => continue,
                    Some(value) => return Ok(Some(value)),
                },
                other => doc.event(other, span).map_err(Stop::Yaml)?,
            }
        }
    }
}

impl<R: BufRead> Iterator for YamlDocuments<R> {
    type Item = Result<Value, Stop>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.next_document().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

fn scan_error(e: ScanError) -> Stop {
    match e.kind() {
        ErrorKind::InputIo { error } => Stop::Io(std::io::Error::other(error.message())),
        _ => Stop::Yaml(YamlError::Scan(e)),
    }
}

fn at(span: &Span, problem: impl Into<YamlProblem>) -> YamlError {
    YamlError::At {
        problem: problem.into(),
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

fn is_core(tag: &Tag, suffix: &str) -> bool {
    tag.handle() == CORE_TAG && tag.suffix() == suffix
}

/// A scalar's value: quoted and block scalars are strings, plain ones
/// resolve as go-yaml v2 resolves them; a core-schema tag forces its type.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, YamlProblem> {
    let core = tag.filter(|t| t.handle() == CORE_TAG).map(Tag::suffix);
    let typed = |tag: &'static str, v: Option<Value>| {
        v.ok_or_else(|| YamlProblem::NotOfTag {
            text: text.to_string(),
            tag,
        })
    };
    match core {
        Some("str") | Some("timestamp") => Ok(Value::String(text.to_string())),
        Some("null") => Ok(Value::Null),
        Some("bool") => typed("bool", go_bool(text).map(Value::Bool)),
        Some("int") => typed("int", go_int(text)),
        Some("float") => typed("float", go_int(text).or_else(|| go_float(text))),
        Some("binary") => binary(text),
        _ if style != ScalarStyle::Plain => Ok(Value::String(text.to_string())),
        _ => Ok(resolve_plain(text)),
    }
}

fn resolve_plain(text: &str) -> Value {
    if matches!(text, "" | "~" | "null" | "Null" | "NULL") {
        return Value::Null;
    }
    if let Some(b) = go_bool(text) {
        return Value::Bool(b);
    }
    go_int(text)
        .or_else(|| go_float(text))
        .unwrap_or_else(|| Value::String(text.to_string()))
}

/// go-yaml v2's boolean words.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Some(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Some(false)
        }
        _ => None,
    }
}

/// `strconv.ParseInt(text without "_", 0, 64)`, then `ParseUint`: an
/// optional sign, then `0x`, `0o`, `0b` or a leading `0` (octal), or
/// decimal. An integer already in JSON's spelling keeps its text: that is
/// the same number, and it keeps `-0` (which parsing would turn into `0`)
/// and integers too wide for 64 bits as written.
fn go_int(text: &str) -> Option<Value> {
    if is_json_number(text) && !text.contains(['.', 'e', 'E']) {
        return Some(exact(text));
    }
    let plain = text.replace('_', "");
    let (negative, unsigned) = match plain.as_bytes().first()? {
        b'-' => (true, &plain[1..]),
        b'+' => (false, &plain[1..]),
        _ => (false, plain.as_str()),
    };
    let (radix, digits) = match unsigned.as_bytes() {
        [b'0', b'x' | b'X', ..] => (16, &unsigned[2..]),
        [b'0', b'o' | b'O', ..] => (8, &unsigned[2..]),
        [b'0', b'b' | b'B', ..] => (2, &unsigned[2..]),
        [b'0', _, ..] => (8, &unsigned[1..]),
        _ => (10, unsigned),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if !negative {
        return Some(Value::from(magnitude));
    }
    let value = i64::try_from(magnitude)
        .map(|m| -m)
        .ok()
        .or((magnitude == 1 << 63).then_some(i64::MIN))?;
    Some(Value::from(value))
}

/// go-yaml v2's float form `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
/// (after dropping `_`). Text that is already a JSON number is kept as
/// written; other spellings become the value's shortest decimal.
fn go_float(text: &str) -> Option<Value> {
    let plain = text.replace('_', "");
    let body = plain.strip_prefix(['-', '+']).unwrap_or(&plain);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    if !mantissa_ok || !exponent_ok {
        return None;
    }
    if is_json_number(text) {
        return Some(exact(text));
    }
    let value: f64 = plain.parse().ok()?;
    Number::from_f64(value).map(Value::Number)
}

/// A number spelled exactly as `text`, which must match JSON's number
/// grammar. Parsing would respell it (serde_json writes `1e9` as `1e+9`);
/// `from_string_unchecked` is serde_json's own constructor for the text of
/// an `arbitrary_precision` number, hidden from its docs but kept for this
/// use; a unit test pins that it keeps the text.
fn exact(text: &str) -> Value {
    debug_assert!(is_json_number(text));
    Value::Number(Number::from_string_unchecked(text.to_string()))
}

/// JSON's number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`.
pub(super) fn is_json_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// `!!binary`: base64 (line breaks allowed), which must decode to UTF-8 to
/// be a JSON string.
fn binary(text: &str) -> Result<Value, YamlProblem> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64_simd::STANDARD
        .decode_to_vec(compact.as_bytes())
        .map_err(YamlProblem::BinaryNotBase64)?;
    String::from_utf8(bytes)
        .map(Value::String)
        .map_err(YamlProblem::BinaryNotText)
}

/// The characters of a UTF-8 byte stream, read a buffer at a time, each
/// charged to the document's budget of source text as it is handed to the
/// parser (the scanner holds a whole scalar before it reports it, so a
/// budget checked only on the scalar would come after the memory is spent).
pub(super) struct Utf8Chars<R> {
    input: R,
    /// The start of a character split across two reads.
    carry: Vec<u8>,
    decoded: std::vec::IntoIter<char>,
    /// The bytes after `decoded` are not UTF-8.
    invalid: bool,
    /// Where the next character is (1-based; columns in characters, as the
    /// parser counts them).
    line: usize,
    column: usize,
    shared: Rc<Shared>,
}

impl<R: BufRead> Utf8Chars<R> {
    fn refill(&mut self) -> Result<bool, ErrorKind> {
        let io = |e: std::io::Error| ErrorKind::InputIo {
            error: InputIoError::from_io(e),
        };
        if self.invalid {
            return Err(self.fail(YamlProblem::NotUtf8));
        }
        let buf = loop {
            match self.input.fill_buf() {
                Ok(buf) => break buf,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            }
        };
        if buf.is_empty() {
            if self.carry.is_empty() {
                return Ok(false);
            }
            self.carry.clear();
            return Err(self.fail(YamlProblem::NotUtf8));
        }
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(buf);
        let consumed = buf.len();
        self.input.consume(consumed);
        let valid = match std::str::from_utf8(&bytes) {
            Ok(text) => text.len(),
            Err(e) => {
                // Invalid bytes: the characters before them are still
                // handed out, so the error comes at their place.
                self.invalid = e.error_len().is_some();
                e.valid_up_to()
            }
        };
        if !self.invalid {
            self.carry = bytes.split_off(valid);
        }
        let text = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
        self.decoded = text.chars().collect::<Vec<_>>().into_iter();
        Ok(true)
    }

    /// Keeps `problem`, placed where the next character would be, for the
    /// document reader to report in place of the parser's error.
    fn fail(&self, problem: YamlProblem) -> ErrorKind {
        let failure = YamlError::At {
            problem,
            line: self.line,
            column: self.column,
        };
        let message = failure.to_string();
        *self.shared.failure.borrow_mut() = Some(failure);
        ErrorKind::InputDecoding { message }
    }
}

impl<R: BufRead> Iterator for Utf8Chars<R> {
    type Item = Result<char, ErrorKind>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(c) = self.decoded.next() {
                if let Err(over) = self.shared.meter.read(c.len_utf8()) {
                    self.decoded = Vec::new().into_iter();
                    return Some(Err(self.fail(over.into())));
                }
                self.shared.handed.borrow_mut().push(c.len_utf8());
                if c == '\n' {
                    self.line += 1;
                    self.column = 1;
                } else {
                    self.column += 1;
                }
                return Some(Ok(c));
            }
            match self.refill() {
                Ok(true) => continue,
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
