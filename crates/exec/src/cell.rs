//! A database value as read from a row, before it becomes JSON.
//!
//! Backends decode their wire formats into [`Cell`]s that borrow from the driver's row where
//! they can; sinks turn them into JSON (one value per cell, nothing per row beyond that).

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use serde_json::Value as Json;
use std::borrow::Cow;

/// One column value of one row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell<'a> {
    /// SQL NULL.
    Null,
    /// Boolean.
    Bool(bool),
    /// Signed integer.
    Int(i64),
    /// Unsigned integer beyond `i64`.
    UInt(u64),
    /// Floating point.
    Float(f64),
    /// Exact decimal, as text.
    Decimal(Cow<'a, str>),
    /// Text.
    Text(Cow<'a, str>),
    /// A JSON document, as text.
    Json(Cow<'a, str>),
    /// Date and time.
    DateTime(NaiveDateTime),
    /// Date.
    Date(NaiveDate),
    /// Time of day.
    Time(NaiveTime),
    /// Binary data.
    Bytes(Cow<'a, [u8]>),
}

/// Integers beyond ±(2^53 − 1) lose digits in JavaScript clients, so they are answered as
/// strings (the reference does the same since 7.0.2).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// A timestamp, date or time as the answer prints it, formatted on the stack: a streamed list
/// formats one per row, and chrono's `format` interprets its pattern every time.
pub struct DateTimeText {
    buf: [u8; 40],
    len: usize,
}

impl DateTimeText {
    /// A timestamp the way the reference's JDBC driver prints it, `2017-02-01 11:21:50.0`: the
    /// fraction without trailing zeros, at least one digit.
    pub fn new(dt: &NaiveDateTime) -> DateTimeText {
        let mut t = DateTimeText::date(&dt.date());
        t.push(b' ');
        t.push_time(&dt.time());
        let nanos = dt.nanosecond() % 1_000_000_000;
        t.push(b'.');
        if nanos == 0 {
            t.push(b'0');
        } else {
            let mut digits = [0u8; 9];
            let mut rest = nanos;
            for d in digits.iter_mut().rev() {
                *d = b'0' + (rest % 10) as u8;
                rest /= 10;
            }
            let used = 9 - digits.iter().rev().take_while(|&&d| d == b'0').count();
            for &d in &digits[..used] {
                t.push(d);
            }
        }
        t
    }

    /// `2017-02-01` (chrono's `%Y-%m-%d`).
    pub fn date(d: &NaiveDate) -> DateTimeText {
        let mut t = DateTimeText {
            buf: [0; 40],
            len: 0,
        };
        let year = d.year();
        if (0..=9999).contains(&year) {
            t.push_digits(year as u32, 4);
        } else {
            // chrono writes a sign and at least four digits outside 0..=9999.
            use std::io::Write;
            let mut cursor = std::io::Cursor::new(&mut t.buf[..]);
            let _ = write!(cursor, "{}", d.format("%Y"));
            t.len = cursor.position() as usize;
        }
        t.push(b'-');
        t.push_digits(d.month(), 2);
        t.push(b'-');
        t.push_digits(d.day(), 2);
        t
    }

    /// `11:21:50` (chrono's `%H:%M:%S`).
    pub fn time(time: &NaiveTime) -> DateTimeText {
        let mut t = DateTimeText {
            buf: [0; 40],
            len: 0,
        };
        t.push_time(time);
        t
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    /// The text's bytes: ASCII digits and separators (and chrono's sign for far years) only.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn push_time(&mut self, time: &NaiveTime) {
        self.push_digits(time.hour(), 2);
        self.push(b':');
        self.push_digits(time.minute(), 2);
        self.push(b':');
        // chrono keeps a leap second as :59 plus a second's worth of nanoseconds; `%S` says 60.
        let leap = u32::from(time.nanosecond() >= 1_000_000_000);
        self.push_digits(time.second() + leap, 2);
    }

    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn push_digits(&mut self, mut v: u32, width: usize) {
        let end = self.len + width;
        if let Some(slots) = self.buf.get_mut(self.len..end) {
            for slot in slots.iter_mut().rev() {
                *slot = b'0' + (v % 10) as u8;
                v /= 10;
            }
            self.len = end;
        }
    }
}

impl Cell<'_> {
    /// The JSON answer for this cell; `as_json` parses text columns that hold JSON.
    pub fn to_json(&self, as_json: bool) -> Json {
        match self {
            Cell::Null => Json::Null,
            Cell::Bool(b) => Json::Bool(*b),
            Cell::Int(i) if i.unsigned_abs() <= MAX_SAFE_INTEGER as u64 => Json::from(*i),
            Cell::Int(i) => Json::String(i.to_string()),
            Cell::UInt(u) if *u <= MAX_SAFE_INTEGER as u64 => Json::from(*u),
            Cell::UInt(u) => Json::String(u.to_string()),
            Cell::Float(f) => serde_json::Number::from_f64(*f)
                .map(Json::Number)
                .unwrap_or(Json::Null),
            Cell::Decimal(d) => Json::String(d.to_string()),
            Cell::Text(t) if as_json => parse_json_text(t),
            Cell::Text(t) => Json::String(t.to_string()),
            Cell::Json(t) => parse_json_text(t),
            Cell::DateTime(dt) => Json::String(DateTimeText::new(dt).as_str().to_string()),
            Cell::Date(d) => Json::String(DateTimeText::date(d).as_str().to_string()),
            Cell::Time(t) => Json::String(DateTimeText::time(t).as_str().to_string()),
            Cell::Bytes(b) if as_json => parse_json_text(&String::from_utf8_lossy(b)),
            Cell::Bytes(b) => Json::String(String::from_utf8_lossy(b).into_owned()),
        }
    }
}

/// Empties a row buffer and hands its allocation on with a fresh lifetime, so one buffer
/// serves every row of a cursor (collecting an empty vector into the same element layout
/// reuses the allocation).
pub fn recycle<'b>(mut cells: Vec<Cell<'_>>) -> Vec<Cell<'b>> {
    cells.clear();
    cells.into_iter().map(|_| Cell::Null).collect()
}

