//! The account endpoints of the reference's demo application, which existing APIJSON clients
//! call against the same database: verification codes (`/post/verify`, `/gets/verify`,
//! `/heads/verify`), `/login` by password or code, `/register` with a code, `/put/password`
//! and `/put/balance` (protocol §14; APIJSON-Demo `APIJSONBoot` DemoController); and the
//! signed tokens that say who the visitor of a request is ([`session`]).
//!
//! Every path turns the client's phone into an [`apijet_auth::Phone`] (one canonical spelling,
//! or 406) before it is a limiter key or a bound value, so no spelling of a number the database
//! would read as the same account gets a count of its own. Wrong codes and passwords count per
//! account and per client address ([`login_limit`], 429). Passwords are stored as
//! `password_storage` says ([`passwords`]). Refusals are `apijet_response::AccountError`s,
//! whose codes `apijet_response` maps with every other error's.
//!
//! Codes live in the `Verify` table (`id, type, phone, verify, date`), which the generic API
//! never reaches (`apijet_plan::schema::SECRET_TABLES`); see [`codes`].

mod balance;
mod codes;
mod login;
pub mod login_limit;
mod passwords;
mod profile;
mod register;
pub mod session;

pub use profile::check_defaults;

use crate::client::ClientKey;
use crate::config::Config;
use crate::ledger::{Admitted, Client, Kind, Ledger};
use crate::pipeline::Pipeline;
use apijet_auth::Phone;
use apijet_core::Value;
use apijet_plan::schema::{ColumnKind, Table};
use apijet_response::{AccountError, ApiError};
use login_limit::{LoginLimiter, LoginLimits, Subject};
use serde_json::{Map, Value as Json};
use session::Sessions;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

/// The account endpoints: their settings, the failed-attempt counts, and the pipeline they
/// read and write through.
pub struct Accounts {
    pipeline: Arc<Pipeline>,
    /// Issues the tokens of logins.
    sessions: Arc<Sessions>,
    /// Failed logins, codes and passwords, per account and per client address.
    limiter: LoginLimiter,
    /// How passwords are stored and checked.
    passwords: passwords::Passwords,
    /// How long a code is valid.
    code_ttl: Duration,
    /// Whether `/post/verify` and `/gets/verify` answer the code itself.
    code_in_answer: bool,
    /// Wrong guesses per (type, phone) since the code was made.
    attempts: Mutex<HashMap<(CodeType, Phone), u32>>,
    /// Admits the password work of each client within its budget (`logins_per_client`).
    ledger: Arc<Ledger>,
}

impl Accounts {
    /// The account endpoints as `cfg` sets them, over `pipeline`, logging in with `sessions`,
    /// their password work admitted by `ledger`.
    pub fn new(
        cfg: &Config,
        pipeline: Arc<Pipeline>,
        sessions: Arc<Sessions>,
        ledger: Arc<Ledger>,
    ) -> Accounts {
        Accounts {
            ledger,
            pipeline,
            sessions,
            limiter: LoginLimiter::new(LoginLimits {
                per_phone: cfg.login_failures_per_phone,
                per_address: cfg.login_failures_per_address,
                lockout: Duration::from_secs(cfg.login_lockout_secs),
                entries: cfg.login_limit_entries,
            }),
            passwords: passwords::Passwords::new(cfg.password_storage),
            code_ttl: Duration::from_secs(cfg.verify_code_ttl_secs),
            code_in_answer: cfg.verify_code_in_answer,
            attempts: Mutex::new(HashMap::new()),
        }
    }

    fn attempts(&self) -> std::sync::MutexGuard<'_, HashMap<(CodeType, Phone), u32>> {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// 429 when any of `subjects` has used up its failures for now.
    fn limit(&self, subjects: &[Subject]) -> Result<(), AccountError> {
        match self.limiter.check(subjects, Instant::now()) {
            Some(wait) => Err(AccountError::TooManyAttempts(wait)),
            None => Ok(()),
        }
    }

    /// Admits the password work (a check or a hash, and the lookups around it) of a request
    /// from `client`, or refuses it (429) when the client has `logins_per_client` under way:
    /// hashing is deliberate CPU work, and one client logging in from many connections must
    /// not make everybody else's logins wait.
    fn admit_password_work(&self, client: Option<ClientKey>) -> Result<Admitted, ApiError> {
        let client = Client {
            key: client,
            logged_in: false,
        };
        self.ledger
            .admit(client, Kind::Login)
            .map_err(|refused| ApiError::TooManyRequests(refused.message))
    }

    /// Counts a failure against each of `subjects`.
    fn count_failure(&self, subjects: &[Subject]) {
        self.limiter.failed(subjects, Instant::now());
    }

    /// The `table` of this database (`Privacy`, `User`, `Verify`), or 403 naming it.
    fn table(&self, name: &str) -> Result<Arc<Table>, AccountError> {
        self.pipeline
            .snapshot()
            .schema
            .table(name)
            .cloned()
            .ok_or_else(|| AccountError::Forbidden(format!("this database has no {name} table")))
    }

    /// The `Privacy` row where `key = value`, with `cols`.
    async fn privacy_row(
        &self,
        key: &str,
        value: Value,
        cols: &[&str],
    ) -> Result<Option<Map<String, Json>>, ApiError> {
        let table = self.table("Privacy")?;
        let rows = self
            .pipeline
            .lookup(&table, cols, (key, value), &[])
            .await?;
        Ok(rows.into_iter().next())
    }
}

/// The subjects a failure from `address` about `subject` counts against.
fn subjects(subject: Subject, address: Option<ClientKey>) -> Vec<Subject> {
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
fn phone_value(table: &Table, column: &str, phone: &Phone) -> Value {
    let numeric = table
        .column(column)
        .is_some_and(|c| matches!(c.kind, ColumnKind::Int));
    if numeric {
        Value::Int(phone.as_i64())
    } else {
        Value::Text(phone.as_str().to_string())
    }
}

/// The client's `field` as a [`Phone`]: its one canonical spelling, or 406.
fn phone(v: Option<&Json>, field: &'static str) -> Result<Phone, AccountError> {
    Phone::from_json(v, field).map_err(|e| AccountError::Invalid(e.to_string()))
}
