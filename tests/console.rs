//! The web console in a real browser: headless Chromium driven through chromedriver
//! (WebDriver over plain HTTP). Opens the console, completes a table name, types a request, runs
//! it and sees the rows; logs in and runs a private request.
//!
//! `APIJET_CONSOLE_SCREENSHOT=PATH` saves a screenshot of the console at the end (that is how
//! docs/console.png is made).

mod support;

use serde_json::Value;
use std::time::Duration;
use support::browser::Browser;
use support::{skip, Server};

/// Waits until `js` returns a truthy value, showing the console's status line when it does not.
fn wait_for(b: &Browser, what: &str, js: &str) {
    if b.wait_until(js, Duration::from_secs(20)).is_err() {
        panic!("waited 20 s for {what}; status: {}", b.text("#status"));
    }
}

/// The answer shown in the Raw tab.
fn shown_answer(b: &Browser) -> Value {
    let raw = b.script("return document.getElementById('raw').textContent");
    serde_json::from_str(raw.as_str().unwrap_or("")).expect("the raw answer is JSON")
}

#[test]
fn console_runs_public_and_private_requests_in_chromium() {
    let server = Server::fresh_sqlite("");
    let Some(b) = Browser::start(1400, 860) else {
        skip("console: chromium and chromedriver not found (scripts/test.sh installs them)");
        return;
    };
    b.goto(&server.base);
    // The schema for completion comes from /openapi.json.
    wait_for(&b, "the schema", "return +document.body.dataset.schema > 0");

    // Completion: `{"Us` offers User; Tab takes it.
    b.clear("#editor");
    b.type_text("#editor", "{\"Us");
    wait_for(&b, "the completion list",
        "return document.getElementById('complete').style.display === 'block' && document.getElementById('complete').textContent.includes('User')",
    );
    b.type_text("#editor", "\u{E004}"); // Tab
    let value = b.script("return document.getElementById('editor').value");
    assert_eq!(value, "{\"User", "Tab completes the table name");
    // Columns of the enclosing table and operators are offered too.
    b.type_text("#editor", "\":{\"na");
    wait_for(
        &b,
        "column completion",
        "return document.getElementById('complete').textContent.includes('name')",
    );

    // A public request: type it, run it, see the rows.
    b.clear("#editor");
    b.type_text(
        "#editor",
        r#"{"User[]":{"count":3,"User":{"id&{}":">=82001,<=82003","@column":"id,name"}}}"#,
    );
    b.click("#run");
    wait_for(
        &b,
        "the answer",
        "return document.getElementById('status').textContent.includes('code')",
    );
    let answer = shown_answer(&b);
    assert_eq!(answer["code"], 200, "{answer}");
    let rows = answer["User[]"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 3, "{answer}");
    assert_eq!(rows[0]["name"], "Ada");
    // The tree shows the rows too.
    let tree = b.text("#tree");
    assert!(tree.contains("Ada"), "{tree}");

    // Logged out, a private read is refused...
    b.script("document.getElementById('method').value = 'gets'");
    b.clear("#editor");
    b.type_text("#editor", r#"{"tag":"Privacy","Privacy":{"id":82001}}"#);
    b.click("#run");
    wait_for(
        &b,
        "the refusal",
        "return document.getElementById('status').textContent.includes('code')",
    );
    assert_ne!(shown_answer(&b)["code"], 200);

    // ...and after logging in through the login box, it answers.
    b.clear("#phone");
    b.type_text("#phone", "13000082001");
    b.clear("#password");
    b.type_text("#password", "123456");
    b.click("#login");
    wait_for(
        &b,
        "the login",
        "return document.getElementById('who').textContent.includes('Ada')",
    );
    b.click("#run");
    wait_for(
        &b,
        "the private answer",
        "return document.getElementById('raw').textContent.includes('\"Privacy\"')",
    );
    let answer = shown_answer(&b);
    assert_eq!(answer["code"], 200, "{answer}");
    assert_eq!(answer["Privacy"]["id"], 82001, "{answer}");

    // History is kept in the browser.
    let history = b.script("return JSON.parse(localStorage.getItem('apijet.history')).length");
    assert!(history.as_u64().unwrap_or(0) >= 2, "{history}");

    // Copy as curl builds a runnable command.
    b.click("#curl");
    let curl = b.script("return document.getElementById('curlbox').value");
    let curl = curl.as_str().unwrap_or("");
    assert!(
        curl.starts_with("curl -s ") && curl.contains("/gets") && curl.contains("Privacy"),
        "{curl}"
    );

    // Debug mode: the SQL tab shows the statements (@explain).
    let debug = Server::fresh_sqlite("debug = true\n");
    b.goto(&debug.base);
    wait_for(&b, "the schema", "return +document.body.dataset.schema > 0");
    b.clear("#editor");
    b.type_text("#editor", r#"{"User":{"id":82001}}"#);
    b.click("#explain");
    b.click("#run");
    wait_for(
        &b,
        "the answer",
        "return document.getElementById('status').textContent.includes('code')",
    );
    b.click("#tab-sql");
    let sql = b.text("#sql");
    assert!(sql.to_uppercase().contains("SELECT"), "{sql}");
    b.click("#explain");
    b.click("#tab-tree");

    if let Ok(path) = std::env::var("APIJET_CONSOLE_SCREENSHOT") {
        b.goto(&server.base);
        wait_for(&b, "the schema", "return +document.body.dataset.schema > 0");
        b.script("document.getElementById('method').value = 'get'");
        b.clear("#editor");
        b.type_text(
            "#editor",
            r#"{"[]":{"count":3,"Moment":{"userId{}":[82001,82002],"@column":"id,userId,content","@order":"id-"},"User":{"id@":"/Moment/userId","@column":"id,name"}}}"#,
        );
        b.click("#format");
        b.click("#run");
        wait_for(
            &b,
            "the answer",
            "return document.getElementById('raw').textContent.includes('Moment')",
        );
        b.screenshot(std::path::Path::new(&path));
    }
}
