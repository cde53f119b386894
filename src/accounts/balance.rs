//! `/put/balance`: top-ups and withdrawals in whole cents.
//!
//! Money is counted in integer cents from the request to the database: an amount with more
//! than two decimals is refused (406), and the new balance is computed from the stored one
//! and written as exact decimal text, on the condition that the balance is still what was read
//! (retried a few times when another change came first). `balance = balance + x` would let
//! SQLite, whose `DECIMAL` columns hold binary floating point, drift (`9022.280999999`).

use super::login_limit::Subject;
use super::{account_id, secret, subjects, Accounts};
use crate::client::ClientKey;
use apijet_core::{Method, Value, Visitor};
use apijet_exec::ExecError;
use apijet_plan::PlanError;
use apijet_request::parse_body;
use apijet_response::{success, AccountError, ApiError};
use serde_json::{json, Map, Value as Json};
use std::fmt;

/// The most one top-up or withdrawal may move, in cents (the reference's 10000).
const MAX_CHANGE: i64 = 10_000 * 100;
/// The largest balance a `decimal(10,2)` holds, in cents.
const MAX_BALANCE: i64 = 9_999_999_999;
/// Tries of the conditional write before a busy account is answered 409.
const TRIES: usize = 4;

/// An amount of money in whole cents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cents(i64);

impl Cents {
    /// An amount a client sent: a number or a decimal string with at most two decimals.
    pub fn parse_amount(v: Option<&Json>, field: &str) -> Result<Cents, AccountError> {
        let refused = || {
            AccountError::Invalid(format!(
                "{field} must be an amount in whole cents: a number with at most 2 decimals"
            ))
        };
        match v {
            Some(Json::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    return i.checked_mul(100).map(Cents).ok_or_else(refused);
                }
                let f = n.as_f64().filter(|f| f.is_finite()).ok_or_else(refused)?;
                let cents = (f * 100.0).round();
                // A binary fraction of whole cents is within rounding of an integer; 0.001
                // or 100.005 are not.
                if (f * 100.0 - cents).abs() > 1e-6 || cents.abs() > 1e15 {
                    return Err(refused());
                }
                Ok(Cents(cents as i64))
            }
            Some(Json::String(s)) => Cents::parse_text(s.trim()).ok_or_else(refused),
            _ => Err(refused()),
        }
    }

    /// Decimal text with at most two decimals, exactly.
    fn parse_text(s: &str) -> Option<Cents> {
        let (negative, digits) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (whole, fraction) = match digits.split_once('.') {
            Some((_, "")) => return None,
            Some(parts) => parts,
            None => (digits, ""),
        };
        let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || whole.len() > 15 || fraction.len() > 2 {
            return None;
        }
        if !all_digits(whole) || !all_digits(fraction) {
            return None;
        }
        let whole: i64 = whole.parse().ok()?;
        let fraction: i64 = format!("{fraction:0<2}").parse().ok()?;
        let cents = whole * 100 + fraction;
        Some(Cents(if negative { -cents } else { cents }))
    }

    /// A balance as the database answered it (a decimal string, or a number on some engines),
    /// to the nearest cent: a value that drifted before this rule existed heals on its next
    /// change.
    fn from_stored(v: Option<&Json>) -> Option<Cents> {
        match v? {
            Json::Number(n) => n
                .as_i64()
                .map(|i| Cents(i * 100))
                .or_else(|| n.as_f64().map(|f| Cents((f * 100.0).round() as i64))),
            Json::String(s) => Cents::parse_text(s.trim()).or_else(|| {
                let f: f64 = s.trim().parse().ok()?;
                f.is_finite().then(|| Cents((f * 100.0).round() as i64))
            }),
            _ => None,
        }
    }
}

impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:02}", abs / 100, abs % 100)
    }
}

