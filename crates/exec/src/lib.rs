//! apijet-exec: runs planned statements on a backend and assembles the read results.
//!
//! The backends ([`Backend`]) hide the three drivers behind one `fetch(statement, sink)`; the
//! [`read`] module runs a read's plan (`apijet_plan::read::ReadPlan`) the way the reference
//! reads (request order, references to earlier results, the first-child rule), binding each
//! statement's values and rendering it with `sql`; [`write`] runs writes.

#![deny(missing_docs)]

pub mod backend;
pub mod cancel;
pub mod cell;
pub mod fair;
pub mod feed;
mod functions;
pub mod ids;
mod introspect;
mod procedure;
pub mod queue;
pub mod read;
pub mod sink;
pub mod stats;
pub mod write;

pub use backend::{Backend, DbRole, DbUrl};
pub use introspect::{kind_of, load_request_rules, load_schema};

use apijet_plan::PlanError;

/// Neutral classes of database errors (the driver's own code stays in the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbErrorKind {
    /// A value the column cannot take (bad number, bad date, bad JSON).
    BadValue,
    /// Unique constraint.
    Unique,
    /// Other constraints (not null, foreign key, check).
    Constraint,
    /// Statement timeout or lock wait.
    Timeout,
    /// A value larger than the engine was allowed to make (`max_answer_bytes`).
    TooLarge,
    /// A regular expression the engine cannot compile (a client's `k~` value).
    BadPattern,
    /// A function or type this engine does not have (`now()` on SQLite, a cast type).
    Unsupported,
    /// The statement does not fit the schema (should not happen: the planner checks names).
    Syntax,
    /// The connection broke.
    Connection,
    /// A part of the database said it cannot serve now: a shard Spider cannot reach, a
    /// Galera node that is not synced, a server shutting down or read-only after a failover.
    /// Nothing of the statement took effect; the same request may succeed on a retry.
    Unavailable,
    /// Anything else.
    Other,
}

/// Why running a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Planning failed.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The database cannot be reached.
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    /// The database refused a statement.
    #[error("{message}")]
    Db {
        /// Class of the error.
        kind: DbErrorKind,
        /// The driver's message.
        message: String,
    },
    /// The client went away while rows were being sent.
    #[error("the client closed the connection")]
    ClientGone,
    /// A statement ran past the request's own timeout and was stopped.
    #[error(
        "a statement of this request ran longer than {setting} allows ({ms} ms) and was \
         stopped: ask for less (conditions on indexed columns, fewer rows to group or sort)"
    )]
    Timeout {
        /// The setting that gives the timeout.
        setting: &'static str,
        /// Its value in milliseconds.
        ms: u64,
    },
    /// A remote function that is not registered.
    #[error("remote function {0} is not allowed")]
    FunctionNotAllowed(String),
    /// A request shape that is not valid at execution time.
    #[error("{0}")]
    Invalid(String),
    /// A construct refused at execution time.
    #[error("{0}")]
    Forbidden(String),
}

impl ExecError {
    /// The database could not be reached, or the connection broke: another server may answer.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            ExecError::Connect(_)
                | ExecError::Db {
                    kind: DbErrorKind::Connection,
                    ..
                }
        )
    }
}
