//! The audit of `@` keys. A reserved key is honoured as the reference honours it, ignored
//! where the reference ignores it (a key that cannot change the answer, such as `@null` in a
//! read), or refused with a code naming it. Any other `@` key is a custom key, kept as the
//! reference keeps it (its `customMap`): echoed in the answer and readable as an argument by
//! the functions and procedures of the same object (`"@position":0`,
//! `"firstPicture()":"getFromArray(pictureList,@position)"`). A custom key that looks like a
//! misspelt keyword (`@colum`, `@Order`) is refused instead: echoing it would drop what the
//! client meant it to do to the rows.
//!
//! [`TABLE_KEYWORDS`] and [`ROOT_KEYWORDS`] list every key apijet knows with what it does
//! with it; `tests/it/key_audit.rs` sends each of them and checks the answer is one or the other.

use crate::{PlanError, PlanOptions, Scope};
use serde_json::Value as Json;

/// What apijet does with a reserved key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// Honoured as the reference honours it.
    Honoured,
    /// Honoured for some values (named in the refusal of the others).
    Checked,
    /// Always refused with a 4xx naming it.
    Refused,
}

/// Table-object keywords (without `@`), with their treatment. `name()` keys (stored
/// procedures) are handled apart.
pub const TABLE_KEYWORDS: &[(&str, Treatment)] = &[
    ("column", Treatment::Honoured),
    ("order", Treatment::Honoured),
    ("group", Treatment::Honoured),
    ("having", Treatment::Honoured),
    ("having&", Treatment::Honoured),
    ("combine", Treatment::Honoured),
    ("key", Treatment::Honoured),
    ("raw", Treatment::Checked),
    ("json", Treatment::Honoured),
    ("null", Treatment::Honoured),
    ("cast", Treatment::Honoured),
    ("string", Treatment::Honoured),
    ("trim", Treatment::Honoured),
    ("role", Treatment::Honoured),
    ("explain", Treatment::Checked),
    ("drop", Treatment::Honoured),
    ("from@", Treatment::Honoured),
    ("method", Treatment::Checked),
    ("database", Treatment::Checked),
    ("schema", Treatment::Checked),
    ("cache", Treatment::Checked),
    ("try", Treatment::Checked),
    ("datasource", Treatment::Refused),
    ("namespace", Treatment::Refused),
    ("catalog", Treatment::Refused),
    ("sample", Treatment::Refused),
    ("latest", Treatment::Refused),
    ("partition", Treatment::Refused),
    ("fill", Treatment::Refused),
    ("ASOF", Treatment::Refused),
];

/// Root keywords (without `@`). The CRUD declarations are read by `/crud`; elsewhere the
/// reference accepts them too and so do we when they name the URL's own method.
pub const ROOT_KEYWORDS: &[(&str, Treatment)] = &[
    ("role", Treatment::Honoured),
    ("explain", Treatment::Checked),
    ("database", Treatment::Checked),
    ("schema", Treatment::Checked),
    ("cache", Treatment::Checked),
    ("datasource", Treatment::Refused),
    ("namespace", Treatment::Refused),
    ("catalog", Treatment::Refused),
    ("get", Treatment::Honoured),
    ("gets", Treatment::Honoured),
    ("head", Treatment::Honoured),
    ("heads", Treatment::Honoured),
    ("post", Treatment::Honoured),
    ("put", Treatment::Honoured),
    ("delete", Treatment::Honoured),
];

/// What a table object's `@` key is, once checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// A reserved keyword, honoured (or ignored where the reference ignores it).
    Keyword,
    /// A custom key: echoed in the object's answer after its columns and readable by its
    /// functions and procedures.
    Custom,
}

