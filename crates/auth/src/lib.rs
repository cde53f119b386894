//! apijet-auth: the visitor's identity, carried in a signed, expiring token.
//!
//! The token holds everything the server needs about a visitor (id and contact list), signed
//! with HMAC-SHA256 under a key from the configuration. Any apijet instance with the same key
//! accepts it, so instances behind a load balancer share no session state. The same token rides
//! in a cookie for web clients that expect a session, and in `Authorization: Bearer` for the
//! rest. Being stateless, a token stays valid until it expires: logout clears the cookie.
//!
//! Format: `v1.<base64url(JSON payload)>.<base64url(HMAC-SHA256 of the first two parts)>`.
//!
//! Beside the token: [`Phone`], the one spelling of a login identity, and [`password`], how
//! passwords are stored and checked.

#![deny(missing_docs)]

pub mod password;
mod phone;

pub use phone::{Phone, PhoneError};

use apijet_core::Visitor;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

type HmacSha256 = Hmac<Sha256>;

/// Why a token was not accepted. A client sees all of them as "not logged in".
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// Not a token of ours.
    #[error("the token is malformed")]
    Malformed,
    /// Signed with another key, or altered.
    #[error("the token's signature does not match")]
    BadSignature,
    /// Past its expiry.
    #[error("the token has expired")]
    Expired,
}

/// The key that signs and checks tokens.
pub struct TokenKey {
    key: Vec<u8>,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(…)")
    }
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl TokenKey {
    /// A key from a configured secret.
    pub fn new(secret: &[u8]) -> TokenKey {
        TokenKey {
            key: secret.to_vec(),
        }
    }

    /// A fresh random key: tokens die with the process and other instances reject them.
    pub fn random() -> Result<TokenKey, String> {
        let mut key = vec![0u8; 32];
        getrandom::fill(&mut key).map_err(|e| e.to_string())?;
        Ok(TokenKey { key })
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length; this cannot fail.
        HmacSha256::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
    }

    /// A token for `visitor`, valid for `ttl` from `now`.
    pub fn issue(&self, visitor: &Visitor, ttl: Duration, now: SystemTime) -> String {
        let mut payload =
            json!({ "sub": visitor.id, "contacts": visitor.contacts, "exp": unix(now + ttl) });
        if let Some(schema) = &visitor.foreign_schema {
            payload["schema"] = json!(schema);
        }
        let body = format!("v1.{}", URL_SAFE_NO_PAD.encode(payload.to_string()));
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        let sig = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{body}.{sig}")
    }

    /// The visitor a token names, if it is ours, intact and not expired at `now`.
    pub fn verify(&self, token: &str, now: SystemTime) -> Result<Visitor, AuthError> {
        self.verify_until(token, now).map(|(visitor, _)| visitor)
    }

    /// [`TokenKey::verify`], with the moment the token expires (a live answer ends then).
    pub fn verify_until(
        &self,
        token: &str,
        now: SystemTime,
    ) -> Result<(Visitor, SystemTime), AuthError> {
        let (body, sig) = token.rsplit_once('.').ok_or(AuthError::Malformed)?;
        let payload = body.strip_prefix("v1.").ok_or(AuthError::Malformed)?;
        let sig = URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|_| AuthError::Malformed)?;
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        // verify_slice compares in constant time.
        mac.verify_slice(&sig)
            .map_err(|_| AuthError::BadSignature)?;
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| AuthError::Malformed)?;
        let v: Value = serde_json::from_slice(&json).map_err(|_| AuthError::Malformed)?;
        let exp = v["exp"].as_u64().ok_or(AuthError::Malformed)?;
        if unix(now) >= exp {
            return Err(AuthError::Expired);
        }
        let id = v["sub"].as_i64().ok_or(AuthError::Malformed)?;
        let contacts = v["contacts"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        let foreign_schema = v["schema"].as_str().map(str::to_string);
        Ok((
            Visitor {
                id,
                contacts,
                foreign_schema,
            },
            UNIX_EPOCH + Duration::from_secs(exp),
        ))
    }
}

/// Compares secrets without an early exit, so timing does not tell how much of a guess was right.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(!x);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visitor() -> Visitor {
        Visitor {
            id: 82001,
            contacts: vec![82002, 82003],
            foreign_schema: None,
        }
    }

    #[test]
    fn a_token_round_trips_between_instances_with_the_same_key() {
        let now = SystemTime::now();
        let token = TokenKey::new(b"shared secret").issue(&visitor(), Duration::from_secs(60), now);
        let other_instance = TokenKey::new(b"shared secret");
        assert_eq!(other_instance.verify(&token, now), Ok(visitor()));
        let elsewhere = Visitor {
            foreign_schema: Some("sys".into()),
            ..visitor()
        };
        let token = TokenKey::new(b"shared secret").issue(&elsewhere, Duration::from_secs(60), now);
        assert_eq!(other_instance.verify(&token, now), Ok(elsewhere));
    }

    #[test]
    fn tampered_foreign_and_expired_tokens_are_refused() {
        let now = SystemTime::now();
        let key = TokenKey::new(b"k1");
        let token = key.issue(&visitor(), Duration::from_secs(60), now);
        assert_eq!(
            TokenKey::new(b"k2").verify(&token, now),
            Err(AuthError::BadSignature)
        );
        let (body, sig) = token.rsplit_once('.').expect("token");
        let forged_payload = URL_SAFE_NO_PAD.encode(r#"{"sub":1,"contacts":[],"exp":99999999999}"#);
        assert_eq!(
            key.verify(&format!("v1.{forged_payload}.{sig}"), now),
            Err(AuthError::BadSignature)
        );
        assert_eq!(key.verify(body, now), Err(AuthError::Malformed));
        assert_eq!(key.verify("garbage", now), Err(AuthError::Malformed));
        let later = now + Duration::from_secs(61);
        assert_eq!(key.verify(&token, later), Err(AuthError::Expired));
    }

    #[test]
    fn constant_time_eq_compares_whole_values() {
        assert!(constant_time_eq(b"123456", b"123456"));
        assert!(!constant_time_eq(b"123456", b"123457"));
        assert!(!constant_time_eq(b"123456", b"1234567"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
