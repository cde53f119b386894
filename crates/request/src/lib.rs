//! apijet-request: the client's JSON body turned into a typed [`Request`] tree.
//!
//! This stage knows the APIJSON grammar (protocol §3 and §5.1) and nothing else: it does not
//! know which tables exist, who the visitor is, or what SQL will be written. It accepts JSON with
//! `//` and `/* */` comments and keeps keys in request order, because the response must follow
//! that order.

#![deny(missing_docs)]

mod classify;
mod json;
mod key;
mod tree;

pub use json::parse_body;
pub use key::{
    is_name, is_table_key, ArrayKey, ConditionKey, KeyParts, LengthFn, Logic, Op, TableKey,
};
pub use tree::{
    ArrayObject, Container, Member, Node, Request, SubqueryObject, TableEntry, TableObject,
};

/// Why a body could not become a request tree.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The body is not JSON (or not UTF-8, or empty).
    #[error("{0}")]
    InvalidJson(String),
    /// The body is JSON but not an object.
    #[error("the request body must be a JSON object")]
    NotAnObject,
    /// A key does not follow the key grammar.
    #[error("{key}: {reason}")]
    BadKey {
        /// The key as sent.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `>`, `<`, `>=`, `<=` combined with `&`, `|` or `!`.
    #[error("{key}")]
    LogicWithComparison {
        /// The key as sent.
        key: String,
    },
}

/// Parses a body into a request tree: read straight from the text, or, when the text repeats a
/// key in one object, has a large object or is not a JSON object, through a map, which keeps
/// serde_json's semantics for repeated keys and names the error.
pub fn parse(body: &[u8]) -> Result<Request, RequestError> {
    // Without a `/` there is no comment to blank: the bytes are read as they are (serde_json
    // checks the UTF-8 of each string it reads; anything else not UTF-8 is not JSON).
    let direct = if body.contains(&b'/') {
        json::text(body).ok().and_then(|t| classify::from_text(&t))
    } else {
        classify::from_slice(body)
    };
    match direct {
        Some(req) => Ok(req),
        None => Request::from_map(json::parse_body(body)?),
    }
}
