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
fn any_number_of_comments_before_a_collection_entry_is_read() {
    // granit-parser buffers at most 96 comment events before an entry when
    // it emits them; the reader has them skipped instead.
    let comments: String = (0..500).map(|i| format!("# comment {i}\n")).collect();
    let text = format!(
        "metadata:\n  labels:\n{comments}    a: b\nspec:\n  containers:\n{comments}  - name: c\n"
    );
    let docs = read(&text).unwrap();
    assert_eq!(
        docs,
        [json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}})]
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

fn texts(doc: &Value) -> Vec<String> {
    doc["a"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| match v {
            Value::String(s) => format!("str:{s}"),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn yaml_numbers_keep_their_text() {
    let docs =
        read("a: [1e9, 1.50, 6.02E23, 18446744073709551617, -18446744073709551617, 0.5, 12, -3]\n")
            .unwrap();
    assert_eq!(
        texts(&docs[0]),
        [
            "1e9",
            "1.50",
            "6.02E23",
            "18446744073709551617",
            "-18446744073709551617",
            "0.5",
            "12",
            "-3"
        ]
    );
    // What the writers print is that text.
    let yaml = to_yaml(&docs[0]).unwrap();
    assert_eq!(
        yaml,
        "a:\n- 1e9\n- 1.50\n- 6.02E23\n- 18446744073709551617\n- -18446744073709551617\n- 0.5\n- 12\n- -3\n"
    );
    assert_eq!(
        serde_json::to_string(&docs[0]).unwrap(),
        r#"{"a":[1e9,1.50,6.02E23,18446744073709551617,-18446744073709551617,0.5,12,-3]}"#
    );
    assert_eq!(read(&yaml).unwrap(), docs);
}

#[test]
fn negative_zero_keeps_its_sign_through_both_readers_and_the_yaml_writer() {
    // Found by the reader fuzz target: JSON `-0` was written as YAML `-0`,
    // which read back as `0`.
    for text in [r#"{"a": [-0, -0.0, 0]}"#, "a: [-0, -0.0, 0]\n"] {
        let docs = read(text).unwrap();
        assert_eq!(texts(&docs[0]), ["-0", "-0.0", "0"], "{text}");
        assert_eq!(read(&to_yaml(&docs[0]).unwrap()).unwrap(), docs, "{text}");
    }
}

#[test]
fn yaml_only_number_spellings_become_the_decimal_kubectl_sends() {
    // go-yaml v2: strconv.ParseInt(text without "_", 0, 64), else its float form.
    let docs =
        read("a: [0644, 0x1F, 0o17, 0b101, +5, 1_000, -0x10, .5, 1., +1.5e3, 08]\n").unwrap();
    assert_eq!(
        texts(&docs[0]),
        ["420", "31", "15", "5", "5", "1000", "-16", "0.5", "1.0", "1500.0", "8.0"]
    );
}

#[test]
fn yaml_scalars_that_are_not_numbers_stay_strings() {
    let docs = read(
        "a: [0x, 1e, 1.2.3, .inf, -.Inf, .nan, 2001-01-01, 1:20, 0xFFFFFFFFFFFFFFFFFF, '12', \"1e9\", yEs, ~, null, Null, y, N, On]\n",
    )
    .unwrap();
    assert_eq!(
        texts(&docs[0]),
        [
            "str:0x",
            "str:1e",
            "str:1.2.3",
            "str:.inf",
            "str:-.Inf",
            "str:.nan",
            "str:2001-01-01",
            "str:1:20",
            "str:0xFFFFFFFFFFFFFFFFFF",
            "str:12",
            "str:1e9",
            "str:yEs",
            "null",
            "null",
            "null",
            "true",
            "false",
            "true"
        ]
    );
}

#[test]
fn yaml_core_tags_decide_the_type() {
    let docs = read("a: [!!str 12, !!int '12', !!float '1', !!bool 'yes', !!null '', !!binary aGVsbG8=, !custom 5]\n").unwrap();
    assert_eq!(
        texts(&docs[0]),
        ["str:12", "12", "1", "true", "null", "str:hello", "5"]
    );
    let err = read("a: !!int twelve\n").unwrap_err().to_string();
    assert!(err.contains("is not a valid !!int"), "{err}");
}

#[test]
fn yaml_merge_lists_aliases_and_duplicates() {
    let text = "a: &a {x: 1, y: 1}\nb: &b {y: 2, z: 2}\nc:\n  <<: [*a, *b]\n  x: 0\nd: *a\n";
    let docs = read(text).unwrap();
    assert_eq!(docs[0]["c"], json!({"x": 0, "y": 1, "z": 2}));
    assert_eq!(docs[0]["d"], json!({"x": 1, "y": 1}));
    let err = read("a: 1\na: 2\n").unwrap_err().to_string();
    assert!(err.contains("mapping key \"a\" already defined"), "{err}");
    let err = read("a: {<<: 5}\n").unwrap_err().to_string();
    assert!(err.contains("merge key needs a mapping"), "{err}");
    let err = read("? [a]\n: 1\n").unwrap_err().to_string();
    assert!(err.contains("a mapping key must be a scalar"), "{err}");
}

#[test]
fn an_alias_bomb_is_refused_by_the_node_budget() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        text.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
    }
    let started = std::time::Instant::now();
    let err = read(&text).unwrap_err().to_string();
    assert!(err.contains("more than 1000000 nodes"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn yaml_that_is_not_utf8_is_refused_and_a_character_split_across_reads_is_not() {
    let err = read_bytes(b"a: \xff\xfe\n").unwrap_err().to_string();
    assert!(err.contains("not valid UTF-8"), "{err}");
    // One byte at a time: every multi-byte character is split across reads.
    let text = "a: \"é😀\u{2028}\"\n".as_bytes().to_vec();
    let mut input = std::io::BufReader::with_capacity(1, Cursor::new(text));
    let docs: Result<Vec<_>, _> = documents(&mut input).unwrap().collect();
    assert_eq!(docs.unwrap(), [json!({"a": "é😀\u{2028}"})]);
}

fn read_bytes(bytes: &[u8]) -> Result<Vec<Value>, ReadError> {
    let mut input = Cursor::new(bytes.to_vec());
    let docs = documents(&mut input)?.collect();
    docs
}

#[test]
fn json_numbers_keep_their_digits_and_serde_json_spells_the_exponent() {
    let docs = read(r#"{"a": [1.50, 18446744073709551617, -0.000001, 1E9, 2e-3]}"#).unwrap();
    assert_eq!(
        texts(&docs[0]),
        ["1.50", "18446744073709551617", "-0.000001", "1e+9", "2e-3"]
    );
}

#[test]
fn a_duplicate_json_key_is_refused_as_in_yaml() {
    let err = read("{\"a\": 1, \"b\": {\"c\": 1, \"c\": 2}}")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "document 1: not valid JSON: mapping key \"c\" already defined at line 1 column 27"
    );
    let err = read("{\"a\": 1}\n{\"a\": 1, \"a\": 1}")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("document 2: not valid JSON: mapping key \"a\" already defined"),
        "{err}"
    );
    // The same key in two mappings is no duplicate.
    assert!(read("{\"a\": {\"k\": 1}, \"b\": {\"k\": 1}}").is_ok());
}