fn parse_json_text(t: &str) -> Json {
    serde_json::from_str(t).unwrap_or_else(|_| Json::String(t.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_like_jdbc() {
        let dt = NaiveDate::from_ymd_opt(2017, 2, 1)
            .and_then(|d| d.and_hms_opt(11, 21, 50))
            .expect("valid");
        assert_eq!(Cell::DateTime(dt).to_json(false), "2017-02-01 11:21:50.0");
    }

    #[test]
    fn dates_and_times_print_like_chrono() {
        let days = [
            NaiveDate::from_ymd_opt(2017, 2, 1),
            NaiveDate::from_ymd_opt(1, 1, 1),
            NaiveDate::from_ymd_opt(0, 12, 31),
            NaiveDate::from_ymd_opt(9999, 12, 31),
            NaiveDate::from_ymd_opt(10000, 1, 1),
            NaiveDate::from_ymd_opt(-1, 6, 30),
            NaiveDate::from_ymd_opt(-262_000, 1, 1),
        ];
        let times = [
            (0, 0, 0, 0),
            (23, 59, 59, 999_999_999),
            (11, 21, 50, 120_000),
            (1, 2, 3, 1),
        ];
        for d in days.into_iter().map(|d| d.expect("valid")) {
            assert_eq!(
                DateTimeText::date(&d).as_str(),
                d.format("%Y-%m-%d").to_string()
            );
            for (h, m, s, n) in times {
                let dt = d.and_hms_nano_opt(h, m, s, n).expect("valid");
                let frac = format!("{n:09}");
                let frac = match frac.trim_end_matches('0') {
                    "" => "0",
                    f => f,
                };
                let want = format!("{}.{frac}", dt.format("%Y-%m-%d %H:%M:%S"));
                assert_eq!(DateTimeText::new(&dt).as_str(), want);
                assert_eq!(
                    DateTimeText::time(&dt.time()).as_str(),
                    dt.time().format("%H:%M:%S").to_string()
                );
            }
        }
        // A leap second prints its :59 and fraction, as chrono's `%S` and the old code did.
        let leap = NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000))
            .expect("valid");
        assert_eq!(DateTimeText::new(&leap).as_str(), "2016-12-31 23:59:60.5");
    }

    #[test]
    fn big_integers_and_decimals_are_strings() {
        assert_eq!(Cell::Int(1 << 60).to_json(false), "1152921504606846976");
        assert_eq!(Cell::Int(82001).to_json(false), 82001);
        assert_eq!(Cell::Int(i64::MIN).to_json(false), "-9223372036854775808");
        assert_eq!(
            Cell::Decimal("157782.61".into()).to_json(false),
            "157782.61"
        );
    }

    #[test]
    fn json_text_is_parsed_when_asked() {
        assert_eq!(
            Cell::Text("[1,2]".into()).to_json(true),
            serde_json::json!([1, 2])
        );
        assert_eq!(Cell::Text("[1,2]".into()).to_json(false), "[1,2]");
    }
}
