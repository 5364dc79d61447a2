//! Parsing single fields from raw bytes, with errors that name the field and quote the value.

use std::borrow::Cow;

use mm_lake::RowError;

/// Quotes a raw value for an error message (lossy UTF-8, cut at 60 characters).
pub fn show(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    let mut out: String = s.chars().take(60).collect();
    if s.chars().count() > 60 {
        out.push('…');
    }
    format!("'{out}'")
}

/// A present, non-blank field: `None` for a missing or empty value.
#[inline]
pub fn present(raw: Option<&[u8]>) -> Option<&[u8]> {
    raw.filter(|b| !b.is_empty() && !b.iter().all(u8::is_ascii_whitespace))
}

/// Text of a string field; fails on invalid UTF-8.
#[inline]
pub fn text<'a>(field: &str, raw: &'a [u8]) -> Result<&'a str, RowError> {
    std::str::from_utf8(raw)
        .map(str::trim)
        .map_err(|_| RowError::field(field, "is not valid UTF-8"))
}

/// Optional string field.
#[inline]
pub fn opt_text<'a>(field: &str, raw: Option<&'a [u8]>) -> Result<Option<Cow<'a, str>>, RowError> {
    present(raw)
        .map(|b| text(field, b).map(Cow::Borrowed))
        .transpose()
}

/// Required string field.
#[inline]
pub fn req_text<'a>(field: &str, raw: Option<&'a [u8]>) -> Result<Cow<'a, str>, RowError> {
    opt_text(field, raw)?.ok_or_else(|| RowError::field(field, "missing required field"))
}

/// The value of 1 to 16 ASCII digits; `None` if any byte is not a digit or the length is out
/// of range. The last eight digits of a longer number are read at once (SWAR: three
/// multiplications instead of a chain of eight), the rest one by one. Epoch times have 10 or 13
/// digits, so this is most of their parsing.
#[inline]
pub fn digits(d: &[u8]) -> Option<u64> {
    if d.is_empty() || d.len() > 16 {
        return None;
    }
    let fold = |d: &[u8]| {
        d.iter().try_fold(0_u64, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
        })
    };
    match d.split_last_chunk::<8>() {
        Some((head, last)) => {
            Some(fold(head)? * 100_000_000 + eight_digits(u64::from_le_bytes(*last))?)
        }
        None => fold(d),
    }
}

/// Eight ASCII digits loaded little-endian (the first digit in the lowest byte) as one number.
#[inline]
fn eight_digits(x: u64) -> Option<u64> {
    const ZEROS: u64 = u64::from_le_bytes([b'0'; 8]);
    const HIGH_NIBBLES: u64 = u64::from_le_bytes([0xF0; 8]);
    const SIX: u64 = u64::from_le_bytes([6; 8]);
    // Every byte is 0x30..=0x3F, and adding 6 keeps it below 0x40 (no carry can cross a byte
    // once the first test holds): exactly the bytes '0'..='9'.
    if x & HIGH_NIBBLES != ZEROS || x.wrapping_add(SIX) & HIGH_NIBBLES != ZEROS {
        return None;
    }
    // Pairs, then groups of four, then all eight (as in simdjson's parse_eight_digits).
    let v = x - ZEROS;
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    const MUL1: u64 = 100 + (1_000_000 << 32);
    const MUL2: u64 = 1 + (10_000 << 32);
    let v = (v & MASK)
        .wrapping_mul(MUL1)
        .wrapping_add(((v >> 16) & MASK).wrapping_mul(MUL2))
        >> 32;
    Some(v)
}

/// Integer: plain digits with an optional sign (the fast path), or a float with no fractional
/// part such as `3.0` (what spreadsheets and pandas write for integer columns with gaps).
#[inline]
pub fn int(field: &str, raw: &[u8]) -> Result<i64, RowError> {
    let (neg, digits) = match raw {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, raw),
    };
    if let Some(v) = self::digits(digits) {
        // At most 16 digits: well inside i64.
        let v = v as i64;
        return Ok(if neg { -v } else { v });
    }
    let s = std::str::from_utf8(raw).map(str::trim).unwrap_or("");
    if let Ok(v) = s.parse::<i64>() {
        return Ok(v);
    }
    match s.parse::<f64>() {
        // Below 9e15 (under 2^53): every such integer is exact in an f64.
        Ok(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9e15 => Ok(f as i64),
        _ => Err(RowError::field(
            field,
            format!("{} is not an integer", show(raw)),
        )),
    }
}

#[inline]
pub fn opt_i32(field: &str, raw: Option<&[u8]>) -> Result<Option<i32>, RowError> {
    present(raw)
        .map(|b| {
            let v = int(field, b)?;
            i32::try_from(v).map_err(|_| RowError::field(field, format!("{v} is out of range")))
        })
        .transpose()
}

