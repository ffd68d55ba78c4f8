//! `audit --objects`: a dump (`kubectl get pods,rs,deploy,... -A -o yaml`
//! or `-o json`) read object by object into the inventory. A JSON List is
//! read one item at a time, so a dump of ten thousand pods is never held
//! as one tree, and each item is a document of its own for the reader's
//! budget; YAML is read a document at a time (see `reader`'s budget), its
//! Lists then split.

use crate::audit::AuditError;
use crate::audit::Inventory;
use kserve_injector_core::reader::{self, Budget, JsonDocuments, Meter, Syntax, ValueSeed};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use std::io::BufRead;
use std::rc::Rc;

/// Why a dump could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DumpError {
    #[error(transparent)]
    Read(#[from] reader::ReadError),
    #[error("document {document}: not valid JSON: {message}")]
    Json { document: usize, message: String },
    #[error(transparent)]
    Object(#[from] AuditError),
    #[error("cannot read input: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads every object of `input` into `inventory`, within `budget`.
pub(crate) fn read_into(
    input: &mut impl BufRead,
    inventory: &mut Inventory,
    budget: Budget,
) -> Result<(), DumpError> {
    match reader::sniff(input)? {
        Syntax::Json => read_json(input, inventory, budget),
        Syntax::Yaml => {
            for (i, doc) in reader::documents_within(input, budget)?.enumerate() {
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

fn read_json(
    input: &mut impl BufRead,
    inventory: &mut Inventory,
    budget: Budget,
) -> Result<(), DumpError> {
    let meter = Rc::new(Meter::new(budget));
    let mut docs = JsonDocuments::new(input, meter.clone());
    let mut document = 0;
    let json_error = |e, document| match reader::json_error(e, &meter).at(document) {
        reader::ReadError::Json { document, message } => DumpError::Json { document, message },
        other => other.into(),
    };
    while docs.more().map_err(|e| json_error(e, document + 1))? {
        document += 1;
        // `more` read the document's first byte.
        meter.start_document_with(1);
        let mut failed = None;
        let seed = Document {
            inventory: &mut *inventory,
            document,
            failed: &mut failed,
            meter: &meter,
        };
        let read = docs.next_with(seed);
        if let Some(e) = failed {
            return Err(e.into());
        }
        read.map_err(|e| json_error(e, document))?;
    }
    Ok(())
}

/// One top-level JSON value: a List's items go to the inventory as they
/// are read, any other object whole.
struct Document<'a> {
    inventory: &'a mut Inventory,
    document: usize,
    /// The inventory's refusal, kept apart from JSON errors.
    failed: &'a mut Option<AuditError>,
    meter: &'a Meter,
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
                    meter: self.meter,
                })?;
            } else if listed {
                map.next_value::<IgnoredAny>()?;
            } else {
                self.meter
                    .text(key.len())
                    .and_then(|()| self.meter.nodes(1))
                    .map_err(serde::de::Error::custom)?;
                fields.insert(
                    key,
                    map.next_value_seed(ValueSeed::at_depth(self.meter, 1))?,
                );
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
    meter: &'a Meter,
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
        loop {
            // Each item is read within a document's budget of its own.
            self.meter.start_document();
            let Some(item) = seq.next_element_seed(ValueSeed::at_depth(self.meter, 2))? else {
                break;
            };
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
