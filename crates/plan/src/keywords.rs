//! The audit of reserved `@` keys: every one a client may send is either honoured (as the
//! reference honours it) or refused with a code naming it; none is ignored or echoed.
//!
//! [`TABLE_KEYWORDS`] and [`ROOT_KEYWORDS`] list every key apijet knows with what it does
//! with it; `tests/key_audit.rs` sends each of them and checks the answer is one or the other.

use crate::{Ctx, PlanError, PlanOptions};
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
    ("null", Treatment::Checked),
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

/// Checks one table-object keyword against the audit; `Ok` when it is honoured.
pub fn check_table_keyword(name: &str, value: &Json, ctx: &Ctx<'_>) -> Result<(), PlanError> {
    let Some((_, t)) = TABLE_KEYWORDS.iter().find(|(k, _)| *k == name) else {
        return Err(refused(name));
    };
    match (*t, name) {
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
        (_, "null") if ctx.method.is_query() => Err(PlanError::Invalid(format!(
            "@null sets columns to NULL in PUT; in {} it is no condition: write \
             \"key{{}}\":\"=null\" for IS NULL",
            ctx.method.name()
        ))),
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

/// Checks the root keywords of a request against the audit.
pub fn check_root_keywords(
    globals: &[(String, Json)],
    method: apijet_core::Method,
    options: &PlanOptions,
) -> Result<(), PlanError> {
    for (name, value) in globals {
        let Some((_, t)) = ROOT_KEYWORDS.iter().find(|(k, _)| *k == name) else {
            return Err(refused(name));
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
    Ok(())
}
