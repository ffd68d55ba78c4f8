//! `audit --objects`: a dump (`kubectl get pods,rs,deploy,... -A -o yaml`
//! or `-o json`) read object by object into the inventory. A JSON List is
//! read one item at a time, so a dump of ten thousand pods is never held
//! as one tree; YAML is read a document at a time (see `reader`'s limits),
//! its Lists then split.

use crate::audit::AuditError;
use crate::audit::Inventory;
use crate::reader::{self, Syntax};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use std::io::BufRead;

/// Why a dump could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error(transparent)]
    Read(#[from] reader::ReadError),
    #[error("document {document}: not valid JSON: {message}")]
    Json { document: usize, message: String },
    #[error(transparent)]
    Object(#[from] AuditError),
    #[error("cannot read input: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads every object of `input` into `inventory`.
pub fn read_into(input: &mut impl BufRead, inventory: &mut Inventory) -> Result<(), DumpError> {
    match reader::sniff(input)? {
        Syntax::Json => read_json(input, inventory),
        Syntax::Yaml => {
            for (i, doc) in reader::documents(input)?.enumerate() {
                let at = format!("document {}", i + 1);
                match doc? {
                    Value::Object(mut map) if map.get("items").is_some_and(Value::is_array) => {
                        let Some(Value::Array(items)) = map.remove("items") else {
                            continue;
                        };
                        for (j, item) in items.into_iter().enumerate() {
                            inventory.add(item, &format!("{at}, item {}", j + 1))?;
                        }
                    }
                    doc => inventory.add(doc, &at)?,
                }
            }
            Ok(())
        }
    }
}

fn read_json(input: &mut impl BufRead, inventory: &mut Inventory) -> Result<(), DumpError> {
    let mut document = 0;
    loop {
        // Blank space between documents; the end of the input ends the read.
        if reader::sniff(input)? == Syntax::Yaml && input.fill_buf()?.is_empty() {
            return Ok(());
        }
        document += 1;
        let mut de = serde_json::Deserializer::from_reader(&mut *input);
        let mut failed = None;
        let seed = Document {
            inventory: &mut *inventory,
            document,
            failed: &mut failed,
        };
        let read = seed.deserialize(&mut de);
        if let Some(e) = failed {
            return Err(e.into());
        }
        read.map_err(|e| DumpError::Json {
            document,
            message: e.to_string(),
        })?;
    }
}

/// One top-level JSON value: a List's items go to the inventory as they
/// are read, any other object whole.
struct Document<'a> {
    inventory: &'a mut Inventory,
    document: usize,
    /// The inventory's refusal, kept apart from JSON errors.
    failed: &'a mut Option<AuditError>,
}

impl<'de> DeserializeSeed<'de> for Document<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Document<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object or List")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = Map::new();
        let mut listed = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                listed = true;
                map.next_value_seed(Items {
                    inventory: &mut *self.inventory,
                    document: self.document,
                    failed: &mut *self.failed,
                })?;
            } else if listed {
                map.next_value::<IgnoredAny>()?;
            } else {
                fields.insert(key, map.next_value()?);
            }
        }
        if !listed && self.failed.is_none() {
            let at = format!("document {}", self.document);
            if let Err(e) = self.inventory.add(Value::Object(fields), &at) {
                *self.failed = Some(e);
            }
        }
        Ok(())
    }
}

struct Items<'a> {
    inventory: &'a mut Inventory,
    document: usize,
    failed: &'a mut Option<AuditError>,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an items array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut n = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            n += 1;
            if self.failed.is_some() {
                continue;
            }
            let at = format!("document {}, item {n}", self.document);
            if let Err(e) = self.inventory.add(item, &at) {
                *self.failed = Some(e);
            }
        }
        Ok(())
    }
}
