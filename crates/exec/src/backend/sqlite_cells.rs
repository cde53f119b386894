//! SQLite's values as cells: its declared types decide how text is answered.

use crate::cell::Cell;
use chrono::{NaiveDate, NaiveDateTime};
use rusqlite::types::ValueRef;
use std::borrow::Cow;

/// Declared types decide how text is answered: `JSON` as JSON, `DATETIME`/`TIMESTAMP` as
/// timestamps, `DECIMAL`/`NUMERIC` as decimal strings. Classified once per statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Decl {
    Decimal,
    Bool,
    Json,
    DateTime,
    Date,
    Other,
}

impl Decl {
    pub(super) fn of(decl: &str) -> Decl {
        // Declared types are a few bytes: a plain scan beats `str::contains`' searcher set-up.
        let d = decl.as_bytes();
        let has = |word: &[u8]| d.windows(word.len()).any(|w| w.eq_ignore_ascii_case(word));
        if has(b"DECIMAL") || has(b"NUMERIC") {
            Decl::Decimal
        } else if d.len() >= 4 && d[..4].eq_ignore_ascii_case(b"BOOL") {
            Decl::Bool
        } else if has(b"JSON") {
            Decl::Json
        } else if has(b"DATETIME") || has(b"TIMESTAMP") {
            Decl::DateTime
        } else if d.eq_ignore_ascii_case(b"DATE") {
            Decl::Date
        } else {
            Decl::Other
        }
    }
}

pub(super) fn cell(v: ValueRef<'_>, decl: Decl) -> Cell<'_> {
    match v {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(i) if decl == Decl::Decimal => Cell::Decimal(Cow::Owned(i.to_string())),
        ValueRef::Integer(i) if decl == Decl::Bool => Cell::Bool(i != 0),
        ValueRef::Integer(i) => Cell::Int(i),
        ValueRef::Real(f) if decl == Decl::Decimal => Cell::Decimal(Cow::Owned(f.to_string())),
        ValueRef::Real(f) => Cell::Float(f),
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t);
            match decl {
                Decl::Json => Cell::Json(s),
                Decl::DateTime => parse_datetime(&s)
                    .map(Cell::DateTime)
                    .unwrap_or(Cell::Text(s)),
                Decl::Date => NaiveDate::parse_from_str(&s, "%Y-%m-%d")
                    .map(Cell::Date)
                    .unwrap_or(Cell::Text(s)),
                _ => Cell::Text(s),
            }
        }
        ValueRef::Blob(b) => Cell::Bytes(Cow::Borrowed(b)),
    }
}

/// Parses stored timestamp text (`%Y-%m-%d %H:%M:%S%.f`). The canonical shape SQLite's own
/// functions write is read by hand, once per row of a list; anything else goes to chrono.
fn parse_datetime(s: &str) -> Option<NaiveDateTime> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<u32> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0u32, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
        })
    };
    let shaped = b.len() >= 19
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b' '
        && b[13] == b':'
        && b[16] == b':';
    let fraction = match b.get(19..) {
        Some([]) => Some(0),
        Some([b'.', digits @ ..]) if (1..=9).contains(&digits.len()) => {
            num(20, digits.len()).map(|n| n * 10u32.pow(9 - digits.len() as u32))
        }
        _ => None,
    };
    let fast = match (shaped, fraction) {
        (true, Some(nanos)) => NaiveDate::from_ymd_opt(num(0, 4)? as i32, num(5, 2)?, num(8, 2)?)
            .and_then(|d| d.and_hms_nano_opt(num(11, 2)?, num(14, 2)?, num(17, 2)?, nanos)),
        _ => None,
    };
    fast.or_else(|| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").ok())
}

#[cfg(test)]
mod tests {
    use super::Decl;

    #[test]
    fn timestamps_parse_like_chrono() {
        for text in [
            "2017-02-01 11:21:50",
            "2017-02-01 11:21:50.5",
            "2017-02-01 11:21:50.123456789",
            "2017-02-01 11:21:50.1234567891",
            "0001-01-01 00:00:00",
            "2017-02-30 11:21:50",
            "2017-13-01 11:21:50",
            "2016-12-31 23:59:60",
            "2017-02-01 24:00:00",
            "2017-2-1 1:2:3",
            "2017-02-01T11:21:50",
            "2017-02-01 11:21:50.",
            "2017-02-01 11:21:50Z",
            "+2017-02-01 11:21:50",
            "2017-02-01",
            "",
            "garbage text",
        ] {
            assert_eq!(
                super::parse_datetime(text),
                chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").ok(),
                "{text}"
            );
        }
    }

    #[test]
    fn declared_types_classify_like_their_names() {
        for (decl, want) in [
            ("DECIMAL(10,2)", Decl::Decimal),
            ("numeric", Decl::Decimal),
            ("BOOLEAN", Decl::Bool),
            ("json", Decl::Json),
            ("DATETIME", Decl::DateTime),
            ("timestamp", Decl::DateTime),
            ("date", Decl::Date),
            ("DATE_TEXT", Decl::Other),
            ("VARCHAR(36)", Decl::Other),
            ("", Decl::Other),
        ] {
            assert_eq!(Decl::of(decl), want, "{decl}");
        }
    }
}
