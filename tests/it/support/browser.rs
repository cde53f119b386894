//! A headless Chromium driven through chromedriver (WebDriver over plain HTTP), for the tests
//! that need a real browser: the console (tests/it/console.rs), what browsers send across sites
//! (tests/it/writes_only_by_post.rs) and APIAuto (tests/it/apiauto.rs).

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, Client};
use std::cell::RefCell;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process and one browser session; both end on drop.
pub struct Browser {
    driver: Child,
    session: String,
    client: RefCell<Client>,
    profile: std::path::PathBuf,
}

fn find(names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| {
        let p = Path::new(n);
        if p.is_absolute() {
            return p.exists().then(|| n.to_string());
        }
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(n))
                .find(|p| p.exists())
                .map(|p| p.display().to_string())
        })
    })
}

impl Browser {
    /// A new headless session in a 1400 × 860 window; `None` when Chromium or chromedriver is
    /// not installed.
    pub fn start() -> Option<Browser> {
        Browser::start_sized(1400, 860)
    }

    /// A new headless session in a window of `width` × `height`.
    pub fn start_sized(width: u32, height: u32) -> Option<Browser> {
        let chromium = find(&["chromium", "chromium-browser", "google-chrome"])?;
        let driver_bin = find(&["chromedriver", "/usr/lib/chromium/chromedriver"])?;
        let port = free_port();
        // Chromium keeps scoped folders in TMPDIR and leaves them when its session ends
        // abruptly: they go to this test process's folder, which is removed when it ends.
        let driver = Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .env("TMPDIR", super::scratch_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let base = format!("http://127.0.0.1:{port}");
        let mut client = Client::new(&base).with_timeout(Duration::from_secs(120));
        let deadline = Instant::now() + Duration::from_secs(20);
        while client.get("/status").is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        // One profile per browser: the tests of a file run at the same time.
        let profile = super::scratch_dir().join(format!(
            "apijet-console-profile-{}-{port}",
            std::process::id()
        ));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         format!("--window-size={width},{height}"),
                         format!("--user-data-dir={}", profile.display())]
            }
        }}});
        let mut browser = Browser {
            driver,
            session: String::new(),
            client: RefCell::new(client),
            profile,
        };
        let v = browser.call("POST", "/session", Some(caps));
        browser.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {v}"))
            .to_string();
        Some(browser)
    }

    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = match method {
            "GET" | "DELETE" => String::new(),
            _ => body.unwrap_or(json!({})).to_string(),
        };
        let v: Value = self
            .client
            .borrow_mut()
            .request(method, path, &[], body.as_bytes())
            .and_then(|r| r.json())
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        if let Some(err) = v["value"].get("error") {
            panic!("WebDriver {method} {path}: {err} {}", v["value"]["message"]);
        }
        v.get("value").cloned().map_or(v.clone(), |inner| {
            if path == "/session" {
                v["value"].clone()
            } else {
                inner
            }
        })
    }

    pub fn s(&self, path: &str) -> String {
        format!("/session/{}{path}", self.session)
    }

    pub fn goto(&self, url: &str) {
        self.call("POST", &self.s("/url"), Some(json!({"url": url})));
    }

    pub fn element(&self, css: &str) -> String {
        let v = self.call(
            "POST",
            &self.s("/element"),
            Some(json!({"using": "css selector", "value": css})),
        );
        v[ELEMENT].as_str().expect("element id").to_string()
    }

    pub fn click(&self, css: &str) {
        let id = self.element(css);
        self.call("POST", &self.s(&format!("/element/{id}/click")), None);
    }

    pub fn clear(&self, css: &str) {
        let id = self.element(css);
        self.call("POST", &self.s(&format!("/element/{id}/clear")), None);
    }

    pub fn type_text(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.call(
            "POST",
            &self.s(&format!("/element/{id}/value")),
            Some(json!({ "text": text })),
        );
    }

    /// Runs `js` as an async script: it ends by calling `done(value)`, and the value is
    /// answered.
    pub fn script_async(&self, js: &str) -> Value {
        let wrapped = format!("const done = arguments[arguments.length - 1];\n{js}");
        self.call(
            "POST",
            &self.s("/execute/async"),
            Some(json!({"script": wrapped, "args": []})),
        )
    }

    /// Runs `js` in the page (its `return` is the answer).
    pub fn script(&self, js: &str) -> Value {
        self.script_with(js, json!([]))
    }

    /// Runs `js` with `args` as `arguments`.
    pub fn script_with(&self, js: &str, args: Value) -> Value {
        self.call(
            "POST",
            &self.s("/execute/sync"),
            Some(json!({"script": js, "args": args})),
        )
    }

    pub fn text(&self, css: &str) -> String {
        let id = self.element(css);
        self.call("GET", &self.s(&format!("/element/{id}/text")), None)
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// Waits until `js` returns a truthy value, showing the console's status line when it does
    /// not.
    pub fn wait_for(&self, what: &str, js: &str) {
        if self.wait_until(js, Duration::from_secs(20)).is_err() {
            panic!(
                "waited 20 s for {what}; status: {}",
                self.script("return (document.getElementById('status') || {}).textContent || ''")
            );
        }
    }

    /// Waits up to `timeout` until `js` returns a truthy value, and returns it; `Err` with the
    /// last value when it never does.
    pub fn wait_until(&self, js: &str, timeout: Duration) -> Result<Value, Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.script(js);
            if !(v.is_null() || v == false || v == "" || v == 0) {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(v);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Saves a PNG screenshot of the window.
    pub fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let v = self.call("GET", &self.s("/screenshot"), None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64"))
            .expect("png");
        std::fs::write(path, png).expect("write screenshot");
    }

    /// The text of the element `css`, including what is hidden (collapsed or another tab).
    pub fn content(&self, css: &str) -> String {
        let js = format!(
            "const e = document.querySelector({}); return e ? e.textContent : null",
            json!(css)
        );
        self.script(&js).as_str().unwrap_or_default().to_string()
    }

    /// The answer shown in the Raw tab.
    pub fn answer(&self) -> Value {
        let raw = self.script("return document.getElementById('raw').textContent");
        serde_json::from_str(raw.as_str().unwrap_or("")).expect("the raw answer is JSON")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = self.client.get_mut().request("DELETE", &path, &[], b"");
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
