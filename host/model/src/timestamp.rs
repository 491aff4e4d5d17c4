//! RFC 3339 timestamps for `sleep.until`: parsed to Unix milliseconds
//! without a clock or a date library.

use std::fmt;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

/// An RFC 3339 instant as written, with its Unix time in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Timestamp {
    text: String,
    unix_ms: i64,
}

/// Why a string is not an RFC 3339 timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}` is not an RFC 3339 timestamp like 2026-01-31T09:00:00Z", crate::problem::shown(.0))]
pub struct TimestampError(pub String);

impl Timestamp {
    pub fn parse(s: &str) -> Result<Timestamp, TimestampError> {
        parse_ms(s).map(|unix_ms| Timestamp { text: s.to_owned(), unix_ms }).ok_or_else(|| TimestampError(s.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.text
    }
    pub fn unix_ms(&self) -> i64 {
        self.unix_ms
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "format": "date-time"})
    }
}

fn num(b: &[u8], from: usize, len: usize) -> Option<i64> {
    let part = b.get(from..from + len)?;
    if !part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(part).ok()?.parse().ok()
}

fn parse_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let (y, mo, d) = (num(b, 0, 4)?, num(b, 5, 2)?, num(b, 8, 2)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let (h, mi, se) = (num(b, 11, 2)?, num(b, 14, 2)?, num(b, 17, 2)?);
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&mo) || d < 1 || d > days_in[(mo - 1) as usize] || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let st = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == st {
            return None;
        }
        let frac = &s[st..i.min(st + 3)];
        ms = frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (num(b, i + 1, 2)?, num(b, i + 4, 2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let m = oh * 60 + om;
            if *sign == b'+' { m } else { -m }
        }
        _ => return None,
    };
    // days from civil (Howard Hinnant's algorithm)
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(Timestamp::parse("1970-01-01T00:00:00Z").unwrap().unix_ms(), 0);
        assert_eq!(Timestamp::parse("2000-03-01T00:00:00.5Z").unwrap().unix_ms(), 951_868_800_500);
        assert_eq!(Timestamp::parse("2026-01-31T10:00:00+01:00").unwrap().unix_ms(), 1_769_850_000_000);
        assert_eq!(Timestamp::parse("2024-02-29T00:00:00-00:30").unwrap().unix_ms(), 1_709_166_600_000);
    }

    #[test]
    fn rejects() {
        for bad in [
            "",
            "2026-01-31",
            "2026-02-30T00:00:00Z",
            "2026-01-31T25:00:00Z",
            "2026-01-31T10:00:00",
            "2026-01-31T10:00:00+0100",
            "2026-01-31T10:00:00Zx",
            "2026-01-31T10:00:00.Z",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
    }
}
