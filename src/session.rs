//! Login, logout, and who the visitor of a request is (protocol §14).
//!
//! `/login` checks a phone and password against the `Privacy` table and answers with a signed
//! token (see `apijet-auth`), set both as a cookie for web clients that expect a session and in
//! the body for `Authorization: Bearer` clients. No session state is kept on the server.

use crate::app::AppState;
use crate::login_limit::{LoginLimiter, Subject};
use apijet_auth::{Phone, TokenKey};
use apijet_core::{Value, Visitor};
use apijet_exec::read::fetch_rows;
use apijet_plan::{lookup, visible_columns, PlanError};
use apijet_response::ApiError;
use axum::http::HeaderMap;
use serde_json::{json, Map, Value as Json};
use std::net::IpAddr;
use std::time::{Duration, Instant, SystemTime};

/// The cookie that carries the token.
pub const COOKIE: &str = "apijet_token";

/// Signs and reads tokens, and counts failed logins.
pub struct Sessions {
    pub key: TokenKey,
    pub ttl: Duration,
    pub limiter: LoginLimiter,
}

impl Sessions {
    /// The visitor of a request: a valid token in `Authorization: Bearer`, a token of ours
    /// alone in `Authorization` (as APIAuto sends it), or the cookie. Invalid, foreign and
    /// expired tokens mean "not logged in", never an error of their own.
    pub fn visitor(&self, headers: &HeaderMap) -> Option<Visitor> {
        self.visitor_until(headers).map(|(visitor, _)| visitor)
    }

    /// [`Sessions::visitor`], with the moment its token expires.
    pub fn visitor_until(&self, headers: &HeaderMap) -> Option<(Visitor, SystemTime)> {
        let now = SystemTime::now();
        let authorization = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::trim);
        if let Some(t) = authorization.and_then(|v| v.strip_prefix("Bearer ")) {
            return self.key.verify_until(t.trim(), now).ok();
        }
        // A value without a scheme counts only when it is a valid token of ours: any other
        // (a proxy's credential) leaves the cookie to decide, as before.
        let bare = authorization.filter(|v| !v.contains(char::is_whitespace));
        if let Some(found) = bare.and_then(|t| self.key.verify_until(t, now).ok()) {
            return Some(found);
        }
        headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
            .find_map(|t| self.key.verify_until(t, now).ok())
    }

    /// `Set-Cookie` for a token valid `max_age`.
    pub fn cookie(token: &str, max_age: Duration) -> String {
        format!(
            "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}",
            max_age.as_secs()
        )
    }

    /// `Set-Cookie` that removes the cookie.
    pub fn clear_cookie() -> String {
        format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0")
    }
}

fn text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Where a login failed, with the reference's codes: 404 unknown phone, 412 wrong password.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The body is not a login request.
    #[error("{0}")]
    Invalid(String),
    /// No account with that phone.
    #[error("phone {0} is not registered")]
    UnknownPhone(Phone),
    /// The password does not match.
    #[error("wrong phone or password")]
    WrongPassword,
    /// Too many failed logins for this account or client address; the wait is given.
    #[error(
        "too many failed logins for this phone or address: try again in {} s (settings \
         login_failures_per_phone, login_failures_per_address, login_lockout_secs)",
        .0.as_secs().max(1)
    )]
    TooManyAttempts(Duration),
    /// A login by verification code failed.
    #[error(transparent)]
    Code(crate::account::AccountError),
    /// Any other failure.
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl LoginError {
    /// The APIJSON code.
    pub fn code(&self) -> u16 {
        match self {
            LoginError::Invalid(_) => 406,
            LoginError::UnknownPhone(_) => 404,
            LoginError::WrongPassword => 412,
            LoginError::TooManyAttempts(_) => 429,
            LoginError::Code(e) => e.code(),
            LoginError::Api(e) => e.code(),
        }
    }

    /// How long to wait before trying again (HTTP `Retry-After`), for a 429.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LoginError::TooManyAttempts(wait) => Some(*wait),
            LoginError::Code(e) => e.retry_after(),
            _ => None,
        }
    }
}

