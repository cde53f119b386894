//! MySQL functions SQLite lacks, registered on every connection so that `@column`, `@having`
//! and `@order` expressions answer on SQLite as on MySQL (the reference's engine). Dates are
//! read as SQLite stores them: `YYYY-MM-DD[ HH:MM:SS[.fff]]` text or Unix seconds.
//!
//! Each call is bounded: a function whose value grows with an argument (`lpad`, `rpad`,
//! `repeat`, `space`, `date_format`) works out its length first and refuses, naming the limit,
//! a value longer than any value may be ([`TOO_LONG`]), rather than building it or answering
//! a shorter one.

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

type Result<T> = rusqlite::Result<T>;

/// The end of the message of a function that refused to make a value too long; the backend
/// recognises its refusals by it.
pub(super) const TOO_LONG: &str = "bytes any value may have (setting max_answer_bytes)";

/// The longest value a function may make, as the backend sets it (0: SQLite's own limit).
#[derive(Clone)]
struct Bound(Arc<AtomicUsize>);

impl Bound {
    fn bytes(&self) -> usize {
        match self.0.load(Ordering::Relaxed) {
            0 => 1_000_000_000,
            n => n,
        }
    }

    /// `Err` naming the limit when `function` would make `bytes` (none: more than `usize`).
    fn check(&self, function: &str, bytes: Option<usize>) -> Result<()> {
        let limit = self.bytes();
        match bytes {
            Some(b) if b <= limit => Ok(()),
            _ => Err(rusqlite::Error::UserFunctionError(
                format!(
                    "{function}(…) would make a value of {} bytes, more than the {limit} {TOO_LONG}: \
                     ask for a shorter one",
                    bytes.map_or_else(|| "too many".to_string(), |b| b.to_string())
                )
                .into(),
            )),
        }
    }
}

fn datetime(v: ValueRef<'_>) -> Option<NaiveDateTime> {
    match v {
        ValueRef::Text(t) => {
            let s = std::str::from_utf8(t).ok()?.trim();
            NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f")
                .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f"))
                .ok()
                .or_else(|| {
                    NaiveDate::parse_from_str(s.get(..10)?, "%Y-%m-%d")
                        .ok()
                        .map(|d| d.and_time(NaiveTime::MIN))
                })
        }
        ValueRef::Integer(i) => chrono::DateTime::from_timestamp(i, 0).map(|d| d.naive_utc()),
        ValueRef::Real(f) => chrono::DateTime::from_timestamp(f as i64, 0).map(|d| d.naive_utc()),
        _ => None,
    }
}

fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    }
}

