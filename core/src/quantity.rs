//! Kubernetes `resource.Quantity` parsing and canonical formatting, reproducing
//! apimachinery's `ParseQuantity` followed by `Quantity.String()`.

use std::iter;

/// A resource quantity that is not one, in apimachinery's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

const DECIMAL_SUFFIXES: [(&str, i64); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// Indexed by power of 1024.
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// Go silently caps binary quantities at this magnitude.
const BINARY_MAX: u128 = i64::MAX as u128;

/// Parses like Go's resource.ParseQuantity and returns the canonical string that Go's Quantity.String() / JSON marshalling produces.
pub(crate) fn canonicalize(s: &str) -> Result<String, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let parts = split(s)?;
    let (format, exponent) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;
    match int64_fast_path(&parts, format, exponent) {
        // Go caches the input as the quantity's string when it looks canonical,
        // so String() returns it verbatim (including a "+" or leading zeros).
        Some(true) => return Ok(s.to_owned()),
        Some(false) => {}
        None if !parts.value.bytes().any(|b| b.is_ascii_digit()) => {
            return Err(QuantityError::Numeric)
        }
        None => {}
    }
    let mut d = Decimal::new(&parts, format, exponent);
    d.round_up_to_nano();
    d.strip_trailing_zeros();
    if format == Format::BinarySI {
        d.cap_binary();
    }
    Ok(d.into_canonical(format))
}

/// Orders two quantities by value, as apimachinery's `Quantity.Cmp` does
/// (`1Gi` > `1G`, `0.5` == `500m`); an unparsable one is its parse error.
pub(crate) fn compare(a: &str, b: &str) -> Result<std::cmp::Ordering, QuantityError> {
    Ok(exact(a)?.cmp_value(&exact(b)?))
}

/// The exact value Go keeps for `s` (rounded to nano, binary capped).
fn exact(s: &str) -> Result<Decimal, QuantityError> {
    canonicalize(s)?;
    let parts = split(s)?;
    let (format, exponent) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;
    let mut d = Decimal::new(&parts, format, exponent);
    d.round_up_to_nano();
    d.strip_trailing_zeros();
    if format == Format::BinarySI {
        d.cap_binary();
    }
    Ok(d)
}

/// The pieces Go's `parseQuantityString` extracts.
struct Parts<'a> {
    negative: bool,
    /// Sign and number as written, fed to inf.Dec on Go's slow path.
    value: &'a str,
    /// Integer digits without leading zeros, "0" when there are none.
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let digits_end =
        |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let negative = b[0] == b'-';
    let mut pos = usize::from(matches!(b[0], b'-' | b'+'));
    pos += b[pos..].iter().take_while(|&&c| c == b'0').count();
    if pos == b.len() {
        return Ok(Parts {
            negative,
            value: "0",
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let num_start = pos;
    pos = digits_end(pos);
    let num = match &s[num_start..pos] {
        "" => "0",
        num => num,
    };
    let mut denom = "";
    if b.get(pos) == Some(&b'.') {
        let denom_start = pos + 1;
        pos = digits_end(denom_start);
        denom = &s[denom_start..pos];
    }
    let value = &s[..pos];
    let suffix = &s[pos..];
    pos += b[pos..]
        .iter()
        .take_while(|c| b"eEinumkKMGTP".contains(c))
        .count();
    if matches!(b.get(pos), Some(b'+' | b'-')) {
        pos += 1;
    }
    if digits_end(pos) != b.len() {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        negative,
        value,
        num,
        denom,
        suffix,
    })
}

fn interpret(suffix: &str) -> Option<(Format, i64)> {
    if let Some(&(_, exp)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((Format::DecimalSI, exp));
    }
    if let Some(power) = BINARY_SUFFIXES[1..].iter().position(|s| *s == suffix) {
        return Some((Format::BinarySI, 10 * (power as i64 + 1)));
    }
    let rest = suffix.strip_prefix(['e', 'E']).filter(|r| !r.is_empty())?;
    // Go narrows the parsed int64 exponent to int32, wrapping out-of-range values.
    let exp = rest.parse::<i64>().ok()? as i32;
    Some((Format::DecimalExponent, i64::from(exp)))
}

/// Replays Go's int64 fast path: `None` when Go falls back to inf.Dec (the only
/// path that can fail with ErrNumeric), otherwise whether Go keeps the input text.
fn int64_fast_path(p: &Parts, format: Format, exponent: i64) -> Option<bool> {
    let (precision, scale) = match format {
        Format::BinarySI if p.denom.is_empty() => (14 - p.num.len() as i64 - exponent * 3 / 10, 0),
        Format::BinarySI => return None,
        _ => (
            18 - (p.num.len() + p.denom.len()) as i64,
            exponent - p.denom.len() as i64,
        ),
    };
    if precision < 0 || scale < -9 {
        return None;
    }
    let shifted = [p.num, p.denom].concat();
    let value: i64 = shifted.parse().ok()?;
    Some(match format {
        Format::BinarySI => {
            value.checked_mul(1 << exponent)?;
            value & 7 != 0
        }
        _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
    })
}

/// Exact value `±digits × 10^exp`, digits most significant first, no leading zeros
/// (empty means zero).
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exp: i64,
}

