//! The one-pass path's deserializer: what no decoded type reads is
//! validated and skipped at scanning speed, what the types read is borrowed
//! from the body or handed to `serde_json`.
//!
//! Why not `serde_json` alone: a derived struct skips each field it does not
//! read through `serde_json`'s `ignore_value`, which costs about 13
//! instructions a byte on a pod's text (`examples/review_loop.rs` `pass`:
//! 307,000 for the 23 KB `typical` pod), where most of the text is short
//! keys and small objects (managedFields, the containers' fields nobody
//! reads). That was two thirds of the review's decoding. No crate offers a
//! serde `Deserializer` that skips at scanning speed while staying exactly
//! as strict as `serde_json`, so this module is one: it scans the JSON
//! grammar itself (objects, arrays, strings with their escapes and control
//! characters, numbers, literals) and implements the containers, options,
//! strings without escapes and skipped values; every other value (numbers,
//! booleans, enums, escaped strings, `RawValue`) is found by the same scan
//! and decoded by `serde_json` from its own text, so the values read are
//! `serde_json`'s. See docs/performance.md ("The review") for the counts.
//!
//! Strictness: the body is UTF-8 already (`admission::utf8`); a body this
//! deserializer accepts is one `serde_json::from_str` accepts with the same
//! values, and anything it refuses (including nesting deeper than
//! [`MAX_DEPTH`], below `serde_json`'s 128) goes to the plain path, which
//! gives the exact error. `tests` compare the two on generated texts.

use scan::{literal_end, skip_value, string_end, whitespace};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Error;

mod scan;

/// Deepest nesting of the containers this deserializer decodes itself,
/// below `serde_json`'s recursion limit of 128 so that nothing it accepts is
/// refused by that limit on the plain path. A pod nests about 15 deep.
const MAX_DEPTH: usize = 100;

/// `serde_json`'s name for the newtype a `RawValue` asks for: such a value
/// is handed to `serde_json` whole, which borrows its text.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A JSON text read from its start; `end` checks nothing follows the value.
pub(super) struct Skim<'de> {
    text: &'de str,
    pos: usize,
    depth: usize,
}

fn fail(what: &str) -> Error {
    de::Error::custom(format_args!("skim: {what}"))
}

impl<'de> Skim<'de> {
    pub(super) fn new(text: &'de str) -> Self {
        Self {
            text,
            pos: 0,
            depth: 0,
        }
    }

    /// Only whitespace may follow the value read.
    pub(super) fn end(&mut self) -> Result<(), Error> {
        self.whitespace();
        match self.pos == self.text.len() {
            true => Ok(()),
            false => Err(fail("trailing characters")),
        }
    }

    fn bytes(&self) -> &'de [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    fn whitespace(&mut self) {
        self.pos = whitespace(self.bytes(), self.pos);
    }

    /// The next byte after whitespace, not consumed.
    fn next_token(&mut self) -> Result<u8, Error> {
        self.whitespace();
        self.peek().ok_or_else(|| fail("unexpected end"))
    }

    fn expect(&mut self, byte: u8) -> Result<(), Error> {
        match self.next_token()? == byte {
            true => {
                self.pos += 1;
                Ok(())
            }
            false => Err(fail("unexpected character")),
        }
    }

    /// `self.text[start..end]`, which the scan only ends on ASCII bytes.
    fn slice(&self, start: usize, end: usize) -> Result<&'de str, Error> {
        self.text
            .get(start..end)
            .ok_or_else(|| fail("not at a character boundary"))
    }

    /// From just after an opening quote to just after the closing one;
    /// whether the string holds an escape.
    fn string(&mut self) -> Result<bool, Error> {
        let (end, escaped) =
            string_end(self.bytes(), self.pos).ok_or_else(|| fail("invalid string"))?;
        self.pos = end;
        Ok(escaped)
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Error> {
        self.pos =
            literal_end(self.bytes(), self.pos, word).ok_or_else(|| fail("invalid literal"))?;
        Ok(())
    }

    /// Skips one value; the deepest nesting in it.
    fn skip(&mut self) -> Result<usize, Error> {
        let (end, deepest) = skip_value(self.bytes(), self.pos).ok_or_else(|| fail("not JSON"))?;
        self.pos = end;
        Ok(deepest)
    }

    /// Hands the next value to `serde_json`, from its own text: whatever
    /// `serde_json` decodes from it is what the plain path decodes. Its
    /// nesting counts against [`MAX_DEPTH`] with the containers around it.
    fn delegate<V>(
        &mut self,
        decode: impl FnOnce(
            &mut serde_json::Deserializer<serde_json::de::StrRead<'de>>,
        ) -> Result<V, Error>,
    ) -> Result<V, Error> {
        self.whitespace();
        let start = self.pos;
        let deepest = self.skip()?;
        if self.depth + deepest > MAX_DEPTH {
            return Err(fail("nested too deep"));
        }
        let text = self.slice(start, self.pos)?;
        let mut de = serde_json::Deserializer::from_str(text);
        let value = decode(&mut de)?;
        de.end()?;
        Ok(value)
    }

    /// Enters a container this deserializer decodes itself.
    fn enter(&mut self) -> Result<(), Error> {
        self.pos += 1;
        self.depth += 1;
        match self.depth > MAX_DEPTH {
            true => Err(fail("nested too deep")),
            false => Ok(()),
        }
    }

    fn map<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        self.enter()?;
        let mut entries = Entries {
            de: self,
            first: true,
            done: false,
        };
        let value = visitor.visit_map(&mut entries)?;
        let done = entries.done;
        self.depth -= 1;
        // A visitor that stopped before the end (a struct read from an
        // array takes only its fields) leaves the closing bracket, which
        // must come next, as `serde_json` requires.
        if !done {
            self.expect(b'}')?;
        }
        Ok(value)
    }

    fn seq<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        self.enter()?;
        let mut elements = Entries {
            de: self,
            first: true,
            done: false,
        };
        let value = visitor.visit_seq(&mut elements)?;
        let done = elements.done;
        self.depth -= 1;
        // A visitor that stopped before the end (a struct read from an
        // array takes only its fields) leaves the closing bracket, which
        // must come next, as `serde_json` requires.
        if !done {
            self.expect(b']')?;
        }
        Ok(value)
    }

    /// A string borrowed from the text when it holds no escape; one with an
    /// escape is `serde_json`'s to decode.
    fn str<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        if self.next_token()? != b'"' {
            return self.delegate(|de| de.deserialize_str(visitor));
        }
        let start = self.pos;
        self.pos += 1;
        match self.string()? {
            false => visitor.visit_borrowed_str(self.slice(start + 1, self.pos - 1)?),
            true => {
                let text = self.slice(start, self.pos)?;
                let mut de = serde_json::Deserializer::from_str(text);
                let value = de::Deserializer::deserialize_str(&mut de, visitor)?;
                de.end()?;
                Ok(value)
            }
        }
    }
}

