//! Dev-only: what the integration tests (`tests/it`) and `apijet bench` share, one of each.
//!
//! - [`server`]: the launcher, an `apijet` child process on a free port with a config written
//!   for it, its logs, and its RSS and CPU readings from `/proc`.
//! - [`http`]: the HTTP/1.1 client (async, streaming, timed); [`Client`]: the tests' blocking
//!   session client on it (cookies, bearer token, timeout).
//! - [`engine`]: the engines, their SQL spellings and URLs, the servers the test rig provides
//!   (`APIJET_TEST_*`), the bench's throwaway servers, and a SQL connection on the server's own
//!   drivers.
//! - [`shared`]: the reference material beside the repository (`../shared`) and its loader of
//!   the APIJSON demo database.
//! - [`data`]: data generators (inside the database) and the demo dataset's facts (its login);
//!   [`rng`]: a small deterministic PRNG.
//!
//! The server never depends on this crate; `apijet bench` does.

pub mod client;
pub mod data;
pub mod engine;
pub mod http;
pub mod json_patch;
pub mod rng;
pub mod server;
pub mod shared;

pub use client::{Client, Reply};
pub use engine::Engine;
pub use rng::Rng;
pub use server::Server;

use std::io;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The APIJSON `code` of an answer (-1 when there is none).
pub fn code(v: &Value) -> i64 {
    v["code"].as_i64().unwrap_or(-1)
}

/// The APIJSON `code` of an answer body, when it is JSON with one.
pub fn body_code(body: &[u8]) -> Option<i64> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v.get("code")?.as_i64()
}

/// A free TCP port on 127.0.0.1 (bound, read, released: another process may take it meanwhile).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0 to find a free port")
}

/// A new empty directory under the system temp dir, unique to this process and call.
pub fn unique_temp_dir(prefix: &str) -> io::Result<PathBuf> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The last `max` characters of `text`: the end of a log is the interesting part.
pub fn tail(text: &str, max: usize) -> &str {
    let len = text.chars().count();
    if len <= max {
        return text;
    }
    let start = text
        .char_indices()
        .nth(len - max)
        .map(|(i, _)| i)
        .unwrap_or(0);
    &text[start..]
}

/// At most `max` characters of `text`, with `…` appended when cut.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
