//! Parsers for single CSV cells: strict integers and RFC 3339 timestamps.
//!
//! Both accept exactly one spelling per value and never round, so that an imported cell
//! always means what its text says. The rules are stated in `docs/fetch.md`.

use std::fmt;

/// Why a cell is not an integer of the column's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IntError {
    /// Not of the form `[+-]?[0-9]+` (letters, blanks, spaces, decimals...).
    NotInteger,
    /// Digits, but not the canonical spelling: a `+` sign, a leading zero, or `-0`.
    NotCanonical,
    /// A canonical integer outside `min..=max`.
    OutOfRange {
        /// Smallest allowed value.
        min: i128,
        /// Largest allowed value.
        max: i128,
    },
}

impl fmt::Display for IntError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntError::NotInteger => write!(f, "is not an integer"),
            IntError::NotCanonical => write!(
                f,
                "is not written as a plain integer (no '+' sign, leading zero or '-0')"
            ),
            IntError::OutOfRange { min, max } => write!(f, "is outside {min}..={max}"),
        }
    }
}

impl std::error::Error for IntError {}

/// Parse a canonical decimal integer: `0`, or an optional `-` followed by a non-zero digit
/// and more digits. No spaces, no `+`, no leading zeros. The value must fit `T`.
///
/// Equivalently: `s` is accepted with value `v` exactly when `v.to_string() == s`.
pub(crate) fn parse_int<T>(s: &str) -> Result<T, IntError>
where
    T: TryFrom<i128> + Bounded,
{
    let (neg, digits) = match s.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        rest => (false, rest),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(IntError::NotInteger);
    }
    if s.starts_with('+') || (digits.len() > 1 && digits[0] == b'0') || (neg && digits == b"0") {
        return Err(IntError::NotCanonical);
    }
    let range = IntError::OutOfRange {
        min: T::MIN_I128,
        max: T::MAX_I128,
    };
    // 39 digits can overflow i128; anything that long is out of every column's range.
    if digits.len() > 38 {
        return Err(range);
    }
    let mut v: i128 = 0;
    for d in digits {
        v = v * 10 + i128::from(d - b'0');
    }
    if neg {
        v = -v;
    }
    T::try_from(v).map_err(|_| range)
}

/// Bounds of the integer column types, for error messages.
pub(crate) trait Bounded {
    /// Smallest value of the type.
    const MIN_I128: i128;
    /// Largest value of the type.
    const MAX_I128: i128;
}

macro_rules! bounded {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            const MIN_I128: i128 = <$t>::MIN as i128;
            const MAX_I128: i128 = <$t>::MAX as i128;
        }
    )*};
}
bounded!(i8, i16, i32, i64);

