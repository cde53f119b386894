//! A database value as read from a row, before it becomes JSON.
//!
//! Backends decode their wire formats into [`Cell`]s that borrow from the driver's row where
//! they can; sinks turn them into JSON (one value per cell, nothing per row beyond that).

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};
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

/// Writes a timestamp the way the reference's JDBC driver prints it: `2017-02-01 11:21:50.0`.
pub fn write_datetime(dt: &NaiveDateTime, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(out, "{}", dt.format("%Y-%m-%d %H:%M:%S"));
    let nanos = dt.nanosecond() % 1_000_000_000;
    if nanos == 0 {
        out.push_str(".0");
    } else {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
}

impl Cell<'_> {
    /// The JSON answer for this cell; `as_json` parses text columns that hold JSON.
    pub fn to_json(&self, as_json: bool) -> Json {
        match self {
            Cell::Null => Json::Null,
            Cell::Bool(b) => Json::Bool(*b),
            Cell::Int(i) if i.abs() <= MAX_SAFE_INTEGER => Json::from(*i),
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
            Cell::DateTime(dt) => {
                let mut s = String::with_capacity(21);
                write_datetime(dt, &mut s);
                Json::String(s)
            }
            Cell::Date(d) => Json::String(d.format("%Y-%m-%d").to_string()),
            Cell::Time(t) => Json::String(t.format("%H:%M:%S").to_string()),
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
    fn big_integers_and_decimals_are_strings() {
        assert_eq!(Cell::Int(1 << 60).to_json(false), "1152921504606846976");
        assert_eq!(Cell::Int(82001).to_json(false), 82001);
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
