//! Function calls spelled per engine: MySQL and MariaDB run the reference's functions as
//! written; SQLite gets renames here and the rest as functions `exec` registers on every
//! connection; PostgreSQL gets templates. The planner refused what an engine cannot express.

use apijet_core::Engine;
use apijet_plan::query::IntervalUnit;

/// What a rendered argument is known to hold, so a template casts only when it must.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    /// Text.
    Text,
    /// An exact number (integer or decimal).
    Number,
    /// A floating-point number.
    Float,
    /// A date, time or timestamp.
    Temporal,
    /// Unknown.
    Other,
}

/// One rendered argument.
#[derive(Debug, Clone)]
pub struct Arg {
    /// Its SQL.
    pub sql: String,
    /// What it holds.
    pub ty: ArgType,
}

/// A call's spelling: `{0}` is argument 0 as rendered, `{t0}` as text, `{n0}` as numeric,
/// `{d0}` as timestamp, `{f0}` as a number (float8 unless it is one), `{*}` all arguments, `{*1}` the arguments from 1 on, `{D}` the
/// `DISTINCT ` of an aggregate.
fn template(engine: Engine, name: &str, args: &[Arg]) -> Option<&'static str> {
    match engine {
        // MariaDB has no ANY_VALUE: the group's least value is one of its values.
        Engine::MySql => (name == "any_value").then_some("min({0})"),
        Engine::Sqlite => sqlite(name, args.len()),
        Engine::Postgres => {
            // MySQL rounds a double to a double and an exact number to an exact number;
            // PostgreSQL rounds to a given scale only in numeric.
            let exact = args.first().is_some_and(|a| a.ty == ArgType::Number);
            match (name, args.len(), exact) {
                ("round", 2, false) => Some("CAST(round({n0}, {1}) AS float8)"),
                ("truncate", _, false) => Some("CAST(trunc({n0}, {1}) AS float8)"),
                ("mod", _, false) => Some("CAST(mod({n0}, {n1}) AS float8)"),
                _ => postgres(name, args.len()),
            }
        }
    }
}

fn sqlite(name: &str, argc: usize) -> Option<&'static str> {
    Some(match (name, argc) {
        ("ascii", _) => "unicode({0})",
        ("char_length" | "character_length", _) => "length({0})",
        ("lcase", _) => "lower({0})",
        ("ucase", _) => "upper({0})",
        ("mid" | "substring", _) => "substr({*})",
        ("greatest", _) => "max({*})",
        ("least", _) => "min({*})",
        ("if", _) => "iif({*})",
        ("locate", _) => "instr({1}, {0})",
        ("log", 1) => "ln({0})",
        ("insert", _) => "mysql_insert({*})",
        ("json_type", _) => "upper(json_type({0}))",
        ("json_arrayagg", _) => "json_group_array({D}{0})",
        ("any_value", _) => "min({0})",
        // SQLite's second argument would be the separator.
        ("group_concat", 2..) => "group_concat({D}concat({*}))",
        ("json_objectagg", _) => "json_group_object({0}, {1})",
        ("json_merge_patch", _) => "json_patch({*})",
        ("now" | "sysdate" | "current_timestamp" | "localtime" | "localtimestamp", _) => {
            "datetime('now')"
        }
        ("curdate" | "current_date", _) => "date('now')",
        ("curtime" | "current_time", _) => "time('now')",
        ("unix_timestamp", 0) => "CAST(strftime('%s', 'now') AS INTEGER)",
        ("rand", _) => "((random() / 18446744073709551616.0) + 0.5)",
        _ => return None,
    })
}

