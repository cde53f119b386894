//! Every error the server can answer, mapped to its APIJSON code in one place.
//!
//! The codes follow protocol §9: 400 unparsable body, 401 not permitted, 403 forbidden
//! construct, 406 bad key, value or limit, 407 not logged in, 408 timeout, 409 conflict,
//! 415 wrong type, 500 everything else; the account endpoints add the reference demo's 404
//! (no such code or account), 412 (wrong code or password), 416 (amount out of range) and 429
//! (too many failed attempts). Database failures caused by a client's value are
//! answered as 400-class codes, never 500; the server's own faults keep 500 with a masked
//! message outside debug mode.

use apijet_exec::{DbErrorKind, ExecError};
use apijet_plan::PlanError;
use apijet_request::RequestError;
use std::time::Duration;

/// Any error of any stage.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body could not be parsed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Planning refused the request.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Execution failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The URL names no method.
    #[error(
        "URL path /{0} names no method: use one of [get, head, gets, heads, post, put, delete]"
    )]
    UnknownMethod(String),
    /// The server broke one of its own invariants (a plan and the sink of its answer that do
    /// not fit, a hashing worker that died, a reload that failed): its fault, never the
    /// client's, so 500 with the message kept for the log.
    #[error("internal error: {0}")]
    Internal(String),
    /// The client has too much under way already (the message names the setting).
    #[error("{0}")]
    TooManyRequests(String),
    /// An account endpoint (codes, logins, passwords, balance) refused the call.
    #[error(transparent)]
    Account(#[from] AccountError),
}

/// Why an account endpoint refused a call: verification codes, logins, passwords, balances
/// (the reference demo's codes). The endpoints raise it; [`ApiError::code`] maps it.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// A missing or malformed field.
    #[error("{0}")]
    Invalid(String),
    /// No code was given, or no account has that phone.
    #[error("{0}")]
    NotFound(String),
    /// Wrong code or password.
    #[error("{0}")]
    Mismatch(String),
    /// The code has expired.
    #[error("the verification code has expired: ask for a new one")]
    Expired,
    /// The new password equals the old one, or the balance changed meanwhile.
    #[error("{0}")]
    Conflict(String),
    /// An amount out of range.
    #[error("{0}")]
    OutOfRange(String),
    /// Refused by configuration, or the database lacks a table the endpoint needs.
    #[error("{0}")]
    Forbidden(String),
    /// Not logged in.
    #[error("not logged in, or the login has expired: log in and try again")]
    NotLoggedIn,
    /// Too many wrong codes or passwords for this account or client address.
    #[error(
        "too many failed attempts for this account or from this address: try again in {} s \
         (settings login_failures_per_phone, login_failures_per_address, login_lockout_secs)",
        .0.as_secs().max(1)
    )]
    TooManyAttempts(Duration),
    /// Too many failed logins for this phone or client address.
    #[error(
        "too many failed logins for this phone or address: try again in {} s (settings \
         login_failures_per_phone, login_failures_per_address, login_lockout_secs)",
        .0.as_secs().max(1)
    )]
    TooManyLogins(Duration),
}

impl From<PlanError> for Box<ApiError> {
    fn from(e: PlanError) -> Self {
        Box::new(ApiError::Plan(e))
    }
}