fn int(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn real(v: ValueRef<'_>) -> Option<f64> {
    match v {
        ValueRef::Integer(i) => Some(i as f64),
        ValueRef::Real(f) => Some(f),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

/// Registers a deterministic function of `n` arguments (-1: any number).
fn add<F>(conn: &Connection, name: &str, n: i32, f: F) -> Result<()>
where
    F: Fn(&Context<'_>) -> Value + Send + 'static,
{
    conn.create_scalar_function(
        name,
        n,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        move |ctx| Ok(f(ctx)),
    )
}

/// Registers a deterministic function of `n` arguments whose value may grow with them: it
/// checks the length it would make against `bound` itself.
fn sized<F>(conn: &Connection, name: &str, n: i32, bound: &Bound, f: F) -> Result<()>
where
    F: Fn(&Context<'_>, &Bound) -> Result<Value> + Send + 'static,
{
    let bound = bound.clone();
    conn.create_scalar_function(
        name,
        n,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        move |ctx| f(ctx, &bound),
    )
}

fn date_part(conn: &Connection, name: &str, f: fn(NaiveDateTime) -> i64) -> Result<()> {
    add(conn, name, 1, move |c| opt(datetime(c.get_raw(0)).map(f)))
}

/// Days from year 0 as MySQL's `to_days` counts them.
fn to_days(d: NaiveDate) -> i64 {
    i64::from(d.num_days_from_ce()) + 365
}

/// MySQL's `date_format`.
fn date_format(d: NaiveDateTime, fmt: &str) -> String {
    let mut out = String::with_capacity(fmt.len() * 2);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else { break };
        let piece = match spec {
            'Y' => format!("{:04}", d.year()),
            'y' => format!("{:02}", d.year() % 100),
            'm' => format!("{:02}", d.month()),
            'c' => d.month().to_string(),
            'd' => format!("{:02}", d.day()),
            'e' => d.day().to_string(),
            'H' => format!("{:02}", d.hour()),
            'k' => d.hour().to_string(),
            'h' | 'I' => format!("{:02}", (d.hour() + 11) % 12 + 1),
            'l' => ((d.hour() + 11) % 12 + 1).to_string(),
            'i' => format!("{:02}", d.minute()),
            's' | 'S' => format!("{:02}", d.second()),
            'f' => format!("{:06}", d.nanosecond() / 1000),
            'T' => d.format("%H:%M:%S").to_string(),
            'r' => d.format("%I:%M:%S %p").to_string(),
            'j' => format!("{:03}", d.ordinal()),
            'p' => if d.hour() < 12 { "AM" } else { "PM" }.to_string(),
            'M' => d.format("%B").to_string(),
            'b' => d.format("%b").to_string(),
            'W' => d.format("%A").to_string(),
            'a' => d.format("%a").to_string(),
            'w' => d.weekday().num_days_from_sunday().to_string(),
            other => other.to_string(),
        };
        out.push_str(&piece);
    }
    out
}

/// MySQL's `lpad`/`rpad`: `s` cut or filled with `p` to `n` characters.
fn pad(c: &Context<'_>, left: bool, bound: &Bound) -> Result<Value> {
    let (Some(s), Some(n), Some(p)) = (text(c.get_raw(0)), int(c.get_raw(1)), text(c.get_raw(2)))
    else {
        return Ok(Value::Null);
    };
    let name = if left { "lpad" } else { "rpad" };
    let n = usize::try_from(n).unwrap_or(0);
    let len = s.chars().count();
    if len >= n {
        return Ok(Value::Text(s.chars().take(n).collect()));
    }
    if p.is_empty() {
        return Ok(Value::Null);
    }
    // Every character takes a byte at least: a count past the limit is refused unmeasured.
    bound.check(name, Some(n))?;
    let need = n - len;
    let fill_chars = p.chars().count();
    let (whole, rest) = (need / fill_chars, need % fill_chars);
    let rest_bytes = p.char_indices().nth(rest).map_or(p.len(), |(i, _)| i);
    let bytes = p
        .len()
        .checked_mul(whole)
        .and_then(|b| b.checked_add(rest_bytes + s.len()));
    bound.check(name, bytes)?;
    let mut out = String::with_capacity(bytes.unwrap_or(0));
    if !left {
        out.push_str(&s);
    }
    for _ in 0..whole {
        out.push_str(&p);
    }
    out.push_str(&p[..rest_bytes]);
    if left {
        out.push_str(&s);
    }
    Ok(Value::Text(out))
}

/// Registers the MySQL functions SQLite lacks; those whose value grows with their arguments
/// refuse one longer than `max_value_bytes`.
pub fn register(conn: &Connection, max_value_bytes: Arc<AtomicUsize>) -> Result<()> {
    let bound = Bound(max_value_bytes);
    date_part(conn, "year", |d| i64::from(d.year()))?;
    date_part(conn, "quarter", |d| i64::from((d.month() - 1) / 3 + 1))?;
    date_part(conn, "month", |d| i64::from(d.month()))?;
    date_part(conn, "day", |d| i64::from(d.day()))?;
    date_part(conn, "dayofmonth", |d| i64::from(d.day()))?;
    date_part(conn, "dayofweek", |d| {
        i64::from(d.weekday().num_days_from_sunday()) + 1
    })?;
    date_part(conn, "weekday", |d| {
        i64::from(d.weekday().num_days_from_monday())
    })?;
    date_part(conn, "dayofyear", |d| i64::from(d.ordinal()))?;
    date_part(conn, "hour", |d| i64::from(d.hour()))?;
    date_part(conn, "minute", |d| i64::from(d.minute()))?;
    date_part(conn, "second", |d| i64::from(d.second()))?;
    date_part(conn, "to_days", |d| to_days(d.date()))?;
    date_part(conn, "unix_timestamp", |d| d.and_utc().timestamp())?;
    add(conn, "dayname", 1, |c| {
        opt(datetime(c.get_raw(0)).map(|d| d.format("%A").to_string()))
    })?;
    add(conn, "monthname", 1, |c| {
        opt(datetime(c.get_raw(0)).map(|d| d.format("%B").to_string()))
    })?;
    add(conn, "last_day", 1, |c| {
        opt(datetime(c.get_raw(0)).and_then(|d| {
            let first_next = if d.month() == 12 {
                NaiveDate::from_ymd_opt(d.year() + 1, 1, 1)
            } else {
                NaiveDate::from_ymd_opt(d.year(), d.month() + 1, 1)
            }?;
            first_next
                .pred_opt()
                .map(|l| l.format("%Y-%m-%d").to_string())
        }))
    })?;
    add(conn, "datediff", 2, |c| {
        match (datetime(c.get_raw(0)), datetime(c.get_raw(1))) {
            (Some(a), Some(b)) => Value::Integer((a.date() - b.date()).num_days()),
            _ => Value::Null,
        }
    })?;
    add(conn, "from_days", 1, |c| {
        opt(int(c.get_raw(0)).and_then(|n| {
            let days = i32::try_from(n - 365).ok()?;
            NaiveDate::from_num_days_from_ce_opt(days).map(|d| d.format("%Y-%m-%d").to_string())
        }))
    })?;
    add(conn, "from_unixtime", 1, |c| {
        opt(int(c.get_raw(0))
            .and_then(|n| chrono::DateTime::from_timestamp(n, 0))
            .map(|d| d.naive_utc().format("%Y-%m-%d %H:%M:%S.0").to_string()))
    })?;
    add(conn, "time_to_sec", 1, |c| {
        opt(text(c.get_raw(0)).and_then(|s| {
            let t = s.rsplit(' ').next()?;
            let t = NaiveTime::parse_from_str(t, "%H:%M:%S%.f").ok()?;
            Some(i64::from(t.num_seconds_from_midnight()))
        }))
    })?;
    add(conn, "sec_to_time", 1, |c| {
        opt(int(c.get_raw(0)).map(|n| {
            let sign = if n < 0 { "-" } else { "" };
            let n = n.unsigned_abs();
            format!("{sign}{:02}:{:02}:{:02}", n / 3600, n / 60 % 60, n % 60)
        }))
    })?;
    for name in ["date_format", "time_format"] {
        sized(conn, name, 2, &bound, move |c, bound| {
            match (
                datetime(c.get_raw(0)).or_else(|| {
                    text(c.get_raw(0)).and_then(|s| {
                        NaiveTime::parse_from_str(&s, "%H:%M:%S%.f")
                            .ok()
                            .map(|t| NaiveDate::MIN.and_time(t))
                    })
                }),
                text(c.get_raw(1)),
            ) {
                (Some(d), Some(f)) => {
                    // A directive writes at most 11 bytes for its 2 (`%r`: "11:21:50 PM").
                    bound.check(name, f.len().checked_mul(6))?;
                    Ok(Value::Text(date_format(d, &f)))
                }
                _ => Ok(Value::Null),
            }
        })?;
    }
    add(conn, "left", 2, |c| {
        match (text(c.get_raw(0)), int(c.get_raw(1))) {
            (Some(s), Some(n)) => {
                Value::Text(s.chars().take(usize::try_from(n).unwrap_or(0)).collect())
            }
            _ => Value::Null,
        }
    })?;
    add(conn, "right", 2, |c| {
        match (text(c.get_raw(0)), int(c.get_raw(1))) {
            (Some(s), Some(n)) => {
                let len = s.chars().count();
                let n = usize::try_from(n).unwrap_or(0).min(len);
                Value::Text(s.chars().skip(len - n).collect())
            }
            _ => Value::Null,
        }
    })?;
    sized(conn, "lpad", 3, &bound, |c, bound| pad(c, true, bound))?;
    sized(conn, "rpad", 3, &bound, |c, bound| pad(c, false, bound))?;
    sized(conn, "repeat", 2, &bound, |c, bound| {
        match (text(c.get_raw(0)), int(c.get_raw(1))) {
            (Some(s), Some(n)) => {
                let n = usize::try_from(n).unwrap_or(0);
                bound.check("repeat", s.len().checked_mul(n))?;
                Ok(Value::Text(s.repeat(n)))
            }
            _ => Ok(Value::Null),
        }
    })?;
    sized(conn, "space", 1, &bound, |c, bound| {
        match int(c.get_raw(0)) {
            Some(n) => {
                let n = usize::try_from(n).unwrap_or(0);
                bound.check("space", Some(n))?;
                Ok(Value::Text(" ".repeat(n)))
            }
            None => Ok(Value::Null),
        }
    })?;
    add(conn, "reverse", 1, |c| {
        opt(text(c.get_raw(0)).map(|s| s.chars().rev().collect::<String>()))
    })?;
    add(conn, "strcmp", 2, |c| {
        match (text(c.get_raw(0)), text(c.get_raw(1))) {
            (Some(a), Some(b)) => Value::Integer(match a.cmp(&b) {
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
                std::cmp::Ordering::Greater => 1,
            }),
            _ => Value::Null,
        }
    })?;
    add(conn, "field", -1, |c| {
        let Some(needle) = text(c.get_raw(0)) else {
            return Value::Integer(0);
        };
        let at = (1..c.len()).find(|i| text(c.get_raw(*i)).as_deref() == Some(needle.as_str()));
        Value::Integer(at.map_or(0, |i| i as i64))
    })?;
    add(conn, "find_in_set", 2, |c| {
        match (text(c.get_raw(0)), text(c.get_raw(1))) {
            (Some(n), Some(list)) => Value::Integer(
                list.split(',')
                    .position(|x| x == n)
                    .map_or(0, |i| i as i64 + 1),
            ),
            _ => Value::Null,
        }
    })?;
    add(conn, "substring_index", 3, |c| {
        match (text(c.get_raw(0)), text(c.get_raw(1)), int(c.get_raw(2))) {
            (Some(s), Some(d), Some(n)) if !d.is_empty() => {
                let parts: Vec<&str> = s.split(d.as_str()).collect();
                let k = usize::try_from(n.unsigned_abs())
                    .unwrap_or(usize::MAX)
                    .min(parts.len());
                Value::Text(if n >= 0 {
                    parts[..k].join(&d)
                } else {
                    parts[parts.len() - k..].join(&d)
                })
            }
            (Some(_), Some(_), Some(_)) => Value::Text(String::new()),
            _ => Value::Null,
        }
    })?;
    add(conn, "truncate", 2, |c| {
        match (real(c.get_raw(0)), int(c.get_raw(1))) {
            (Some(x), Some(d)) => {
                let f = 10f64.powi(i32::try_from(d.clamp(-30, 30)).unwrap_or(0));
                Value::Real((x * f).trunc() / f)
            }
            _ => Value::Null,
        }
    })?;
    add(conn, "mysql_insert", 4, insert)?;
    math(conn)
}

fn insert(c: &Context<'_>) -> Value {
    match (
        text(c.get_raw(0)),
        int(c.get_raw(1)),
        int(c.get_raw(2)),
        text(c.get_raw(3)),
    ) {
        (Some(s), Some(pos), Some(len), Some(new)) => {
            let chars: Vec<char> = s.chars().collect();
            let Some(start) = usize::try_from(pos - 1).ok().filter(|p| *p < chars.len()) else {
                return Value::Text(s);
            };
            let end = usize::try_from(len)
                .map_or(chars.len(), |l| start.saturating_add(l))
                .min(chars.len());
            let mut out: String = chars[..start].iter().collect();
            out.push_str(&new);
            out.extend(&chars[end..]);
            Value::Text(out)
        }
        _ => Value::Null,
    }
}

/// A finite result, or NULL as MySQL answers out-of-domain arguments.
fn finite(x: f64) -> Value {
    if x.is_finite() {
        Value::Real(x)
    } else {
        Value::Null
    }
}

fn unary(conn: &Connection, name: &str, f: fn(f64) -> f64) -> Result<()> {
    add(conn, name, 1, move |c| {
        real(c.get_raw(0)).map_or(Value::Null, |x| finite(f(x)))
    })
}

fn binary(conn: &Connection, name: &str, f: fn(f64, f64) -> f64) -> Result<()> {
    add(conn, name, 2, move |c| {
        match (real(c.get_raw(0)), real(c.get_raw(1))) {
            (Some(a), Some(b)) => finite(f(a, b)),
            _ => Value::Null,
        }
    })
}

/// The math functions (SQLite's own are compiled out of the bundled library).
fn math(conn: &Connection) -> Result<()> {
    unary(conn, "acos", f64::acos)?;
    unary(conn, "asin", f64::asin)?;
    unary(conn, "atan", f64::atan)?;
    unary(conn, "cos", f64::cos)?;
    unary(conn, "cot", |x| 1.0 / x.tan())?;
    unary(conn, "degrees", f64::to_degrees)?;
    unary(conn, "exp", f64::exp)?;
    unary(conn, "ln", |x| if x > 0.0 { x.ln() } else { f64::NAN })?;
    unary(
        conn,
        "log10",
        |x| if x > 0.0 { x.log10() } else { f64::NAN },
    )?;
    unary(conn, "log2", |x| if x > 0.0 { x.log2() } else { f64::NAN })?;
    unary(conn, "radians", f64::to_radians)?;
    unary(conn, "sin", f64::sin)?;
    unary(conn, "sqrt", |x| if x >= 0.0 { x.sqrt() } else { f64::NAN })?;
    unary(conn, "tan", f64::tan)?;
    binary(conn, "atan2", f64::atan2)?;
    binary(conn, "pow", f64::powf)?;
    binary(conn, "power", f64::powf)?;
    binary(conn, "log", |b, x| {
        if b > 0.0 && b != 1.0 && x > 0.0 {
            x.ln() / b.ln()
        } else {
            f64::NAN
        }
    })?;
    add(conn, "pi", 0, |_| Value::Real(std::f64::consts::PI))?;
    // Integers stay integers, as in MySQL.
    for (name, up) in [("ceil", true), ("ceiling", true), ("floor", false)] {
        add(conn, name, 1, move |c| match c.get_raw(0) {
            ValueRef::Integer(i) => Value::Integer(i),
            v => real(v).map_or(Value::Null, |x| {
                Value::Real(if up { x.ceil() } else { x.floor() })
            }),
        })?;
    }
    add(conn, "mod", 2, |c| match (c.get_raw(0), c.get_raw(1)) {
        (ValueRef::Integer(a), ValueRef::Integer(b)) => {
            a.checked_rem(b).map_or(Value::Null, Value::Integer)
        }
        (a, b) => match (real(a), real(b)) {
            (Some(a), Some(b)) if b != 0.0 => Value::Real(a % b),
            _ => Value::Null,
        },
    })
}
