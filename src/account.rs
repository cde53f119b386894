//! The account endpoints of the reference's demo application, which existing APIJSON clients
//! call against the same database: verification codes (`/post/verify`, `/gets/verify`,
//! `/heads/verify`), login by code, `/register` with a code, `/put/password` and
//! `/put/balance` (protocol §14; APIJSON-Demo `APIJSONBoot` DemoController).
//!
//! Codes live in the `Verify` table (`id, type, phone, verify, date`), which the generic API
//! never reaches (`apijet_plan::schema::SECRET_TABLES`). A code expires `verify_code_ttl_secs`
//! after it was made, dies after [`MAX_ATTEMPTS`] wrong guesses or its first use, and is never
//! logged; wrong codes also count against the phone in the failed-login limiter (429). It is answered to the client only when `verify_code_in_answer` is on (the demo's
//! behaviour, for tests and development); otherwise it must reach the phone another way.

mod profile;
pub mod routes;

pub use profile::check_defaults;

use crate::app::AppState;
use apijet_auth::constant_time_eq;
use apijet_core::{Method, Value};
use apijet_exec::read::fetch_rows;
use apijet_exec::write::write;
use apijet_plan::lookup;
use apijet_plan::schema::{ColumnKind, Table};
use apijet_request::{parse_body, Request};
use apijet_response::{now_ms, success, ApiError};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    /// The new password equals the old one.
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
    /// Too many wrong codes or passwords for this phone.
    #[error(
        "too many failed attempts for this phone: try again in {} s (settings \
         login_failures_per_phone, login_lockout_secs)",
        .0.as_secs().max(1)
    )]
    TooManyAttempts(Duration),
    /// A failure of the pipeline.
    #[error(transparent)]
    Api(#[from] ApiError),
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
}

/// Settings and in-memory state of the account endpoints.
pub struct Accounts {
    /// How long a code is valid.
    pub ttl: Duration,
    /// Whether `/post/verify` and `/gets/verify` answer the code itself.
    pub code_in_answer: bool,
    /// Wrong guesses per (type, phone) since the code was made.
    attempts: Mutex<HashMap<(CodeType, String), u32>>,
}

impl Accounts {
    /// The account endpoints' state.
    pub fn new(ttl: Duration, code_in_answer: bool) -> Accounts {
        Accounts {
            ttl,
            code_in_answer,
            attempts: Mutex::new(HashMap::new()),
        }
    }