impl Decimal {
    fn new(p: &Parts, format: Format, exponent: i64) -> Self {
        let digits = p.num.bytes().chain(p.denom.bytes()).map(|c| c - b'0');
        let mut d = Decimal {
            negative: p.negative,
            digits: digits.skip_while(|&d| d == 0).collect(),
            exp: -(p.denom.len() as i64),
        };
        if format == Format::BinarySI {
            for _ in 0..exponent / 10 {
                d.mul_small(1024);
            }
        } else {
            d.exp += exponent;
        }
        d
    }

    fn mul_small(&mut self, factor: u32) {
        let mut carry = 0;
        for d in self.digits.iter_mut().rev() {
            let v = u32::from(*d) * factor + carry;
            *d = (v % 10) as u8;
            carry = v / 10;
        }
        while carry > 0 {
            self.digits.insert(0, (carry % 10) as u8);
            carry /= 10;
        }
    }

    /// Value order; expects stripped trailing zeros (no leading ones by construction).
    fn cmp_value(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let sign = |d: &Self| match (d.digits.is_empty(), d.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        };
        match sign(self).cmp(&sign(other)) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
        let magnitude = |d: &Self| d.digits.len() as i64 + d.exp;
        let by_size = magnitude(self)
            .cmp(&magnitude(other))
            .then_with(|| self.digits.cmp(&other.digits));
        if sign(self) < 0 {
            by_size.reverse()
        } else {
            by_size
        }
    }

    /// Go keeps nano precision and rounds anything finer away from zero.
    fn round_up_to_nano(&mut self) {
        if self.exp >= -9 {
            return;
        }
        let cut =
            usize::try_from(-9 - self.exp).map_or(self.digits.len(), |c| c.min(self.digits.len()));
        let keep = self.digits.len() - cut;
        let inexact = self.digits[keep..].iter().any(|&d| d != 0);
        self.digits.truncate(keep);
        self.exp = -9;
        if inexact {
            match self.digits.iter().rposition(|&d| d != 9) {
                Some(i) => {
                    self.digits[i] += 1;
                    self.digits[i + 1..].fill(0);
                }
                None => {
                    self.digits.fill(0);
                    self.digits.insert(0, 1);
                }
            }
        }
    }

    fn strip_trailing_zeros(&mut self) {
        while self.digits.last() == Some(&0) {
            self.digits.pop();
            self.exp += 1;
        }
    }

    /// The integer part, or `None` if it does not fit in a u128.
    fn integer_part(&self) -> Option<u128> {
        let len = usize::try_from(self.digits.len() as i64 + self.exp).unwrap_or(0);
        (len <= 38).then(|| {
            let digits = self.digits.iter().copied().chain(iter::repeat(0)).take(len);
            digits.fold(0, |acc, d| acc * 10 + u128::from(d))
        })
    }

