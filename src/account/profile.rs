//! Passwords, balance and login defaults: `/put/password`, `/put/balance` and the
//! `defaults` of `/login`.

use super::{is_code, is_password, is_phone, text, AccountError, CodeType};
use crate::app::AppState;
use apijet_auth::constant_time_eq;
use apijet_core::{Method, Value, Visitor};
use apijet_exec::read::fetch_rows;
use apijet_plan::lookup;
use apijet_plan::PlanOptions;
use apijet_request::parse_body;
use apijet_response::{success, ApiError};
use serde_json::{json, Map, Value as Json};
use std::time::Instant;

/// The failed-login limiter's key for password guesses on account `id`.
fn guess_key(id: i64) -> String {
    format!("id:{id}")
}

impl AppState {
    /// 429 once account `id` has used up its wrong passwords for now (the failed-login limits).
    fn limit_guesses(&self, id: i64) -> Result<(), AccountError> {
        match self
            .sessions
            .limiter
            .check(&guess_key(id), None, Instant::now())
        {
            Some(wait) => Err(AccountError::TooManyAttempts(wait)),
            None => Ok(()),
        }
    }

    fn guessed_wrong(&self, id: i64) {
        self.sessions
            .limiter
            .failed(&guess_key(id), None, Instant::now());
    }

    async fn privacy_row(
        &self,
        key: &str,
        value: Value,
        cols: &[&str],
    ) -> Result<Option<Map<String, Json>>, AccountError> {
        let snapshot = self.snapshot();
        let table =
            snapshot.schema.table("Privacy").cloned().ok_or_else(|| {
                AccountError::Forbidden("this database has no Privacy table".into())
            })?;
        let select = lookup(&table, cols, key, value).map_err(ApiError::from)?;
        let rows = fetch_rows(&self.backend, self.dialect.as_ref(), &select, &[])
            .await
            .map_err(ApiError::from)?;
        Ok(rows.into_iter().next())
    }

