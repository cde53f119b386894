//! Who the visitor of a request is (protocol §14): the signed token of a login (see
//! `apijet-auth`), sent as a cookie by web clients that expect a session and in
//! `Authorization` by the others. No session state is kept on the server.

use crate::config::Config;
use apijet_auth::TokenKey;
use apijet_core::Visitor;
use apijet_plan::PlanError;
use apijet_response::ApiError;
use axum::http::HeaderMap;
use std::time::{Duration, SystemTime};

/// The cookie that carries the token.
pub const COOKIE: &str = "apijet_token";

/// Signs and reads tokens.
pub struct Sessions {
    pub key: TokenKey,
    /// How long a login lasts (seven times as long with `remember`).
    pub ttl: Duration,
}

impl Sessions {
    /// Tokens signed with `token_secret`, or with a random key (and a warning) without one.
    pub fn new(cfg: &Config) -> Result<Sessions, String> {
        let key = match &cfg.token_secret {
            Some(secret) if !secret.is_empty() => TokenKey::new(secret.as_bytes()),
            _ => {
                eprintln!(
                    "apijet: WARNING: no token_secret configured; using a random key. Logins end \
                     when this process stops and other instances will not accept its tokens. \
                     Set token_secret (or APIJET_TOKEN_SECRET) in production."
                );
                TokenKey::random()?
            }
        };
        Ok(Sessions {
            key,
            ttl: Duration::from_secs(cfg.token_ttl_secs),
        })
    }

    /// The visitor of a request: a valid token in `Authorization: Bearer`, a token of ours
    /// alone in `Authorization` (as APIAuto sends it), or the cookie. Invalid, foreign and
    /// expired tokens mean "not logged in", never an error of their own.
    pub fn visitor(&self, headers: &HeaderMap) -> Option<Visitor> {
        self.visitor_until(headers).map(|(visitor, _)| visitor)
    }

    /// [`Sessions::visitor`], with the moment its token expires (a live answer ends then).
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

/// Not logged in (407), for private calls without a visitor.
pub fn not_logged_in() -> ApiError {
    ApiError::Plan(PlanError::NotLoggedIn)
}
