//! The web console in a real browser: headless Chromium driven through chromedriver
//! (WebDriver over plain HTTP). Opens the console, completes a table name, types a request, runs
//! it and sees the rows; logs in and runs a private request; reads the schema panel; sees an
//! invalid edit clear the old answer and the SQL tab list the statements that ran.
//!
//! `APIJET_CONSOLE_SCREENSHOT=PATH` saves a screenshot of the console with its schema panel
//! open (that is how docs/console.png is made: `bash scripts/console-screenshot.sh`).

use crate::support::browser::Browser;
use crate::support::{skip, Server};
use serde_json::json;
use std::time::{Duration, Instant};

#[test]
fn console_runs_public_and_private_requests_in_chromium() {
    let server = Server::fresh_sqlite("");
    let Some(b) = Browser::start() else {
        skip("console: chromium and chromedriver not found (scripts/test.sh installs them)");
        return;
    };
    b.goto(&server.base);
    // The schema for completion comes from /openapi.json.
    b.wait_for("the schema", "return +document.body.dataset.schema > 0");

    // Completion: `{"Us` offers User; Tab takes it.
    b.clear("#editor");
    b.type_text("#editor", "{\"Us");
    b.wait_for(
        "the completion list",
        "return document.getElementById('complete').style.display === 'block' && document.getElementById('complete').textContent.includes('User')",
    );
    b.type_text("#editor", "\u{E004}"); // Tab
    let value = b.script("return document.getElementById('editor').value");
    assert_eq!(value, "{\"User", "Tab completes the table name");
    // Columns of the enclosing table and operators are offered too.
    b.type_text("#editor", "\":{\"na");
    b.wait_for(
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
    b.wait_for(
        "the answer",
        "return document.getElementById('status').textContent.includes('code')",
    );
    let answer = b.answer();
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
    b.wait_for(
        "the refusal",
        "return document.getElementById('status').textContent.includes('code')",
    );
    assert_ne!(b.answer()["code"], 200);

    // ...and after logging in through the login box, it answers.
    b.clear("#phone");
    b.type_text("#phone", "13000082001");
    b.clear("#password");
    b.type_text("#password", "123456");
    b.click("#login");
    b.wait_for(
        "the login",
        "return document.getElementById('who').textContent.includes('Ada')",
    );
    b.click("#run");
    b.wait_for(
        "the private answer",
        "return document.getElementById('raw').textContent.includes('\"Privacy\"')",
    );
    let answer = b.answer();
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

    // Debug mode: the SQL tab lists the statements that ran (@explain): for a page of moments
    // with their authors, the moments and one statement for every author, as without @explain.
    let debug = Server::fresh_sqlite("debug = true\n");
    let nested = r#"{"[]":{"count":3,"Moment":{"@column":"id,userId"},"User":{"id@":"/Moment/userId","@column":"id,name"}}}"#;
    let ran = debug
        .client()
        .post("/get", nested)
        .expect("answer")
        .header("x-apijet-statements")
        .and_then(|n| n.parse::<usize>().ok())
        .expect("x-apijet-statements");
    b.goto(&debug.base);
    b.wait_for("the schema", "return +document.body.dataset.schema > 0");
    b.clear("#editor");
    b.type_text("#editor", nested);
    b.click("#explain");
    b.click("#run");
    b.wait_for(
        "the answer",
        "return document.getElementById('status').textContent.includes('code')",
    );
    b.click("#tab-sql");
    let sql = b.text("#sql");
    assert!(
        sql.contains(&format!("{ran} statements ran")),
        "{ran}: {sql}"
    );
    assert_eq!(sql.matches("SELECT").count(), ran, "{sql}");
    assert!(sql.contains("IN ("), "the authors in one statement: {sql}");
    b.click("#explain");
    b.click("#tab-tree");
}

#[test]
fn console_schema_panel_shows_tables_columns_and_roles_in_chromium() {
    let server = Server::fresh_sqlite("");
    // The page holds no credentials (the README's tour gives the demo's), and the icon a
    // browser asks for is there.
    let page = server.client().get("/").expect("page");
    for secret in ["13000082001", "123456"] {
        assert!(!page.text.contains(secret), "{secret} is in the page");
    }
    let icon = server.client().get("/favicon.ico").expect("icon");
    assert_eq!(icon.header("content-type"), Some("image/x-icon"));
    assert!(icon.bytes.starts_with(&[0, 0, 1, 0]), "an ICO file");
    let Some(b) = Browser::start() else {
        skip("console: chromium and chromedriver not found (scripts/test.sh installs them)");
        return;
    };
    b.goto(&server.base);
    b.wait_for(
        "the schema panel",
        "return document.querySelectorAll('#schema details').length > 0",
    );
    let tables: Vec<String> = b
        .script(
            "return [...document.querySelectorAll('#schema details')].map(d => d.dataset.table)",
        )
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    for t in ["Comment", "Moment", "Privacy", "User"] {
        assert!(tables.iter().any(|n| n == t), "{t} in {tables:?}");
    }
    for hidden in ["Access", "Request", "Verify"] {
        assert!(
            !tables.iter().any(|n| n == hidden),
            "{hidden} in {tables:?}"
        );
    }

    // A table opens on its columns with their types and what each role may do.
    b.click("#schema details[data-table='User'] summary");
    let user = b.text("#schema details[data-table='User']");
    for part in [
        "contactIdList",
        "JSON",
        "date",
        "datetime",
        "UNKNOWN",
        "OWNER",
    ] {
        assert!(user.contains(part), "no {part} in {user}");
    }
    // Each role with the methods the Access row grants it, as the panel shows them.
    let shown = b.script(
        "const r = {}; const g = document.querySelector(\"#schema details[data-table='User'] .roles\"); \
         for (const b of g.querySelectorAll('b')) r[b.textContent] = [...b.nextElementSibling.querySelectorAll('span')].map(s => s.textContent); \
         return r",
    );
    let reads = ["get", "head", "gets", "heads"];
    assert_eq!(
        shown,
        json!({"UNKNOWN": ["get", "head"], "LOGIN": reads, "CONTACT": reads, "CIRCLE": reads,
               "OWNER": ["get", "head", "gets", "heads", "post", "put"]}),
        "the demo's Access row of User (ADMIN, refused by apijet, is not shown)"
    );
    let privacy = b.content("#schema details[data-table='Privacy']");
    assert!(!privacy.contains("_password"), "{privacy}");
    assert!(
        !privacy.contains("UNKNOWN"),
        "Privacy has no public method: {privacy}"
    );
    // Its button loads a request for the first rows, which runs.
    b.click("#schema details[data-table='User'] button");
    b.click("#run");
    b.wait_for(
        "the rows",
        "return document.getElementById('raw').textContent.includes('User[]')",
    );
    assert_eq!(b.answer()["code"], 200);

    // An invalid edit leaves no earlier answer under its error.
    b.clear("#editor");
    b.type_text("#editor", r#"{"User":{"id":82001"#);
    b.click("#run");
    b.wait_for(
        "the error",
        "return document.getElementById('status').className === 'bad'",
    );
    for shown in ["#tree", "#raw"] {
        let text = b.content(shown);
        assert!(
            text.contains("not JSON") && !text.contains("82001") && !text.contains("Ada"),
            "{shown}: {text}"
        );
    }

    // In debug mode the configuration tables are listed too.
    let debug = Server::fresh_sqlite("debug = true\n");
    b.goto(&debug.base);
    b.wait_for(
        "the schema panel",
        "return !!document.querySelector(\"#schema details[data-table='Access']\")",
    );

    if let Ok(path) = std::env::var("APIJET_CONSOLE_SCREENSHOT") {
        b.goto(&server.base);
        b.wait_for("the schema", "return +document.body.dataset.schema > 0");
        b.click("#schema details[data-table='Moment'] summary");
        b.script("document.getElementById('method').value = 'get'");
        b.clear("#editor");
        b.type_text(
            "#editor",
            r#"{"[]":{"count":3,"Moment":{"userId{}":[82001,82002],"@column":"id,userId,content","@order":"id-"},"User":{"id@":"/Moment/userId","@column":"id,name"}}}"#,
        );
        b.click("#format");
        b.click("#run");
        b.wait_for(
            "the answer",
            "return document.getElementById('raw').textContent.includes('Moment')",
        );
        b.screenshot(std::path::Path::new(&path));
    }
}

/// The console's Live toggle subscribes through the browser's `EventSource` and shows each new
/// answer as it arrives.
#[test]
fn console_live_toggle_shows_answers_arriving_in_chromium() {
    let server = Server::fresh_sqlite(
        "live_interval_ms = 300\nlive_poll_ms = 0\nmetrics_token = \"console-live\"\n",
    );
    let Some(b) = Browser::start() else {
        skip("console: chromium and chromedriver not found (scripts/test.sh installs them)");
        return;
    };
    let mine = server.post("/get", r#"{"Moment":{"userId":82001,"@column":"id"}}"#);
    let id = mine["Moment"]["id"].as_i64().expect("a moment of Ada's");
    b.goto(&server.base);
    b.wait_for("the schema", "return +document.body.dataset.schema > 0");
    let request = json!({"Moment": {"id": id, "@column": "id,content"}});
    b.script(&format!("setRequest('get', {request}); return true"));
    b.click("#live");
    b.wait_for(
        "the first live answer",
        "return +document.body.dataset.liveAnswers >= 1",
    );
    assert_eq!(b.answer()["Moment"]["id"], id);
    assert!(
        b.text("#status").starts_with("live"),
        "{}",
        b.text("#status")
    );

    let mut ada = server.client();
    ada.login("13000082001", "123456").expect("login");
    let r = ada
        .post(
            "/put",
            &json!({"Moment": {"id": id, "content": "arrived live"}, "tag": "Moment"}).to_string(),
        )
        .expect("put")
        .json()
        .expect("json");
    assert_eq!(r["code"], 200, "{r}");
    b.wait_for(
        "the new answer",
        "return +document.body.dataset.liveAnswers >= 2",
    );
    assert_eq!(b.answer()["Moment"]["content"], "arrived live");
    // Off closes the stream: the server counts no subscription any more.
    b.click("#live");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = server
            .client()
            .with_only_bearer("console-live")
            .get("/metrics")
            .expect("metrics")
            .text;
        let write = ada.post(
            "/put",
            &json!({"Moment": {"id": id, "content": "nobody listens"}, "tag": "Moment"})
                .to_string(),
        );
        assert!(write.is_ok());
        if metrics.contains("apijet_live_subscriptions 0") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stream stayed open: {metrics}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(b.answer()["Moment"]["content"], "arrived live");
}
