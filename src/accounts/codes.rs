//! Verification codes: `/post/verify`, `/gets/verify`, `/heads/verify`, and the checks of
//! `/login` type 1, `/register` and `/put/password`.
//!
//! A code expires `verify_code_ttl_secs` after it was made, dies after [`MAX_ATTEMPTS`] wrong
//! guesses or its first use, and is never logged; wrong codes also count against the account
//! and the client address in the failed-login limiter (429). It is answered to the client only
//! when `verify_code_in_answer` is on (the demo's behaviour, for tests and development);
//! otherwise it must reach the phone another way.

use super::login_limit::Subject;
use super::{
    is_code, is_password, phone, phone_value, secret, subjects, text, Accounts, CodeType,
    MAX_ATTEMPTS,
};
use crate::client::ClientKey;
use apijet_auth::{constant_time_eq, Phone};
use apijet_core::{Method, Value};
use apijet_plan::schema::{ColumnKind, Table};
use apijet_request::parse_body;
use apijet_response::{success, AccountError, ApiError};
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A fresh code from the operating system's generator: 4 digits, as the demo makes them.
fn new_code() -> Result<String, ApiError> {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b)
        .map_err(|e| ApiError::Internal(format!("no random source for verification codes: {e}")))?;
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
    fn of(accounts: &Accounts) -> Result<VerifyTable, AccountError> {
        let snapshot = accounts.pipeline.snapshot();
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

    /// The code as the code column stores it (a number on the APIJSON demo's MySQL dump).
    fn code_value(&self, code: &str) -> Json {
        let numeric = self
            .table
            .column(&self.code)
            .is_some_and(|c| matches!(c.kind, ColumnKind::Int));
        match code.parse::<i64>() {
            Ok(n) if numeric => json!(n),
            _ => json!(code),
        }
    }

    /// The phone as the phone column stores it.
    fn phone_json(&self, phone: &Phone) -> Json {
        match phone_value(&self.table, &self.phone, phone) {
            Value::Int(n) => json!(n),
            _ => json!(phone.as_str()),
        }
    }
}

/// One stored code.
struct StoredCode {
    id: i64,
    code: String,
    made: Option<SystemTime>,
}

impl Accounts {
    async fn codes(
        &self,
        t: &VerifyTable,
        kind: CodeType,
        phone: &Phone,
    ) -> Result<Vec<StoredCode>, ApiError> {
        let cols = [
            t.id.as_str(),
            t.kind.as_str(),
            t.code.as_str(),
            t.date.as_str(),
        ];
        let key = (t.phone.as_str(), phone_value(&t.table, &t.phone, phone));
        let rows = self.pipeline.lookup(&t.table, &cols, key, &[]).await?;
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

    async fn delete_codes(&self, t: &VerifyTable, ids: Vec<i64>) -> Result<(), ApiError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut obj = Map::new();
        obj.insert(format!("{}{{}}", t.id), json!(ids));
        let mut body = Map::new();
        body.insert("Verify".into(), Json::Object(obj));
        self.pipeline
            .trusted_write(Method::Delete, body, &[])
            .await?;
        Ok(())
    }