impl AppState {
    /// Checks the credentials; the answer (user row + token) and the token's lifetime.
    /// The phone is canonicalised first (406 when it is not a phone); failed attempts count
    /// against the account and the client `address`, and past the limit neither the database
    /// nor the password hash is asked at all.
    pub async fn login(
        &self,
        body: &[u8],
        address: Option<IpAddr>,
    ) -> Result<(Json, String, Duration), LoginError> {
        let req = apijet_request::parse_body(body).map_err(|e| LoginError::Api(e.into()))?;
        let phone = Phone::from_json(req.get("phone"), "phone")
            .map_err(|e| LoginError::Invalid(e.to_string()))?;
        let password = req
            .get("password")
            .and_then(text)
            .ok_or_else(|| LoginError::Invalid("password is required".into()))?;
        // Type 1: `password` is a code of `/post/verify` type 0 (crate::account).
        let by_code = match req.get("type").and_then(Json::as_i64).unwrap_or(0) {
            0 => false,
            1 => true,
            other => {
                return Err(LoginError::Invalid(format!(
                    "login type {other} does not exist: 0 password, 1 verification code"
                )))
            }
        };
        let defaults = req.get("defaults").filter(|d| !d.is_null()).cloned();
        let foreign_schema = match &defaults {
            Some(d) => crate::account::check_defaults(d, &self.options)
                .map_err(|e| LoginError::Invalid(e.to_string()))?,
            None => None,
        };
        let remember = req.get("remember").and_then(Json::as_bool).unwrap_or(false);
        let limiter = &self.sessions.limiter;
        let mut counted = vec![Subject::Phone(phone.clone())];
        counted.extend(address.map(Subject::Address));
        if let Some(wait) = limiter.check(&counted, Instant::now()) {
            return Err(LoginError::TooManyAttempts(wait));
        }
        let result = self
            .check_credentials(&phone, password, by_code, address)
            .await;
        match &result {
            Ok(_) => limiter.succeeded(&phone),
            // Wrong codes are counted where they are checked (crate::account).
            Err(LoginError::UnknownPhone(_) | LoginError::WrongPassword) => {
                limiter.failed(&counted, Instant::now());
            }
            Err(_) => {}
        }
        let (id, contacts, user) = result?;
        let ttl = if remember {
            self.sessions.ttl * 7
        } else {
            self.sessions.ttl
        };
        let token = self.sessions.key.issue(
            &Visitor {
                id,
                contacts,
                foreign_schema,
            },
            ttl,
            SystemTime::now(),
        );
        let mut out = Map::new();
        out.insert("User".into(), Json::Object(user));
        out.insert("token".into(), json!(token));
        out.insert("remember".into(), json!(remember));
        if let Some(d) = defaults {
            out.insert("defaults".into(), d);
        }
        Ok((apijet_response::success(out, false), token, ttl))
    }

    /// The account of `phone` if `password` (or, `by_code`, the login code) is right: its id,
    /// contacts and `User` row.
    async fn check_credentials(
        &self,
        phone: &Phone,
        password: String,
        by_code: bool,
        address: Option<IpAddr>,
    ) -> Result<(i64, Vec<i64>, Map<String, Json>), LoginError> {
        let snapshot = self.snapshot();
        let table = |name: &str| {
            snapshot.schema.table(name).cloned().ok_or_else(|| {
                LoginError::Invalid(format!("this database has no {name} table to log in with"))
            })
        };
        let privacy = table("Privacy")?;
        let phone_value = crate::account::phone_value(&privacy, "phone", phone);
        let select =
            lookup(&privacy, &["id", "_password"], "phone", phone_value).map_err(ApiError::from)?;
        let rows = fetch_rows(&self.backend, self.dialect.as_ref(), &select, &[])
            .await
            .map_err(ApiError::from)?;
        let Some(row) = rows.first() else {
            return Err(LoginError::UnknownPhone(phone.clone()));
        };
        if by_code {
            self.check_code(
                crate::account::CodeType::Login,
                phone,
                &password,
                true,
                address,
            )
            .await
            .map_err(LoginError::Code)?;
        } else {
            let stored = row.get("_password").and_then(text).unwrap_or_default();
            if !self.accounts.passwords.matches(stored, password).await {
                return Err(LoginError::WrongPassword);
            }
        }
        let id = row
            .get("id")
            .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
            .ok_or(LoginError::WrongPassword)?;
        let user_table = table("User")?;
        let select = lookup(
            &user_table,
            &visible_columns(&user_table),
            "id",
            Value::Int(id),
        )
        .map_err(ApiError::from)?;
        let json_cols: Vec<String> = user_table
            .columns
            .iter()
            .filter(|c| c.kind == apijet_plan::schema::ColumnKind::Json)
            .map(|c| c.name.clone())
            .collect();
        let user = fetch_rows(&self.backend, self.dialect.as_ref(), &select, &json_cols)
            .await
            .map_err(ApiError::from)?
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
        Ok((id, contacts, user))
    }
}

impl AppState {
    /// The error answer of a failed login; database text stays out of it outside debug mode.
    pub fn login_failure(&self, e: &LoginError) -> Json {
        match e {
            LoginError::Api(api) => self.failure(api),
            LoginError::Code(account) => self.account_failure(account),
            other => json!({
                "ok": false,
                "code": other.code(),
                "msg": other.to_string(),
                "time": apijet_response::now_ms()
            }),
        }
    }
}

/// Not logged in (407), for private calls without a visitor.
pub fn not_logged_in() -> ApiError {
    ApiError::Plan(PlanError::NotLoggedIn)
}
