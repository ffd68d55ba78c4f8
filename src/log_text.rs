//! Adapter: text from a request or a file, bounded before it is logged or
//! written to stderr. Anyone who reaches the webhook port chooses what a
//! review holds (a 250,000-character annotation quoted whole in a denial),
//! and a ConfigMap or certificate file can be megabytes; copied whole, one
//! such string makes a log line as large as the input, at every summary.
//!
//! [`bounded`] keeps the first `HEAD` and the last `TAIL` bytes, cut at
//! character boundaries, and puts a marker saying how many bytes were left
//! out between them: the end of a message (`… is not a modelcar mode`) is
//! often what explains it. It formats through a writer that keeps only
//! those bytes, so a value's full text is never built for the log.

use std::fmt::{self, Display, Write};

mod escaped;
pub(crate) use escaped::EscapedFields;

/// The most bytes of one string a log line (or a CLI message on stderr)
/// carries, marker aside: its first [`HEAD`] and its last [`TAIL`].
const MAX: usize = HEAD + TAIL;
/// Bytes kept from the start of a cut string.
const HEAD: usize = 768;
/// Bytes kept from the end of a cut string.
const TAIL: usize = 256;

/// `value`'s text as it may be logged: whole when it is at most 1,024
/// bytes; else its first 768 and last 256 bytes around `…[N bytes cut]…`,
/// never splitting a character.
pub fn bounded<T: Display>(value: T) -> Bounded<T> {
    Bounded(value)
}

/// What [`bounded`] returns: a `Display`, for `tracing`'s `%` fields and
/// format strings alike.
pub struct Bounded<T>(T);

impl<T: Display> Display for Bounded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kept = Keep::default();
        // `Keep` never fails; an error here is the value's own.
        write!(kept, "{}", self.0)?;
        kept.finish(f)
    }
}

/// Receives a value's text piece by piece, keeping the head and a window
/// over the end.
#[derive(Default)]
struct Keep {
    head: String,
    /// Set once a byte did not fit in the head: every later byte goes to
    /// the tail, so the head stays a prefix of the text.
    head_closed: bool,
    /// The last bytes seen after the head, at least `TAIL` of them once
    /// there are that many; cut to at most `TAIL` at the end.
    tail: String,
    /// Bytes seen after the head, in all.
    after_head: usize,
}

impl Write for Keep {
    fn write_str(&mut self, mut s: &str) -> fmt::Result {
        if !self.head_closed {
            let room = HEAD - self.head.len();
            if s.len() <= room {
                self.head.push_str(s);
                return Ok(());
            }
            let take = floor_boundary(s, room);
            self.head.push_str(&s[..take]);
            s = &s[take..];
            self.head_closed = true;
        }
        self.after_head += s.len();
        self.tail.push_str(s);
        if self.tail.len() > 4 * TAIL {
            let keep_from = floor_boundary(&self.tail, self.tail.len() - TAIL);
            self.tail.drain(..keep_from);
        }
        Ok(())
    }
}

impl Keep {
    fn finish(self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.head)?;
        // Within MAX, the tail is all the rest: the head holds at least
        // HEAD - 3 bytes once closed, so the rest is under the 4 * TAIL at
        // which the tail is first trimmed.
        if self.head.len() + self.after_head <= MAX {
            return f.write_str(&self.tail);
        }
        let start = ceil_boundary(&self.tail, self.tail.len().saturating_sub(TAIL));
        let tail = &self.tail[start..];
        let cut = self.after_head - tail.len();
        write!(f, "…[{cut} bytes cut]…")?;
        f.write_str(tail)
    }
}

/// The largest character boundary of `s` at or below `at`.
fn floor_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary of `s` at or above `at`.
fn ceil_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// An error and its sources, each once, joined by ": " (hyper's and
/// kube's texts leave the cause, such as "Connection refused", to the
/// sources). A source whose text its parent already ends with is skipped.
pub(crate) fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let part = cause.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;