    /// `POST /put/password`: `{"oldPassword", "Privacy": {"id", "_password"|"_payPassword"}}`
    /// or `{"verify", "Privacy": {"phone", "_password"|"_payPassword"}}`.
    pub async fn put_password(&self, body: &[u8]) -> Result<Json, AccountError> {
        let req = parse_body(body).map_err(ApiError::from)?;
        let privacy = req
            .get("Privacy")
            .and_then(Json::as_object)
            .ok_or_else(|| AccountError::Invalid("Privacy is required".into()))?;
        let (column, kind, password) = match text(privacy.get("_password")) {
            Some(p) if !p.is_empty() => ("_password", CodeType::Password, p),
            _ => {
                let p = text(privacy.get("_payPassword")).unwrap_or_default();
                if p.len() != 6 || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(AccountError::Invalid(
                        "Privacy/_payPassword must be 6 digits".into(),
                    ));
                }
                ("_payPassword", CodeType::PayPassword, p)
            }
        };
        if !is_password(&password) {
            return Err(AccountError::Invalid(format!(
                "Privacy/{column} must have at least 6 characters"
            )));
        }
        let old = text(req.get("oldPassword")).unwrap_or_default();
        let id = if is_password(&old) {
            let id = privacy
                .get("id")
                .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
                .filter(|id| *id > 0)
                .ok_or_else(|| AccountError::Invalid("Privacy/id is required".into()))?;
            if old == password {
                return Err(AccountError::Conflict(
                    "the new password must differ from the old one".into(),
                ));
            }
            self.limit_guesses(id)?;
            let row = self
                .privacy_row("id", Value::Int(id), &["id", column])
                .await?;
            let stored = row
                .as_ref()
                .and_then(|r| text(r.get(column)))
                .unwrap_or_default();
            if row.is_none() || !constant_time_eq(stored.as_bytes(), old.as_bytes()) {
                self.guessed_wrong(id);
                return Err(AccountError::Mismatch(
                    "wrong account or old password".into(),
                ));
            }
            id
        } else {
            let phone = text(privacy.get("phone")).unwrap_or_default();
            let code = text(req.get("verify")).unwrap_or_default();
            if !is_phone(&phone) || !is_code(&code) {
                return Err(AccountError::Invalid(
                    "give oldPassword with Privacy/id, or verify with Privacy/phone".into(),
                ));
            }
            self.check_code(kind, &phone, &code, true).await?;
            self.privacy_row("phone", Value::Text(phone), &["id"])
                .await?
                .and_then(|r| r.get("id").and_then(Json::as_i64))
                .ok_or_else(|| AccountError::NotFound("this phone is not registered".into()))?
        };
        let mut obj = Map::new();
        obj.insert("id".into(), json!(id));
        obj.insert(column.into(), json!(password));
        let mut body = Map::new();
        body.insert("Privacy".into(), Json::Object(obj));
        let written = self.server_write(Method::Put, body).await?;
        Ok(success(written, false))
    }

    /// `POST /put/balance {"Privacy": {"id", "balance+", "_payPassword"}}`: a top-up (positive)
    /// or withdrawal (negative) of at most 10000 by the logged-in owner, with the pay password.
    pub async fn put_balance(
        &self,
        body: &[u8],
        visitor: Option<&Visitor>,
    ) -> Result<Json, AccountError> {
        let visitor = visitor.ok_or(AccountError::NotLoggedIn)?;
        let req = parse_body(body).map_err(ApiError::from)?;
        let privacy = req
            .get("Privacy")
            .and_then(Json::as_object)
            .ok_or_else(|| AccountError::Invalid("Privacy is required".into()))?;
        let id = privacy
            .get("id")
            .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
            .filter(|id| *id > 0)
            .ok_or_else(|| AccountError::Invalid("Privacy/id is required".into()))?;
        if id != visitor.id {
            return Err(AccountError::Api(ApiError::Plan(
                apijet_plan::PlanError::AccessDenied {
                    table: "Privacy".into(),
                    role: apijet_core::Role::Owner,
                    method: Method::Put,
                },
            )));
        }
        let pay = text(privacy.get("_payPassword")).unwrap_or_default();
        if !is_password(&pay) {
            return Err(AccountError::Invalid(
                "Privacy/_payPassword is required".into(),
            ));
        }
        let change = privacy
            .get("balance+")
            .and_then(|v| v.as_f64().or_else(|| v.as_str()?.trim().parse().ok()))
            .ok_or_else(|| AccountError::Invalid("Privacy/balance+ must be a number".into()))?;
        if let Some(k) = privacy
            .keys()
            .find(|k| !matches!(k.as_str(), "id" | "balance+" | "_payPassword"))
        {
            return Err(AccountError::Invalid(format!(
                "Privacy/{k} is not allowed here: give id, balance+ and _payPassword"
            )));
        }
        self.limit_guesses(id)?;
        let row = self
            .privacy_row("id", Value::Int(id), &["id", "balance", "_payPassword"])
            .await?;
        let stored = row
            .as_ref()
            .and_then(|r| text(r.get("_payPassword")))
            .unwrap_or_default();
        if row.is_none() || !constant_time_eq(stored.as_bytes(), pay.as_bytes()) {
            self.guessed_wrong(id);
            return Err(AccountError::Mismatch("wrong pay password".into()));
        }
        if change == 0.0 || !change.is_finite() {
            return Err(AccountError::OutOfRange("balance+ must not be 0".into()));
        }
        if change.abs() > 10000.0 {
            return Err(AccountError::OutOfRange(
                "one top-up or withdrawal may not exceed 10000".into(),
            ));
        }
        let balance = row
            .as_ref()
            .and_then(|r| r.get("balance"))
            .and_then(|v| v.as_f64().or_else(|| v.as_str()?.parse().ok()))
            .unwrap_or(0.0);
        if change < 0.0 && balance < -change {
            return Err(AccountError::OutOfRange("the balance is too low".into()));
        }
        let mut obj = Map::new();
        obj.insert("id".into(), json!(id));
        obj.insert("balance+".into(), json!(change));
        let mut body = Map::new();
        body.insert("Privacy".into(), Json::Object(obj));
        let written = self.server_write(Method::Put, body).await?;
        Ok(success(written, false))
    }
}

/// Checks a `/login` `defaults` object: only `@database` and `@schema` are accepted, as a
/// stateless login can keep nothing else. `@database` must name what this server serves
/// (applying it later changes nothing). A `@schema` it does not serve is accepted as the
/// reference accepts it, and returned: the login carries it, and its later requests without
/// a `@schema` of their own are refused naming it (the reference would read that schema).
pub fn check_defaults(
    defaults: &Json,
    options: &PlanOptions,
) -> Result<Option<String>, AccountError> {
    let Some(map) = defaults.as_object() else {
        return Err(AccountError::Invalid("defaults must be an object".into()));
    };
    let mut foreign = None;
    for (k, v) in map {
        if let (Some(schema), "@schema") = (v.as_str().map(str::trim), k.as_str()) {
            let served = &options.served.schemas;
            if !served.iter().any(|s| s.eq_ignore_ascii_case(schema)) {
                foreign = Some(schema.to_string());
                continue;
            }
        }
        let served = match k.as_str() {
            "@database" => &options.served.databases,
            "@schema" => &options.served.schemas,
            _ => {
                return Err(AccountError::Invalid(format!(
                    "defaults: {k} cannot be kept for a login on this server; send it in \
                     each request (only @database and @schema are accepted)"
                )))
            }
        };
        let named = v.as_str().map(str::trim).unwrap_or_default();
        if !served.iter().any(|s| s.eq_ignore_ascii_case(named)) {
            return Err(AccountError::Invalid(format!(
                "defaults: {k}:{v} is not served here ({})",
                served.join(" / ")
            )));
        }
    }
    Ok(foreign)
}