    fn attempts(&self) -> std::sync::MutexGuard<'_, HashMap<(CodeType, String), u32>> {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The error envelope of an account call.
pub fn account_failure(e: &AccountError) -> Json {
    json!({ "ok": false, "code": e.code(), "msg": e.to_string(), "time": now_ms() })
}

fn text(v: Option<&Json>) -> Option<String> {
    match v? {
        Json::String(s) => Some(s.trim().to_string()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The reference's phone rule: 11 digits starting with 1.
pub fn is_phone(s: &str) -> bool {
    s.len() == 11 && s.starts_with('1') && s.bytes().all(|b| b.is_ascii_digit())
}

/// The reference's password rule: at least 6 characters.
fn is_password(s: &str) -> bool {
    s.chars().count() >= 6 && s.chars().count() <= 64
}

/// A code: 4 to 6 digits.
fn is_code(s: &str) -> bool {
    (4..=6).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

/// A fresh code from the operating system's generator: 4 digits, as the demo makes them.
fn new_code() -> Result<String, AccountError> {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).map_err(|e| {
        AccountError::Api(ApiError::Unsupported(format!(
            "no random source for verification codes: {e}"
        )))
    })?;
    Ok((1000 + u32::from_le_bytes(b) % 9000).to_string())
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
fn utc_text(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    chrono::DateTime::from_timestamp(i64::try_from(secs).unwrap_or(0), 0)
        .map(|d| d.naive_utc().format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

fn parse_utc(s: &str) -> Option<SystemTime> {
    let s = s.get(..19)?.replace('T', " ");
    let d = chrono::NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S").ok()?;
    let secs = u64::try_from(d.and_utc().timestamp()).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// The `Verify` table and its columns as this database names them (the APIJSON demo's MySQL
/// dump calls the code column `Verify`).
struct VerifyTable {
    table: Arc<Table>,
    id: String,
    kind: String,
    phone: String,
    code: String,
    date: String,
}

impl VerifyTable {
    fn of(state: &AppState) -> Result<VerifyTable, AccountError> {
        let snapshot = state.snapshot();
        let table = snapshot.schema.table("Verify").cloned().ok_or_else(|| {
            AccountError::Forbidden(
                "this database has no Verify table for verification codes".into(),
            )
        })?;
        let col = |name: &str| {
            table
                .columns
                .iter()
                .find(|c| c.name.eq_ignore_ascii_case(name))
                .map(|c| c.name.clone())
                .ok_or_else(|| {
                    AccountError::Forbidden(format!("the Verify table has no {name} column"))
                })
        };
        Ok(VerifyTable {
            id: col("id")?,
            kind: col("type")?,
            phone: col("phone")?,
            code: col("verify")?,
            date: col("date")?,
            table,
        })
    }

    /// A value for `column`, typed as the column is (the demo dumps store phones and codes
    /// as numbers on MySQL and as text on PostgreSQL).
    fn value(&self, column: &str, text: &str) -> Json {
        let numeric = self
            .table
            .column(column)
            .is_some_and(|c| matches!(c.kind, ColumnKind::Int));
        match text.parse::<i64>() {
            Ok(n) if numeric => json!(n),
            _ => json!(text),
        }
    }
}

/// One stored code.
struct StoredCode {
    id: i64,
    code: String,
    made: Option<SystemTime>,
}

impl AppState {
    async fn codes(
        &self,
        t: &VerifyTable,
        kind: CodeType,
        phone: &str,
    ) -> Result<Vec<StoredCode>, AccountError> {
        let phone_value = match t.value(&t.phone, phone) {
            Json::Number(n) => Value::Int(n.as_i64().unwrap_or(0)),
            _ => Value::Text(phone.to_string()),
        };
        let cols = [
            t.id.as_str(),
            t.kind.as_str(),
            t.code.as_str(),
            t.date.as_str(),
        ];
        let select = lookup(&t.table, &cols, &t.phone, phone_value).map_err(ApiError::from)?;
        let rows = fetch_rows(&self.backend, self.dialect.as_ref(), &select, &[])
            .await
            .map_err(ApiError::from)?;
        Ok(rows
            .into_iter()
            .filter(|r| r.get(&t.kind).and_then(Json::as_i64) == Some(kind as i64))
            .filter_map(|r| {
                Some(StoredCode {
                    id: r
                        .get(&t.id)
                        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))?,
                    code: text(r.get(&t.code))?,
                    made: r.get(&t.date).and_then(Json::as_str).and_then(parse_utc),
                })
            })
            .collect())
    }

    /// Runs a write as the server itself: the account endpoint has done the checks.
    async fn server_write(
        &self,
        method: Method,
        body: Map<String, Json>,
    ) -> Result<Map<String, Json>, AccountError> {
        let req = Request::from_map(body).map_err(ApiError::from)?;
        let snapshot = self.snapshot();
        let env = self.write_env(method, None, &snapshot, true);
        Ok(write(&req, &[], &env).await.map_err(ApiError::from)?)
    }

    async fn delete_codes(&self, t: &VerifyTable, ids: Vec<i64>) -> Result<(), AccountError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut obj = Map::new();
        obj.insert(format!("{}{{}}", t.id), json!(ids));
        let mut body = Map::new();
        body.insert("Verify".into(), Json::Object(obj));
        self.server_write(Method::Delete, body).await?;
        Ok(())
    }

    /// Checks `code` for `(kind, phone)`: 404 without a code, 412 when it does not match,
    /// 408 when it has expired (and is deleted). Wrong guesses are counted; the
    /// [`MAX_ATTEMPTS`]th deletes the code. `consume` deletes it on success.
    pub async fn check_code(
        &self,
        kind: CodeType,
        phone: &str,
        code: &str,
        consume: bool,
    ) -> Result<(), AccountError> {
        if code.is_empty() {
            return Err(AccountError::NotFound(
                "the verification code is missing".into(),
            ));
        }
        // Wrong codes count with the phone's failed logins: a fresh code must not buy five
        // more guesses.
        let limiter = &self.sessions.limiter;
        if let Some(wait) = limiter.check(phone, None, Instant::now()) {
            return Err(AccountError::TooManyAttempts(wait));
        }
        let t = VerifyTable::of(self)?;
        let stored = self.codes(&t, kind, phone).await?;
        let all_ids: Vec<i64> = stored.iter().map(|c| c.id).collect();
        let found = stored
            .iter()
            .find(|c| constant_time_eq(c.code.as_bytes(), code.as_bytes()));
        let key = (kind, phone.to_string());
        let Some(found) = found else {
            limiter.failed(phone, None, Instant::now());
            let spent = {
                let mut attempts = self.accounts.attempts();
                let n = attempts.entry(key.clone()).or_insert(0);
                *n += 1;
                let spent = *n >= MAX_ATTEMPTS;
                if spent {
                    attempts.remove(&key);
                }
                spent
            };
            if spent {
                self.delete_codes(&t, all_ids).await?;
            }
            return Err(AccountError::Mismatch(
                "wrong phone or verification code".into(),
            ));
        };
        let expired = found
            .made
            .is_none_or(|made| SystemTime::now() > made + self.accounts.ttl);
        if expired || consume {
            self.accounts.attempts().remove(&key);
            self.delete_codes(&t, all_ids).await?;
        }
        if expired {
            return Err(AccountError::Expired);
        }
        Ok(())
    }

    fn verify_answer(&self, kind: CodeType, phone: &str, id: i64, code: &str, made: &str) -> Json {
        let mut row = Map::new();
        row.insert("id".into(), json!(id));
        row.insert("type".into(), json!(kind as i64));
        row.insert("phone".into(), json!(phone));
        if self.accounts.code_in_answer {
            row.insert("verify".into(), json!(code));
        }
        row.insert("date".into(), json!(made));
        let mut out = Map::new();
        out.insert("Verify".into(), Json::Object(row));
        success(out, false)
    }

    /// `POST /post/verify {type, phone}`: replaces the phone's code of that type. Requests
    /// count in the failed-login limits, per phone and per client `address`, so codes (and
    /// `Verify` rows) cannot be made without bound.
    pub async fn post_verify(
        &self,
        body: &[u8],
        address: Option<std::net::IpAddr>,
    ) -> Result<Json, AccountError> {
        let req = parse_body(body).map_err(ApiError::from)?;
        let kind = CodeType::from_json(req.get("type"))?;
        let phone = text(req.get("phone")).unwrap_or_default();
        if !is_phone(&phone) {
            return Err(AccountError::Invalid(
                "phone must be 11 digits starting with 1".into(),
            ));
        }
        let limiter = &self.sessions.limiter;
        let key = format!("verify:{phone}");
        if let Some(wait) = limiter.check(&key, address, Instant::now()) {
            return Err(AccountError::TooManyAttempts(wait));
        }
        limiter.failed(&key, address, Instant::now());
        let t = VerifyTable::of(self)?;
        let old: Vec<i64> = self
            .codes(&t, kind, &phone)
            .await?
            .iter()
            .map(|c| c.id)
            .collect();
        self.delete_codes(&t, old).await?;
        self.accounts.attempts().remove(&(kind, phone.clone()));
        let code = new_code()?;
        let made = utc_text(SystemTime::now());
        let mut obj = Map::new();
        obj.insert(t.kind.clone(), json!(kind as i64));
        obj.insert(t.phone.clone(), t.value(&t.phone, &phone));
        obj.insert(t.code.clone(), t.value(&t.code, &code));
        obj.insert(t.date.clone(), json!(made));
        let mut body = Map::new();
        body.insert("Verify".into(), Json::Object(obj));
        let written = self.server_write(Method::Post, body).await?;
        let id = written
            .get("Verify")
            .and_then(|v| v.get("id"))
            .and_then(Json::as_i64)
            .unwrap_or(0);
        Ok(self.verify_answer(kind, &phone, id, &code, &made))
    }

    /// `POST /gets/verify {type, phone}`: the current code, where codes may be answered.
    pub async fn gets_verify(&self, body: &[u8]) -> Result<Json, AccountError> {
        if !self.accounts.code_in_answer {
            return Err(AccountError::Forbidden(
                "verification codes are not readable through the API on this server \
                 (setting verify_code_in_answer)"
                    .into(),
            ));
        }
        let req = parse_body(body).map_err(ApiError::from)?;
        let kind = CodeType::from_json(req.get("type"))?;
        let phone = text(req.get("phone")).unwrap_or_default();
        let t = VerifyTable::of(self)?;
        let live = self.codes(&t, kind, &phone).await?.into_iter().find(|c| {
            c.made
                .is_some_and(|m| SystemTime::now() <= m + self.accounts.ttl)
        });
        let Some(c) = live else {
            return Err(AccountError::NotFound(
                "no verification code for this phone: ask for one with /post/verify".into(),
            ));
        };
        let made = c.made.map(utc_text).unwrap_or_default();
        Ok(self.verify_answer(kind, &phone, c.id, &c.code, &made))
    }

    /// `POST /heads/verify {type, phone, verify}`: whether the code is right (count 1).
    pub async fn heads_verify(&self, body: &[u8]) -> Result<Json, AccountError> {
        let req = parse_body(body).map_err(ApiError::from)?;
        let kind = CodeType::from_json(req.get("type"))?;
        let phone = text(req.get("phone")).unwrap_or_default();
        let code = text(req.get("verify")).unwrap_or_default();
        self.check_code(kind, &phone, &code, false).await?;
        let mut out = Map::new();
        out.insert("Verify".into(), json!({"count": 1}));
        Ok(success(out, false))
    }

    /// Deletes the codes of `(kind, phone)` once they served; a failure only leaves them to
    /// expire.
    pub async fn forget_codes(&self, kind: CodeType, phone: &str) {
        self.accounts.attempts().remove(&(kind, phone.to_string()));
        let Ok(t) = VerifyTable::of(self) else {
            return;
        };
        if let Ok(codes) = self.codes(&t, kind, phone).await {
            let ids = codes.iter().map(|c| c.id).collect();
            if let Err(e) = self.delete_codes(&t, ids).await {
                tracing::warn!(error = %e, "a used verification code was not deleted");
            }
        }
    }

    /// `/register`'s code check: `{"Privacy": {"phone", "_password"}, "verify": "1234", …}`;
    /// the phone whose code was right.
    pub async fn check_register_code(
        &self,
        req: &Map<String, Json>,
    ) -> Result<String, AccountError> {
        let privacy = req.get("Privacy").and_then(Json::as_object);
        let phone = text(privacy.and_then(|p| p.get("phone"))).unwrap_or_default();
        if !is_phone(&phone) {
            return Err(AccountError::Invalid(
                "Privacy/phone must be 11 digits starting with 1".into(),
            ));
        }
        let password = text(privacy.and_then(|p| p.get("_password"))).unwrap_or_default();
        if !is_password(&password) {
            return Err(AccountError::Invalid(
                "Privacy/_password must have at least 6 characters".into(),
            ));
        }
        let code = text(req.get("verify")).unwrap_or_default();
        if !is_code(&code) {
            return Err(AccountError::Invalid(
                "verify must be the 4-digit code from /post/verify".into(),
            ));
        }
        self.check_code(CodeType::Register, &phone, &code, false)
            .await?;
        Ok(phone)
    }
}
