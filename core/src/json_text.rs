//! Compact JSON text of any `Serialize` value, byte for byte as
//! `serde_json::to_string` writes it, into a plain buffer. Hand-written
//! because serde_json escapes every string, and every struct key, a byte
//! at a time through its formatter and writer, while what we write (the
//! containers and volumes we add, field names) is almost all plain ASCII,
//! and writing the containers we add is much of a small review's work
//! (see `docs/performance.md`). A string with nothing to escape is copied
//! whole; one that needs escaping gets serde_json's escapes, between runs
//! copied whole; every float goes through serde_json itself, so the output
//! stays serde_json's.

use serde::ser::{self, Serialize};
use std::fmt::Display;

/// The JSON text of `value`.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut out = String::with_capacity(128);
    value.serialize(&mut Writer { out: &mut out })?;
    Ok(out)
}

/// Appends the JSON text of `value` to `out`.
pub(crate) fn append<T: Serialize + ?Sized>(
    out: &mut String,
    value: &T,
) -> Result<(), serde_json::Error> {
    value.serialize(&mut Writer { out })
}

/// Appends `text` as a JSON string.
pub(crate) fn write_str(out: &mut String, text: &str) {
    if needs_escape(text.as_bytes()) {
        write_escaped(out, text);
        return;
    }
    out.reserve(text.len() + 2);
    out.push('"');
    out.push_str(text);
    out.push('"');
}

/// Appends `text` as a JSON string with the escapes serde_json writes
/// (`format_escaped_str`): those of [`write_escape`] for the bytes
/// [`ESCAPED`] marks. Written here, runs between escapes copied whole,
/// because going through serde_json's formatter byte by byte showed in a
/// small review's profile (the modelcar's init script has quotes). Out of
/// line: inlined into `write_str`, which every key and string goes
/// through, it made the typical pod's review cost more.
#[inline(never)]
fn write_escaped(out: &mut String, text: &str) {
    out.reserve(text.len() + 8);
    out.push('"');
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut next = escape_at(bytes);
    while let Some(i) = next {
        // Every escaped byte is ASCII, so `start..i` lies on char boundaries.
        out.push_str(&text[start..i]);
        start = i + 1;
        next = escape_at(&bytes[start..]).map(|at| start + at);
        write_escape(out, char::from(bytes[i]));
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// Appends the escape of `c`, as serde_json and Go's `encoding/json` both
/// write it (Go since 1.22, which every KServe release we reproduce is
/// built with): the short forms `\b \t \n \f \r \" \\`, and otherwise
/// `\u` with four lower-case hex digits (`c` is in the Basic Multilingual
/// Plane: a control character, or one of the few Go escapes besides).
#[inline(always)]
fn write_escape(out: &mut String, c: char) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        c => {
            let code = u32::from(c);
            debug_assert!(code <= 0xffff, "only BMP characters are escaped");
            out.push_str("\\u");
            for shift in [12, 8, 4, 0] {
                out.push(char::from(HEX[(code >> shift & 0xf) as usize]));
            }
        }
    }
}

/// Appends the decimal text of `n`, as serde_json and Go's `strconv`
/// (which `encoding/json` uses for integers) both write it.
pub(crate) fn write_int(out: &mut String, n: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Whether any byte is a control character, `"` or `\\`, eight bytes at a
/// time, because every string we write passes through here and a
/// byte-wise table lookup showed in a small review's profile
/// (`examples/review_loop.rs`).
pub(crate) fn needs_escape(bytes: &[u8]) -> bool {
    let word = |chunk: &[u8]| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        u64::from_ne_bytes(word)
    };
    let Some(tail) = bytes.len().checked_sub(8) else {
        return bytes.iter().any(|&b| ESCAPED[b as usize]);
    };
    let mut chunks = bytes.chunks_exact(8);
    if chunks.any(|chunk| escape_in(word(chunk))) {
        return true;
    }
    // The last eight bytes, overlapping the last whole chunk: one test for
    // the tail instead of a byte at a time.
    !chunks.remainder().is_empty() && escape_in(word(&bytes[tail..]))
}

/// Where the first byte [`needs_escape`] looks for is, the same way.
fn escape_at(bytes: &[u8]) -> Option<usize> {
    let find = |from: usize| {
        let rest = &bytes[from..];
        rest.iter()
            .position(|&b| ESCAPED[b as usize])
            .map(|i| from + i)
    };
    let mut chunks = bytes.chunks_exact(8);
    for (n, chunk) in (&mut chunks).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if escape_in(u64::from_ne_bytes(word)) {
            return find(n * 8);
        }
    }
    find(bytes.len() - chunks.remainder().len())
}