impl ApiError {
    /// The APIJSON code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::Request(e) => match e {
                RequestError::InvalidJson(_) | RequestError::NotAnObject => 400,
                RequestError::BadKey { .. } | RequestError::LogicWithComparison { .. } => 406,
            },
            ApiError::Plan(e) => plan_code(e),
            ApiError::Exec(e) => match e {
                ExecError::Plan(p) => plan_code(p),
                ExecError::Connect(_) => 500,
                ExecError::Db { kind, .. } => match kind {
                    DbErrorKind::BadValue => 400,
                    DbErrorKind::Unique => 409,
                    DbErrorKind::Constraint => 400,
                    DbErrorKind::Timeout => 408,
                    DbErrorKind::TooLarge => 406,
                    DbErrorKind::BadPattern | DbErrorKind::Unsupported => 406,
                    DbErrorKind::Unavailable => 503,
                    DbErrorKind::Syntax | DbErrorKind::Connection | DbErrorKind::Other => 500,
                },
                ExecError::ClientGone => 500,
                ExecError::Timeout { .. } => 408,
                ExecError::FunctionNotAllowed(_) => 403,
                ExecError::Invalid(_) => 406,
                ExecError::Forbidden(_) => 403,
            },
            ApiError::UnknownMethod(_) => 406,
            ApiError::Internal(_) => 500,
            ApiError::TooManyRequests(_) => 429,
            ApiError::Account(e) => match e {
                AccountError::Invalid(_) => 406,
                AccountError::NotFound(_) => 404,
                AccountError::Mismatch(_) => 412,
                AccountError::Expired => 408,
                AccountError::Conflict(_) => 409,
                AccountError::OutOfRange(_) => 416,
                AccountError::Forbidden(_) => 403,
                AccountError::NotLoggedIn => 407,
                AccountError::TooManyAttempts(_) | AccountError::TooManyLogins(_) => 429,
            },
        }
    }

    /// How long the client should wait before trying again (HTTP `Retry-After`), for a
    /// refusal that says.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Account(
                AccountError::TooManyAttempts(wait) | AccountError::TooManyLogins(wait),
            ) => Some(*wait),
            _ => None,
        }
    }

    /// The message; server faults are masked unless `debug`, and so is the database's own
    /// text (types, tables, engine), which stays in the log.
    pub fn message(&self, debug: bool) -> String {
        if self.code() == 500 && !debug {
            return "the server failed to run this request; details are in its log".into();
        }
        match self {
            ApiError::Exec(ExecError::Db { kind, message }) => {
                let what = match kind {
                    DbErrorKind::BadValue => {
                        "a value does not fit its column or function (a number out of range, \
                         text that is not JSON, a date that does not exist)"
                    }
                    DbErrorKind::Unique => "a row with these values exists already",
                    DbErrorKind::Constraint => {
                        "a value breaks a rule of its column (not null, reference or check)"
                    }
                    DbErrorKind::Timeout => {
                        "the database stopped a statement that ran longer than \
                         statement_timeout_ms allows, or waited too long for a lock"
                    }
                    DbErrorKind::TooLarge => {
                        "a value of this request would be larger than max_answer_bytes allows"
                    }
                    DbErrorKind::BadPattern => {
                        "a regular expression of a key~ condition is not valid for this database"
                    }
                    DbErrorKind::Unsupported => {
                        "a function or type of this request (@column, @cast, a key() call) is \
                         not available on this database"
                    }
                    DbErrorKind::Unavailable => {
                        "a part of the database cannot serve this request now (a shard or node \
                         that is down, starting, shutting down or read-only); nothing of it took \
                         effect: try again in a moment"
                    }
                    DbErrorKind::Syntax | DbErrorKind::Connection | DbErrorKind::Other => {
                        "the database refused the statement"
                    }
                };
                if debug {
                    format!("{what}: {message}")
                } else {
                    format!("{what} (details only in debug mode)")
                }
            }
            other => other.to_string(),
        }
    }

    /// The client left before its answer was complete: nobody reads this error, and it is
    /// no fault of the server's.
    pub fn client_left(&self) -> bool {
        matches!(self, ApiError::Exec(ExecError::ClientGone))
    }

    /// A database error caused by the request (logged for the operator, not as a fault).
    pub fn is_database_refusal(&self) -> bool {
        matches!(self, ApiError::Exec(ExecError::Db { .. })) && self.code() != 500
    }
}

fn plan_code(e: &PlanError) -> u16 {
    match e {
        PlanError::AccessDenied { .. } => 401,
        PlanError::NotLoggedIn => 407,
        PlanError::UnknownRole(_) => 406,
        PlanError::Forbidden(_) => 403,
        PlanError::UnknownFunction(_) => 406,
        PlanError::Invalid(_) => 406,
        PlanError::Limit(_) => 406,
        PlanError::WrongType(_) => 415,
        PlanError::UnknownColumn { .. } => 406,
        PlanError::Conflict(_) => 409,
        PlanError::Missing(_) => 417,
        PlanError::NothingChanged(_) => 401,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_refusals_answer_the_demo_codes_and_say_how_long_to_wait() {
        let wait = Duration::from_secs(30);
        let cases: [(AccountError, u16); 9] = [
            (AccountError::Invalid("phone".into()), 406),
            (AccountError::NotFound("no code".into()), 404),
            (AccountError::Mismatch("wrong code".into()), 412),
            (AccountError::Expired, 408),
            (AccountError::Conflict("same password".into()), 409),
            (AccountError::OutOfRange("balance".into()), 416),
            (AccountError::Forbidden("no Verify table".into()), 403),
            (AccountError::TooManyAttempts(wait), 429),
            (AccountError::TooManyLogins(wait), 429),
        ];
        for (refusal, code) in cases {
            let waits = matches!(
                refusal,
                AccountError::TooManyAttempts(_) | AccountError::TooManyLogins(_)
            );
            let e = ApiError::from(refusal);
            assert_eq!(e.code(), code, "{e}");
            assert_eq!(e.retry_after(), waits.then_some(wait), "{e}");
            // A refusal is the client's: its message is never masked.
            assert_eq!(e.message(false), e.to_string());
        }
        assert_eq!(ApiError::TooManyRequests("busy".into()).retry_after(), None);
    }

    #[test]
    fn a_broken_invariant_is_the_servers_fault_and_its_message_stays_in_the_log() {
        let e = ApiError::Internal("a held answer was streamed".into());
        assert_eq!(e.code(), 500);
        assert!(
            !e.message(false).contains("held answer"),
            "{}",
            e.message(false)
        );
        assert!(e.message(true).contains("held answer"));
    }
}