/// Parse an RFC 3339 timestamp to microseconds since 1970-01-01T00:00:00Z.
///
/// Accepted, exactly: `YYYY-MM-DDTHH:MM:SS`, then optionally `.` and 1 to 6 digits, then
/// `Z` or `+HH:MM` / `-HH:MM`. Upper-case `T` and `Z` only; a valid calendar date (Gregorian,
/// year 0000-9999); hour 00-23, minute 00-59, second 00-59 (no leap second); offset hours
/// 00-23, minutes 00-59. A fraction of n digits means n decimal places of a second, so
/// `.06` is 60000 µs; more than 6 digits is refused rather than rounded.
pub(crate) fn parse_timestamp_micros(s: &str) -> Result<i64, String> {
    let b = s.as_bytes();
    let shape = || {
        format!(
            "`{s}` is not an RFC 3339 timestamp of the form YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+HH:MM|-HH:MM)"
        )
    };
    if b.len() < 20 {
        return Err(shape());
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, c: u8| b.get(at) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return Err(shape());
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        num(0, 4),
        num(5, 2),
        num(8, 2),
        num(11, 2),
        num(14, 2),
        num(17, 2),
    ) else {
        return Err(shape());
    };
    let mut i = 19;
    let mut micros = 0i64;
    if sep(i, b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return Err(shape());
        }
        if n > 6 {
            return Err(format!(
                "`{s}` has {n} fractional digits; at most 6 (microseconds) are kept exactly"
            ));
        }
        micros = num(start, n).ok_or_else(shape)? * 10i64.pow(6 - n as u32);
    }
    let offset_seconds = match b.get(i) {
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) if i + 6 == b.len() && sep(i + 3, b':') => {
            let (Some(oh), Some(om)) = (num(i + 1, 2), num(i + 4, 2)) else {
                return Err(shape());
            };
            if oh > 23 || om > 59 {
                return Err(format!("`{s}` has an offset out of range"));
            }
            let v = oh * 3600 + om * 60;
            if c == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return Err(shape()),
    };
    // The grammar above is stricter than chrono's RFC 3339 parser (which also takes `t`, `z`,
    // a space, leap seconds and nanoseconds); chrono checks the calendar and counts the days.
    let small = |v: i64| u32::try_from(v).ok();
    let date = (small(month), small(day), i32::try_from(year).ok());
    let date = match date {
        (Some(m), Some(d), Some(y)) => chrono::NaiveDate::from_ymd_opt(y, m, d),
        _ => None,
    }
    .ok_or_else(|| format!("`{s}` is not a valid calendar date"))?;
    let at = match (small(hour), small(minute), small(second)) {
        (Some(h), Some(m), Some(sec)) => date.and_hms_opt(h, m, sec),
        _ => None,
    }
    .ok_or_else(|| format!("`{s}` is not a valid time of day"))?;
    let secs = at.and_utc().timestamp() - offset_seconds;
    Ok(secs * 1_000_000 + micros)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ints_table() {
        assert_eq!(parse_int::<i8>("0"), Ok(0));
        assert_eq!(parse_int::<i8>("127"), Ok(127));
        assert_eq!(parse_int::<i8>("-128"), Ok(-128));
        assert_eq!(
            parse_int::<i8>("128"),
            Err(IntError::OutOfRange {
                min: -128,
                max: 127
            })
        );
        assert_eq!(
            parse_int::<i8>("-129"),
            Err(IntError::OutOfRange {
                min: -128,
                max: 127
            })
        );
        for bad in [
            "", "x", " 1", "1 ", "1.0", "1e2", "--1", "-", "+", "٣", "0x1",
        ] {
            assert_eq!(parse_int::<i8>(bad), Err(IntError::NotInteger), "{bad:?}");
        }
        for odd in ["+1", "01", "-0", "00", "-01"] {
            assert_eq!(parse_int::<i8>(odd), Err(IntError::NotCanonical), "{odd:?}");
        }
        assert!(matches!(
            parse_int::<i64>(&"9".repeat(60)),
            Err(IntError::OutOfRange { .. })
        ));
        assert_eq!(parse_int::<i64>("-9223372036854775808"), Ok(i64::MIN));
    }

    #[test]
    fn timestamps_of_the_data() {
        // Both spellings found in the JobCannon files, checked by hand against `date -u`.
        assert_eq!(
            parse_timestamp_micros("2026-03-10T15:48:45.624832+00:00"),
            Ok(1_773_157_725_624_832)
        );
        assert_eq!(
            parse_timestamp_micros("2026-04-03T20:50:20.089+00:00"),
            Ok(1_775_249_420_089_000)
        );
        assert_eq!(
            parse_timestamp_micros("2026-03-19T11:41:17.06+00:00"),
            Ok(1_773_920_477_060_000)
        );
        assert_eq!(parse_timestamp_micros("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_timestamp_micros("1970-01-01T01:00:00+01:00"),
            Ok(0),
            "offset subtracted"
        );
        assert_eq!(
            parse_timestamp_micros("1969-12-31T23:59:59.999999Z"),
            Ok(-1)
        );
    }

    #[test]
    fn timestamps_refused() {
        for bad in [
            "",
            "2026-03-10",
            "2026-03-10 15:48:45+00:00",
            "2026-03-10t15:48:45+00:00",
            "2026-03-10T15:48:45z",
            "2026-03-10T15:48:45",
            "2026-03-10T15:48:45.+00:00",
            "2026-03-10T15:48:45.1234567+00:00",
            "2026-03-10T15:48:45+0000",
            "2026-03-10T15:48:45+00",
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-03-10T24:00:00Z",
            "2026-03-10T23:60:00Z",
            "2016-12-31T23:59:60Z",
            "2026-03-10T15:48:45+24:00",
            "2026-03-10T15:48:45+00:60",
            " 2026-03-10T15:48:45Z",
            "2026-03-10T15:48:45Z ",
            "+2026-03-10T15:48:45Z",
            "2026-3-10T15:48:45Z",
        ] {
            assert!(parse_timestamp_micros(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_timestamp_micros("2024-02-29T00:00:00Z").is_ok());
        assert!(parse_timestamp_micros("2000-02-29T00:00:00Z").is_ok());
        assert!(parse_timestamp_micros("1900-02-29T00:00:00Z").is_err());
    }

    proptest! {
        /// Every value of the type is accepted in its canonical spelling.
        #[test]
        fn every_i8_roundtrips(v in any::<i8>()) {
            prop_assert_eq!(parse_int::<i8>(&v.to_string()), Ok(v));
        }

        /// Integers outside the type's range are refused as out of range, never wrapped.
        #[test]
        fn out_of_i8_range_refused(v in any::<i64>().prop_filter("outside", |v| i8::try_from(*v).is_err())) {
            let is_range_error = matches!(parse_int::<i8>(&v.to_string()), Err(IntError::OutOfRange { .. }));
            prop_assert!(is_range_error);
        }

        /// Nothing but the canonical spelling is accepted: acceptance implies round-trip.
        #[test]
        fn accepted_means_canonical(s in "[-+ 0-9a-x.]{0,6}") {
            if let Ok(v) = parse_int::<i8>(&s) {
                prop_assert_eq!(v.to_string(), s);
            }
        }

        /// Valid timestamps agree with chrono's RFC 3339 parser to the microsecond.
        #[test]
        fn timestamps_agree_with_chrono(
            y in 0i64..=9999, mo in 1i64..=12, d in 1i64..=31,
            h in 0i64..=23, mi in 0i64..=59, se in 0i64..=59,
            frac in proptest::option::of("[0-9]{1,6}"),
            off in proptest::option::of((any::<bool>(), 0i64..=23, 0i64..=59)),
        ) {
            prop_assume!(chrono::NaiveDate::from_ymd_opt(y as i32, mo as u32, d as u32).is_some());
            let mut s = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}");
            if let Some(f) = &frac {
                s.push('.');
                s.push_str(f);
            }
            match off {
                None => s.push('Z'),
                Some((neg, oh, om)) => s.push_str(&format!("{}{oh:02}:{om:02}", if neg { '-' } else { '+' })),
            }
            let ours = parse_timestamp_micros(&s);
            let theirs = chrono::DateTime::parse_from_rfc3339(&s).map(|t| t.timestamp_micros());
            prop_assert_eq!(ours, Ok(theirs.unwrap()), "{}", s);
        }

        /// Whatever we accept, chrono accepts with the same instant (we are never looser).
        #[test]
        fn accepted_timestamps_are_rfc3339(s in "[0-9]{4}-[0-9]{2}-[0-9]{2}[T t][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,8})?(Z|z|[+-][0-9]{2}:?[0-9]{2})?") {
            if let Ok(v) = parse_timestamp_micros(&s) {
                let theirs = chrono::DateTime::parse_from_rfc3339(&s).map(|t| t.timestamp_micros());
                prop_assert_eq!(Ok(v), theirs.map_err(|e| e.to_string()));
            }
        }
    }
}