fn postgres(name: &str, argc: usize) -> Option<&'static str> {
    Some(match (name, argc) {
        ("group_concat", 1) => "string_agg({D}{t0}, ',')",
        ("group_concat", _) => "string_agg({D}concat({*}), ',')",
        ("json_arrayagg", _) => "json_agg({D}{0})",
        // PostgreSQL 16 has any_value; the first element of the group's array is one on every
        // version and for every type (min() has no jsonb).
        ("any_value", _) => "(array_agg({0}))[1]",
        ("json_objectagg", _) => "json_object_agg({0}, {1})",
        ("ascii", _) => "ascii({t0})",
        ("char_length" | "character_length", _) => "char_length({t0})",
        ("locate", _) => "strpos({t1}, {t0})",
        ("lcase" | "lower", _) => "lower({t0})",
        ("ucase" | "upper", _) => "upper({t0})",
        ("left", _) => "left({t0}, {1})",
        ("right", _) => "right({t0}, {1})",
        ("lpad", _) => "lpad({t0}, {1}, {t2})",
        ("rpad", _) => "rpad({t0}, {1}, {t2})",
        ("ltrim", _) => "ltrim({t0})",
        ("rtrim", _) => "rtrim({t0})",
        ("trim", _) => "trim({t0})",
        ("mid" | "substr" | "substring", _) => "substr({t0}, {*1})",
        ("repeat", _) => "repeat({t0}, {1})",
        ("replace", _) => "replace({t0}, {t1}, {t2})",
        ("reverse", _) => "reverse({t0})",
        ("space", _) => "repeat(' ', {0})",
        ("strcmp", _) => {
            "(CASE WHEN lower({t0}) < lower({t1}) THEN -1 WHEN lower({t0}) > lower({t1}) THEN 1 \
             ELSE 0 END)"
        }
        ("find_in_set", _) => "coalesce(array_position(string_to_array({t1}, ','), {t0}), 0)",
        // The first n parts (n ≥ 0) or the last -n parts, joined again, as MySQL's.
        ("substring_index", _) => {
            "(CASE WHEN {t1} = '' THEN '' WHEN CAST({2} AS integer) >= 0 THEN \
             array_to_string((string_to_array({t0}, {t1}))[1:CAST({2} AS integer)], {t1}) \
             ELSE array_to_string((string_to_array({t0}, {t1}))[greatest(cardinality(\
             string_to_array({t0}, {t1})) + CAST({2} AS integer) + 1, 1):], {t1}) END)"
        }
        ("field", _) => "coalesce(array_position(ARRAY[{*1}], {0}), 0)",
        ("insert", _) => "overlay({t0} placing {t3} from {1} for {2})",
        ("sec_to_time", _) => "to_char(make_interval(secs => {n0}), 'HH24:MI:SS')",
        ("sign", _) => "CAST(sign({n0}) AS integer)",
        ("abs", _) => "abs({f0})",
        ("ceil" | "ceiling", _) => "ceil({f0})",
        ("floor", _) => "floor({f0})",
        ("sqrt", _) => "sqrt({f0})",
        ("exp", _) => "exp({f0})",
        ("ln", _) => "ln({f0})",
        ("log10", _) => "log10({f0})",
        ("sin", _) => "sin({f0})",
        ("cos", _) => "cos({f0})",
        ("tan", _) => "tan({f0})",
        ("asin", _) => "asin({f0})",
        ("acos", _) => "acos({f0})",
        ("atan", _) => "atan({f0})",
        ("cot", _) => "cot({f0})",
        ("degrees", _) => "degrees({f0})",
        ("radians", _) => "radians({f0})",
        ("log", 1) => "ln({f0})",
        ("log", _) => "CAST(log({n0}, {n1}) AS float8)",
        ("log2", _) => "CAST(log(2, {n0}) AS float8)",
        ("mod", _) => "mod({n0}, {n1})",
        ("pow", _) => "power({0}, {1})",
        ("rand", _) => "random()",
        ("round", 2) => "round({n0}, {1})",
        ("truncate", _) => "trunc({n0}, {1})",
        ("now" | "sysdate" | "current_timestamp" | "localtime" | "localtimestamp", _) => {
            "LOCALTIMESTAMP(0)"
        }
        ("curdate" | "current_date", _) => "CURRENT_DATE",
        ("curtime" | "current_time", _) => "LOCALTIME(0)",
        ("date", _) => "CAST({d0} AS date)",
        ("time", _) => "CAST({d0} AS time)",
        ("year", _) => "CAST(EXTRACT(YEAR FROM {d0}) AS integer)",
        ("quarter", _) => "CAST(EXTRACT(QUARTER FROM {d0}) AS integer)",
        ("month", _) => "CAST(EXTRACT(MONTH FROM {d0}) AS integer)",
        ("day" | "dayofmonth", _) => "CAST(EXTRACT(DAY FROM {d0}) AS integer)",
        ("dayofyear", _) => "CAST(EXTRACT(DOY FROM {d0}) AS integer)",
        ("dayofweek", _) => "(CAST(EXTRACT(DOW FROM {d0}) AS integer) + 1)",
        ("weekday", _) => "(CAST(EXTRACT(ISODOW FROM {d0}) AS integer) - 1)",
        ("hour", _) => "CAST(EXTRACT(HOUR FROM {d0}) AS integer)",
        ("minute", _) => "CAST(EXTRACT(MINUTE FROM {d0}) AS integer)",
        ("second", _) => "CAST(floor(EXTRACT(SECOND FROM {d0})) AS integer)",
        ("dayname", _) => "to_char({d0}, 'FMDay')",
        ("monthname", _) => "to_char({d0}, 'FMMonth')",
        ("last_day", _) => "CAST(date_trunc('month', {d0}) + INTERVAL '1 month - 1 day' AS date)",
        ("datediff", _) => "(CAST({d0} AS date) - CAST({d1} AS date))",
        ("to_days", _) => "(CAST({d0} AS date) - DATE '0001-01-01' + 366)",
        ("from_days", _) => "(DATE '0001-01-01' + CAST({0} AS integer) - 366)",
        ("unix_timestamp", 0) => "CAST(EXTRACT(EPOCH FROM LOCALTIMESTAMP(0)) AS bigint)",
        ("unix_timestamp", _) => "CAST(EXTRACT(EPOCH FROM {d0}) AS bigint)",
        ("from_unixtime", _) => "(to_timestamp({n0}) AT TIME ZONE 'UTC')",
        ("time_to_sec", _) => "CAST(EXTRACT(EPOCH FROM CAST({0} AS time)) AS integer)",
        ("date_format", _) => "to_char({d0}, {1})",
        ("json_array", _) => "json_build_array({*})",
        ("json_object", _) => "json_build_object({*})",
        ("ifnull", _) => "coalesce({*})",
        ("if", _) => "(CASE WHEN {0} THEN {1} ELSE {2} END)",
        _ => return None,
    })
}

