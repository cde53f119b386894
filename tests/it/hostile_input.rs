//! Issue 8, findings 1, 2 and 6, replayed as an attacker sent them, on every engine: requests
//! that used to overflow a worker's stack, build a gigabyte answer, or keep the database busy
//! for the whole statement timeout are refused with a code naming the limit, in milliseconds,
//! and the server stays up with flat memory.

use crate::support::{code, on_every_engine, Engine, Server};
use apijet_testkit::Rng;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const CONFIG: &str = "debug = false\nmax_count = 100\n";

/// A refusal this cheap is a length or depth comparison, not a parse or a query.
const QUICK: Duration = Duration::from_secs(2);

fn timed(s: &Server, path: &str, body: &str) -> (Value, Duration) {
    let start = Instant::now();
    let answer = s.post(path, body);
    (answer, start.elapsed())
}

fn assert_alive(engine: Engine, s: &Server) {
    let r = s.post_json("/get", &json!({"User": {"id": 82001, "@column": "id"}}));
    assert_eq!(
        r["User"]["id"], 82001,
        "{engine}: server answers after the attack: {r}"
    );
}

fn url_encoded(body: &str) -> String {
    percent_encoding::utf8_percent_encode(body, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[test]
fn deep_expressions_are_refused_quickly_and_the_server_stays_up() {
    let parens = |n: usize| format!("count({}id{})>0", "(".repeat(n), ")".repeat(n));
    let attacks: Vec<(&str, Value)> = vec![
        (
            "@having 5,000 parentheses",
            json!({"Moment": {"@having": parens(5000)}}),
        ),
        (
            "@column 3,000 nested abs(",
            json!({"Moment": {"@column": format!("{}id{}", "abs(".repeat(3000), ")".repeat(3000))}}),
        ),
        (
            "@having count(id)+1+1… 20,000 times",
            json!({"Moment": {"@having": format!("count(id){}>0", "+1".repeat(20_000))}}),
        ),
        (
            "@having& chain",
            json!({"Moment": {"@having&": format!("count(id){}>0", "*1".repeat(20_000))}}),
        ),
        (
            "@combine 200,000 negations",
            json!({"Moment": {"@combine": format!("{}id>", "!".repeat(200_000)), "id>": 1}}),
        ),
        (
            "@key 5,000 parentheses",
            json!({"Moment": {"@key": format!("a:{}id{}", "(".repeat(5000), ")".repeat(5000))}}),
        ),
        // Within the length limit, so the depth limit must catch them.
        (
            "@having 400 parentheses",
            json!({"Moment": {"@having": parens(400)}}),
        ),
        (
            "@combine 400 parentheses",
            json!({"Moment": {"@combine": format!("{}id>{}", "(".repeat(400), ")".repeat(400)), "id>": 1}}),
        ),
        (
            "@having count(id)+1… 400 times",
            json!({"Moment": {"@having": format!("count(id){}>0", "+1".repeat(400))}}),
        ),
    ];
    on_every_engine("deep_expressions", CONFIG, |engine, s| {
        for (name, body) in &attacks {
            let body = body.to_string();
            for path in ["/get", "/head"] {
                let (r, took) = timed(s, path, &body);
                assert_eq!(code(&r), 406, "{engine} {path} {name}: {r}");
                let msg = r["msg"].as_str().unwrap_or_default();
                assert!(
                    msg.contains("max_expr_length") || msg.contains("max_expr_depth"),
                    "{engine} {path} {name}: the message names the limit: {msg}"
                );
                assert!(took < QUICK, "{engine} {path} {name}: took {took:?}");
            }
        }
        // Subqueries nested 40 deep: every engine's own parser has a limit of its own (SQLite
        // failed with a server error at 61); ours is checked first.
        let mut sub = json!({"from": "Moment", "Moment": {"@column": "id"}});
        for _ in 0..40 {
            sub = json!({"from": "Moment", "Moment": {"@column": "id", "id{}@": sub}});
        }
        let r = s.post_json("/get", &json!({"Moment": {"id{}@": sub}}));
        assert_eq!(code(&r), 406, "{engine}: nested subqueries: {r}");
        assert!(
            r["msg"].as_str().unwrap_or_default().contains("max_depth"),
            "{engine}: {r}"
        );

        let (name, body) = &attacks[0];
        let r = s.get(&format!("/get/{}", url_encoded(&body.to_string())));
        assert_eq!(code(&r), 406, "{engine} GET /get/{{json}} {name}: {r}");
        assert_alive(engine, s);

        // Ordinary expressions are unaffected.
        let r = s.post_json(
            "/get",
            &json!({"[]": {"Moment": {"@column": "userId;count(*):n", "@group": "userId",
                                      "@having": "(count(*)+1-1)*1>0", "@order": "userId+"}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
    });
}

#[test]
fn nested_answers_have_a_row_budget_and_memory_stays_flat() {
    // Three levels of count 100: 300,000 objects from a 156-byte request.
    let attack = json!({"[]": {"count": 100, "Moment": {},
        "[]": {"count": 100, "Comment": {}, "[]": {"count": 100, "User": {}}}}})
    .to_string();
    on_every_engine("nested_budget", CONFIG, |engine, s| {
        // The largest answer within the budget: 100 moments with 99 comments each, 10,000 rows.
        let idle = s.rss_kib();
        let r = s.post_json(
            "/get",
            &json!({"[]": {"count": 100, "Moment": {}, "[]": {"count": 99, "Comment": {}}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {}", r["msg"]);
        if let (Some(idle), Some(peak)) = (idle, s.peak_rss_kib()) {
            assert!(
                peak < idle + 64 * 1024,
                "{engine}: a 10,000-row answer peaked at {peak} KiB from {idle} KiB idle"
            );
        }

        let mut after_first = None;
        for round in 0..6 {
            let (r, _) = timed(s, "/get", &attack);
            assert_eq!(code(&r), 406, "{engine} round {round}: {r}");
            let msg = r["msg"].as_str().unwrap_or_default();
            assert!(msg.contains("max_rows"), "{engine}: names the limit: {msg}");
            if round == 0 {
                after_first = s.rss_kib();
            }
        }
        let after_all = s.rss_kib();
        if let (Some(first), Some(last)) = (after_first, after_all) {
            assert!(
                last < first + 64 * 1024,
                "{engine}: resident memory grew from {first} KiB to {last} KiB over six refused \
                 answers"
            );
        }
        assert_alive(engine, s);

        // A nested answer within the budget is answered whole.
        let r = s.post_json(
            "/get",
            &json!({"[]": {"count": 10, "Moment": {"@column": "id", "@order": "id+"},
                           "Comment[]": {"count": 10, "Comment": {"momentId@": "[]/Moment/id", "@column": "id"}}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert_eq!(r["[]"].as_array().map(Vec::len), Some(10), "{engine}: {r}");
    });
}

#[test]
fn huge_patterns_and_lists_are_refused_before_the_database() {
    on_every_engine("huge_patterns", CONFIG, |engine, s| {
        let like =
            json!({"Moment[]": {"Moment": {"content$": format!("%{}%", "a".repeat(500_000))}}})
                .to_string();
        // Eight at once used to fill the pool for the whole statement timeout.
        let started = Instant::now();
        std::thread::scope(|scope| {
            let attackers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| s.post("/get", &like)))
                .collect();
            let lookup = Instant::now();
            assert_alive(engine, s);
            assert!(
                lookup.elapsed() < QUICK,
                "{engine}: an unrelated lookup waited"
            );
            for a in attackers {
                let r = a.join().expect("attacker thread");
                assert_eq!(code(&r), 406, "{engine}: {r}");
                let msg = r["msg"].as_str().unwrap_or_default();
                assert!(
                    msg.contains("max_pattern_length") || msg.contains("max_pattern_bytes"),
                    "{engine}: {msg}"
                );
            }
        });
        assert!(
            started.elapsed() < 4 * QUICK,
            "{engine}: {:?}",
            started.elapsed()
        );

        let regex = json!({"User": {"name~": format!("^{}$", "(a|b)*".repeat(60))}}).to_string();
        let (r, took) = timed(s, "/get", &regex);
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert!(took < QUICK, "{engine}: {took:?}");

        let ids: Vec<i64> = (0..5000).collect();
        let r = s.post_json("/get", &json!({"Moment[]": {"Moment": {"id{}": ids}}}));
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert!(
            r["msg"]
                .as_str()
                .unwrap_or_default()
                .contains("max_list_items"),
            "{engine}: {r}"
        );

        // Ordinary patterns still match.
        let r = s.post_json(
            "/get",
            &json!({"User": {"name$": "Ad%", "@column": "name"}}),
        );
        assert_eq!(r["User"]["name"], "Ada", "{engine}: {r}");
    });
}

/// Issue 16, finding 5: a 63-byte request made a 640 MB cell. Functions that grow strings carry
/// a bound on their value, refused past the answer budget before any SQL runs; every answer,
/// streamed lists too, has the byte budget.
#[test]
fn values_that_could_pass_the_answer_budget_are_refused_before_the_database() {
    let growing = [
        "repeat(name,20000000):x",
        "lpad(name,20000000,'x'):x",
        "rpad(name,20000000,'x'):x",
        "space(20000000):x",
        "concat(repeat(name,9),repeat(name,9)):x",
        "replace(name,'a',repeat('b',1000)):x",
        "upper(repeat(repeat('ab',5000),5000)):x",
        // A count read from a column has no bound at all.
        "repeat(name,id):x",
    ];
    on_every_engine("value_budget", CONFIG, |engine, s| {
        for column in growing {
            for key in ["User[]", "[]"] {
                let body = json!({key: {"count": 1, "User": {"@column": column}}}).to_string();
                let (r, took) = timed(s, "/get", &body);
                assert_eq!(code(&r), 406, "{engine} {key} {column}: {r}");
                let msg = r["msg"].as_str().unwrap_or_default();
                assert!(msg.contains("max_answer_bytes"), "{engine} {column}: {msg}");
                assert!(took < QUICK, "{engine} {column}: took {took:?}");
            }
        }
        // The same functions within the budget answer as before, and so does group_concat.
        let r = s.post_json(
            "/get",
            &json!({"User": {"id": 82001, "@column": "repeat(name,3):r;lpad(id,8,'0'):p"}}),
        );
        assert_eq!(r["User"]["r"], "AdaAdaAda", "{engine}: {r}");
        assert_eq!(r["User"]["p"], "00082001", "{engine}: {r}");
        let r = s.post_json(
            "/get",
            &json!({"[]": {"Moment": {"@column": "userId;group_concat(id):ids", "@group": "userId",
                                      "userId": 82001}}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert!(r["[]"][0]["Moment"]["ids"].is_string(), "{engine}: {r}");
        assert_alive(engine, s);
    });
    // A plain list past the budget: a 406 before its first byte, not a stream that never ends.
    on_every_engine(
        "list_budget",
        "debug = false\nmax_answer_bytes = 4096\n",
        |engine, s| {
            let r = s.post_json("/get", &json!({"Comment[]": {"count": 100, "Comment": {}}}));
            assert_eq!(code(&r), 406, "{engine}: {r}");
            let msg = r["msg"].as_str().unwrap_or_default();
            assert!(msg.contains("max_answer_bytes"), "{engine}: {msg}");
            let r = s.post_json("/get", &json!({"Comment[]": {"count": 3, "Comment": {}}}));
            assert_eq!(
                r["Comment[]"].as_array().map(Vec::len),
                Some(3),
                "{engine}: {r}"
            );
        },
    );
}

/// Issue 16, finding 6: requests under every per-item limit that kept the database busy. One
/// pattern budget per request; no regex over a value the request builds; no nested repetition
/// on MariaDB's backtracking regex engine.
#[test]
fn pattern_work_is_bounded_per_request() {
    on_every_engine("pattern_work", CONFIG, |engine, s| {
        // A LIKE list of 1,000 patterns of 200 bytes: within max_list_items and
        // max_pattern_length, 200 KB together.
        let patterns: Vec<String> = (0..1000).map(|i| format!("%{i:0>198}%")).collect();
        let body = json!({"Moment[]": {"Moment": {"content$": patterns}}}).to_string();
        let (r, took) = timed(s, "/get", &body);
        assert_eq!(code(&r), 406, "{engine}: {r}");
        let msg = r["msg"].as_str().unwrap_or_default();
        assert!(msg.contains("max_pattern_bytes"), "{engine}: {msg}");
        assert!(took < QUICK, "{engine}: took {took:?}");
        // Spread over several keys and objects it is the same budget.
        let p = "%".to_string() + &"a".repeat(250) + "%";
        let r = s.post_json(
            "/get",
            &json!({"Moment": {"content$": p, "content~": "b"},
                    "User": {"name$": p, "tag$": p, "head$": p},
                    "[]": {"Comment": {"content$": p}}}),
        );
        assert_eq!(code(&r), 406, "{engine}: {r}");
        assert!(r["msg"]
            .as_str()
            .unwrap_or_default()
            .contains("max_pattern_bytes"));

        // A regex over a string the request builds (the finding's request, and one within the
        // value budget).
        for key in ["x:repeat(name,100)", "x:concat(name,name)"] {
            let r = s.post_json(
                "/get",
                &json!({"User": {"@key": key, "x~": "(a+)+(b+)+(c+)+z$"}}),
            );
            assert_eq!(code(&r), 406, "{engine} {key}: {r}");
        }
        let r = s.post_json(
            "/get",
            &json!({"User": {"@key": "x:concat(name,name)", "x~": "^Ada"}}),
        );
        let msg = r["msg"].as_str().unwrap_or_default();
        assert!(msg.contains("column only"), "{engine}: {r}");

        // Nested repetition: exponential on MariaDB's engine, refused there; the others run
        // regular expressions in linear time (SQLite) or without backtracking (PostgreSQL).
        for pattern in ["^(a+)+$", "^(a|a)*$", "(\\w+\\s?)*$"] {
            let r = s.post_json(
                "/get",
                &json!({"User": {"name~": pattern, "@column": "id"}}),
            );
            if engine == Engine::Mariadb {
                assert_eq!(code(&r), 406, "{engine} {pattern}: {r}");
                let msg = r["msg"].as_str().unwrap_or_default();
                assert!(msg.contains("exponential"), "{engine}: {msg}");
            } else {
                assert_eq!(code(&r), 200, "{engine} {pattern}: {r}");
            }
        }
        // Ordinary patterns still match.
        let r = s.post_json(
            "/get",
            &json!({"User": {"name~": "^A(d|x)a$", "@column": "name"}}),
        );
        if engine == Engine::Mariadb {
            assert_eq!(code(&r), 200, "{engine}: {r}");
        }
        let r = s.post_json(
            "/get",
            &json!({"User": {"name~": "^Ad[a-z]$", "@column": "name"}}),
        );
        assert_eq!(r["User"]["name"], "Ada", "{engine}: {r}");
    });
}

/// Issue 16, finding 7: values the database refuses for the client's own reasons (a number out
/// of range, text that is not JSON) are 4xx, never a masked 500, on every engine.
#[test]
fn values_the_database_refuses_are_client_errors() {
    on_every_engine("data_exceptions", CONFIG, |engine, s| {
        for column in [
            "power(10,400):p",
            "json_length(name):p",
            "exp(10000):p",
            "cast(name AS SIGNED):p",
        ] {
            let r = s.post_json("/get", &json!({"User": {"id": 82001, "@column": column}}));
            let c = code(&r);
            assert!(
                c == 200 || (400..500).contains(&c),
                "{engine} {column}: a client's value is not a server fault: {r}"
            );
        }
        // The finding's two: MariaDB's out-of-range double, SQLite's malformed JSON.
        let r = s.post_json(
            "/get",
            &json!({"User": {"id": 82001, "@column": "power(10,400):p"}}),
        );
        if engine == Engine::Mariadb || engine == Engine::Postgres {
            assert_eq!(code(&r), 400, "{engine}: {r}");
        }
        let r = s.post_json(
            "/get",
            &json!({"User": {"id": 82001, "@column": "json_length(name):p"}}),
        );
        if engine == Engine::Sqlite || engine == Engine::Postgres {
            assert_eq!(code(&r), 400, "{engine}: {r}");
            let msg = r["msg"].as_str().unwrap_or_default();
            assert!(msg.contains("not JSON"), "{engine}: {msg}");
        }
    });
}

/// The property behind finding 5: whatever a client nests, an expression the planner accepts
/// under a budget never makes a value past it. Random nestings of the functions that grow
/// text run on a server with room to measure them and on one with a small budget (16 KiB,
/// stored values counted as 64 bytes: the demo's names are shorter); every one the small
/// server accepts must measure within its budget.
#[test]
fn growing_expressions_never_outgrow_their_bound() {
    const BUDGET: usize = 16 * 1024;
    let strict_config =
        format!("debug = false\nmax_answer_bytes = {BUDGET}\nmax_body_bytes = 64\n");
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    // An @column function item may be 100 characters long (as in the reference).
    let expressions: Vec<String> = std::iter::repeat_with(|| growing(&mut rng, 3))
        .filter(|e| e.len() + "concat()".len() <= 100)
        .take(150)
        .collect();
    for (engine, url) in crate::support::demo_databases("growing_bounds") {
        let roomy = Server::start(&url, "debug = false\nmax_answer_bytes = 8388608\n");
        let strict = Server::start(&url, &strict_config);
        let (mut accepted, mut largest) = (0, 0);
        for e in &expressions {
            let body =
                json!({"User": {"id": 82001, "@column": format!("concat({e}):v")}}).to_string();
            let measured = roomy.post("/get", &body);
            let judged = strict.get(&format!("/get/{}", url_encoded(&body)));
            let length = measured["User"]["v"].as_str().map(str::len);
            match code(&judged) {
                200 => {
                    accepted += 1;
                    let length = length.unwrap_or(0);
                    largest = largest.max(length);
                    assert!(
                        length <= BUDGET,
                        "{engine}: {e} was accepted under a {BUDGET}-byte budget and made \
                         {length} bytes"
                    );
                }
                406 => {
                    let msg = judged["msg"].as_str().unwrap_or_default();
                    assert!(msg.contains("max_answer_bytes"), "{engine}: {e}: {msg}");
                }
                _ => panic!("{engine}: {e}: {judged}"),
            }
        }
        eprintln!(
            "{engine}: {accepted} of {} accepted, the largest {largest} bytes",
            expressions.len()
        );
        assert!(
            accepted > 20 && largest > 1000,
            "{engine}: the cases reach the budget"
        );
    }
}

/// A random expression over `name` of the functions that grow text, `depth` levels deep.
fn growing(rng: &mut Rng, depth: u32) -> String {
    let mut next = |n: u64| rng.below(n);
    let count = [0, 1, 2, 3, 10, 100, 1000, 5000, 20000][next(9) as usize];
    let pick = if depth == 0 { next(2) } else { next(14) };
    let inner = |rng: &mut Rng| growing(rng, depth.saturating_sub(1));
    match pick {
        0 => "name".to_string(),
        1 => format!("'{}'", "ab".repeat(next(4) as usize + 1)),
        2 => format!("repeat({},{count})", inner(rng)),
        3 => format!("lpad({},{count},'xy')", inner(rng)),
        4 => format!("rpad({},{count},'z')", inner(rng)),
        5 => format!("space({count})"),
        6 => format!("concat({},{},{})", inner(rng), inner(rng), inner(rng)),
        7 => format!(
            "replace({},'a','{}')",
            inner(rng),
            "q".repeat(count.min(50))
        ),
        8 => format!("upper({})", inner(rng)),
        9 => format!("left({},{count})", inner(rng)),
        10 => format!("substr({},1,{count})", inner(rng)),
        11 => format!("insert({},2,1,{})", inner(rng), inner(rng)),
        12 => format!("concat_ws('-',{},{})", inner(rng), inner(rng)),
        _ => format!("reverse({})", inner(rng)),
    }
}
