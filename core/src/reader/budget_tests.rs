//! The budget: charged as values are produced, aliases each time they are
//! used, the source text as it is read; the same for YAML and JSON.

use super::*;
use serde_json::json;
use std::io::{BufReader, Cursor, Read};

fn read_within(text: &[u8], budget: Budget) -> Result<Vec<Value>, ReadError> {
    let mut input = Cursor::new(text.to_vec());
    let docs = documents_within(&mut input, budget)?.collect();
    docs
}

fn small(bytes: u64) -> Budget {
    Budget {
        document_bytes: bytes,
        ..Budget::default()
    }
}

/// A byte source of `len` bytes made by `byte(i)`, counting what was taken
/// from it: the reader's memory cannot exceed what it read.
struct Endless<F> {
    len: u64,
    at: u64,
    byte: F,
}

impl<F: Fn(u64) -> u8> Read for Endless<F> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = (out.len() as u64).min(self.len - self.at) as usize;
        for (i, b) in out[..n].iter_mut().enumerate() {
            *b = (self.byte)(self.at + i as u64);
        }
        self.at += n as u64;
        Ok(n)
    }
}

/// Reads a `len`-byte input whose first bytes are `head` and the rest
/// `fill`; gives the error and how many bytes were taken.
fn read_endless(head: &'static [u8], fill: u8, len: u64, budget: Budget) -> (String, u64) {
    let source = Endless {
        len,
        at: 0,
        byte: move |i| head.get(i as usize).copied().unwrap_or(fill),
    };
    let mut input = BufReader::with_capacity(1 << 16, source);
    let err = documents_within(&mut input, budget)
        .unwrap()
        .find_map(Result::err)
        .expect("over budget")
        .to_string();
    (err, input.get_ref().at)
}

#[test]
fn an_alias_to_a_large_scalar_is_charged_each_time_it_is_used() {
    // One 64 KiB scalar, then 20,000 aliases to it: 125 KB of YAML that
    // expands to 1.3 GB of text.
    let mut text = format!("kind: Pod\nbig: &b {}\nlist:\n", "x".repeat(64 << 10));
    text.push_str(&"- *b\n".repeat(20_000));
    let err = read_within(text.as_bytes(), Budget::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("document 1: not valid YAML or JSON: more than 64 MiB of text in one document (an alias counts each time it is used) at line "),
        "{err}"
    );
    // Within a budget that holds the expansion, the same shape reads.
    let fits = format!("big: &b {}\nlist: [*b, *b, *b]\n", "x".repeat(1000));
    let docs = read_within(fits.as_bytes(), small(4100)).unwrap();
    assert_eq!(docs[0]["list"][2].as_str().map(str::len), Some(1000));
    let over = read_within(fits.as_bytes(), small(3900)).unwrap_err();
    assert!(
        over.to_string().contains("more than 3900 bytes of text"),
        "{over}"
    );
}

#[test]
fn an_alias_to_a_collection_charges_its_nodes_and_its_text() {
    let text = "a: &a {k: vvvvvvvvvv}\nb: [*a, *a, *a, *a]\n";
    let budget = |nodes, bytes| Budget {
        document_nodes: nodes,
        document_bytes: bytes,
        ..Budget::default()
    };
    // The root, two keys, the anchored mapping (itself, a key, a value),
    // a sequence, then four aliases of three nodes each (the mapping's own
    // node included: a fuzz find).
    assert!(read_within(text.as_bytes(), budget(19, 1000)).is_ok());
    let err = read_within(text.as_bytes(), budget(18, 1000)).unwrap_err();
    assert!(err.to_string().contains("more than 18 nodes"), "{err}");
    // Keys and values: "a", "b", "k" + 5 × 11.
    assert!(read_within(text.as_bytes(), budget(100, 200)).is_ok());
    let err = read_within(text.as_bytes(), budget(100, 50)).unwrap_err();
    assert!(err.to_string().contains("more than 50 bytes"), "{err}");
}

