//! Why a request cannot be planned.

use apijet_core::{Method, Role};

/// Why a request cannot be planned. Each variant maps to one APIJSON code in `response`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PlanError {
    /// The role may not use this method on this table, or no such table is served: both get
    /// this same answer, so that it does not tell which tables exist.
    #[error(
        "no table {table} is served to {role} visitors for {method}: there is no such table, \
         or the Access table does not grant {role} visitors {method} on it (both are answered \
         alike, so that the answer does not reveal which tables exist)",
        role = role.name()
    )]
    AccessDenied {
        /// API table name.
        table: String,
        /// Role used.
        role: Role,
        /// Method.
        method: Method,
    },
    /// The role needs a login.
    #[error("not logged in, or the login has expired: log in and try again")]
    NotLoggedIn,
    /// No such role.
    #[error("role {0} does not exist: use one of [UNKNOWN, LOGIN, CONTACT, CIRCLE, OWNER, ADMIN]")]
    UnknownRole(String),
    /// A construct that is refused outright.
    #[error("{0}")]
    Forbidden(String),
    /// A function that is not on the allow-list.
    #[error("function {0} is not allowed")]
    UnknownFunction(String),
    /// A key or value that is not valid.
    #[error("{0}")]
    Invalid(String),
    /// A limit was exceeded.
    #[error("{0}")]
    Limit(String),
    /// A value of the wrong JSON type.
    #[error("{0}")]
    WrongType(String),
    /// A write would duplicate what must be unique, or add an element already present.
    #[error("{0}")]
    Conflict(String),
    /// A write removes an element that is not there.
    #[error("{0}")]
    Missing(String),
    /// A write changed no row: it is not the visitor's, or it does not exist.
    #[error("no permission to change {0}, or it does not exist")]
    NothingChanged(String),
    /// A column the table does not have.
    #[error("{table} has no column {column}")]
    UnknownColumn {
        /// API table name.
        table: String,
        /// The column as sent.
        column: String,
    },
}