    /// Checks `code` for `(kind, phone)`: 404 without a code, 412 when it does not match,
    /// 408 when it has expired (and is deleted). Wrong guesses count against the account and
    /// the client `address`; the [`MAX_ATTEMPTS`]th deletes the code. `consume` deletes it on
    /// success.
    pub async fn check_code(
        &self,
        kind: CodeType,
        phone: &Phone,
        code: &str,
        consume: bool,
        address: Option<ClientKey>,
    ) -> Result<(), ApiError> {
        if code.is_empty() {
            return Err(AccountError::NotFound("the verification code is missing".into()).into());
        }
        // Wrong codes count with the account's failed logins: a fresh code must not buy five
        // more guesses, and one address must not guess across accounts.
        let counted = subjects(Subject::Phone(phone.clone()), address);
        self.limit(&counted)?;
        let t = VerifyTable::of(self)?;
        let stored = self.codes(&t, kind, phone).await?;
        let all_ids: Vec<i64> = stored.iter().map(|c| c.id).collect();
        let found = stored
            .iter()
            .find(|c| constant_time_eq(c.code.as_bytes(), code.as_bytes()));
        let key = (kind, phone.clone());
        let Some(found) = found else {
            self.count_failure(&counted);
            if stored.is_empty() {
                // No code to spend: nothing to remember (the limiter counted the guess).
                return Err(
                    AccountError::Mismatch("wrong phone or verification code".into()).into(),
                );
            }
            let spent = {
                let mut attempts = self.attempts();
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
            return Err(AccountError::Mismatch("wrong phone or verification code".into()).into());
        };
        let expired = found
            .made
            .is_none_or(|made| SystemTime::now() > made + self.code_ttl);
        if expired || consume {
            self.attempts().remove(&key);
            self.delete_codes(&t, all_ids).await?;
        }
        if expired {
            return Err(AccountError::Expired.into());
        }
        Ok(())
    }

    fn verify_answer(
        &self,
        kind: CodeType,
        phone: &Phone,
        id: i64,
        code: &str,
        made: &str,
    ) -> Json {
        let mut row = Map::new();
        row.insert("id".into(), json!(id));
        row.insert("type".into(), json!(kind as i64));
        row.insert("phone".into(), json!(phone.as_str()));
        if self.code_in_answer {
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
        address: Option<ClientKey>,
    ) -> Result<Json, ApiError> {
        let req = parse_body(body)?;
        let kind = CodeType::from_json(req.get("type"))?;
        let phone = phone(req.get("phone"), "phone")?;
        let counted = subjects(Subject::CodeRequests(phone.clone()), address);
        self.limit(&counted)?;
        self.count_failure(&counted);
        let t = VerifyTable::of(self)?;
        let old: Vec<i64> = self
            .codes(&t, kind, &phone)
            .await?
            .iter()
            .map(|c| c.id)
            .collect();
        self.delete_codes(&t, old).await?;
        self.attempts().remove(&(kind, phone.clone()));
        let code = new_code()?;
        let made = utc_text(SystemTime::now());
        let mut obj = Map::new();
        obj.insert(t.kind.clone(), json!(kind as i64));
        obj.insert(t.phone.clone(), t.phone_json(&phone));
        obj.insert(t.code.clone(), t.code_value(&code));
        obj.insert(t.date.clone(), json!(made));
        let mut body = Map::new();
        body.insert("Verify".into(), Json::Object(obj));
        let written = self.pipeline.trusted_write(Method::Post, body, &[]).await?;
        let id = written
            .get("Verify")
            .and_then(|v| v.get("id"))
            .and_then(Json::as_i64)
            .unwrap_or(0);
        Ok(self.verify_answer(kind, &phone, id, &code, &made))
    }

    /// `POST /gets/verify {type, phone}`: the current code, where codes may be answered.
    pub async fn gets_verify(&self, body: &[u8]) -> Result<Json, ApiError> {
        if !self.code_in_answer {
            return Err(AccountError::Forbidden(
                "verification codes are not readable through the API on this server \
                 (setting verify_code_in_answer)"
                    .into(),
            )
            .into());
        }
        let req = parse_body(body)?;
        let kind = CodeType::from_json(req.get("type"))?;
        let phone = phone(req.get("phone"), "phone")?;
        let t = VerifyTable::of(self)?;
        let live = self.codes(&t, kind, &phone).await?.into_iter().find(|c| {
            c.made
                .is_some_and(|m| SystemTime::now() <= m + self.code_ttl)
        });
        let Some(c) = live else {
            return Err(AccountError::NotFound(
                "no verification code for this phone: ask for one with /post/verify".into(),
            )
            .into());
        };
        let made = c.made.map(utc_text).unwrap_or_default();
        Ok(self.verify_answer(kind, &phone, c.id, &c.code, &made))
    }

    /// `POST /heads/verify {type, phone, verify}`: whether the code is right (count 1).
    pub async fn heads_verify(
        &self,
        body: &[u8],
        address: Option<ClientKey>,
    ) -> Result<Json, ApiError> {
        let req = parse_body(body)?;
        let kind = CodeType::from_json(req.get("type"))?;
        let phone = phone(req.get("phone"), "phone")?;
        let code = text(req.get("verify")).unwrap_or_default();
        self.check_code(kind, &phone, &code, false, address).await?;
        let mut out = Map::new();
        out.insert("Verify".into(), json!({"count": 1}));
        Ok(success(out, false))
    }

    /// Deletes the codes of `(kind, phone)` once they served; a failure only leaves them to
    /// expire.
    pub async fn forget_codes(&self, kind: CodeType, phone: &Phone) {
        self.attempts().remove(&(kind, phone.clone()));
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

    /// `/register`'s checks: `{"Privacy": {"phone", "_password"}, "verify": "1234", …}`. The
    /// code must be right for the phone; the request goes on with the phone in its canonical
    /// spelling (so the stored phone is the one logins and codes look up). Answers the phone.
    pub async fn check_registration(
        &self,
        req: &mut Map<String, Json>,
        address: Option<ClientKey>,
    ) -> Result<Phone, ApiError> {
        let privacy = req.get_mut("Privacy").and_then(Json::as_object_mut);
        let Some(privacy) = privacy else {
            return Err(AccountError::Invalid(
                "Privacy with phone and _password is required".into(),
            )
            .into());
        };
        let phone = phone(privacy.get("phone"), "Privacy/phone")?;
        privacy.insert("phone".into(), json!(phone.as_str()));
        let password = secret(privacy.get("_password")).unwrap_or_default();
        if !is_password(&password) {
            return Err(AccountError::Invalid(
                "Privacy/_password must have 6 to 64 characters".into(),
            )
            .into());
        }
        let code = text(req.get("verify")).unwrap_or_default();
        if !is_code(&code) {
            return Err(AccountError::Invalid(
                "verify must be the 4-digit code from /post/verify".into(),
            )
            .into());
        }
        self.check_code(CodeType::Register, &phone, &code, false, address)
            .await?;
        Ok(phone)
    }
}