impl Accounts {
    /// `POST /put/balance {"Privacy": {"id", "balance+", "_payPassword"}}`: a top-up (positive)
    /// or withdrawal (negative) of at most 10000 by the logged-in owner, with the pay password.
    pub async fn put_balance(
        &self,
        body: &[u8],
        visitor: Option<&Visitor>,
        address: Option<ClientKey>,
    ) -> Result<Json, ApiError> {
        let visitor = visitor.ok_or(PlanError::NotLoggedIn)?;
        let req = parse_body(body)?;
        let privacy = req
            .get("Privacy")
            .and_then(Json::as_object)
            .ok_or_else(|| AccountError::Invalid("Privacy is required".into()))?;
        let id = account_id(privacy.get("id"), "Privacy/id")?;
        if id != visitor.id {
            return Err(PlanError::AccessDenied {
                table: "Privacy".into(),
                role: apijet_core::Role::Owner,
                method: Method::Put,
            }
            .into());
        }
        let pay = secret(privacy.get("_payPassword")).unwrap_or_default();
        if !super::is_password(&pay) {
            return Err(AccountError::Invalid("Privacy/_payPassword is required".into()).into());
        }
        let change = Cents::parse_amount(privacy.get("balance+"), "Privacy/balance+")?;
        if let Some(k) = privacy
            .keys()
            .find(|k| !matches!(k.as_str(), "id" | "balance+" | "_payPassword"))
        {
            return Err(AccountError::Invalid(format!(
                "Privacy/{k} is not allowed here: give id, balance+ and _payPassword"
            ))
            .into());
        }
        if change.0 == 0 {
            return Err(AccountError::OutOfRange("balance+ must not be 0".into()).into());
        }
        if change.0.abs() > MAX_CHANGE {
            return Err(AccountError::OutOfRange(
                "one top-up or withdrawal may not exceed 10000".into(),
            )
            .into());
        }
        let counted = subjects(Subject::PayPassword(id), address);
        self.limit(&counted)?;
        let _work = self.admit_password_work(address)?;
        let row = self
            .privacy_row("id", Value::Int(id), &["id", "_payPassword"])
            .await?;
        let right = match row.as_ref().and_then(|r| secret(r.get("_payPassword"))) {
            Some(stored) => self.passwords.matches(stored, pay).await,
            None => false,
        };
        if !right {
            self.count_failure(&counted);
            return Err(AccountError::Mismatch("wrong pay password".into()).into());
        }
        for _ in 0..TRIES {
            if let Some(written) = self.change_balance(id, change).await? {
                return Ok(success(written, false));
            }
        }
        Err(AccountError::Conflict(
            "the balance changed while this change was made: try again".into(),
        )
        .into())
    }

    /// Adds `change` to the balance of `id` if nobody changed it meanwhile; `None` when
    /// somebody did.
    async fn change_balance(
        &self,
        id: i64,
        change: Cents,
    ) -> Result<Option<Map<String, Json>>, ApiError> {
        let row = self
            .privacy_row("id", Value::Int(id), &["id", "balance"])
            .await?
            .ok_or_else(|| AccountError::NotFound("this account has no Privacy row".into()))?;
        let stored = row.get("balance").cloned().unwrap_or(Json::Null);
        let balance = Cents::from_stored(Some(&stored)).unwrap_or(Cents(0));
        let new = Cents(balance.0 + change.0);
        if new.0 < 0 {
            return Err(AccountError::OutOfRange("the balance is too low".into()).into());
        }
        if new.0 > MAX_BALANCE {
            return Err(
                AccountError::OutOfRange("the balance would exceed 99999999.99".into()).into(),
            );
        }
        let mut obj = Map::new();
        obj.insert("id".into(), json!(id));
        obj.insert("balance".into(), json!(new.to_string()));
        // The value as read, bound as the database answered it: equal to the stored one.
        obj.insert("balance{}".into(), json!([stored]));
        let mut body = Map::new();
        body.insert("Privacy".into(), Json::Object(obj));
        match self.pipeline.trusted_write(Method::Put, body, &[]).await {
            Ok(written) => Ok(Some(written)),
            // Zero rows changed: another change came first.
            Err(
                ApiError::Plan(PlanError::NothingChanged(_))
                | ApiError::Exec(ExecError::Plan(PlanError::NothingChanged(_))),
            ) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_whole_cents_or_refused() {
        let cents = |v: Json| Cents::parse_amount(Some(&v), "balance+").map(|c| c.0);
        assert_eq!(cents(json!(100.5)).ok(), Some(10050));
        assert_eq!(cents(json!(0.29)).ok(), Some(29));
        assert_eq!(cents(json!(-50)).ok(), Some(-5000));
        assert_eq!(cents(json!("12.3")).ok(), Some(1230));
        assert_eq!(cents(json!("-0.05")).ok(), Some(-5));
        for bad in [
            json!(0.001),
            json!(100.005),
            json!("100.005"),
            json!("1e2"),
            json!("12."),
            json!(".5"),
            json!("NaN"),
            json!("1 000"),
            json!(true),
            json!(null),
            json!([1]),
        ] {
            assert!(cents(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn stored_balances_are_read_to_the_nearest_cent() {
        let stored = |v: Json| Cents::from_stored(Some(&v)).map(|c| c.0);
        assert_eq!(stored(json!("9022.28")), Some(902228));
        assert_eq!(stored(json!("9022.280999999")), Some(902228));
        assert_eq!(stored(json!(157782.61)), Some(15778261));
        assert_eq!(stored(json!(2000)), Some(200000));
        assert_eq!(Cents(902228).to_string(), "9022.28");
        assert_eq!(Cents(-5).to_string(), "-0.05");
    }
}