/// Whether any of the eight bytes of `v` is one [`ESCAPED`] marks.
#[inline(always)]
fn escape_in(v: u64) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // Some byte of `v` is zero, or (with `n` for 1) below `n`: exact tests
    // for whether any byte qualifies, from "Bit Twiddling Hacks".
    // The three tests are or-ed as words, not as booleans: one branch
    // rather than three for each word of every string written.
    let below = |v: u64, n: u64| v.wrapping_sub(ONES * n) & !v & HIGH;
    below(v, 0x20) | below(v ^ (ONES * 0x22), 1) | below(v ^ (ONES * 0x5c), 1) != 0
}

/// The bytes JSON escapes in a string.
const ESCAPED: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

struct Writer<'o> {
    out: &'o mut String,
}

impl Writer<'_> {
    fn int(&mut self, n: impl itoa::Integer) {
        write_int(self.out, n);
    }

    fn float(&mut self, v: impl Serialize) -> Result<(), serde_json::Error> {
        self.out.push_str(&serde_json::to_string(&v)?);
        Ok(())
    }
}

/// A list, map or struct being written: whether the next item is the first.
pub(crate) struct Compound<'w, 'o> {
    writer: &'w mut Writer<'o>,
    first: bool,
    /// What closes it: `]`, `}` or, for an enum variant, `}}`.
    close: &'static str,
    /// A `serde_json::Number`: with `arbitrary_precision` it serialises as
    /// a one-field struct holding its text, which is written bare.
    number: bool,
}

/// The struct name serde_json gives a `Number` under `arbitrary_precision`.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

impl Compound<'_, '_> {
    fn separate(&mut self) {
        if !std::mem::replace(&mut self.first, false) {
            self.writer.out.push(',');
        }
    }

    fn key(&mut self, key: &str) {
        self.separate();
        write_str(self.writer.out, key);
        self.writer.out.push(':');
    }

    fn finish(self) -> Result<(), serde_json::Error> {
        self.writer.out.push_str(self.close);
        Ok(())
    }
}

impl<'w, 'o> ser::Serializer for &'w mut Writer<'o> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = Compound<'w, 'o>;
    type SerializeTuple = Compound<'w, 'o>;
    type SerializeTupleStruct = Compound<'w, 'o>;
    type SerializeTupleVariant = Compound<'w, 'o>;
    type SerializeMap = Compound<'w, 'o>;
    type SerializeStruct = Compound<'w, 'o>;
    type SerializeStructVariant = Compound<'w, 'o>;

    fn serialize_bool(self, v: bool) -> Result<(), Self::Error> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), Self::Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Self::Error> {
        self.float(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Self::Error> {
        self.float(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Self::Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Self::Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Self::Error> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for byte in v {
            seq.serialize_element(byte)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), Self::Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Self::Error> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Self::Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Self::Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        self.out.push('{');
        write_str(self.out, variant);
        self.out.push(':');
        value.serialize(&mut *self)?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Self::Error> {
        self.out.push('[');
        Ok(Compound {
            writer: self,
            first: true,
            close: "]",
            number: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, Self::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, Self::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Self::Error> {
        self.out.push('{');
        write_str(self.out, variant);
        self.out.push_str(":[");
        Ok(Compound {
            writer: self,
            first: true,
            close: "]}",
            number: false,
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Self::Error> {
        self.out.push('{');
        Ok(Compound {
            writer: self,
            first: true,
            close: "}",
            number: false,
        })
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, Self::Error> {
        if name == NUMBER_TOKEN {
            return Ok(Compound {
                writer: self,
                first: true,
                close: "",
                number: true,
            });
        }
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Self::Error> {
        self.out.push('{');
        write_str(self.out, variant);
        self.out.push_str(":{");
        Ok(Compound {
            writer: self,
            first: true,
            close: "}}",
            number: false,
        })
    }
    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<(), Self::Error> {
        self.serialize_str(&value.to_string())
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.separate();
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.finish()
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.finish()
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Self::Error> {
        self.separate();
        let start = self.writer.out.len();
        key.serialize(&mut *self.writer)?;
        // JSON keys are strings; like serde_json, a number or boolean key is
        // written quoted and anything else is refused.
        match self.writer.out.as_bytes().get(start) {
            Some(b'"') => {}
            Some(b'[' | b'{' | b'n') | None => {
                self.writer.out.truncate(start);
                return Err(ser::Error::custom("key must be a string"));
            }
            Some(_) => {
                self.writer.out.insert(start, '"');
                self.writer.out.push('"');
            }
        }
        self.writer.out.push(':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        value.serialize(&mut *self.writer)
    }
    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), Self::Error> {
        ser::SerializeMap::serialize_key(self, key)?;
        ser::SerializeMap::serialize_value(self, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.finish()
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        if self.number {
            if let serde_json::Value::String(text) = serde_json::to_value(value)? {
                self.writer.out.push_str(&text);
            }
            return Ok(());
        }
        self.key(key);
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.finish()
    }
}

pub(crate) mod go;
pub(crate) mod k8s;

#[cfg(test)]
mod tests;
