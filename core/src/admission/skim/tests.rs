//! The skim against `serde_json`: whatever it accepts, `serde_json` accepts
//! with the same values; what `serde_json` accepts as a pod's text, it
//! accepts too (else every review would take the slow path).

use super::*;
use proptest::prelude::*;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

fn skim<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, Error> {
    let mut de = Skim::new(text);
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// The property: the skim never accepts what `serde_json` refuses, and
/// decodes what it accepts as `serde_json` does.
fn agrees(text: &str) {
    if skim::<IgnoredAny>(text).is_ok() {
        assert!(
            serde_json::from_str::<IgnoredAny>(text).is_ok(),
            "skipped what serde_json refuses: {text:?}"
        );
    }
    if let Ok(value) = skim::<Value>(text) {
        assert_eq!(
            serde_json::from_str::<Value>(text).ok(),
            Some(value),
            "decoded otherwise: {text:?}"
        );
    }
}

#[test]
fn refuses_what_json_refuses() {
    for text in [
        "",
        " ",
        "{",
        "}",
        "[",
        "]",
        "{,}",
        "[,]",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\"}",
        "{\"a\":}",
        "{a:1}",
        "{\"a\" 1}",
        "[1 2]",
        "{\"a\":1 \"b\":2}",
        "tru",
        "nul",
        "falsy",
        "-",
        "01",
        "-01",
        "1.",
        ".5",
        "1e",
        "1e+",
        "+1",
        "0x1",
        "\"a",
        "\"\\x\"",
        "\"\\u12g4\"",
        "\"\\u123\"",
        "\"a\u{1}b\"",
        "\"\t\"",
        "1 2",
        "{} {}",
        "[]]",
        "{\"a\":1}}",
        "[\"a\\\"]",
        "\u{a0}1",
    ] {
        assert!(skim::<IgnoredAny>(text).is_err(), "skipped {text:?}");
        assert!(skim::<Value>(text).is_err(), "decoded {text:?}");
        assert!(
            serde_json::from_str::<IgnoredAny>(text).is_err(),
            "{text:?}"
        );
    }
}

#[test]
fn accepts_what_json_accepts() {
    for text in [
        "0",
        "-0",
        "1.5e-3",
        "12E+4",
        "-12.25",
        "true",
        "false",
        "null",
        "\"\"",
        "\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\tz\"",
        "\"\\u00e9\\uD83D\\uDE00\"",
        "\"é 💡\"",
        " { \"a\" : [ 1 , { } , [ ] , \"x\" ] , \"b\" : null }\n\t\r",
        "[[[[]]]]",
        "{\"a\":{\"b\":{\"c\":[1,2,{\"d\":\"e\"}]}}}",
        "\"0123456789abcdef\\\"0123456789\"",
    ] {
        skim::<IgnoredAny>(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let value: Value = skim(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(
            value,
            serde_json::from_str::<Value>(text).unwrap(),
            "{text:?}"
        );
    }
}

/// Skipping has no depth limit, as `serde_json`'s does not; decoding stops
/// at `MAX_DEPTH`, below `serde_json`'s 128, so the plain path decides.
#[test]
fn depth() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    for n in [1, 63, 64, 65, 127, 128, 129, 200, 5000] {
        skim::<IgnoredAny>(&deep(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    }
    let objects = |n: usize| format!("{}1{}", "{\"k\":".repeat(n), "}".repeat(n));
    skim::<IgnoredAny>(&objects(3000)).unwrap();
    assert!(skim::<Value>(&deep(MAX_DEPTH)).is_ok());
    assert!(skim::<Value>(&deep(MAX_DEPTH + 1)).is_err());
    // A mismatched bracket past a group of 64 levels is still found.
    let wrong = format!("{}{}", "[".repeat(70), "]".repeat(69) + "}");
    assert!(skim::<IgnoredAny>(&wrong).is_err());
    let mixed = format!("{}{}1{}{}", "{\"k\":".repeat(65), "[", "]", "}".repeat(65));
    skim::<IgnoredAny>(&mixed).unwrap();
    let swapped = format!("{}{}1{}{}", "{\"k\":".repeat(65), "[", "}", "]".repeat(65));
    assert!(skim::<IgnoredAny>(&swapped).is_err());
}

/// Strings read borrow the text when they hold no escape, as `serde_json`'s
/// do, and are decoded by `serde_json` when they do.
#[test]
fn strings_borrow_where_they_can() {
    #[derive(Deserialize)]
    struct Two<'a> {
        #[serde(borrow)]
        plain: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        escaped: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        raw: &'a serde_json::value::RawValue,
    }
    let text =
        r#"{"plain":"abc","skipped":{"x":[1,"\u0041"]},"escaped":"a\nb","raw":{"k": [1, 2]}}"#;
    let two: Two = skim(text).unwrap();
    assert!(matches!(two.plain, std::borrow::Cow::Borrowed("abc")));
    assert_eq!(two.escaped, "a\nb");
    assert_eq!(two.raw.get(), r#"{"k": [1, 2]}"#);
}

/// A derived struct refuses a duplicate field it reads, as with
/// `serde_json`; one it skips may repeat.
#[test]
fn duplicates_and_types_are_the_visitors_to_judge() {
    #[derive(Deserialize, Debug, PartialEq)]
    struct One {
        a: Option<u32>,
    }
    assert!(skim::<One>(r#"{"a":1,"a":2}"#).is_err());
    assert_eq!(
        skim::<One>(r#"{"b":1,"b":2,"a":3}"#).unwrap(),
        One { a: Some(3) }
    );
    assert_eq!(skim::<One>(r#"{"a":null}"#).unwrap(), One { a: None });
    assert_eq!(skim::<One>(r#"[7]"#).unwrap(), One { a: Some(7) });
    assert!(skim::<One>(r#"{"a":"1"}"#).is_err());
    assert!(skim::<One>(r#"{"a":-1}"#).is_err());
    assert!(skim::<One>(r#"{"a":1.0}"#).is_err());
}

/// The texts a pod's review holds, made of JSON's tokens and some bytes
/// that are not: most are not JSON, some are.
fn tokens() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{"),
        Just("}"),
        Just("["),
        Just("]"),
        Just(","),
        Just(":"),
        Just("\""),
        Just("\"k\""),
        Just("\"\\u00e9\""),
        Just("\\"),
        Just("\\u"),
        Just("1"),
        Just("-"),
        Just("0"),
        Just("."),
        Just("e"),
        Just("+"),
        Just("true"),
        Just("null"),
        Just("f"),
        Just(" "),
        Just("\n"),
        Just("\u{1}"),
        Just("é"),
        Just("x"),
        Just("\"a\":"),
        Just("{\"a\":"),
        Just("[1,"),
    ];
    proptest::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

/// JSON values, pretty or compact, so that acceptance is checked too.
fn values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        "[a-z\"\\\\\n\u{e9}\u{1f4a1}]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z:\"]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn token_soup_agrees(text in tokens()) {
        agrees(&text);
    }

    #[test]
    fn json_is_accepted_and_mutations_agree(value in values(), pretty in any::<bool>(), at in any::<usize>(), byte in any::<u8>()) {
        let text = match pretty {
            true => serde_json::to_string_pretty(&value).unwrap(),
            false => serde_json::to_string(&value).unwrap(),
        };
        prop_assert!(skim::<IgnoredAny>(&text).is_ok(), "{}", text);
        prop_assert_eq!(skim::<Value>(&text).unwrap(), value);
        // One byte changed (kept UTF-8, as the body is by then).
        let mut bytes = text.into_bytes();
        if !bytes.is_empty() {
            let i = at % bytes.len();
            bytes[i] = byte;
            if let Ok(mutated) = std::str::from_utf8(&bytes) {
                agrees(mutated);
            }
        }
    }
}