/// A number. Plain integers of up to 15 digits with an optional sign (the common case: scores
/// and counts) are converted directly: every such value is exactly representable, so the result
/// is the one `str::parse::<f64>` gives, signed zero included, at a fraction of the cost.
#[inline]
pub fn float(field: &str, raw: &[u8]) -> Result<f64, RowError> {
    let (neg, digits) = match raw {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, raw),
    };
    if digits.len() <= 15
        && let Some(v) = self::digits(digits)
    {
        let v = v as f64; // below 10^15 < 2^53: exact
        return Ok(if neg { -v } else { v });
    }
    let s = std::str::from_utf8(raw).map(str::trim).unwrap_or("");
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(v) => Err(RowError::field(
            field,
            format!("{v} is not a finite number"),
        )),
        Err(_) => Err(RowError::field(
            field,
            format!("{} is not a number", show(raw)),
        )),
    }
}

#[inline]
pub fn opt_f64(field: &str, raw: Option<&[u8]>) -> Result<Option<f64>, RowError> {
    present(raw).map(|b| float(field, b)).transpose()
}

pub fn opt_bool(field: &str, raw: Option<&[u8]>) -> Result<Option<bool>, RowError> {
    match raw {
        Some(b"1") => return Ok(Some(true)),
        Some(b"0") => return Ok(Some(false)),
        _ => {}
    }
    let Some(b) = present(raw) else {
        return Ok(None);
    };
    let s = std::str::from_utf8(b).map(str::trim).unwrap_or("");
    const T: [&str; 5] = ["true", "t", "1", "yes", "y"];
    const F: [&str; 5] = ["false", "f", "0", "no", "n"];
    if T.iter().any(|x| x.eq_ignore_ascii_case(s)) {
        Ok(Some(true))
    } else if F.iter().any(|x| x.eq_ignore_ascii_case(s)) {
        Ok(Some(false))
    } else {
        Err(RowError::field(
            field,
            format!("{} is not a boolean (true/false/1/0)", show(b)),
        ))
    }
}

/// Epoch values at or above this are read as milliseconds, below as seconds
/// (1e11 seconds is the year 5138, 1e11 milliseconds is 1973).
pub const EPOCH_MS_THRESHOLD: i64 = 100_000_000_000;

/// Epoch seconds or milliseconds (see [`EPOCH_MS_THRESHOLD`]) as milliseconds; `v` has at most
/// 16 digits.
#[inline]
pub fn epoch_ms(v: i64) -> i64 {
    if v >= EPOCH_MS_THRESHOLD { v } else { v * 1000 }
}

