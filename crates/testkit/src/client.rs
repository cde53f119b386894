//! The session client of the tests: blocking calls over the kit's one HTTP client
//! ([`crate::http::Connection`], on a small runtime of its own), keeping the cookies and the
//! bearer token of a login, each request bounded by a timeout; and its [`Reply`].

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;

use crate::data::demo::{ADA_PASSWORD, ADA_PHONE};
use crate::http::Connection;
use crate::truncate;

/// Timeout of one request (connect, send and read the whole answer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// An HTTP answer. Non-2xx statuses are answers too, not errors.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    /// The body as text (invalid UTF-8 replaced).
    pub text: String,
    /// The body as it came.
    pub bytes: Vec<u8>,
    /// Response headers, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Reply {
    /// The value of a response header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (keys keep their order).
    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_str(&self.text).map_err(|e| {
            format!(
                "HTTP {}: the body is not JSON ({e}): {}",
                self.status,
                truncate(&self.text, 300)
            )
        })
    }
}

/// A client of one server that keeps cookies (a login session) and a bearer token.
pub struct Client {
    base: String,
    addr: SocketAddr,
    runtime: tokio::runtime::Runtime,
    conn: Connection,
    timeout: Duration,
    cookies: Vec<(String, String)>,
    bearer: Option<String>,
}

impl Clone for Client {
    /// The same session (cookies, token) on a connection of its own.
    fn clone(&self) -> Client {
        Client {
            cookies: self.cookies.clone(),
            bearer: self.bearer.clone(),
            ..Client::new(&self.base).with_timeout(self.timeout)
        }
    }
}

impl Client {
    /// A client of `base` (`http://HOST:PORT`). Panics when `base` names no address.
    pub fn new(base: &str) -> Client {
        let authority = base
            .strip_prefix("http://")
            .unwrap_or(base)
            .trim_end_matches('/');
        let addr = authority
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .unwrap_or_else(|| panic!("{base} names no address"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the client");
        Client {
            base: base.trim_end_matches('/').to_string(),
            addr,
            runtime,
            conn: Connection::new(addr),
            timeout: REQUEST_TIMEOUT,
            cookies: Vec::new(),
            bearer: None,
        }
    }

    /// The same client, each request bounded by `timeout` instead of [`REQUEST_TIMEOUT`].
    pub fn with_timeout(self, timeout: Duration) -> Client {
        Client { timeout, ..self }
    }

    /// POSTs `body` verbatim with `Content-Type: application/json`.
    pub fn post(&mut self, path: &str, body: &str) -> Result<Reply, String> {
        self.request("POST", path, &[], body.as_bytes())
    }

    /// GETs `path`.
    pub fn get(&mut self, path: &str) -> Result<Reply, String> {
        self.request("GET", path, &[], b"")
    }

    /// Sends one request with the session's cookie and token and the given headers
    /// (`Content-Type: application/json` unless they name another).
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Reply, String> {
        let mut all: Vec<(&str, String)> =
            headers.iter().map(|(k, v)| (*k, v.to_string())).collect();
        if let Some(cookie) = self.cookie_header() {
            all.push(("Cookie", cookie));
        }
        if let Some(token) = &self.bearer {
            all.push(("Authorization", format!("Bearer {token}")));
        }
        let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut bytes = Vec::new();
        let (conn, timeout) = (&mut self.conn, self.timeout);
        let sent = self.runtime.block_on(async {
            tokio::time::timeout(
                timeout,
                conn.request(method, path, &all, body, &mut |b| {
                    bytes.extend_from_slice(b)
                }),
            )
            .await
        });
        let head = match sent {
            Ok(Ok(head)) => head,
            Ok(Err(e)) => return Err(format!("{method} {path}: {e}")),
            Err(_) => {
                // The connection is in an unknown state: the next request opens a new one.
                self.conn = Connection::new(self.addr);
                return Err(format!(
                    "{method} {path}: no whole answer within {} s",
                    self.timeout.as_secs()
                ));
            }
        };
        for (name, value) in &head.headers {
            if name == "set-cookie" {
                self.store_cookie(value);
            }
        }
        Ok(Reply {
            status: head.status,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            bytes,
            headers: head.headers,
        })
    }

    /// `POST /login {"type":0,"phone":PHONE,"password":PASSWORD}`; keeps the session cookies and,
    /// when the answer has a `token`, sends it as `Authorization: Bearer` from then on. Fails
    /// unless the answer is JSON with `code` 200.
    pub fn login(&mut self, phone: &str, password: &str) -> Result<Value, String> {
        let body = serde_json::json!({"type": 0, "phone": phone, "password": password});
        let answer = self.post("/login", &body.to_string())?.json()?;
        if answer.get("code").and_then(Value::as_i64) != Some(200) {
            return Err(format!(
                "login as {phone} refused: {}",
                truncate(&answer.to_string(), 300)
            ));
        }
        if let Some(token) = answer.get("token").and_then(Value::as_str) {
            self.bearer = Some(token.to_string());
        }
        Ok(answer)
    }

    /// Logs in as Ada, the demo dataset's user 82001.
    pub fn login_as_ada(&mut self) -> Result<Value, String> {
        self.login(ADA_PHONE, ADA_PASSWORD)
    }

    /// The bearer token of the login, when it gave one.
    pub fn bearer(&self) -> Option<&str> {
        self.bearer.as_deref()
    }

    /// Sends only the cookie from now on (the web-client path).
    pub fn without_bearer(mut self) -> Client {
        self.bearer = None;
        self
    }

    /// Sends only `Authorization: Bearer TOKEN` from now on (the API-client path).
    pub fn with_only_bearer(mut self, token: &str) -> Client {
        self.cookies.clear();
        self.bearer = Some(token.to_string());
        self
    }

    /// The headers that carry this client's login (cookie, bearer token), for requests made
    /// another way (an event stream).
    pub fn auth_headers(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(cookie) = self.cookie_header() {
            out.push(("Cookie".to_string(), cookie));
        }
        if let Some(token) = &self.bearer {
            out.push(("Authorization".to_string(), format!("Bearer {token}")));
        }
        out
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The server's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    fn cookie_header(&self) -> Option<String> {
        if self.cookies.is_empty() {
            return None;
        }
        Some(
            self.cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    }

    fn store_cookie(&mut self, set_cookie: &str) {
        let mut parts = set_cookie.split(';');
        let Some((name, value)) = parts.next().and_then(|nv| nv.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim().to_string(), value.trim().to_string());
        let expired = parts.any(|attr| {
            let attr = attr.trim().to_ascii_lowercase();
            attr == "max-age=0" || attr.starts_with("max-age=-")
        });
        self.cookies.retain(|(k, _)| *k != name);
        if !expired && !value.is_empty() {
            self.cookies.push((name, value));
        }
    }
}
