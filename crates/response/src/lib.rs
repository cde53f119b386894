//! apijet-response: the APIJSON envelope (§2) and the error → code mapping (§9).

#![deny(missing_docs)]

pub mod answer;
mod cell_json;
mod error;
mod format;
pub mod nested;
pub mod object;
pub mod stream;
mod written;

pub use error::{AccountError, ApiError};
pub use format::format_keys;
pub use written::{written, written_object};

use serde_json::{json, Map, Value as Json};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, for the envelope's `time`.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A successful answer: the results in request order, then `ok`, `code`, `msg`, `time`.
pub fn success(results: Map<String, Json>, format: bool) -> Json {
    success_at(results, format, now_ms())
}

/// [`success`] answered at `time_ms`.
pub fn success_at(mut results: Map<String, Json>, format: bool, time_ms: u64) -> Json {
    if format {
        results = format_keys(results);
    }
    succeeded(&mut results);
    results.insert("time".into(), json!(time_ms));
    Json::Object(results)
}

/// `"ok": true, "code": 200, "msg": "success"`, after what is in `m`.
fn succeeded(m: &mut Map<String, Json>) {
    m.insert("ok".into(), Json::Bool(true));
    m.insert("code".into(), json!(200));
    m.insert("msg".into(), json!("success"));
}

/// The bytes of [`success`]'s members after the results, up to `time`'s value.
pub(crate) const SUCCEEDED_UNTIL_TIME: &[u8] =
    b"\"ok\":true,\"code\":200,\"msg\":\"success\",\"time\":";

/// An object of the answer that is a count (a HEAD object, a written object), `{…, "count":
/// n}`: `"ok": true, "code": 200, "msg": "success"` go before its count.
fn counted(obj: &mut Map<String, Json>) {
    let count = obj.shift_remove("count");
    succeeded(obj);
    obj.insert("count".into(), count.unwrap_or(json!(0)));
}

/// An error answer: `ok:false`, the code and the message.
pub fn failure(err: &ApiError, debug: bool) -> Json {
    refusal(err.code(), &err.message(debug))
}

/// The error answer of a refusal made before the APIJSON pipeline (an oversized or slow body,
/// no such route, too many connections): its code is the HTTP status it goes out with.
pub fn refusal(status: u16, msg: &str) -> Json {
    let mut m = Map::new();
    m.insert("ok".into(), Json::Bool(false));
    m.insert("code".into(), json!(status));
    m.insert("msg".into(), json!(msg));
    m.insert("time".into(), json!(now_ms()));
    Json::Object(m)
}
