//! The paging keywords of an array (`count`, `page`, `query`, `compat`, protocol §4.1, §7).

use crate::PlanError;
use apijet_request::ArrayObject;
use serde_json::Value as Json;

/// What `query` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryMode {
    /// Rows only.
    Rows,
    /// The total only.
    Total,
    /// Both.
    Both,
}

/// The validated paging of an array.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    /// Page size.
    pub count: u64,
    /// Page index.
    pub page: u64,
    /// `query`.
    pub mode: QueryMode,
    /// `compat`: count over the whole query (right for DISTINCT and GROUP BY).
    pub compat: bool,
}

fn int_of(v: &Json) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Validates `count`, `page`, `query` and `compat` of the array at `path`.
pub fn paging(
    arr: &ArrayObject,
    path: &str,
    max_count: u64,
    max_page: u64,
) -> Result<Paging, PlanError> {
    let count = match &arr.count {
        None => 10.min(max_count),
        Some(v) => match int_of(v) {
            Some(0) => max_count,
            Some(c) if c > 0 && (c as u64) <= max_count => c as u64,
            _ => {
                return Err(PlanError::Limit(format!(
                    "{path}/count:{v} is not valid: it must be within 0-{max_count} (setting \
                     max_count; count:0 asks for that maximum)"
                )))
            }
        },
    };
    let page = match &arr.page {
        None => 0,
        Some(v) => match int_of(v) {
            Some(p) if p >= 0 && (p as u64) <= max_page => p as u64,
            _ => {
                return Err(PlanError::Limit(format!(
                    "{path}/page:{v} is not valid: it must be within 0-{max_page} (setting \
                     max_page)"
                )))
            }
        },
    };
    let mode = match &arr.query {
        None => QueryMode::Rows,
        Some(v) => match (int_of(v), v.as_str()) {
            (Some(0), _) | (_, Some("TABLE")) => QueryMode::Rows,
            (Some(1), _) | (_, Some("TOTAL")) => QueryMode::Total,
            (Some(2), _) | (_, Some("ALL")) => QueryMode::Both,
            _ => {
                return Err(PlanError::Invalid(format!(
                    "{path}/query:{v} is not valid: use 0/TABLE, 1/TOTAL or 2/ALL"
                )))
            }
        },
    };
    let compat = arr.compat.as_ref().and_then(Json::as_bool).unwrap_or(false);
    Ok(Paging {
        count,
        page,
        mode,
        compat,
    })
}
