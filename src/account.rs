//! The account endpoints of the reference's demo application, which existing APIJSON clients
//! call against the same database: verification codes (`/post/verify`, `/gets/verify`,
//! `/heads/verify`), login by code, `/register` with a code, `/put/password` and
//! `/put/balance` (protocol §14; APIJSON-Demo `APIJSONBoot` DemoController).
//!
//! Every path turns the client's phone into an [`apijet_auth::Phone`] (one canonical spelling,
//! or 406) before it is a limiter key or a bound value, so no spelling of a number the database
//! would read as the same account gets a count of its own. Wrong codes and passwords count per
//! account and per client address (`crate::login_limit`, 429). Passwords are stored as
//! `password_storage` says ([`passwords`]).
//!
//! Codes live in the `Verify` table (`id, type, phone, verify, date`), which the generic API
//! never reaches (`apijet_plan::schema::SECRET_TABLES`); see [`codes`].

mod balance;
mod codes;
pub mod passwords;
mod profile;
pub mod routes;

pub use profile::check_defaults;

use crate::app::AppState;
use crate::config::Config;
use crate::login_limit::Subject;
use apijet_auth::{Phone, PhoneError};
use apijet_core::{Method, Value};
use apijet_exec::write::write;
use apijet_plan::schema::{ColumnKind, Table};
use apijet_request::Request;
use apijet_response::{now_ms, ApiError};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong guesses a code survives; the next one deletes it.
pub const MAX_ATTEMPTS: u32 = 5;

/// What a code is for (the demo's `Verify.TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeType {
    /// Login by code (`/login` type 1).
    Login = 0,
    /// `/register`.
    Register = 1,
    /// `/put/password` for `_password`.
    Password = 2,
    /// `/put/password` for `_payPassword`.
    PayPassword = 3,
    /// The demo's `/reload` (accepted, unused here: `/reload` is for configured admins).
    Reload = 4,
}

impl CodeType {
    fn from_json(v: Option<&Json>) -> Result<CodeType, AccountError> {
        let n = match v {
            None | Some(Json::Null) => 0,
            Some(v) => v
                .as_i64()
                .or_else(|| v.as_str()?.trim().parse().ok())
                .ok_or_else(|| AccountError::Invalid("type must be a number 0..4".into()))?,
        };
        Ok(match n {
            0 => CodeType::Login,
            1 => CodeType::Register,
            2 => CodeType::Password,
            3 => CodeType::PayPassword,
            4 => CodeType::Reload,
            _ => {
                return Err(AccountError::Invalid(format!(
                    "type {n} is not a verification type: 0 login, 1 register, 2 password, \
                     3 pay password, 4 reload"
                )))
            }
        })
    }
}

/// Why an account call failed, with the demo's codes.
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
    /// Refused by configuration.
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
    /// A failure of the pipeline.
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl From<PhoneError> for AccountError {
    fn from(e: PhoneError) -> AccountError {
        AccountError::Invalid(e.to_string())
    }
}

impl AccountError {
    /// The APIJSON code.
    pub fn code(&self) -> u16 {
        match self {
            AccountError::Invalid(_) => 406,
            AccountError::NotFound(_) => 404,
            AccountError::Mismatch(_) => 412,
            AccountError::Expired => 408,
            AccountError::Conflict(_) => 409,
            AccountError::OutOfRange(_) => 416,
            AccountError::Forbidden(_) => 403,
            AccountError::NotLoggedIn => 407,
            AccountError::TooManyAttempts(_) => 429,
            AccountError::Api(e) => e.code(),
        }
    }

    /// How long to wait before trying again (HTTP `Retry-After`), for a 429.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AccountError::TooManyAttempts(wait) => Some(*wait),
            _ => None,
        }
    }
}

/// Settings and in-memory state of the account endpoints.
pub struct Accounts {
    /// How long a code is valid.
    pub ttl: Duration,
    /// Whether `/post/verify` and `/gets/verify` answer the code itself.
    pub code_in_answer: bool,
    /// How passwords are stored and checked.
    pub passwords: passwords::Passwords,
    /// Wrong guesses per (type, phone) since the code was made.
    attempts: Mutex<HashMap<(CodeType, Phone), u32>>,
}