/// The reserved keyword a custom `@name` is a misspelling of: the same name in another letter
/// case, or one edit (insert, delete, change or swap of one character) away from a keyword of
/// five letters or more. Short keywords (`@key`, `@raw`) would catch too many custom names.
pub fn misspelt_keyword(name: &str) -> Option<&'static str> {
    let names = TABLE_KEYWORDS
        .iter()
        .chain(ROOT_KEYWORDS)
        .map(|(k, _)| k.trim_end_matches('@'));
    let mut near = None;
    for k in names {
        if k == name {
            return None;
        }
        if near.is_none()
            && (k.eq_ignore_ascii_case(name) || (k.len() >= 5 && one_edit_apart(k, name)))
        {
            near = Some(k);
        }
    }
    near
}

/// Whether `a` becomes `b` by inserting, deleting or changing one character, or swapping two
/// neighbours (compared without letter case).
fn one_edit_apart(a: &str, b: &str) -> bool {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    let (short, long) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    if long.len() - short.len() > 1 {
        return false;
    }
    let prefix = short
        .iter()
        .zip(long.iter())
        .take_while(|(x, y)| x == y)
        .count();
    if short.len() == long.len() {
        if prefix == short.len() {
            return true;
        }
        let (x, y) = (&short[prefix + 1..], &long[prefix + 1..]);
        // One changed character, or two neighbours swapped.
        x == y
            || (prefix + 1 < short.len()
                && short[prefix] == long[prefix + 1]
                && short[prefix + 1] == long[prefix]
                && short[prefix + 2..] == long[prefix + 2..])
    } else {
        short[prefix..] == long[prefix + 1..]
    }
}

/// A custom `@name`: kept, unless it is a misspelt keyword.
fn custom(name: &str) -> Result<KeyUse, PlanError> {
    match misspelt_keyword(name) {
        Some(k) => Err(PlanError::Invalid(format!(
            "@{name} looks like the keyword @{k}, misspelt: write @{k}, or give the custom key a \
             name that is no keyword's"
        ))),
        None => Ok(KeyUse::Custom),
    }
}

/// What database and schema this server serves, for `@database` and `@schema`.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// Names `@database` may give (upper case, as the reference spells them: `MYSQL`).
    pub databases: Vec<String>,
    /// Names `@schema` may give.
    pub schemas: Vec<String>,
}

fn text(v: &Json) -> Option<&str> {
    v.as_str().map(str::trim)
}

fn served(name: &str, value: &Json, options: &PlanOptions) -> Result<(), PlanError> {
    let (list, what) = match name {
        "database" => (&options.served.databases, "database engine"),
        _ => (&options.served.schemas, "schema"),
    };
    match text(value) {
        Some(v) if list.iter().any(|s| s.eq_ignore_ascii_case(v)) => Ok(()),
        _ => Err(PlanError::Invalid(format!(
            "@{name}:{value} is not served here: this server answers from the {what} {}",
            list.join(" / ")
        ))),
    }
}

fn cache(value: &Json) -> Result<(), PlanError> {
    // A result-cache hint: answers here are always read fresh, which every mode allows.
    let ok = match value {
        Json::Number(n) => n.as_u64().is_some_and(|n| n <= 2),
        Json::String(s) => matches!(s.as_str(), "ALL" | "ROM" | "RAM" | "0" | "1" | "2"),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(PlanError::Invalid(format!(
            "@cache:{value} is not valid: use 0/ALL, 1/ROM or 2/RAM"
        )))
    }
}

fn explain(value: &Json) -> Result<(), PlanError> {
    match value {
        Json::Bool(_) => Ok(()),
        _ => Err(PlanError::WrongType(format!(
            "@explain:{value} is not valid: use true or false"
        ))),
    }
}

fn refused(name: &str) -> PlanError {
    PlanError::Invalid(match name {
        "datasource" | "namespace" | "catalog" => {
            format!("@{name} is not supported: this server has one data source; remove @{name}")
        }
        "sample" | "latest" | "partition" | "fill" | "ASOF" => format!(
            "@{name} is a time-series keyword (TDengine) that SQLite, PostgreSQL and MariaDB \
             do not have"
        ),
        _ => format!("@{name} is not a keyword apijet knows; remove it"),
    })
}

