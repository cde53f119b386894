//! SQLite's errors as the backend's: SQLite has no classes of errors, so where and how they
//! happen decides.

use crate::{DbErrorKind, ExecError};

/// An error of a prepared statement while it runs. SQLite has no classes of errors, but where
/// they happen says enough: a statement that prepared names only what exists, so a generic
/// error while it steps comes from evaluating a value (`json_length` of text that is not JSON,
/// a function's own refusal), a client's mistake as PostgreSQL's class 22 is.
pub(super) fn step_error(e: rusqlite::Error) -> ExecError {
    if let rusqlite::Error::SqliteFailure(_, Some(message)) = &e {
        if message.contains(super::sqlite_functions::TOO_LONG) {
            // A registered function refused to make a value past the limit: its message
            // names the function and the setting.
            return ExecError::Plan(apijet_plan::PlanError::Limit(message.clone()));
        }
    }
    let generic = matches!(
        &e,
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::Unknown
    );
    match db_error(e) {
        ExecError::Db {
            kind: DbErrorKind::Other,
            message,
        } if generic => ExecError::Db {
            kind: DbErrorKind::BadValue,
            message,
        },
        other => other,
    }
}

pub(super) fn db_error(e: rusqlite::Error) -> ExecError {
    let kind = match &e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            rusqlite::ErrorCode::ConstraintViolation => {
                if f.extended_code == 2067 || f.extended_code == 1555 {
                    DbErrorKind::Unique
                } else {
                    DbErrorKind::Constraint
                }
            }
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked => {
                DbErrorKind::Timeout
            }
            rusqlite::ErrorCode::TooBig => DbErrorKind::TooLarge,
            _ => DbErrorKind::Other,
        },
        rusqlite::Error::UserFunctionError(_) => DbErrorKind::BadValue,
        _ => DbErrorKind::Other,
    };
    let message = e.to_string();
    let kind = if message.contains("no such column") || message.contains("syntax error") {
        DbErrorKind::Syntax
    } else if message.contains("no such function") {
        DbErrorKind::Unsupported
    } else if message.contains("regex parse error") {
        DbErrorKind::BadPattern
    } else {
        kind
    };
    ExecError::Db { kind, message }
}
