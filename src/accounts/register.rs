//! `/register`: a POST with tag `register` (the `Request` row decides the shape: typically
//! `Privacy` with `phone` and `_password`, `User` with `name`, `"id@": "Privacy/id"`). It runs
//! without a login and without the `Access` role lists, as the reference's demo does; the
//! structure is what keeps it in bounds.
//!
//! The verification code (`verify`, type 1 of `/post/verify`) is checked first and spent when
//! the account is made; the phone is stored in its canonical spelling and the passwords as
//! `password_storage` says.

use super::{Accounts, CodeType};
use crate::client::ClientKey;
use apijet_core::Method;
use apijet_request::parse_body;
use apijet_response::{success, ApiError};
use serde_json::{Map, Value as Json};

impl Accounts {
    /// `POST /register`, from the client `address`.
    pub async fn register(
        &self,
        body: &[u8],
        address: Option<ClientKey>,
    ) -> Result<Json, ApiError> {
        let mut map = parse_body(body)?;
        let phone = self.check_registration(&mut map, address).await?;
        let _work = self.admit_password_work(address)?;
        let answer = self.create_account(map).await?;
        self.forget_codes(CodeType::Register, &phone).await;
        Ok(answer)
    }

    async fn create_account(&self, mut map: Map<String, Json>) -> Result<Json, ApiError> {
        map.insert("tag".into(), Json::String("register".into()));
        map.remove("verify");
        // No login and no Access lists here: the structure is all that bounds a sign-up, so it
        // is read as a whitelist (a sign-up that could set `User.contactIdList` would forge the
        // CONTACT and CIRCLE reach of every later login).
        let mut verified = self.pipeline.verify_trusted(Method::Post, map)?;
        self.passwords.seal_request(&mut verified.request).await?;
        let results = self
            .pipeline
            .trusted_write(Method::Post, verified.request, &verified.checks)
            .await?;
        Ok(success(results, false))
    }
}
