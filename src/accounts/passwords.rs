//! How passwords are stored and checked (`password_storage`).
//!
//! New passwords (`/register`, `/put/password`, pay passwords) are stored as argon2id hashes
//! (`apijet_auth::password`), or as the reference's plain text where the Java server shares
//! the `Privacy` table and compares passwords in SQL. A check accepts both forms, so one
//! database can hold both while it moves from one to the other.
//!
//! Hashing is deliberate CPU and memory work (19 MiB, tens of milliseconds): it runs on
//! blocking threads, at most one per core at a time, so logins can neither stall the async
//! threads nor hold more than cores × 19 MiB. Callers ask the failed-login limiter first, so a
//! locked account or address costs no hashing at all.

pub use crate::config::PasswordStorage;
use apijet_auth::password;
use apijet_plan::PlanError;
use apijet_response::ApiError;
use serde_json::{Map, Value as Json};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Stores and checks passwords; see the module documentation.
pub struct Passwords {
    storage: PasswordStorage,
    /// One permit per hash running.
    hashing: Arc<Semaphore>,
}

impl Passwords {
    /// Passwords stored as `storage` says.
    pub fn new(storage: PasswordStorage) -> Passwords {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Passwords {
            storage,
            hashing: Arc::new(Semaphore::new(cores)),
        }
    }

    /// Runs `work` on a blocking thread once a hashing permit is free.
    async fn hashing<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let failed = |e: String| ApiError::Internal(format!("password hashing failed: {e}"));
        let permit = Arc::clone(&self.hashing)
            .acquire_owned()
            .await
            .map_err(|e| failed(e.to_string()))?;
        // The permit goes with the work: a client that hangs up does not free it while the
        // hash still runs.
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
        .map_err(|e| failed(e.to_string()))
    }

    /// Whether `given` is the password `stored` holds (a hash, or the reference's plain text).
    pub async fn matches(&self, stored: String, given: String) -> bool {
        if !password::is_hash(&stored) {
            return password::matches(&stored, &given);
        }
        self.hashing(move || password::matches(&stored, &given))
            .await
            .unwrap_or(false)
    }

    /// The stored form of a new password.
    pub async fn seal(&self, new: String) -> Result<String, ApiError> {
        match self.storage {
            PasswordStorage::Plain => Ok(new),
            PasswordStorage::Argon2id => self
                .hashing(move || password::hash(&new))
                .await?
                .map_err(|e| ApiError::Internal(e.to_string())),
        }
    }

    /// A database refusal to store a password `column` becomes a message that says why and
    /// which setting decides: the reference's demo declares `_password varchar(20)` and
    /// `_payPassword int`, which hold plain text only.
    pub fn explain_refusal(&self, column: &str, e: ApiError) -> ApiError {
        let too_narrow = matches!(
            &e,
            ApiError::Exec(apijet_exec::ExecError::Db {
                kind: apijet_exec::DbErrorKind::BadValue,
                ..
            })
        );
        if too_narrow && self.storage == PasswordStorage::Argon2id {
            return ApiError::Plan(PlanError::Forbidden(format!(
                "Privacy.{column} cannot hold an argon2id hash on this database (about 97 \
                 characters): widen the column to varchar(255), or set password_storage = \
                 \"plain\" where the Java reference shares this table"
            )));
        }
        e
    }
}

/// The password columns of `Privacy`.
pub const PASSWORD_COLUMNS: [&str; 2] = ["_password", "_payPassword"];

impl Passwords {
    /// Replaces the passwords of the `Privacy` object of a write (`/register`) by their stored
    /// form. Called after the structure was checked, which sees what the client sent.
    pub async fn seal_request(&self, req: &mut Map<String, Json>) -> Result<(), ApiError> {
        let Some(privacy) = req.get_mut("Privacy").and_then(Json::as_object_mut) else {
            return Ok(());
        };
        for column in PASSWORD_COLUMNS {
            let Some(given) = super::secret(privacy.get(column)) else {
                continue;
            };
            let sealed = self.seal(given).await?;
            privacy.insert(column.into(), Json::String(sealed));
        }
        Ok(())
    }
}
