//! JSON text as Go's `encoding/json` `Marshal` writes it, byte for byte,
//! for the values KServe's mutator (v0.15.0 to HEAD) marshals into what it
//! injects: [`probe`] (`InjectAgent`'s readiness probe), [`string_map`]
//! (the storage spec's override parameters, `CreateStorageSpecSecretEnvs`)
//! and [`container`] (the two containers a ClusterStorageContainer merge
//! marshals). Hand-written because no crate writes Go's field order, its
//! `omitempty` tags for core/v1 or its HTML-safe escapes. The tags are
//! written once, in `tags`, for the probe and the container; the escapes
//! and the integers are [`super`]'s, shared with the serde_json writer, so
//! each rule of the two encoders is written once.

use std::collections::BTreeMap;

pub(crate) mod container;
pub(crate) mod probe;
mod tags;

/// Appends `text` as `encoding/json` quotes a string with `Marshal`'s
/// HTML escaping on (`appendString`): serde_json's escapes, and besides
/// `<`, `>` and `&` as `\u003c`, `\u003e`, `\u0026`, and U+2028 and
/// U+2029 as `\u2028`, `\u2029`. Go's `\ufffd` for invalid UTF-8 cannot
/// arise from a `&str`.
pub(crate) fn write_str(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    let mut start = 0;
    for (i, c) in text.char_indices() {
        let escaped = match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => true,
            c => c.is_ascii() && super::ESCAPED[c as usize],
        };
        if escaped {
            out.push_str(&text[start..i]);
            super::write_escape(out, c);
            start = i + c.len_utf8();
        }
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// The text `Marshal` gives a non-nil `map[string]string`: its keys sorted
/// by their bytes, which is a `BTreeMap`'s order.
pub(crate) fn string_map(m: &BTreeMap<String, String>) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in m.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(&mut out, key);
        out.push(':');
        write_str(&mut out, value);
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quote(text: &str) -> String {
        let mut out = String::new();
        write_str(&mut out, text);
        out
    }

    #[test]
    fn string_map_sorts_keys_and_escapes_html() {
        let m: BTreeMap<String, String> =
            [("type", "s3"), ("bucket", "a&b"), ("Z", ""), ("<k>", "v")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert_eq!(
            string_map(&m),
            r#"{"\u003ck\u003e":"v","Z":"","bucket":"a\u0026b","type":"s3"}"#
        );
        assert_eq!(string_map(&BTreeMap::new()), "{}");
    }

    #[test]
    fn string_escaping() {
        assert_eq!(
            quote("\"\\\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}<>&\u{2028}\u{2029}é😀/"),
            "\"\\\"\\\\\\n\\r\\t\\b\\f\\u0000\\u001f\u{7f}\\u003c\\u003e\\u0026\\u2028\\u2029é😀/\""
        );
        assert_eq!(quote("plain"), "\"plain\"");
        assert_eq!(quote("a<b"), "\"a\\u003cb\"");
    }

    /// Go's escapes are serde_json's and five more, so the escapes both
    /// write are written once (`super::write_escape`).
    #[test]
    fn go_escapes_what_serde_json_escapes_and_five_more() {
        for c in (0u8..=0x7f)
            .map(char::from)
            .chain(['\u{2028}', '\u{2029}', 'é'])
        {
            let text = format!("a{c}b");
            let serde = serde_json::to_string(&text).unwrap();
            let go = quote(&text);
            match c {
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                    assert_eq!(go, format!("\"a\\u{:04x}b\"", u32::from(c)));
                }
                _ => assert_eq!(go, serde, "{c:?}"),
            }
        }
    }
}