/// Checks one `@` key of a table object against the audit: a keyword it honours or ignores,
/// a custom key, or a refusal naming it.
pub fn check_table_keyword(name: &str, value: &Json, ctx: &Scope<'_>) -> Result<KeyUse, PlanError> {
    let Some((_, t)) = TABLE_KEYWORDS.iter().find(|(k, _)| *k == name) else {
        if ROOT_KEYWORDS.iter().any(|(k, _)| *k == name) {
            return Err(PlanError::Invalid(format!(
                "@{name} is a keyword of the request's root, not of a table object: move it \
                 to the root"
            )));
        }
        return custom(name);
    };
    check_reserved(*t, name, value, ctx).map(|()| KeyUse::Keyword)
}

fn check_reserved(
    t: Treatment,
    name: &str,
    value: &Json,
    ctx: &Scope<'_>,
) -> Result<(), PlanError> {
    match (t, name) {
        (Treatment::Refused, _) => Err(refused(name)),
        (_, "database" | "schema") => served(name, value, ctx.options),
        (_, "cache") => cache(value),
        (_, "explain") => explain(value),
        (_, "try") => match value {
            Json::Bool(false) | Json::Null => Ok(()),
            _ => Err(PlanError::Invalid(
                "@try:true is not supported: errors are always answered; remove @try".into(),
            )),
        },
        // @null sets columns to NULL in PUT; a read ignores it, as the reference does
        // (`"key{}":"=null"` is the condition IS NULL).
        (_, "null") if ctx.method.is_query() => Ok(()),
        (_, "method") => match text(value) {
            Some(m) if m.eq_ignore_ascii_case(ctx.method.name()) => Ok(()),
            _ => Err(PlanError::Invalid(format!(
                "@method:{value} differs from the method this object runs with ({}): use \
                 /crud to mix methods",
                ctx.method.name()
            ))),
        },
        _ => Ok(()),
    }
}

/// Checks the root `@` keys of a request against the audit; the custom ones, to be echoed at
/// the end of the answer as the reference does, are returned with their `@`.
pub fn check_root_keywords(
    globals: &[(String, Json)],
    method: apijet_core::Method,
    options: &PlanOptions,
) -> Result<Vec<(String, Json)>, PlanError> {
    let mut customs = Vec::new();
    for (name, value) in globals {
        let Some((_, t)) = ROOT_KEYWORDS.iter().find(|(k, _)| *k == name) else {
            if TABLE_KEYWORDS.iter().any(|(k, _)| *k == name) {
                return Err(PlanError::Invalid(format!(
                    "@{name} is a keyword of table objects, not of the request's root: move it \
                     into the object it is for"
                )));
            }
            custom(name)?;
            customs.push((format!("@{name}"), value.clone()));
            continue;
        };
        match (*t, name.as_str()) {
            (Treatment::Refused, _) => return Err(refused(name)),
            (_, "database" | "schema") => served(name, value, options)?,
            (_, "cache") => cache(value)?,
            (_, "explain") => explain(value)?,
            (_, "get" | "gets" | "head" | "heads" | "post" | "put" | "delete")
                if !name.eq_ignore_ascii_case(method.name()) =>
            {
                return Err(PlanError::Invalid(format!(
                    "@{name} declares {} objects, but this is {}: use /crud to mix methods",
                    name.to_uppercase(),
                    method.name()
                )))
            }
            _ => {}
        }
    }
    Ok(customs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_keys_are_kept_unless_they_look_like_keywords() {
        for custom in [
            "position", "value", "limit", "offset", "x", "whatever", "row", "page",
        ] {
            assert_eq!(misspelt_keyword(custom), None, "@{custom}");
        }
        for (typo, keyword) in [
            ("colum", "column"),
            ("Column", "column"),
            ("ORDER", "order"),
            ("oredr", "order"),
            ("groups", "group"),
            ("havin", "having"),
            ("explian", "explain"),
            ("Role", "role"),
            ("combin", "combine"),
        ] {
            assert_eq!(misspelt_keyword(typo), Some(keyword), "@{typo}");
        }
        assert_eq!(misspelt_keyword("column"), None);
    }
}
