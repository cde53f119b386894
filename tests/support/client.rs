//! The HTTP side of the tests: [`Client`], a small client on `ureq` that keeps the cookies and
//! bearer token of a login, and its [`Reply`].

use serde_json::Value;

use super::{truncate, REQUEST_TIMEOUT};

/// An HTTP answer: status and body text. Non-2xx statuses are answers too, not errors.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub text: String,
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

/// An HTTP client for one server that keeps cookies (a login session) and a bearer token.
#[derive(Clone)]
pub struct Client {
    base: String,
    agent: ureq::Agent,
    cookies: Vec<(String, String)>,
    bearer: Option<String>,
}

impl Client {
    pub fn new(base: &str) -> Client {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .max_redirects(0)
            .proxy(None)
            .build();
        Client {
            base: base.to_string(),
            agent: ureq::Agent::new_with_config(config),
            cookies: Vec::new(),
            bearer: None,
        }
    }

    /// POSTs `body` verbatim with `Content-Type: application/json`.
    pub fn post(&mut self, path: &str, body: &str) -> Result<Reply, String> {
        let mut req = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("Content-Type", "application/json");
        if let Some(cookie) = self.cookie_header() {
            req = req.header("Cookie", cookie);
        }
        if let Some(token) = &self.bearer {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        let res = req.send(body).map_err(|e| format!("POST {path}: {e}"))?;
        self.finish(res, "POST", path)
    }

    /// GETs `path`.
    pub fn get(&mut self, path: &str) -> Result<Reply, String> {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(cookie) = self.cookie_header() {
            req = req.header("Cookie", cookie);
        }
        if let Some(token) = &self.bearer {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        let res = req.call().map_err(|e| format!("GET {path}: {e}"))?;
        self.finish(res, "GET", path)
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

    fn finish(
        &mut self,
        mut res: ureq::http::Response<ureq::Body>,
        method: &str,
        path: &str,
    ) -> Result<Reply, String> {
        for header in res.headers().get_all("set-cookie") {
            if let Ok(header) = header.to_str() {
                self.store_cookie(header);
            }
        }
        let status = res.status().as_u16();
        let headers = res
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    v.to_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let text = res
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| format!("{method} {path}: reading the answer: {e}"))?;
        Ok(Reply {
            status,
            text,
            headers,
        })
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