/// Writes the call `name(args)` for `engine`.
pub fn write_call(engine: Engine, name: &str, args: &[Arg], distinct: bool, out: &mut String) {
    let Some(t) = template(engine, name, args) else {
        out.push_str(name);
        out.push('(');
        if distinct {
            out.push_str("DISTINCT ");
        }
        join(args, 0, out);
        out.push(')');
        return;
    };
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open + rest[open..].find('}').unwrap_or(0);
        let spec = &rest[open + 1..close];
        rest = &rest[close + 1..];
        match spec {
            "D" => {
                if distinct {
                    out.push_str("DISTINCT ");
                }
            }
            "*" => join(args, 0, out),
            "*1" => join(args, 1, out),
            _ => {
                let (conv, index) = match spec.as_bytes().first() {
                    Some(c @ (b't' | b'n' | b'd' | b'f')) => (Some(*c), &spec[1..]),
                    _ => (None, spec),
                };
                let Some(arg) = index.parse::<usize>().ok().and_then(|i| args.get(i)) else {
                    continue;
                };
                write_converted(arg, conv, out);
            }
        }
    }
    out.push_str(rest);
}

fn write_converted(arg: &Arg, conv: Option<u8>, out: &mut String) {
    if conv == Some(b'f') && matches!(arg.ty, ArgType::Number | ArgType::Float) {
        out.push_str(&arg.sql);
        return;
    }
    let (target, already) = match conv {
        Some(b'f') => ("float8", ArgType::Float),
        Some(b't') => ("text", ArgType::Text),
        Some(b'n') => ("numeric", ArgType::Number),
        Some(b'd') => ("timestamp", ArgType::Temporal),
        _ => {
            out.push_str(&arg.sql);
            return;
        }
    };
    if arg.ty == already {
        out.push_str(&arg.sql);
    } else {
        out.push_str("CAST(");
        out.push_str(&arg.sql);
        out.push_str(" AS ");
        out.push_str(target);
        out.push(')');
    }
}

fn join(args: &[Arg], from: usize, out: &mut String) {
    for (i, a) in args.iter().enumerate().skip(from) {
        if i > from {
            out.push_str(", ");
        }
        out.push_str(&a.sql);
    }
}