impl Accounts {
    /// The account endpoints' state.
    pub fn new(cfg: &Config) -> Accounts {
        Accounts {
            ttl: Duration::from_secs(cfg.verify_code_ttl_secs),
            code_in_answer: cfg.verify_code_in_answer,
            passwords: passwords::Passwords::new(cfg.password_storage),
            attempts: Mutex::new(HashMap::new()),
        }
    }

    fn attempts(&self) -> std::sync::MutexGuard<'_, HashMap<(CodeType, Phone), u32>> {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl AppState {
    /// The error envelope of an account call. Failures of the pipeline go through
    /// [`AppState::failure`], which keeps database text out of answers outside debug mode.
    pub fn account_failure(&self, e: &AccountError) -> Json {
        match e {
            AccountError::Api(api) => self.failure(api),
            other => json!({
                "ok": false,
                "code": other.code(),
                "msg": other.to_string(),
                "time": now_ms()
            }),
        }
    }

    /// 429 when any of `subjects` has used up its failures for now.
    fn limit(&self, subjects: &[Subject]) -> Result<(), AccountError> {
        match self.sessions.limiter.check(subjects, Instant::now()) {
            Some(wait) => Err(AccountError::TooManyAttempts(wait)),
            None => Ok(()),
        }
    }

    /// Counts a failure against each of `subjects`.
    fn count_failure(&self, subjects: &[Subject]) {
        self.sessions.limiter.failed(subjects, Instant::now());
    }

    /// Runs a write as the server itself: the account endpoint has done the checks.
    async fn server_write(
        &self,
        method: Method,
        body: Map<String, Json>,
    ) -> Result<Map<String, Json>, AccountError> {
        let req = Request::from_map(body).map_err(ApiError::from)?;
        let snapshot = self.snapshot();
        let plan = self
            .plan_write(&req, &[], method, None, &snapshot, true)
            .map_err(ApiError::from)?;
        let env = self.write_env(None, &snapshot);
        Ok(write(&plan, &env).await.map_err(ApiError::from)?)
    }
}

/// The subjects a failure from `address` about `subject` counts against.
fn subjects(subject: Subject, address: Option<IpAddr>) -> Vec<Subject> {
    let mut out = vec![subject];
    out.extend(address.map(Subject::Address));
    out
}

/// The text of a string or number field (codes and passwords; never phones, which are
/// [`Phone`]s).
fn text(v: Option<&Json>) -> Option<String> {
    match v? {
        Json::String(s) => Some(s.trim().to_string()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A password field as sent: a string as is (a login compares it untrimmed, so it is stored
/// untrimmed too), a number as its digits.
fn secret(v: Option<&Json>) -> Option<String> {
    match v? {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// An account id: a positive whole number, as a number or as its digits.
fn account_id(v: Option<&Json>, field: &str) -> Result<i64, AccountError> {
    v.and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
        .filter(|id| *id > 0)
        .ok_or_else(|| AccountError::Invalid(format!("{field} must be an account id")))
}

/// The reference's password rule: at least 6 characters (and at most 64 here, so a hash is
/// never asked to work on megabytes).
fn is_password(s: &str) -> bool {
    (6..=64).contains(&s.chars().count())
}

/// A code: 4 to 6 digits.
fn is_code(s: &str) -> bool {
    (4..=6).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

/// The bound value of `phone` for `column` of `table`: a number where the column is an
/// integer (the APIJSON demo's `bigint` phones), else the canonical text. Either way the
/// database compares one spelling.
pub(crate) fn phone_value(table: &Table, column: &str, phone: &Phone) -> Value {
    let numeric = table
        .column(column)
        .is_some_and(|c| matches!(c.kind, ColumnKind::Int));
    if numeric {
        Value::Int(phone.as_i64())
    } else {
        Value::Text(phone.as_str().to_string())
    }
}

/// The `Privacy` table of this database.
fn privacy_table(state: &AppState) -> Result<std::sync::Arc<Table>, AccountError> {
    state
        .snapshot()
        .schema
        .table("Privacy")
        .cloned()
        .ok_or_else(|| AccountError::Forbidden("this database has no Privacy table".into()))
}