/// A point in time, as milliseconds since the Unix epoch (UTC). Accepts epoch seconds or
/// milliseconds (integers; see [`EPOCH_MS_THRESHOLD`]), RFC 3339 with an offset (also written
/// `+hhmm` or `+hh`, with `T` or a space), and `YYYY-MM-DD[ T]HH:MM:SS[.fff]` or `YYYY-MM-DD`,
/// which are taken as UTC.
pub fn time_ms(field: &str, raw: &[u8]) -> Result<i64, RowError> {
    if let Some(v) = digits(raw) {
        return Ok(epoch_ms(v as i64));
    }
    let s = text(field, raw)?;
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    // ISO 8601 offsets without a colon or without minutes, as polars (`+0000`) and DuckDB
    // (`+00`) write them by default.
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%.f%#z"] {
        if let Ok(t) = chrono::DateTime::parse_from_str(s, fmt) {
            return Ok(t.timestamp_millis());
        }
    }
    for fmt in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, fmt) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        && let Some(t) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(t.and_utc().timestamp_millis());
    }
    Err(RowError::field(
        field,
        format!(
            "{} is not a time (epoch seconds or ms, RFC 3339, or YYYY-MM-DD HH:MM:SS UTC)",
            show(raw)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_fast_and_slow_paths_agree_with_std() {
        for s in ["0", "42", "-7", "+3", " 12 ", "3.0", "-2.0", "123456789012"] {
            let want: i64 = s.trim().parse::<f64>().unwrap() as i64;
            assert_eq!(int("k", s.as_bytes()).unwrap(), want, "{s}");
        }
        for s in ["", "-", "1.5", "abc", "1e400", "NaN"] {
            let e = int("kills", s.as_bytes()).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("kills"), "{s}");
        }
        assert!(opt_i32("kills", Some(b"99999999999")).is_err());
    }

    #[test]
    fn numbers_fast_path_agrees_with_std() {
        for s in [
            "0",
            "-0",
            "+0",
            "7",
            "-7",
            "+7",
            "007",
            "480",
            "-3",
            "123456789012345",
            "-999999999999999",
            "1234567890123456",
            "12.5",
            "1e3",
            " 42",
            "42 ",
            "-",
            "+",
            "",
        ] {
            let want = s.trim().parse::<f64>().ok().filter(|v| v.is_finite());
            let got = float("score", s.as_bytes()).ok();
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{s:?}");
        }
    }

    proptest::proptest! {
        /// Digit strings of every length, with a non-digit byte or not: the plain fold's value.
        #[test]
        fn digits_agree_with_a_plain_fold(s in "[0-9]{0,18}", bad in proptest::option::of((0_usize..18, proptest::num::u8::ANY))) {
            let mut b = s.into_bytes();
            if let Some((at, byte)) = bad && !b.is_empty() {
                let at = at % b.len();
                b[at] = byte;
            }
            let want = (!b.is_empty() && b.len() <= 16 && b.iter().all(u8::is_ascii_digit))
                .then(|| b.iter().fold(0_u64, |acc, d| acc * 10 + u64::from(d - b'0')));
            proptest::prop_assert_eq!(digits(&b), want);
        }

        /// Any short string of signs, digits, dots, exponents and blanks: the same value (bit
        /// for bit) or the same refusal as the standard parser.
        #[test]
        fn numbers_agree_with_std_on_random_text(s in "[-+ ]?[0-9]{0,17}(\\.[0-9]{0,3})?(e[-+]?[0-9]{1,3})? ?") {
            let want = s.trim().parse::<f64>().ok().filter(|v| v.is_finite());
            let got = float("score", s.as_bytes()).ok();
            proptest::prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits));
        }
    }

    #[test]
    fn times_in_every_accepted_form() {
        let t = 1_704_067_200_000; // 2024-01-01T00:00:00Z
        for s in [
            "1704067200",
            "1704067200000",
            "2024-01-01T00:00:00Z",
            "2024-01-01T01:00:00+01:00",
            // polars' CSV writer, DuckDB's CSV and JSON writers, pandas', pyarrow's.
            "2024-01-01T00:00:00.000000+0000",
            "2024-01-01 02:00:00+02",
            "2023-12-31 19:30:00-0430",
            "2024-01-01 00:00:00+00:00",
            "2024-01-01 00:00:00.000000Z",
            "2024-01-01 00:00:00",
            "2024-01-01T00:00:00.000",
            "2024-01-01",
        ] {
            assert_eq!(time_ms("start_time", s.as_bytes()).unwrap(), t, "{s}");
        }
        assert!(time_ms("start_time", b"yesterday").is_err());
        assert!(time_ms("start_time", b"2024-13-01").is_err());
        assert!(time_ms("start_time", b"2024-01-01 00:00:00+0").is_err());
    }

    #[test]
    fn values_are_quoted_and_cut_after_sixty_characters() {
        assert_eq!(show(b"abc"), "'abc'");
        assert_eq!(show(b""), "''");
        // Characters, not bytes: sixty two-byte characters are shown whole.
        let sixty = "é".repeat(60);
        assert_eq!(show(sixty.as_bytes()), format!("'{sixty}'"));
        assert_eq!(show("é".repeat(61).as_bytes()), format!("'{sixty}…'"));
        assert_eq!(show(b"\xffa"), "'\u{FFFD}a'");
        // The quoted value is in the error a refused field gives.
        let e = int("kills", b"12x").unwrap_err();
        assert!(e.to_string().contains("'12x' is not an integer"), "{e}");
    }

    #[test]
    fn integers_written_as_floats_stop_below_nine_quadrillion() {
        // `3.0`-style integers go through f64: exact below 9e15 (under 2^53), refused from it.
        assert_eq!(
            int("k", b"8999999999999999.0").unwrap(),
            8_999_999_999_999_999
        );
        assert_eq!(
            int("k", b"-8999999999999999.0").unwrap(),
            -8_999_999_999_999_999
        );
        assert!(int("k", b"9000000000000000.0").is_err());
        assert!(int("k", b"-9e15").is_err());
    }

    #[test]
    fn blanks_are_missing_and_bools_parse() {
        assert_eq!(present(Some(b"  ")), None);
        assert_eq!(opt_f64("score", Some(b"")).unwrap(), None);
        assert_eq!(opt_bool("quit_early", Some(b"TRUE")).unwrap(), Some(true));
        assert_eq!(opt_bool("quit_early", Some(b"0")).unwrap(), Some(false));
        assert!(opt_bool("quit_early", Some(b"maybe")).is_err());
        assert!(float("score", b"inf").is_err());
        assert!(req_text("match_id", Some(b"\xff")).is_err());
    }
}
