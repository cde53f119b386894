//! Passwords and login defaults: `/put/password` and the `defaults` of `/login`.
//!
//! `/put/password` by old password needs no login, as in the reference's demo: the old
//! password is the credential, as it is at `/login`, and its wrong guesses count exactly as
//! wrong logins do (per account, by its canonical phone, and per client address), so it is no
//! better an oracle than `/login` itself. By code it needs the type 2 (or 3) code of the phone.

use super::login_limit::Subject;
use super::passwords::PASSWORD_COLUMNS;
use super::{
    account_id, is_code, is_password, phone, phone_value, secret, subjects, text, Accounts,
    CodeType,
};
use crate::client::ClientKey;
use apijet_auth::Phone;
use apijet_core::{Method, Value};
use apijet_plan::PlanOptions;
use apijet_request::parse_body;
use apijet_response::{success, AccountError, ApiError};
use serde_json::{json, Map, Value as Json};

impl Accounts {
    /// What a wrong old password of account `id` counts against: its pay password, or its
    /// login (by the canonical spelling of its stored phone, shared with `/login`; by id where
    /// the stored phone has none).
    fn old_password_subject(column: &str, id: i64, row: Option<&Map<String, Json>>) -> Subject {
        if column == "_payPassword" {
            return Subject::PayPassword(id);
        }
        match row.map(|r| Phone::from_json(r.get("phone"), "phone")) {
            Some(Ok(phone)) => Subject::Phone(phone),
            _ => Subject::Account(id),
        }
    }

    /// `POST /put/password`: `{"oldPassword", "Privacy": {"id", "_password"|"_payPassword"}}`
    /// or `{"verify", "Privacy": {"phone", "_password"|"_payPassword"}}`.
    pub async fn put_password(
        &self,
        body: &[u8],
        address: Option<ClientKey>,
    ) -> Result<Json, ApiError> {
        let req = parse_body(body)?;
        let privacy = req
            .get("Privacy")
            .and_then(Json::as_object)
            .ok_or_else(|| AccountError::Invalid("Privacy is required".into()))?;
        let (column, kind, password) = match secret(privacy.get("_password")) {
            Some(p) if !p.is_empty() => (PASSWORD_COLUMNS[0], CodeType::Password, p),
            _ => {
                let p = secret(privacy.get("_payPassword")).unwrap_or_default();
                if p.len() != 6 || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(AccountError::Invalid(
                        "Privacy/_payPassword must be 6 digits".into(),
                    )
                    .into());
                }
                (PASSWORD_COLUMNS[1], CodeType::PayPassword, p)
            }
        };
        if !is_password(&password) {
            return Err(AccountError::Invalid(format!(
                "Privacy/{column} must have 6 to 64 characters"
            ))
            .into());
        }
        let old = secret(req.get("oldPassword")).unwrap_or_default();
        let _work = self.admit_password_work(address)?;
        let id = if is_password(&old) {
            let id = account_id(privacy.get("id"), "Privacy/id")?;
            if old == password {
                return Err(AccountError::Conflict(
                    "the new password must differ from the old one".into(),
                )
                .into());
            }
            // The address first: a sprayer's locked address costs no lookup.
            let address_only: Vec<Subject> = address.map(Subject::Address).into_iter().collect();
            self.limit(&address_only)?;
            let row = self
                .privacy_row("id", Value::Int(id), &["id", "phone", column])
                .await?;
            let counted = subjects(
                Self::old_password_subject(column, id, row.as_ref()),
                address,
            );
            self.limit(&counted)?;
            let stored = row.as_ref().and_then(|r| secret(r.get(column)));
            let right = match stored {
                Some(stored) => self.passwords.matches(stored, old).await,
                None => false,
            };
            if !right {
                self.count_failure(&counted);
                return Err(AccountError::Mismatch("wrong account or old password".into()).into());
            }
            id
        } else {
            let phone = phone(privacy.get("phone"), "Privacy/phone");
            let code = text(req.get("verify")).unwrap_or_default();
            let (Ok(phone), true) = (phone, is_code(&code)) else {
                return Err(AccountError::Invalid(
                    "give oldPassword with Privacy/id, or verify with Privacy/phone".into(),
                )
                .into());
            };
            self.check_code(kind, &phone, &code, true, address).await?;
            let table = self.table("Privacy")?;
            self.privacy_row("phone", phone_value(&table, "phone", &phone), &["id"])
                .await?
                .and_then(|r| account_id(r.get("id"), "id").ok())
                .ok_or_else(|| AccountError::NotFound("this phone is not registered".into()))?
        };
        let sealed = self.passwords.seal(password).await?;
        let mut obj = Map::new();
        obj.insert("id".into(), json!(id));
        obj.insert(column.into(), json!(sealed));
        let mut body = Map::new();
        body.insert("Privacy".into(), Json::Object(obj));
        let written = self
            .pipeline
            .trusted_write(Method::Put, body, &[])
            .await
            .map_err(|e| self.passwords.explain_refusal(column, e))?;
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