#[test]
fn a_document_over_budget_stops_being_read_at_the_budget() {
    const LIMIT: u64 = 1 << 20;
    const LEN: u64 = 64 << 20;
    // One long line, a literal block, one JSON string: each a single
    // document of 64 MiB, read no further than the budget and a buffer.
    let cases: [(&str, &'static [u8], u8); 4] = [
        ("plain", b"kind: Pod\nx: ", b'a'),
        ("literal block", b"kind: Pod\nx: |\n  ", b'a'),
        ("json string", b"{\"kind\": \"Pod\", \"x\": \"", b'a'),
        ("json array", b"{\"kind\": \"Pod\", \"x\": [0", b' '),
    ];
    for (name, head, fill) in cases {
        let (err, taken) = read_endless(head, fill, LEN, small(LIMIT));
        assert!(
            err.contains("more than 1 MiB of text in one document"),
            "{name}: {err}"
        );
        assert!(taken <= LIMIT + (128 << 10), "{name}: read {taken} bytes");
    }
}

#[test]
fn a_json_array_of_millions_is_refused_by_the_node_budget_as_it_is_read() {
    let budget = Budget {
        document_nodes: 1000,
        ..Budget::default()
    };
    let mut text = String::from("{\"kind\": \"Pod\", \"unknown\": [");
    text.push_str(&"0,".repeat(5000));
    text.push_str("0]}");
    let err = read_within(text.as_bytes(), budget)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "document 1: not valid JSON: more than 1000 nodes in one document at line 1 column "
        ),
        "{err}"
    );
}

#[test]
fn each_document_has_its_own_budget_and_the_input_one_for_all() {
    let doc = format!("a: {}\n", "x".repeat(600));
    let three = format!("{doc}---\n{doc}---\n{doc}");
    assert_eq!(read_within(three.as_bytes(), small(1000)).unwrap().len(), 3);
    let input = Budget {
        input_bytes: 1500,
        ..Budget::default()
    };
    let err = read_within(three.as_bytes(), input)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "document 3: not valid YAML or JSON: more than 1500 bytes of text in the input"
        ),
        "{err}"
    );
    let json_doc = format!("{{\"a\": \"{}\"}}\n", "x".repeat(600));
    let json = json_doc.repeat(3);
    assert_eq!(read_within(json.as_bytes(), small(1000)).unwrap().len(), 3);
    let err = read_within(json.as_bytes(), input).unwrap_err().to_string();
    assert!(
        err.starts_with("document 3: not valid JSON: more than 1500 bytes of text in the input"),
        "{err}"
    );
}

#[test]
fn json_nests_as_deep_as_yaml() {
    let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert_eq!(
        read_within(ok.as_bytes(), Budget::default()).unwrap().len(),
        1
    );
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    let err = read_within(deep.as_bytes(), Budget::default()).unwrap_err();
    assert!(
        // serde_json places it just after the bracket that went too deep.
        err.to_string()
            .contains("nested deeper than 64 levels at line 1 column 66"),
        "{err}"
    );
}

#[test]
fn invalid_utf8_is_reported_where_it_is() {
    let yaml = b"kind: Pod\nmetadata:\n  name: caf\xe9\n";
    let err = read_within(yaml, Budget::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "document 1: not valid YAML or JSON: the input is not valid UTF-8 at line 3 column 12"
    );
    // Past the first buffer, and in the second document.
    let mut long = b"a: 1\n---\n".to_vec();
    long.extend(std::iter::repeat_n(b'#', 100_000));
    long.extend(b"\nb: \xff\n");
    let mut input = BufReader::with_capacity(4096, Cursor::new(long));
    let err = documents_within(&mut input, Budget::default())
        .unwrap()
        .find_map(Result::err)
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "document 2: not valid YAML or JSON: the input is not valid UTF-8 at line 4 column 4"
    );
    let json = b"{\"kind\": \"Pod\",\n \"name\": \"caf\xe9\"}";
    let err = read_within(json, Budget::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("at line 2 column 14"), "{err}");
}

#[test]
fn values_within_budget_read_as_before() {
    let text = "{\"a\": [1.50, true, null, {}, -0], \"b\": {\"c\": \"d\"}}";
    let docs = read_within(text.as_bytes(), Budget::default()).unwrap();
    let want: Value = serde_json::from_str(text).unwrap();
    assert_eq!(docs, [want]);
    assert_eq!(docs[0]["a"][0].to_string(), "1.50");
    assert_eq!(docs[0]["a"][4].to_string(), "-0");
    assert_eq!(docs[0]["b"], json!({"c": "d"}));
}

