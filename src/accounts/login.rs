//! `/login`: a phone and a password (or, type 1, a login code of `/post/verify`) checked
//! against the `Privacy` table, answered with the `User` row and a signed token
//! ([`super::session`]), which the HTTP edge also sets as a cookie. No session state is kept on
//! the server.

use super::login_limit::Subject;
use super::{check_defaults, phone, phone_value, secret, Accounts, CodeType};
use crate::client::ClientKey;
use apijet_auth::Phone;
use apijet_core::{Value, Visitor};
use apijet_plan::schema::{ColumnKind, Table};
use apijet_plan::visible_columns;
use apijet_request::parse_body;
use apijet_response::{success, AccountError, ApiError};
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// A logged-in account: its id, contacts and `User` row.
struct Account {
    id: i64,
    contacts: Vec<i64>,
    user: Map<String, Json>,
}

/// A login that succeeded.
pub struct LoggedIn {
    /// The answer: the `User` row, the token, `remember` and the `defaults` kept.
    pub answer: Json,
    /// The token, for the cookie.
    pub token: String,
    /// How long the token is valid.
    pub ttl: Duration,
}

impl Accounts {
    /// Checks the credentials of a `/login` body from the client `address`. The phone is
    /// canonicalised first (406 when it is not a phone); wrong phones and passwords count
    /// against the account and the address, and past the limit neither the database nor the
    /// password hash is asked at all.
    pub async fn login(
        &self,
        body: &[u8],
        address: Option<ClientKey>,
    ) -> Result<LoggedIn, ApiError> {
        let req = parse_body(body)?;
        let phone = phone(req.get("phone"), "phone")?;
        let password = secret(req.get("password"))
            .ok_or_else(|| AccountError::Invalid("password is required".into()))?;
        // Type 1: `password` is a code of `/post/verify` type 0 (`super::codes`).
        let by_code = match req.get("type").and_then(Json::as_i64).unwrap_or(0) {
            0 => false,
            1 => true,
            other => {
                return Err(AccountError::Invalid(format!(
                    "login type {other} does not exist: 0 password, 1 verification code"
                ))
                .into())
            }
        };
        let defaults = req.get("defaults").filter(|d| !d.is_null()).cloned();
        let foreign_schema = match &defaults {
            Some(d) => check_defaults(d, &self.pipeline.options)?,
            None => None,
        };
        let remember = req.get("remember").and_then(Json::as_bool).unwrap_or(false);
        let mut counted = vec![Subject::Phone(phone.clone())];
        counted.extend(address.map(Subject::Address));
        if let Some(wait) = self.limiter.check(&counted, Instant::now()) {
            return Err(AccountError::TooManyLogins(wait).into());
        }
        let _work = self.admit_password_work(address)?;
        // Wrong codes are counted where they are checked (`super::codes`); wrong phones and
        // passwords here.
        let account = match self.credentials(&phone, password, by_code, address).await? {
            Ok(account) => {
                self.limiter.succeeded(&phone);
                account
            }
            Err(wrong) => {
                self.limiter.failed(&counted, Instant::now());
                return Err(wrong.into());
            }
        };
        let ttl = if remember {
            self.sessions.ttl * 7
        } else {
            self.sessions.ttl
        };
        let visitor = Visitor {
            id: account.id,
            contacts: account.contacts,
            foreign_schema,
        };
        let token = self.sessions.key.issue(&visitor, ttl, SystemTime::now());
        let mut out = Map::new();
        out.insert("User".into(), Json::Object(account.user));
        out.insert("token".into(), json!(token));
        out.insert("remember".into(), json!(remember));
        if let Some(d) = defaults {
            out.insert("defaults".into(), d);
        }
        Ok(LoggedIn {
            answer: success(out, false),
            token,
            ttl,
        })
    }

    /// The account of `phone` if `password` (or, `by_code`, the login code) is right; a wrong
    /// phone or password is the inner error, which counts as a failed login.
    async fn credentials(
        &self,
        phone: &Phone,
        password: String,
        by_code: bool,
        address: Option<ClientKey>,
    ) -> Result<Result<Account, AccountError>, ApiError> {
        let privacy = self.login_table("Privacy")?;
        let key = ("phone", phone_value(&privacy, "phone", phone));
        let rows = self
            .pipeline
            .lookup(&privacy, &["id", "_password"], key, &[])
            .await?;
        let Some(row) = rows.first() else {
            return Ok(Err(AccountError::NotFound(format!(
                "phone {phone} is not registered"
            ))));
        };
        let wrong = || AccountError::Mismatch("wrong phone or password".into());
        if by_code {
            self.check_code(CodeType::Login, phone, &password, true, address)
                .await?;
        } else {
            let stored = secret(row.get("_password")).unwrap_or_default();
            if !self.passwords.matches(stored, password).await {
                return Ok(Err(wrong()));
            }
        }
        let id = row
            .get("id")
            .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()));
        let Some(id) = id else {
            return Ok(Err(wrong()));
        };
        let users = self.login_table("User")?;
        let json_columns: Vec<String> = users
            .columns
            .iter()
            .filter(|c| c.kind == ColumnKind::Json)
            .map(|c| c.name.clone())
            .collect();
        let user = self
            .pipeline
            .lookup(
                &users,
                &visible_columns(&users),
                ("id", Value::Int(id)),
                &json_columns,
            )
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        let contacts = user
            .get("contactIdList")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Ok(Account { id, contacts, user }))
    }

    /// A table a login reads, or 406 naming it.
    fn login_table(&self, name: &str) -> Result<Arc<Table>, AccountError> {
        self.pipeline
            .snapshot()
            .schema
            .table(name)
            .cloned()
            .ok_or_else(|| {
                AccountError::Invalid(format!("this database has no {name} table to log in with"))
            })
    }
}
