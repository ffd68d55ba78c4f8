//! Reads a JSON object the way Go's `encoding/json` fills a struct: keys match
//! field names case-insensitively, unknown keys are ignored, `null` leaves the
//! zero value, and a later key wins over an earlier one that folds to the same name.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

use super::ConfigError;

/// Go's `map[string]string`.
type StringMap = BTreeMap<String, String>;

pub(crate) struct Fields<'a> {
    section: &'a str,
    by_lower: BTreeMap<String, &'a Value>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(section: &'a str, value: &'a Value) -> Result<Self, ConfigError> {
        match value {
            Value::Object(map) => Ok(Self::from_map(section, map)),
            Value::Null => Ok(Self::from_map(section, empty_map())),
            other => Err(ConfigError::Type {
                section: section.to_string(),
                field: String::new(),
                expected: "object",
                found: kind_of(other),
            }),
        }
    }

    fn from_map(section: &'a str, map: &'a Map<String, Value>) -> Self {
        let by_lower = map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        Self { section, by_lower }
    }

    fn get(&self, field: &str) -> Option<&'a Value> {
        self.by_lower.get(&field.to_ascii_lowercase()).copied()
    }

    fn type_error(&self, field: &str, expected: &'static str, found: &Value) -> ConfigError {
        ConfigError::Type {
            section: self.section.to_string(),
            field: field.to_string(),
            expected,
            found: kind_of(found),
        }
    }

    pub(crate) fn string(&self, field: &str) -> Result<String, ConfigError> {
        match self.get(field) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.type_error(field, "string", other)),
        }
    }

    pub(crate) fn boolean(&self, field: &str) -> Result<bool, ConfigError> {
        match self.get(field) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(self.type_error(field, "boolean", other)),
        }
    }

    pub(crate) fn integer(&self, field: &str) -> Result<Option<i64>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v @ Value::Number(n)) => n
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.type_error(field, "integer", v)),
            Some(other) => Err(self.type_error(field, "integer", other)),
        }
    }

    pub(crate) fn object(&self, field: &str) -> Result<Option<Fields<'a>>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Self::from_map(self.section, map))),
            Some(other) => Err(self.type_error(field, "object", other)),
        }
    }

    /// A `map[string]string`: its keys are data, so they keep their case.
    pub(crate) fn string_map(&self, field: &str) -> Result<Option<StringMap>, ConfigError> {
        let Some(value) = self.get(field) else {
            return Ok(None);
        };
        let Value::Object(map) = value else {
            return Err(self.type_error(field, "object of strings", value));
        };
        map.iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(self.type_error(field, "object of strings", other)),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}

fn empty_map() -> &'static Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(Map::new)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_match_case_insensitively_and_last_wins() {
        let v = json!({"Image": "a", "CPUREQUEST": "1", "image": "b", "other": 3});
        let f = Fields::new("s", &v).unwrap();
        assert_eq!(f.string("image").unwrap(), "b");
        assert_eq!(f.string("cpuRequest").unwrap(), "1");
        assert_eq!(f.string("missing").unwrap(), "");
    }

    #[test]
    fn wrong_types_name_the_field() {
        let v = json!({"enableModelcar": "yes"});
        let err = Fields::new("storageInitializer", &v)
            .unwrap()
            .boolean("enableModelcar")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid \"storageInitializer\" configuration: field \"enableModelcar\" must be a boolean, found a string"
        );
    }

    #[test]
    fn null_is_the_zero_value() {
        let v = json!({"uidModelcar": null, "image": null});
        let f = Fields::new("s", &v).unwrap();
        assert_eq!(f.integer("uidModelcar").unwrap(), None);
        assert_eq!(f.string("image").unwrap(), "");
    }

    #[test]
    fn string_maps_keep_key_case() {
        let v = json!({"Parameters": {"Type": "s3"}});
        let f = Fields::new("logger", &v).unwrap();
        let m = f.string_map("parameters").unwrap().unwrap();
        assert_eq!(m.get("Type").map(String::as_str), Some("s3"));
    }
}
