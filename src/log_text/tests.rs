use super::*;

/// A `Display` that writes its text in pieces of `piece` bytes (or the
/// characters around them), as a formatted error does.
struct Pieces<'a> {
    text: &'a str,
    piece: usize,
}

impl Display for Pieces<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.text;
        while !rest.is_empty() {
            let at = ceil_boundary(rest, self.piece.min(rest.len()));
            f.write_str(&rest[..at])?;
            rest = &rest[at..];
        }
        Ok(())
    }
}

/// The head, the number of bytes cut and the tail of a cut text.
fn parts(shown: &str) -> (&str, usize, &str) {
    let (head, rest) = shown.split_once("…[").expect("a marker");
    let (count, tail) = rest.split_once(" bytes cut]…").expect("a marker's end");
    (head, count.parse().expect("a count"), tail)
}

#[test]
fn text_up_to_the_bound_is_kept_whole() {
    for len in [0, 1, HEAD - 1, HEAD, HEAD + 1, MAX - 1, MAX] {
        let text = "a".repeat(len);
        assert_eq!(bounded(&text).to_string(), text, "{len} bytes");
    }
}

#[test]
fn a_long_text_keeps_its_head_and_tail_and_says_how_much_was_cut() {
    let text = format!(
        "annotation x: \"{}\" is not a security profile",
        "y".repeat(250_000)
    );
    let shown = bounded(&text).to_string();
    let (head, cut, tail) = parts(&shown);
    assert_eq!(head.len(), HEAD);
    assert_eq!(tail.len(), TAIL);
    assert!(text.starts_with(head) && text.ends_with(tail));
    assert!(tail.ends_with("\" is not a security profile"));
    assert_eq!(head.len() + cut + tail.len(), text.len());
    assert!(shown.len() < MAX + 40, "{} bytes shown", shown.len());
}

#[test]
fn one_byte_over_the_bound_is_cut() {
    let text = "b".repeat(MAX + 1);
    let shown = bounded(&text).to_string();
    let (head, cut, tail) = parts(&shown);
    assert_eq!((head.len(), cut, tail.len()), (HEAD, 1, TAIL));
}

#[test]
fn multi_byte_characters_are_never_split_at_either_cut() {
    // 1-, 2-, 3- and 4-byte characters, at every offset against HEAD and
    // the tail's start, written whole or in pieces of every small size.
    for unit in ["é", "€", "𝄞", "aé", "a€", "ab𝄞"] {
        for pad in 0..4 {
            let text = format!("{}{}", "p".repeat(pad), unit.repeat(3 * MAX / unit.len()));
            for piece in [1, 2, 3, 5, 7, 64, usize::MAX] {
                let shown = bounded(Pieces { text: &text, piece }).to_string();
                let (head, cut, tail) = parts(&shown);
                assert!(text.starts_with(head), "{unit:?} pad {pad} piece {piece}");
                assert!(text.ends_with(tail), "{unit:?} pad {pad} piece {piece}");
                assert!(head.len() <= HEAD && head.len() + 4 > HEAD);
                assert!(tail.len() <= TAIL && tail.len() + 4 > TAIL);
                assert_eq!(head.len() + cut + tail.len(), text.len());
            }
        }
    }
}

#[test]
fn a_value_written_in_pieces_is_cut_like_the_same_text_whole() {
    let text: String = (0..5_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let whole = bounded(&text).to_string();
    for piece in [1, 3, 100, HEAD, HEAD + 1, 4 * TAIL + 1] {
        assert_eq!(bounded(Pieces { text: &text, piece }).to_string(), whole);
    }
}

#[test]
fn a_text_just_over_the_head_in_multi_byte_characters_is_whole() {
    // The head closes a byte or two early on a character that does not
    // fit; the rest still fits within MAX and is shown whole.
    let text = format!("{}{}", "a".repeat(HEAD - 1), "€".repeat(50));
    assert!(text.len() <= MAX);
    assert_eq!(bounded(&text).to_string(), text);
}

fn escaped(text: &str) -> String {
    let mut out = String::new();
    escaped::write_escaped(&mut out, text).expect("a String takes any text");
    out
}

#[test]
fn line_breaks_and_control_characters_are_escaped_in_text_logs() {
    assert_eq!(escaped("plain text, a\ttab"), "plain text, a\ttab");
    assert_eq!(escaped("a\nb\r\nc"), "a\\nb\\r\\nc");
    assert_eq!(escaped("\u{1b}[31mred\u{7f}"), "\\u{1b}[31mred\\u{7f}");
    assert_eq!(
        escaped("é\u{2028}ü\u{2029}\u{85}"),
        "é\\u{2028}ü\\u{2029}\\u{85}"
    );
    assert_eq!(escaped("\n"), "\\n");
}

/// A subscriber as `--log-format text` builds it: one event is one line,
/// whatever its fields and its span's fields hold.
#[test]
fn an_event_with_a_line_break_in_its_fields_is_one_line() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .expect("not poisoned")
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .fmt_fields(EscapedFields::default())
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("review", pod = %"web\nFORGED span");
        let _in = span.enter();
        tracing::info!(reason = %bounded("bad\nFORGED event"), "admission reviewed\nFORGED message");
    });
    let text = String::from_utf8(lines.0.lock().expect("not poisoned").clone()).expect("UTF-8");
    assert_eq!(text.lines().count(), 1, "{text}");
    for part in [
        "web\\nFORGED span",
        "bad\\nFORGED event",
        "reviewed\\nFORGED message",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
}
