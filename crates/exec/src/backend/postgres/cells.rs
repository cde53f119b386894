//! PostgreSQL's binary values as cells: each column's kind is decided once per statement from
//! its type, then every row's raw bytes are decoded by that kind.

use crate::cell::Cell;
use chrono::{Duration, NaiveDate, NaiveDateTime, NaiveTime};
use postgres_types::{FromSql, Type};
use std::borrow::Cow;
use std::error::Error;

/// A column's value in PostgreSQL's binary format, undecoded (`None` for NULL).
pub(super) struct RawValue<'a>(pub(super) Option<&'a [u8]>);

impl<'a> FromSql<'a> for RawValue<'a> {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(RawValue(Some(raw)))
    }

    fn from_sql_null(_ty: &Type) -> Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(RawValue(None))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

/// How a column's binary values become [`Cell`]s, decided once per statement from its type
/// rather than by comparing the type on every row.
#[derive(Debug, Clone, Copy)]
pub(super) enum PgKind {
    Bool,
    Int2,
    Int4,
    Int8,
    Oid,
    Float4,
    Float8,
    Numeric,
    Json,
    Jsonb,
    Timestamp,
    Date,
    Time,
    Bytea,
    Uuid,
    /// text, varchar, bpchar, name, citext and enums arrive as UTF-8 text.
    Text,
}

impl PgKind {
    pub(super) fn of(ty: &Type) -> PgKind {
        match *ty {
            Type::BOOL => PgKind::Bool,
            Type::INT2 => PgKind::Int2,
            Type::INT4 => PgKind::Int4,
            Type::INT8 => PgKind::Int8,
            Type::OID => PgKind::Oid,
            Type::FLOAT4 => PgKind::Float4,
            Type::FLOAT8 => PgKind::Float8,
            Type::NUMERIC => PgKind::Numeric,
            Type::JSON => PgKind::Json,
            Type::JSONB => PgKind::Jsonb,
            Type::TIMESTAMP | Type::TIMESTAMPTZ => PgKind::Timestamp,
            Type::DATE => PgKind::Date,
            Type::TIME => PgKind::Time,
            Type::BYTEA => PgKind::Bytea,
            Type::UUID => PgKind::Uuid,
            _ => PgKind::Text,
        }
    }

    pub(super) fn decode(self, raw: &[u8]) -> Result<Cell<'_>, Box<dyn Error + Sync + Send>> {
        Ok(match self {
            PgKind::Bool => Cell::Bool(bool::from_sql(&Type::BOOL, raw)?),
            PgKind::Int2 => Cell::Int(i16::from_sql(&Type::INT2, raw)?.into()),
            PgKind::Int4 => Cell::Int(i32::from_sql(&Type::INT4, raw)?.into()),
            PgKind::Int8 => Cell::Int(i64::from_sql(&Type::INT8, raw)?),
            PgKind::Oid => Cell::Int(u32::from_sql(&Type::OID, raw)?.into()),
            PgKind::Float4 => Cell::Float(f32::from_sql(&Type::FLOAT4, raw)?.into()),
            PgKind::Float8 => Cell::Float(f64::from_sql(&Type::FLOAT8, raw)?),
            PgKind::Numeric => Cell::Decimal(Cow::Owned(numeric_text(raw)?)),
            PgKind::Json => Cell::Json(Cow::Borrowed(std::str::from_utf8(raw)?)),
            PgKind::Jsonb => Cell::Json(Cow::Borrowed(std::str::from_utf8(
                raw.get(1..).unwrap_or_default(),
            )?)),
            // PostgreSQL's infinities are the extreme integers; its finite range also reaches
            // past chrono's (year 294276 against 262143), so the sum is checked, never assumed.
            PgKind::Timestamp => match i64::from_sql(&Type::INT8, raw)? {
                i64::MAX => Cell::Text(Cow::Borrowed("infinity")),
                i64::MIN => Cell::Text(Cow::Borrowed("-infinity")),
                micros => Cell::DateTime(
                    epoch()
                        .checked_add_signed(Duration::microseconds(micros))
                        .ok_or("timestamp beyond the years apijet can represent")?,
                ),
            },
            PgKind::Date => match i32::from_sql(&Type::INT4, raw)? {
                i32::MAX => Cell::Text(Cow::Borrowed("infinity")),
                i32::MIN => Cell::Text(Cow::Borrowed("-infinity")),
                days => Cell::Date(
                    epoch()
                        .date()
                        .checked_add_signed(Duration::days(days.into()))
                        .ok_or("date beyond the years apijet can represent")?,
                ),
            },
            PgKind::Time => {
                let micros = i64::from_sql(&Type::INT8, raw)?;
                Cell::Time(NaiveTime::MIN + Duration::microseconds(micros))
            }
            PgKind::Bytea => Cell::Bytes(Cow::Borrowed(raw)),
            PgKind::Uuid if raw.len() == 16 => Cell::Text(Cow::Owned(uuid_text(raw))),
            PgKind::Uuid | PgKind::Text => Cell::Text(Cow::Borrowed(std::str::from_utf8(raw)?)),
        })
    }
}

fn epoch() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2000, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .unwrap_or_default()
}

fn uuid_text(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Decodes PostgreSQL's binary NUMERIC (base-10000 digits) into its decimal text.
fn numeric_text(raw: &[u8]) -> Result<String, Box<dyn Error + Sync + Send>> {
    let word = |i: usize| -> Result<u16, Box<dyn Error + Sync + Send>> {
        raw.get(i..i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "truncated numeric".into())
    };
    let ndigits = word(0)? as usize;
    let weight = word(2)? as i16 as i32;
    let sign = word(4)?;
    let dscale = word(6)? as usize;
    if sign == 0xC000 {
        return Ok("NaN".into());
    }
    let digits: Vec<u16> = (0..ndigits)
        .map(|i| word(8 + 2 * i))
        .collect::<Result<_, _>>()?;
    let mut int_part = String::new();
    if weight < 0 {
        int_part.push('0');
    } else {
        for i in 0..=weight as usize {
            let d = digits.get(i).copied().unwrap_or(0);
            if i == 0 {
                int_part.push_str(&d.to_string());
            } else {
                int_part.push_str(&format!("{d:04}"));
            }
        }
    }
    let mut frac = String::new();
    if dscale > 0 {
        let mut i = weight + 1;
        while frac.len() < dscale {
            let d = if i < 0 {
                0
            } else {
                digits.get(i as usize).copied().unwrap_or(0)
            };
            frac.push_str(&format!("{d:04}"));
            i += 1;
        }
        frac.truncate(dscale);
    }
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    s.push_str(&int_part);
    if !frac.is_empty() {
        s.push('.');
        s.push_str(&frac);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::numeric_text;

    fn raw(ndigits: u16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [ndigits, weight as u16, sign, dscale] {
            v.extend_from_slice(&w.to_be_bytes());
        }
        for d in digits {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v
    }

    #[test]
    fn numeric_binary_decodes_to_text() {
        // 157782.61 = 15 7782 . 6100
        assert_eq!(
            numeric_text(&raw(3, 1, 0, 2, &[15, 7782, 6100])).expect("ok"),
            "157782.61"
        );
        assert_eq!(
            numeric_text(&raw(1, -1, 0x4000, 2, &[500])).expect("ok"),
            "-0.05"
        );
        assert_eq!(numeric_text(&raw(0, 0, 0, 2, &[])).expect("ok"), "0.00");
    }
}