/// `base ± amount unit` for `date_add` and friends.
pub fn write_date_add(
    engine: Engine,
    base: &Arg,
    amount: &str,
    unit: IntervalUnit,
    subtract: bool,
    out: &mut String,
) {
    match engine {
        Engine::MySql => {
            out.push_str(if subtract { "date_sub(" } else { "date_add(" });
            out.push_str(&base.sql);
            out.push_str(", INTERVAL ");
            out.push_str(amount);
            out.push(' ');
            out.push_str(unit.keyword());
            out.push(')');
        }
        Engine::Postgres => {
            let step = match unit {
                IntervalUnit::Second => "1 second",
                IntervalUnit::Minute => "1 minute",
                IntervalUnit::Hour => "1 hour",
                IntervalUnit::Day => "1 day",
                IntervalUnit::Week => "7 days",
                IntervalUnit::Month => "1 month",
                IntervalUnit::Quarter => "3 months",
                IntervalUnit::Year => "1 year",
            };
            out.push('(');
            write_converted(base, Some(b'd'), out);
            out.push_str(if subtract { " - " } else { " + " });
            out.push_str("CAST(");
            out.push_str(amount);
            out.push_str(" AS integer) * INTERVAL '");
            out.push_str(step);
            out.push_str("')");
        }
        Engine::Sqlite => {
            let (factor, unit) = match unit {
                IntervalUnit::Second => ("1", "seconds"),
                IntervalUnit::Minute => ("1", "minutes"),
                IntervalUnit::Hour => ("1", "hours"),
                IntervalUnit::Day => ("1", "days"),
                IntervalUnit::Week => ("7", "days"),
                IntervalUnit::Month => ("1", "months"),
                IntervalUnit::Quarter => ("3", "months"),
                IntervalUnit::Year => ("1", "years"),
            };
            // `.0` as the answers of DATETIME columns have it.
            out.push_str("(datetime(");
            out.push_str(&base.sql);
            out.push_str(", CAST(");
            out.push_str(if subtract { "-" } else { "" });
            out.push_str(factor);
            out.push_str(" * (");
            out.push_str(amount);
            out.push_str(") AS TEXT) || ' ");
            out.push_str(unit);
            out.push_str("') || '.0')");
        }
    }
}

/// A MySQL `date_format` pattern in PostgreSQL's `to_char` spelling (the planner let through
/// only the specifiers translated here).
pub fn postgres_date_format(fmt: &str) -> String {
    let mut out = String::with_capacity(fmt.len() * 2);
    let mut literal = String::new();
    let flush = |literal: &mut String, out: &mut String| {
        if !literal.is_empty() {
            out.push('"');
            out.push_str(&literal.replace('"', "\\\""));
            out.push('"');
            literal.clear();
        }
    };
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            literal.push(c);
            continue;
        }
        let spelled = match chars.next() {
            Some('Y') => "YYYY",
            Some('y') => "YY",
            Some('m') => "MM",
            Some('c') => "FMMM",
            Some('d') => "DD",
            Some('e') => "FMDD",
            Some('H') => "HH24",
            Some('k') => "FMHH24",
            Some('h' | 'I') => "HH12",
            Some('i') => "MI",
            Some('s' | 'S') => "SS",
            Some('T') => "HH24:MI:SS",
            Some('j') => "DDD",
            Some('p') => "AM",
            Some(other) => {
                literal.push(other);
                continue;
            }
            None => continue,
        };
        flush(&mut literal, &mut out);
        out.push_str(spelled);
    }
    flush(&mut literal, &mut out);
    out
}

/// Full-text relevance of `columns` for the bound `query`.
pub fn write_match(
    engine: Engine,
    columns: &[String],
    query: &str,
    boolean: bool,
    out: &mut String,
) {
    match engine {
        Engine::Postgres => {
            out.push_str("ts_rank(to_tsvector('simple', concat_ws(' ', ");
            out.push_str(&columns.join(", "));
            out.push_str(")), ");
            out.push_str(if boolean {
                "websearch_to_tsquery('simple', "
            } else {
                "plainto_tsquery('simple', "
            });
            out.push_str(query);
            out.push_str("))");
        }
        _ => {
            out.push_str("MATCH (");
            out.push_str(&columns.join(", "));
            out.push_str(") AGAINST (");
            out.push_str(query);
            out.push_str(if boolean { " IN BOOLEAN MODE)" } else { ")" });
        }
    }
}
