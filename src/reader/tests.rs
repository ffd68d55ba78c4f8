use super::*;
use serde_json::json;
use std::io::Cursor;

fn read(text: &str) -> Result<Vec<Value>, ReadError> {
    let mut input = Cursor::new(text.as_bytes().to_vec());
    let docs = documents(&mut input)?.collect();
    docs
}

#[test]
fn json_is_read_as_json_surrogate_pairs_and_line_separators_included() {
    let text = "\n  {\"a\": \"\\ud83d\\ude00\", \"b\": \"x\u{2028}y\", \"c\": \"\\u2029\"}";
    let docs = read(text).unwrap();
    assert_eq!(
        docs,
        [json!({"a": "😀", "b": "x\u{2028}y", "c": "\u{2029}"})]
    );
}

#[test]
fn a_json_stream_is_several_documents_and_nulls_are_skipped() {
    let docs = read("{\"a\":1}\nnull\n{\"b\":2} [3]").unwrap();
    assert_eq!(docs, [json!({"a": 1}), json!({"b": 2}), json!([3])]);
}

#[test]
fn sniff_skips_blanks_and_a_byte_order_mark() {
    let mut input = Cursor::new(b"\xEF\xBB\xBF \n\t{}".to_vec());
    assert_eq!(sniff(&mut input).unwrap(), Syntax::Json);
    let mut input = Cursor::new(b"# comment\n{}".to_vec());
    assert_eq!(sniff(&mut input).unwrap(), Syntax::Yaml);
    let mut input = Cursor::new(Vec::new());
    assert_eq!(sniff(&mut input).unwrap(), Syntax::Yaml);
}

#[test]
fn yaml_merge_keys_are_expanded() {
    let text = "base: &c {name: kserve-container, image: x}\nspec:\n  containers:\n  - <<: *c\n    image: y2\n";
    let docs = read(text).unwrap();
    assert_eq!(
        docs[0]["spec"]["containers"][0],
        json!({"name": "kserve-container", "image": "y2"})
    );
}

#[test]
fn yaml_scalars_resolve_as_kubectl_reads_them() {
    let docs = read("a: yes\nb: off\nc: true\nd: 0644\ne: ~\nf: '0644'\ng: 12\nh: 1.5\n").unwrap();
    assert_eq!(
        docs,
        [
            json!({"a": true, "b": false, "c": true, "d": 420, "e": null, "f": "0644", "g": 12, "h": 1.5})
        ]
    );
}

#[test]
fn multi_document_yaml_skips_empty_documents_and_numbers_errors() {
    let docs = read("---\n---\na: 1\n---\n~\n---\nb: 2\n").unwrap();
    assert_eq!(docs, [json!({"a": 1}), json!({"b": 2})]);
    let err = read("a: 1\n---\nb: [\n").unwrap_err().to_string();
    assert!(
        err.starts_with("document 2: not valid YAML or JSON"),
        "{err}"
    );
    let err = read("{\"a\": 1}\n{\"b\": }").unwrap_err().to_string();
    assert!(err.starts_with("document 2: not valid JSON"), "{err}");
}

fn refused_as_too_deep(text: &str) {
    let err = read(text).unwrap_err().to_string();
    assert!(err.starts_with("document 1: not valid"), "{err}");
}

#[test]
fn deep_yaml_flow_nesting_is_refused() {
    refused_as_too_deep(&format!("a: {}", "[".repeat(100_000)));
    refused_as_too_deep(&format!("a: {}", "{a: ".repeat(100_000)));
}

#[test]
fn deep_yaml_block_nesting_is_refused() {
    let lines: String = (1..=MAX_DEPTH + 1)
        .map(|i| format!("{}k:\n", " ".repeat(i)))
        .collect();
    refused_as_too_deep(&format!("a:\n{lines}"));
}

#[test]
fn deep_json_nesting_is_refused() {
    refused_as_too_deep(&"[".repeat(100_000));
    refused_as_too_deep(&"{\"a\":".repeat(100_000));
}

#[test]
fn nesting_up_to_the_limit_is_read() {
    let depth = MAX_DEPTH - 1;
    let ok = format!("a: {}1{}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    assert!(read(&ok).is_ok());
}

#[test]
fn yaml_output_reads_back_as_the_same_value_in_yaml_1_1_and_1_2() {
    let value = json!({
        "strings": ["yes", "no", "on", "off", "y", "n", "true", "null", "~", "0755", "1e3",
                    "0x1F", "+1", ".5", "2001-01-01", "", " lead", "trail ", "a: b", "- x",
                    "#c", "x\u{2028}y", "😀", "multi\nline\n", "tab\there", "*ref", "&a", "!tag", "%x", "@x", "`x"],
        "numbers": [0, -1, 1.5, 1e300, 18446744073709551615u64],
        "flags": [true, false, null],
        "empty": {}, "none": []
    });
    let text = to_yaml(&value).unwrap();
    assert_eq!(read(&text).unwrap(), [value], "{text}");
    // YAML 1.1 readers (kubectl) take unquoted yes/on/y as booleans.
    for word in ["yes", "no", "on", "off", "y", "n"] {
        assert!(
            !text.lines().any(|l| l.trim_end() == format!("- {word}")),
            "{word} unquoted in\n{text}"
        );
    }
}

#[test]
fn strings_with_unicode_space_at_an_end_read_back_as_strings() {
    // Found by the `reader` fuzz target: written plain, "\u{2002}8" read
    // back as the number 8.
    let tricky = [
        "\u{2002}8",
        "8\u{2002}",
        "\u{a0}8",
        "\u{3000}1.5",
        "\u{2002}true",
        "x\u{85}",
    ];
    let value = json!({"strings": tricky, "key\u{2002}": tricky[0]});
    let text = to_yaml(&value).unwrap();
    assert_eq!(read(&text).unwrap(), std::slice::from_ref(&value), "{text}");
    let mut streamed = Vec::new();
    write_yaml(&mut streamed, &value).unwrap();
    assert_eq!(String::from_utf8(streamed).unwrap(), text);
    // Strings without such edges keep serde-saphyr's own style.
    assert_eq!(
        to_yaml(&json!(["8", " 8"])).unwrap(),
        to_yaml_plain(&json!(["8", " 8"]))
    );
}

fn to_yaml_plain(value: &serde_json::Value) -> String {
    serde_saphyr::to_string(value).unwrap()
}