/// An object's entries or an array's elements, as the visitor asks for them.
struct Entries<'a, 'de> {
    de: &'a mut Skim<'de>,
    first: bool,
    /// The closing bracket was read.
    done: bool,
}

impl Entries<'_, '_> {
    /// Before an entry: `true` when the container closes instead.
    fn closes(&mut self, close: u8) -> Result<bool, Error> {
        let byte = self.de.next_token()?;
        match (self.first, byte) {
            (_, b) if b == close => {
                self.de.pos += 1;
                self.done = true;
                Ok(true)
            }
            (true, _) => {
                self.first = false;
                Ok(false)
            }
            (false, b',') => {
                self.de.pos += 1;
                Ok(false)
            }
            _ => Err(fail("expected a comma or a closing bracket")),
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if self.done || self.closes(b'}')? {
            return Ok(None);
        }
        let de = &mut *self.de;
        if de.next_token()? != b'"' {
            return Err(fail("expected a key"));
        }
        let start = de.pos;
        de.pos += 1;
        let escaped = de.string()?;
        let key = Key {
            quoted: de.slice(start, de.pos)?,
            escaped,
        };
        let value = seed.deserialize(key)?;
        de.expect(b':')?;
        Ok(Some(value))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(&mut *self.de)
    }
}

impl<'de> SeqAccess<'de> for Entries<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        if self.done || self.closes(b']')? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.de).map(Some)
    }
}

/// An object's key: a string, borrowed when it holds no escape. A type that
/// asks a key for anything but a string (a number, a boolean) is given the
/// string, and refuses it, which sends the body to the plain path.
struct Key<'de> {
    /// With its quotes.
    quoted: &'de str,
    escaped: bool,
}

impl<'de> Deserializer<'de> for Key<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.escaped {
            false => visitor.visit_borrowed_str(&self.quoted[1..self.quoted.len() - 1]),
            true => {
                let mut de = serde_json::Deserializer::from_str(self.quoted);
                let value = de::Deserializer::deserialize_str(&mut de, visitor)?;
                de.end()?;
                Ok(value)
            }
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The values `serde_json` would decode the same way, handed to it.
macro_rules! delegated {
    ($($method:ident),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.delegate(|de| de::Deserializer::$method(de, visitor))
        }
    )*};
}

impl<'de> Deserializer<'de> for &mut Skim<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.next_token()? {
            b'{' => self.map(visitor),
            b'[' => self.seq(visitor),
            b'"' => self.str(visitor),
            _ => self.delegate(|de| de::Deserializer::deserialize_any(de, visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.skip()?;
        visitor.visit_unit()
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.next_token()? {
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.str(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.str(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.next_token()? {
            b'{' => self.map(visitor),
            _ => self.delegate(|de| de::Deserializer::deserialize_map(de, visitor)),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.next_token()? {
            b'[' => self.seq(visitor),
            _ => self.delegate(|de| de::Deserializer::deserialize_seq(de, visitor)),
        }
    }

    /// As `serde_json` does, a struct is read from an object or an array.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.next_token()? {
            b'{' => self.map(visitor),
            b'[' => self.seq(visitor),
            _ => {
                self.delegate(|de| de::Deserializer::deserialize_struct(de, name, fields, visitor))
            }
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        match name == RAW_VALUE_TOKEN {
            true => {
                self.delegate(|de| de::Deserializer::deserialize_newtype_struct(de, name, visitor))
            }
            false => visitor.visit_newtype_struct(self),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.delegate(|de| de::Deserializer::deserialize_unit_struct(de, name, visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        self.delegate(|de| de::Deserializer::deserialize_tuple(de, len, visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.delegate(|de| de::Deserializer::deserialize_tuple_struct(de, name, len, visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.delegate(|de| de::Deserializer::deserialize_enum(de, name, variants, visitor))
    }

    delegated!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit
    );
}

#[cfg(test)]
mod tests;