#[test]
fn a_document_is_charged_from_its_first_character_not_from_where_its_start_is_reported() {
    // The scanner reads past `---` before the parser reports the document's
    // start; those characters stay charged, so a scalar is cut where the
    // document reaches its budget (1024 bytes) and the buffer holding it,
    // which grows by doubling, never doubles past the budget.
    let cases = [
        ("--- |\n", "document 1", 2, 1024 - 6 + 1),
        ("a: 1\n--- |\n", "document 2", 3, 1024 - 6 + 1),
        ("kind: Pod\nx: |\n  ", "document 1", 3, 1024 - 17 + 2 + 1),
    ];
    for (head, document, line, column) in cases {
        let text = format!("{head}{}", "a".repeat(4096));
        let err = read_within(text.as_bytes(), small(1024))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!("{document}: not valid YAML or JSON: more than 1024 bytes of text in one document at line {line} column {column}"),
            "{head:?}"
        );
    }
    // JSON: the first byte, read to tell whether a value follows, counts
    // too; serde_json places the error after the last byte it was given.
    let text = format!("{{\"x\": \"{}\"}}", "a".repeat(4096));
    let err = read_within(text.as_bytes(), small(1024))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "document 1: not valid JSON: more than 1024 bytes of text in one document at line 1 column 1024"
    );
}

#[test]
fn anchors_nested_in_anchored_nodes_are_charged_what_they_expand_to() {
    // `a1` holds `b1`, `e`, `a2` and `b2`, and `b2` an alias of `e`: 15
    // nodes (see below), placed twice: the root, two keys and 2 × 15.
    let text = "a: &a1 {k: &b1 {v: &e [p, q], w: &a2 {k: &b2 {v: *e}}}}\nb: *a1\n";
    let budget = |nodes| Budget {
        document_nodes: nodes,
        ..Budget::default()
    };
    let docs = read_within(text.as_bytes(), budget(33)).unwrap();
    let inner = json!({"k": {"v": ["p", "q"], "w": {"k": {"v": ["p", "q"]}}}});
    assert_eq!(docs, [json!({"a": inner, "b": inner})]);
    let err = read_within(text.as_bytes(), budget(32)).unwrap_err();
    assert!(err.to_string().contains("more than 32 nodes"), "{err}");
}

#[test]
fn an_alias_is_refused_where_it_would_nest_past_the_depth_budget() {
    let shallow = Budget {
        depth: 8,
        ..Budget::default()
    };
    // `d` is 4 levels high: placed 4 levels deep it reaches 8, 5 deep 9.
    let fits = "a: &d [[[[1]]]]\nb: [[[*d]]]\n";
    let docs = read_within(fits.as_bytes(), shallow).unwrap();
    assert_eq!(docs[0]["b"], json!([[[[[[[1]]]]]]]));
    let over = "a: &d [[[[1]]]]\nb: [[[[*d]]]]\n";
    let err = read_within(over.as_bytes(), shallow)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "document 1: not valid YAML or JSON: nested deeper than 8 levels at line 2 column 8"
    );
    // A merge places the source's entries, one level less than the source.
    let merged = "a: &m {x: [[[1]]]}\nb: [[[{<<: *m}]]]\n";
    assert!(read_within(merged.as_bytes(), shallow).is_ok());
    let merged = "a: &m {x: [[[1]]]}\nb: [[[[{<<: *m}]]]]\n";
    let err = read_within(merged.as_bytes(), shallow).unwrap_err();
    assert!(
        err.to_string().contains("nested deeper than 8 levels"),
        "{err}"
    );
    // A chain of aliases, each a little deeper than the last, is refused
    // where it crosses the budget rather than built 100,000 levels deep.
    let mut chain = String::from("l0: &d0 [[[0]]]\n");
    for i in 1..2000 {
        chain.push_str(&format!("l{i}: &d{i} [[[*d{}]]]\n", i - 1));
    }
    let err = read_within(chain.as_bytes(), Budget::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("nested deeper than 64 levels at line 22 column 14"),
        "{err}"
    );
}

#[test]
fn a_redefined_anchor_and_merges_through_aliases_read_as_yaml_says() {
    let text = "a: &a 1\nb: {k: *a}\nc: &a {k: 2}\nd: *a\nbase: &m {x: &x {deep: [1, 2]}}\nm: {<<: [*m, {z: 3}], n: *x}\n";
    let docs = read_within(text.as_bytes(), Budget::default()).unwrap();
    assert_eq!(
        docs,
        [json!({
            "a": 1,
            "b": {"k": 1},
            "c": {"k": 2},
            "d": {"k": 2},
            "base": {"x": {"deep": [1, 2]}},
            "m": {"x": {"deep": [1, 2]}, "n": {"deep": [1, 2]}, "z": 3},
        })]
    );
}