    /// Expects stripped trailing zeros, so a negative exponent means a fraction.
    fn cap_binary(&mut self) {
        let over = self
            .integer_part()
            .is_none_or(|i| i > BINARY_MAX || (i == BINARY_MAX && self.exp < 0));
        if over {
            self.digits = BINARY_MAX.to_string().bytes().map(|c| c - b'0').collect();
            self.exp = 0;
        }
    }

    /// Expects stripped trailing zeros.
    fn into_canonical(mut self, format: Format) -> String {
        if self.digits.is_empty() {
            return "0".to_owned();
        }
        let sign = if self.negative { "-" } else { "" };
        // Binary output needs an integer of at least 1024; anything else is shown as DecimalSI.
        if format == Format::BinarySI && self.exp >= 0 {
            if let Some(mut v) = self.integer_part().filter(|&v| v >= 1024) {
                let mut power = 0;
                while v % 1024 == 0 && power + 1 < BINARY_SUFFIXES.len() {
                    v /= 1024;
                    power += 1;
                }
                return format!("{sign}{v}{}", BINARY_SUFFIXES[power]);
            }
        }
        let pad = self.exp.rem_euclid(3);
        self.digits.extend(iter::repeat_n(0, pad as usize));
        self.exp -= pad;
        let mantissa: String = self.digits.iter().map(|&d| char::from(b'0' + d)).collect();
        let si = DECIMAL_SUFFIXES.iter().find(|(_, e)| *e == self.exp);
        let suffix = match (format, si) {
            (Format::DecimalExponent, _) if self.exp == 0 => String::new(),
            // DecimalSI has no suffix beyond "E", so Go falls back to exponent notation.
            (Format::DecimalExponent, _) | (_, None) => format!("e{}", self.exp),
            (_, Some((s, _))) => (*s).to_owned(),
        };
        format!("{sign}{mantissa}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(cases: &[(&str, &str)]) {
        for (input, want) in cases {
            assert_eq!(canonicalize(input).as_deref(), Ok(*want), "input {input:?}");
        }
    }

    #[test]
    fn canonical_forms() {
        check(&[
            ("1", "1"),
            ("100m", "100m"),
            ("1Gi", "1Gi"),
            ("200Mi", "200Mi"),
            ("0.1", "100m"),
            ("1000Mi", "1000Mi"),
            ("1024Mi", "1Gi"),
            ("0.5Gi", "512Mi"),
            ("1.5Gi", "1536Mi"),
            ("10m", "10m"),
            ("15Mi", "15Mi"),
            ("500M", "500M"),
            ("1e3", "1e3"),
            ("0", "0"),
            ("-1", "-1"),
            ("1n", "1n"),
            ("0.0000000001", "1n"),
            ("1000m", "1"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("12e3", "12e3"),
            ("1.5e3", "1500"),
            ("2048Ki", "2Mi"),
            ("1000M", "1G"),
            ("1080000000n", "1080m"),
            ("1.08", "1080m"),
            ("0.001T", "1G"),
            ("1Ki", "1Ki"),
            ("1025Ki", "1025Ki"),
            ("8Ki", "8Ki"),
            ("300Mi", "300Mi"),
            ("307200Ki", "300Mi"),
            ("1025024Mi", "1001Gi"),
            ("4Pi", "4Pi"),
            ("3Ei", "3Ei"),
            ("12E", "12E"),
            ("1.2e3", "1200"),
            ("1.3E+6", "1300e3"),
            ("0.5e-2", "5e-3"),
            (".001e12", "1e9"),
            ("0.001e0", "1e-3"),
            ("00", "0"),
            ("0.0", "0"),
            ("0Mi", "0"),
            ("-0", "0"),
            ("-0.5", "-500m"),
            ("-1024Mi", "-1Gi"),
            ("-1.5Gi", "-1536Mi"),
        ]);
    }

    #[test]
    fn rounding_and_caps() {
        check(&[
            ("3.001n", "4n"),
            ("1.1E-9", "2e-9"),
            ("1000e-12", "1e-9"),
            ("0.00000012345", "124n"),
            ("0.00000000050", "1n"),
            ("0.9999999999", "1"),
            ("-0.0000000001", "-1n"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            (".000000000001Ki", "2n"),
            ("0.5Ki", "512"),
            ("1.1Ki", "1126400m"),
            ("9Ei", "9223372036854775807"),
            ("-9Ei", "-9223372036854775807"),
            ("9223372036854775807Ki", "9223372036854775807"),
            ("18446744073709551616", "18446744073709551616"),
            ("1000E", "1e21"),
            ("5000000E", "5e24"),
            ("1e1000", "10e999"),
        ]);
    }

    /// Go returns the input verbatim when its fast path deems it canonical, and
    /// its scanner accepts a few degenerate numbers.
    #[test]
    fn go_quirks() {
        check(&[
            ("+1", "+1"),
            ("01", "01"),
            ("1.", "1."),
            ("1.G", "1.G"),
            ("1.250", "1.250"),
            ("100.035k", "100.035k"),
            ("+15Mi", "+15Mi"),
            ("1E-3", "1E-3"),
            ("1e4294967296", "1e4294967296"),
            ("+", "0"),
            ("-", "0"),
            (".", "0"),
            ("k", "0"),
            ("Ki", "0"),
        ]);
    }

    #[test]
    fn errors() {
        use QuantityError::*;
        for (input, want) in [
            ("", FormatWrong),
            ("abc", FormatWrong),
            ("200MC", FormatWrong),
            ("1Q", FormatWrong),
            ("1.2.3", FormatWrong),
            ("1.1.M", FormatWrong),
            ("1+1.0M", FormatWrong),
            (" 1", FormatWrong),
            ("1 ", FormatWrong),
            ("1é", FormatWrong),
            ("1i", Suffix),
            ("0.1mi", Suffix),
            (".5i", Suffix),
            ("-3.01e-", Suffix),
            ("1e", Suffix),
            ("1K", Suffix),
            ("1e99999999999999999999", Suffix),
            ("Ei", Numeric),
            ("-Pi", Numeric),
            (".e-10", Numeric),
        ] {
            assert_eq!(canonicalize(input), Err(want), "input {input:?}");
        }
    }

    #[test]
    fn compares_by_value() {
        use std::cmp::Ordering::*;
        for (a, b, want) in [
            ("1Gi", "1G", Greater),
            ("500m", "0.5", Equal),
            ("1", "1000m", Equal),
            ("100Mi", "1Gi", Less),
            ("2", "1999m", Greater),
            ("0", "-0", Equal),
            ("-1", "0", Less),
            ("-2", "-1", Less),
            ("1e3", "1k", Equal),
            ("1.5Gi", "1536Mi", Equal),
            ("1n", "0", Greater),
            ("16Gi", "16G", Greater),
            ("10", "9", Greater),
        ] {
            assert_eq!(compare(a, b), Ok(want), "{a} vs {b}");
            assert_eq!(compare(b, a), Ok(want.reverse()), "{b} vs {a}");
        }
        assert_eq!(compare("1Q", "1"), Err(QuantityError::FormatWrong));
        assert_eq!(compare("1", ""), Err(QuantityError::FormatWrong));
    }

    #[test]
    fn never_panics_and_is_idempotent() {
        const ALPHABET: &[u8] = b"0159.+-eEinumkKMGTPQ ";
        let mut inputs: Vec<String> = vec![
            "1e2147483647".into(),
            "1e-2147483648".into(),
            "1.5e-2147483648".into(),
            "9".repeat(200) + "Ei",
            "0.".to_owned() + &"0".repeat(200) + "1Ki",
            "9".repeat(40) + ".9e-20",
            "é".into(),
            "1\u{2028}".into(),
        ];
        for len in 1..=4u32 {
            for mut n in 0..ALPHABET.len().pow(len) {
                let mut s = String::new();
                for _ in 0..len {
                    s.push(char::from(ALPHABET[n % ALPHABET.len()]));
                    n /= ALPHABET.len();
                }
                inputs.push(s);
            }
        }
        for input in &inputs {
            if let Ok(out) = canonicalize(input) {
                assert_eq!(canonicalize(&out).as_ref(), Ok(&out), "input {input:?}");
            }
        }
    }
}
