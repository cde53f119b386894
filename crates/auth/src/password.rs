//! Passwords at rest: argon2id in the PHC string format, and the reference's plain text on
//! databases the Java server shares.
//!
//! The parameters are OWASP's first recommendation for argon2id: 19 MiB of memory, 2 passes,
//! 1 lane. One hash or check costs about 19 MiB and a few tens of milliseconds of one core
//! (release build); callers run it off the async threads and bound how many run at once.
//! A stored hash names its own parameters; one asking for more than [`MAX_MEMORY_KIB`],
//! [`MAX_PASSES`] or [`MAX_LANES`] (written into the table by someone else) is not checked at
//! all, so no row can make a login allocate gigabytes.

use crate::constant_time_eq;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

/// Memory per hash, in KiB.
pub const MEMORY_KIB: u32 = 19 * 1024;
/// Passes over the memory.
pub const PASSES: u32 = 2;
/// Lanes (threads within one hash).
pub const LANES: u32 = 1;
/// The most memory a stored hash may ask for before it is refused unchecked.
pub const MAX_MEMORY_KIB: u32 = 64 * 1024;
/// The most passes a stored hash may ask for.
pub const MAX_PASSES: u32 = 8;
/// The most lanes a stored hash may ask for.
pub const MAX_LANES: u32 = 4;

/// The prefix of every hash this module writes.
const PREFIX: &str = "$argon2id$";

/// A password could not be hashed (no random source for the salt).
#[derive(Debug, thiserror::Error)]
#[error("the password could not be hashed: {0}")]
pub struct HashError(String);

fn hasher() -> Result<Argon2<'static>, HashError> {
    let params =
        Params::new(MEMORY_KIB, PASSES, LANES, None).map_err(|e| HashError(e.to_string()))?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

/// The argon2id PHC string of `password` with a fresh 16-byte salt. CPU-bound: call it on a
/// blocking thread.
pub fn hash(password: &str) -> Result<String, HashError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| HashError(e.to_string()))?;
    hash_with_salt(password, &salt)
}

/// [`hash`] with a given salt (the demo dataset's rows are identical on every engine).
pub fn hash_with_salt(password: &str, salt: &[u8]) -> Result<String, HashError> {
    let salt = SaltString::encode_b64(salt).map_err(|e| HashError(e.to_string()))?;
    hasher()?
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| HashError(e.to_string()))
}

/// Whether `stored` is a hash this module can check (else it is the reference's plain text).
pub fn is_hash(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

/// Whether `given` is the password `stored` holds: an argon2id hash is checked (CPU-bound:
/// call it on a blocking thread), anything else is compared as the reference's plain text, in
/// constant time. An empty stored password, a hash that cannot be read, or one that asks for
/// more than the `MAX_*` costs never matches.
pub fn matches(stored: &str, given: &str) -> bool {
    if stored.is_empty() {
        return false;
    }
    if !is_hash(stored) {
        return constant_time_eq(stored.as_bytes(), given.as_bytes());
    }
    let Ok(parsed) = PasswordHash::new(stored) else {
        return false;
    };
    let Ok(params) = Params::try_from(&parsed) else {
        return false;
    };
    if params.m_cost() > MAX_MEMORY_KIB
        || params.t_cost() > MAX_PASSES
        || params.p_cost() > MAX_LANES
    {
        return false;
    }
    Argon2::default()
        .verify_password(given.as_bytes(), &parsed)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_checks_its_password_and_no_other() {
        let h = hash("secret1").expect("hash");
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(h.len() <= 100, "fits varchar(128): {}", h.len());
        assert!(matches(&h, "secret1"));
        assert!(!matches(&h, "secret2"));
        assert!(!matches(&h, ""));
        assert_ne!(h, hash("secret1").expect("hash"), "fresh salts");
    }

    #[test]
    fn plain_text_is_compared_as_the_reference_stores_it() {
        assert!(matches("123456", "123456"));
        assert!(!matches("123456", "1234567"));
        assert!(!matches("", "x"));
        assert!(!matches("", ""), "an empty stored password opens nothing");
        // A plain password that looks like a hash prefix but is not one never matches itself
        // through the hash path.
        assert!(!matches("$argon2id$nonsense", "$argon2id$nonsense"));
    }

    #[test]
    fn a_stored_hash_asking_for_too_much_memory_is_not_checked() {
        let salt = SaltString::encode_b64(b"0123456789abcdef").expect("salt");
        let greedy = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(MAX_MEMORY_KIB * 2, 1, 1, None).expect("params"),
        );
        let h = greedy
            .hash_password(b"pw", &salt)
            .expect("hash")
            .to_string();
        assert!(!matches(&h, "pw"));
    }
}
