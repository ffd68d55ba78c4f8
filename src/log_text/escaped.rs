//! Text logs (`--log-format text`, the offline commands' `RUST_LOG` log)
//! one event per line, whatever a request or a file put in a field. JSON
//! logs escape line breaks themselves; tracing's text formatter writes a
//! field's `Display` as it comes, so a pod name or a denial quoting an
//! annotation with `\n` in it would start a line of its own that a reader
//! (or a log pipeline splitting on lines) takes for another event, and an
//! ESC would reach the terminal.

use std::fmt::{self, Write};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};
use tracing_subscriber::fmt::FormatFields;

/// tracing's own text fields, then line breaks, Unicode's line and
/// paragraph separators and every other control character but tab written
/// as escapes (`\n`, `\r`, `\u{1b}`). For `SubscriberBuilder::fmt_fields`:
/// an event's message and fields and its spans' fields all pass here.
#[derive(Default)]
pub(crate) struct EscapedFields(DefaultFields);

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut text = String::new();
        self.0.format_fields(Writer::new(&mut text), fields)?;
        write_escaped(&mut writer, &text)
    }
}

fn breaks_a_line(c: char) -> bool {
    (c.is_control() && c != '\t') || c == '\u{2028}' || c == '\u{2029}'
}

/// `text` into `out`, each character [`breaks_a_line`] picks as an escape.
pub(super) fn write_escaped(out: &mut impl Write, text: &str) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(breaks_a_line) {
        out.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        match c {
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            c => write!(out, "\\u{{{:x}}}", u32::from(c))?,
        }
        rest = &rest[at + c.len_utf8()..];
    }
    out.write_str(rest)
}
