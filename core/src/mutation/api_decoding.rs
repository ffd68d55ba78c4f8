//! What the API server does to a pod before any webhook sees it that the
//! CLI, reading the user's file, must do itself: a number where the Pod
//! schema has a `Quantity` (`cpu: 2`, `memory: 1e9`) is accepted, as
//! apimachinery's `Quantity.UnmarshalJSON` accepts it, and read as its text.
//!
//! Only the copy the injectors read is changed; the document the CLI prints
//! keeps the number as written.

use serde_json::Value;
use std::borrow::Cow;

/// Every place a Pod's metadata and spec (or a pod template's) hold a
/// `Quantity`, `*` standing for any list index or map key.
const QUANTITY_PATHS: &[&[&str]] = &[
    &["spec", "overhead", "*"],
    &["spec", "resources", "limits", "*"],
    &["spec", "resources", "requests", "*"],
    &["spec", "volumes", "*", "emptyDir", "sizeLimit"],
    &[
        "spec",
        "volumes",
        "*",
        "ephemeral",
        "volumeClaimTemplate",
        "spec",
        "resources",
        "limits",
        "*",
    ],
    &[
        "spec",
        "volumes",
        "*",
        "ephemeral",
        "volumeClaimTemplate",
        "spec",
        "resources",
        "requests",
        "*",
    ],
    &[
        "spec",
        "volumes",
        "*",
        "downwardAPI",
        "items",
        "*",
        "resourceFieldRef",
        "divisor",
    ],
    &[
        "spec",
        "volumes",
        "*",
        "projected",
        "sources",
        "*",
        "downwardAPI",
        "items",
        "*",
        "resourceFieldRef",
        "divisor",
    ],
];

/// The same paths under each kind of container list.
const CONTAINER_QUANTITY_PATHS: &[&[&str]] = &[
    &["resources", "limits", "*"],
    &["resources", "requests", "*"],
    &["env", "*", "valueFrom", "resourceFieldRef", "divisor"],
];

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// `pod` as the API server would have decoded it: numbers at `Quantity`
/// places become strings holding their text. Borrowed when there are none
/// (the CLI's hostile-size pods are not copied).
pub(crate) fn quantities_as_text(pod: &Value) -> Cow<'_, Value> {
    let mut numbers = Vec::new();
    for path in QUANTITY_PATHS {
        find_numbers(pod, path, String::new(), &mut numbers);
    }
    for list in CONTAINER_LISTS {
        let containers = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for (i, container) in containers.into_iter().flatten().enumerate() {
            for path in CONTAINER_QUANTITY_PATHS {
                find_numbers(container, path, format!("/spec/{list}/{i}"), &mut numbers);
            }
        }
    }
    if numbers.is_empty() {
        return Cow::Borrowed(pod);
    }
    let mut copy = pod.clone();
    for pointer in numbers {
        if let Some(v) = copy.pointer_mut(&pointer) {
            *v = Value::String(v.to_string());
        }
    }
    Cow::Owned(copy)
}

/// The JSON pointers of the numbers at `path` below `value` (at `at`).
fn find_numbers(value: &Value, path: &[&str], at: String, found: &mut Vec<String>) {
    let Some((head, rest)) = path.split_first() else {
        if value.is_number() {
            found.push(at);
        }
        return;
    };
    let token = |key: &str| format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
    match (value, *head) {
        (Value::Array(items), "*") => {
            for (i, v) in items.iter().enumerate() {
                find_numbers(v, rest, format!("{at}/{i}"), found);
            }
        }
        (Value::Object(map), "*") => {
            for (k, v) in map {
                find_numbers(v, rest, token(k), found);
            }
        }
        (Value::Object(map), key) => {
            if let Some(v) = map.get(key) {
                find_numbers(v, rest, token(key), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_at_quantity_places_become_their_text() {
        let pod: Value = serde_json::from_str(
            r#"{"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 2, "memory": 1.50e9}},
                 "env": [{"name": "L", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": 1}}}],
                 "ports": [{"containerPort": 8080}]}],
               "overhead": {"cpu": 0.5},
               "volumes": [{"name": "v", "emptyDir": {"sizeLimit": 1073741824}}]}}"#,
        )
        .unwrap();
        let read = quantities_as_text(&pod);
        assert_eq!(
            read["spec"]["containers"][0]["resources"]["limits"],
            json!({"cpu": "2", "memory": "1.50e+9"})
        );
        assert_eq!(
            read["spec"]["containers"][0]["env"][0]["valueFrom"]["resourceFieldRef"]["divisor"],
            "1"
        );
        assert_eq!(read["spec"]["overhead"]["cpu"], "0.5");
        assert_eq!(
            read["spec"]["volumes"][0]["emptyDir"]["sizeLimit"],
            "1073741824"
        );
        let gpu =
            json!({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
        assert_eq!(
            quantities_as_text(&gpu)["spec"]["containers"][0]["resources"]["limits"]
                ["nvidia.com/gpu"],
            "1"
        );
        // Not a Quantity: left a number.
        assert_eq!(
            read["spec"]["containers"][0]["ports"][0]["containerPort"],
            8080
        );
    }

    #[test]
    fn a_pod_without_such_numbers_is_borrowed() {
        let pod = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "2"}}}]}});
        assert!(matches!(quantities_as_text(&pod), Cow::Borrowed(_)));
    }
}
