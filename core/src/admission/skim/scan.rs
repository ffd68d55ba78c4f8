//! The scan under [`Skim`](super::Skim): functions of the text and a
//! position that give the position after what they read, or `None` where
//! the text is not JSON. One loop with no error values inside it, which is
//! most of what makes skipping fast.

const ONE_BYTES: u64 = u64::MAX / 255;
const HIGH_BITS: u64 = ONE_BYTES << 7;

/// Past JSON's whitespace.
#[inline(always)]
pub(super) fn whitespace(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if c > b' ' || !matches!(c, b' ' | b'\n' | b'\t' | b'\r') {
            break;
        }
        i += 1;
    }
    i
}

/// Flags, in each byte's high bit, the bytes of `v` that are a quote, a
/// backslash or a control character; the lowest flag is exact (a borrow only
/// carries into higher bytes).
#[inline(always)]
fn specials(v: u64) -> u64 {
    let quote = v ^ (ONE_BYTES * u64::from(b'"'));
    let backslash = v ^ (ONE_BYTES * u64::from(b'\\'));
    ((v.wrapping_sub(ONE_BYTES * 0x20) & !v)
        | (quote.wrapping_sub(ONE_BYTES) & !quote)
        | (backslash.wrapping_sub(ONE_BYTES) & !backslash))
        & HIGH_BITS
}

/// From just after an opening quote to just after the closing one, checking
/// each escape and refusing control characters, as JSON does; whether the
/// string holds an escape. A `\u` takes four hex digits; a lone surrogate is
/// `serde_json`'s to judge where a string is read, as it does not judge one
/// in a string it skips.
#[inline(always)]
pub(super) fn string_end(b: &[u8], mut i: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        // Eight bytes at a time while none is special.
        while let Some(chunk) = b.get(i..i + 8) {
            let hits = specials(u64::from_le_bytes(chunk.try_into().ok()?));
            if hits != 0 {
                i += (hits.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        match *b.get(i)? {
            b'"' => return Some((i + 1, escaped)),
            b'\\' => {
                escaped = true;
                i = match *b.get(i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i + 2,
                    b'u' if b.get(i + 2..i + 6)?.iter().all(u8::is_ascii_hexdigit) => i + 6,
                    _ => return None,
                };
            }
            0..=0x1f => return None,
            // An ordinary byte among the last seven.
            _ => i += 1,
        }
    }
}

#[inline(always)]
fn digits_end(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// A number by JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)?
/// ([eE] [+-]? [0-9]+)?`.
fn number_end(b: &[u8], mut i: usize) -> Option<usize> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    i = match *b.get(i)? {
        b'0' => i + 1,
        b'1'..=b'9' => digits_end(b, i + 1),
        _ => return None,
    };
    if b.get(i) == Some(&b'.') {
        let end = digits_end(b, i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let end = digits_end(b, i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some(i)
}

pub(super) fn literal_end(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

/// A key and its colon, from the key's opening quote.
#[inline(always)]
fn key_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let (i, _) = string_end(b, i + 1)?;
    let i = whitespace(b, i);
    (b.get(i) == Some(&b':')).then_some(i + 1)
}

/// Skips one value, checking it is JSON, without recursion: the open
/// containers are a stack of bits (1 for an object), as deep as the text
/// makes it, as `serde_json` skips. The end, and the deepest nesting seen.
pub(super) fn skip_value(b: &[u8], mut i: usize) -> Option<(usize, usize)> {
    let mut stack: Vec<u64> = Vec::new();
    let mut top: u64 = 0;
    let mut depth = 0usize;
    let mut deepest = 0usize;
    'value: loop {
        i = whitespace(b, i);
        let c = *b.get(i)?;
        match c {
            b'"' => i = string_end(b, i + 1)?.0,
            b'{' | b'[' => {
                i = whitespace(b, i + 1);
                // `}` and `]` come two after `{` and `[` in ASCII.
                if b.get(i) == Some(&(c + 2)) {
                    i += 1;
                    deepest = deepest.max(depth + 1);
                } else {
                    if depth.is_multiple_of(64) && depth > 0 {
                        stack.push(top);
                        top = 0;
                    }
                    top = (top << 1) | u64::from(c == b'{');
                    depth += 1;
                    deepest = deepest.max(depth);
                    if c == b'{' {
                        i = key_end(b, i)?;
                    }
                    continue 'value;
                }
            }
            b'-' | b'0'..=b'9' => i = number_end(b, i)?,
            b't' => i = literal_end(b, i, b"true")?,
            b'f' => i = literal_end(b, i, b"false")?,
            b'n' => i = literal_end(b, i, b"null")?,
            _ => return None,
        }
        // After a value: a comma, or the end of open containers.
        loop {
            if depth == 0 {
                return Some((i, deepest));
            }
            i = whitespace(b, i);
            let c = *b.get(i)?;
            let object = top & 1 == 1;
            if c == b',' {
                i += 1;
                if object {
                    i = key_end(b, whitespace(b, i))?;
                }
                continue 'value;
            }
            if c != if object { b'}' } else { b']' } {
                return None;
            }
            i += 1;
            top >>= 1;
            depth -= 1;
            if depth.is_multiple_of(64) && depth > 0 {
                top = stack.pop()?;
            }
        }
    }
}
