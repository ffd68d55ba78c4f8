//! Containers an injector adds whole stay typed until something reads them.
//! In the working set such a container is a placeholder that carries only
//! its name (all that name lookups need); reading or editing it turns it into
//! JSON first. One that nothing reads again is serialised once, straight into
//! the answer: turning a k8s-openapi `Container` into a JSON tree and writing
//! that out cost four times writing the container itself (the agent's:
//! 172,000 against 41,000 instructions, callgrind).

use k8s_openapi::api::core::v1::Container;
use serde_json::{Map, Value};

/// The placeholder's key. Nothing else in the working set can carry it: the
/// tree is built from the view, which keeps only fields the Pod schema names,
/// and from values we build.
const MARK: &str = "\u{0}kserve-injector-pending";

/// The containers held back, by placeholder number.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deferred(Vec<Option<Container>>);

impl Deferred {
    /// Keeps `container` and returns its placeholder and number.
    pub(crate) fn hold(&mut self, container: Container) -> (Value, usize) {
        let id = self.0.len();
        let mut placeholder = Map::new();
        placeholder.insert("name".into(), Value::from(container.name.as_str()));
        placeholder.insert(MARK.into(), Value::from(id));
        self.0.push(Some(container));
        (Value::Object(placeholder), id)
    }

    /// The container held under number `id`, until it is written out.
    pub(crate) fn container(&self, id: usize) -> Option<&Container> {
        self.0.get(id)?.as_ref()
    }

    fn id(value: &Value) -> Option<usize> {
        let map = value.as_object()?;
        if map.len() != 2 {
            return None;
        }
        usize::try_from(map.get(MARK)?.as_u64()?).ok()
    }

    /// The container `value` stands for, when it is a placeholder.
    pub fn get(&self, value: &Value) -> Option<&Container> {
        self.0.get(Self::id(value)?)?.as_ref()
    }

    /// Turns a placeholder into the container's JSON, for reading or editing.
    pub(crate) fn materialize(&mut self, value: &mut Value) {
        let Some(id) = Self::id(value) else {
            return;
        };
        if let Some(container) = self.0.get_mut(id).and_then(Option::take) {
            // k8s-openapi types serialise to JSON infallibly.
            *value = serde_json::to_value(&container).unwrap_or(Value::Null);
        }
    }

    /// Turns every placeholder inside `value` into JSON: for callers that
    /// apply the patch to a tree rather than write it out.
    pub fn resolve(&mut self, value: &mut Value) {
        if Self::id(value).is_some() {
            return self.materialize(value);
        }
        match value {
            Value::Array(items) => items.iter_mut().for_each(|v| self.resolve(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.resolve(v)),
            _ => {}
        }
    }
}
