//! JSON documents as values, charged to a [`Meter`] as they are read.
//!
//! serde_json's own `Value` counts nothing but depth, and `from_reader`
//! holds a whole string before it hands it over, so the budget is charged
//! twice over: every byte read ([`MeteredRead`]), which bounds a string
//! still being read, and every node and byte of text produced
//! ([`ValueSeed`]), which bounds a tree (a 50 MB array of 25 million zeros
//! is a 2 GB tree).

use super::budget::Meter;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;
use std::io::BufRead;
use std::rc::Rc;

/// The key under which serde_json's `arbitrary_precision` hands a number's
/// text to a visitor (a one-entry map); its own `Value` recognises the same
/// text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A byte source that charges every byte to the current document.
pub(crate) struct MeteredRead<R> {
    input: R,
    meter: Rc<Meter>,
}

impl<R: BufRead> MeteredRead<R> {
    pub(super) fn new(input: R, meter: Rc<Meter>) -> Self {
        Self { input, meter }
    }
}

impl<R: BufRead> std::io::Read for MeteredRead<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let buf = self.input.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.input.consume(n);
        self.meter.read(n).map_err(std::io::Error::other)?;
        Ok(n)
    }
}

/// A serde_json error as the reader reports it: a read stopped by the
/// budget (an I/O error to serde_json) becomes the budget's message, at
/// the place the read stopped.
pub(super) fn message(e: &serde_json::Error, meter: &Meter) -> Option<String> {
    if !e.is_io() {
        return Some(e.to_string());
    }
    let refusal = meter.refusal()?;
    Some(format!(
        "{refusal} at line {} column {}",
        e.line(),
        e.column()
    ))
}

/// Reads one value, charging each node and each byte of text (mapping
/// keys included) as it is produced.
#[derive(Clone, Copy)]
pub struct ValueSeed<'m> {
    meter: &'m Meter,
    /// The depth of the value's parent (0 at the root).
    depth: usize,
}

impl<'m> ValueSeed<'m> {
    pub(crate) fn new(meter: &'m Meter) -> Self {
        Self { meter, depth: 0 }
    }

    /// A value inside `depth` open collections.
    pub fn at_depth(meter: &'m Meter, depth: usize) -> Self {
        Self { meter, depth }
    }

    fn child(self) -> Self {
        Self {
            depth: self.depth + 1,
            ..self
        }
    }

    fn scalar<E: de::Error>(self, text: usize) -> Result<(), E> {
        self.meter.nodes(1).map_err(E::custom)?;
        self.meter.text(text).map_err(E::custom)
    }

    fn open<E: de::Error>(self) -> Result<(), E> {
        self.meter.nodes(1).map_err(E::custom)?;
        self.meter.depth(self.depth + 1).map_err(E::custom)
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(ValueVisitor(self))
    }
}

/// The seed's visitor, kept out of the core's public surface: callers
/// hand a [`ValueSeed`] to serde, never a visitor.
struct ValueVisitor<'m>(ValueSeed<'m>);

impl<'de> Visitor<'de> for ValueVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.0.scalar(0)?;
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.0.scalar(0)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.0.scalar(0)?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.0.scalar(0)?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.0.scalar(0)?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.0.scalar(v.len())?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.0.scalar(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.open()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.0.child())? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Some(first) = map.next_key_seed(KeySeed(self.0.meter))? else {
            self.0.open()?;
            return Ok(Value::Object(Map::new()));
        };
        if first == NUMBER_TOKEN {
            let text: String = map.next_value()?;
            let number = text.parse::<Number>().map_err(de::Error::custom)?;
            self.0.scalar(text.len())?;
            return Ok(Value::Number(number));
        }
        self.0.open()?;
        let mut out = Map::new();
        out.insert(first, map.next_value_seed(self.0.child())?);
        while let Some(key) = map.next_key_seed(KeySeed(self.0.meter))? {
            // As in YAML: a later key would silently win over the first.
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "mapping key {key:?} already defined"
                )));
            }
            let value = map.next_value_seed(self.0.child())?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key: a node and its text, as in YAML.
struct KeySeed<'m>(&'m Meter);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<String, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.visit_string(v.to_string())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        if v != NUMBER_TOKEN {
            self.0.nodes(1).map_err(E::custom)?;
            self.0.text(v.len()).map_err(E::custom)?;
        }
        Ok(v)
    }
}

/// The values of a JSON stream, one at a time, each a document of its own
/// for the budget. One deserializer reads the whole stream, so an error's
/// line and column count from the start of the input.
pub struct JsonDocuments<R: BufRead> {
    de: serde_json::Deserializer<serde_json::de::IoRead<MeteredRead<R>>>,
    meter: Rc<Meter>,
}

impl<R: BufRead> JsonDocuments<R> {
    pub fn new(input: R, meter: Rc<Meter>) -> Self {
        Self {
            de: serde_json::Deserializer::from_reader(MeteredRead::new(input, meter.clone())),
            meter,
        }
    }

    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// Whether another value follows (blank space skipped).
    pub fn more(&mut self) -> Result<bool, serde_json::Error> {
        // `end` skips blank space and fails if anything follows it; what it
        // peeked at stays in the deserializer for the next value.
        match self.de.end() {
            Ok(()) => Ok(false),
            Err(e) if e.is_io() => Err(e),
            Err(_) => Ok(true),
        }
    }

    /// The next value; `None` at the end of the input.
    pub fn next_value(&mut self) -> Option<Result<Value, serde_json::Error>> {
        match self.more() {
            Ok(false) => return None,
            Err(e) => return Some(Err(e)),
            Ok(true) => {}
        }
        // `more` read the value's first byte.
        self.meter.start_document_with(1);
        Some(ValueSeed::new(&self.meter).deserialize(&mut self.de))
    }

    /// Runs `seed` on the next value, which the caller has checked is there
    /// with [`Self::more`] (for readers that take a value apart as it is
    /// read, and start the budget's documents themselves, the first byte
    /// that `more` read included).
    pub fn next_with<'de, S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, serde_json::Error> {
        seed.deserialize(&mut self.de)
    }
}
