//! Lookup, tag and version, MUST and the structure rewrites; helpers for the other test files.
//! The structures are our own, shaped like the demo's rows the recorded cases (REF-*) ran on.

use super::*;
use serde_json::json;

pub(super) fn row(
    id: i64,
    method: Method,
    tag: &str,
    version: i64,
    structure: Value,
) -> RequestRule {
    RequestRule {
        id,
        method,
        tag: tag.to_string(),
        version,
        structure,
    }
}

pub(super) fn rules_of(rows: Vec<RequestRule>) -> RequestRules {
    let (rules, warnings) = RequestRules::new(rows);
    assert!(warnings.is_empty(), "{warnings:?}");
    rules
}

pub(super) fn run(
    method: Method,
    rules: &RequestRules,
    body: Value,
) -> Result<Verified, PlanError> {
    run_as(method, rules, body, false)
}

/// [`run`] for a request the server runs itself (`trusted`).
pub(super) fn run_as(
    method: Method,
    rules: &RequestRules,
    body: Value,
    trusted: bool,
) -> Result<Verified, PlanError> {
    let Value::Object(body) = body else {
        panic!("test bodies are objects")
    };
    let schema = crate::schema::SchemaCache::new();
    let options = crate::PlanOptions::default();
    let context = Context {
        schema: &schema,
        rules,
        options: &options,
        method,
        visitor: None,
        trusted,
    };
    verify(body, &context)
}

/// The APIJSON code `response` gives each variant used here.
pub(super) fn code(e: &PlanError) -> u16 {
    match e {
        PlanError::Forbidden(_) => 403,
        PlanError::Invalid(_) | PlanError::Limit(_) => 406,
        PlanError::WrongType(_) => 415,
        _ => 0,
    }
}

/// Asserts a failure with `code` whose message mentions `needle`.
#[track_caller]
pub(super) fn fails(res: Result<Verified, PlanError>, code_: u16, needle: &str) {
    match res {
        Ok(v) => panic!("expected {code_}, got {:?}", v.request),
        Err(e) => {
            assert_eq!(code(&e), code_, "{e}");
            assert!(e.to_string().contains(needle), "{e:?} lacks {needle:?}");
        }
    }
}

#[track_caller]
pub(super) fn passes(res: Result<Verified, PlanError>) -> Verified {
    match res {
        Ok(v) => v,
        Err(e) => panic!("expected success, got {} {e}", code(&e)),
    }
}

/// Key order of an object, which `Value` equality does not compare.
pub(super) trait Keys {
    fn key_list(&self) -> Vec<String>;
}

impl Keys for Map<String, Value> {
    fn key_list(&self) -> Vec<String> {
        self.keys().cloned().collect()
    }
}

impl Keys for Value {
    fn key_list(&self) -> Vec<String> {
        self.as_object().map(Keys::key_list).unwrap_or_default()
    }
}

pub(super) fn keys(v: &impl Keys) -> Vec<String> {
    v.key_list()
}

pub(super) fn demo() -> RequestRules {
    use Method::*;
    rules_of(vec![
        row(
            1,
            Post,
            "Comment",
            1,
            json!({"MUST": "momentId,content", "REFUSE": "id", "UPDATE": {"@role": "OWNER"}}),
        ),
        row(
            2,
            Post,
            "Moment",
            1,
            json!({
                "INSERT": {"@role": "OWNER", "pictureList": []},
                "REFUSE": "id",
                "UPDATE": {"verifyURLList-()": "verifyURLList(pictureList)"}
            }),
        ),
        row(
            3,
            Put,
            "Moment",
            1,
            json!({"MUST": "id", "REFUSE": "userId,date", "UPDATE": {"@role": "OWNER"}}),
        ),
        row(
            4,
            Put,
            "User",
            1,
            json!({"MUST": "id", "INSERT": {"@role": "OWNER"}, "REFUSE": "phone"}),
        ),
        row(
            5,
            Delete,
            "Comment",
            1,
            json!({
                "MUST": "id", "INSERT": {"@role": "OWNER"}, "UPDATE": {"childCount()": "deleteChildComment(id)"}
            }),
        ),
        row(
            6,
            Gets,
            "Privacy-CIRCLE",
            2,
            json!({
                "Privacy": {"MUST": "id", "REFUSE": "!", "UPDATE": {"@role": "CIRCLE", "@column": "phone"}}
            }),
        ),
        row(
            7,
            Post,
            "register",
            1,
            json!({
                "User": {"MUST": "name", "REFUSE": "id", "UPDATE": {"id@": "Privacy/id"}},
                "Privacy": {"MUST": "_password,phone", "REFUSE": "id", "UNIQUE": "phone", "VERIFY": {"phone~": "PHONE"}}
            }),
        ),
        row(
            8,
            Put,
            "Privacy-phone",
            1,
            json!({"Privacy": {
                "MUST": "id,phone,_password", "INSERT": {"@role": "OWNER"}, "REFUSE": "!",
                "UPDATE": {"@combine": "_password"}, "VERIFY": {"phone[{}": "=11", "_password[{}": ">=6"}
            }}),
        ),
        row(
            9,
            Put,
            "Chain-group",
            1,
            json!({"Chain": {
                "MUST": "groupId,groupName", "INSERT": {"@role": "OWNER"}, "IS_ID_CONDITION_MUST": false
            }}),
        ),
        row(
            10,
            Post,
            "Request",
            1,
            json!({"MUST": "method,tag,structure", "INSERT": {"@role": "LOGIN"}, "REFUSE": "!detail,!"}),
        ),
        row(
            11,
            Gets,
            "Privacy",
            1,
            json!({"MUST": "id", "REFUSE": "_password", "UPDATE": {"@role": "OWNER"}}),
        ),
        row(
            12,
            Gets,
            "Secret",
            1,
            json!({"IS_ID_CONDITION_MUST": true, "UPDATE": {"@role": "OWNER"}}),
        ),
    ])
}

#[test]
fn find_picks_the_closest_version_at_or_above_the_request() {
    let rules = rules_of(
        [1, 2, 4]
            .into_iter()
            .map(|v| row(v, Method::Gets, "Privacy", v, json!({"MUST": "id"})))
            .collect(),
    );
    let found = |v: Option<i64>| rules.find(Method::Gets, "Privacy", v).map(|r| r.version);
    assert_eq!(found(None), Some(4));
    assert_eq!(found(Some(0)), Some(4));
    assert_eq!(found(Some(-3)), Some(4));
    assert_eq!(found(Some(1)), Some(1));
    assert_eq!(found(Some(2)), Some(2));
    assert_eq!(found(Some(3)), Some(4));
    assert_eq!(found(Some(4)), Some(4));
    assert_eq!(found(Some(5)), None);
    assert!(rules.find(Method::Heads, "Privacy", None).is_none());
    assert!(rules.find(Method::Gets, "privacy", None).is_none());
}

#[test]
fn unusable_rows_are_reported() {
    let (rules, warnings) = RequestRules::new(vec![
        row(1, Method::Post, "Comment", 1, json!("MUST id")),
        row(2, Method::Post, "Moment", 1, json!({"MUST": "content"})),
        row(3, Method::Post, "Moment", 1, json!({"MUST": "id"})),
        row(
            4,
            Method::Put,
            "Moment",
            1,
            json!({"Moment": {"VERIFY": {"code~": "(unclosed"}}}),
        ),
        row(
            5,
            Method::Put,
            "User",
            1,
            json!({"TYPE": {"age": "INTEGER"}}),
        ),
        row(6, Method::Put, "Praise", 1, json!({"IF": "curObj.id > 0"})),
    ]);
    let mentions = |id: &str| {
        warnings
            .iter()
            .filter(|w| w.starts_with(&format!("Request row {id}:")))
            .count()
    };
    assert_eq!(
        [
            mentions("1"),
            mentions("3"),
            mentions("4"),
            mentions("5"),
            mentions("6")
        ],
        [1; 5]
    );
    assert_eq!(mentions("2"), 0);
    assert!(rules.find(Method::Post, "Comment", None).is_none());
    let moment = rules.find(Method::Post, "Moment", None).map(|r| r.id);
    assert_eq!(moment, Some(2), "the first row of a version wins");
    // A pattern that did not compile fails the requests that need it instead of passing them.
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Moment", "Moment": {"id": 1, "code": "a"}}),
        ),
        406,
        "not a valid regular expression",
    );
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Praise", "Praise": {"id": 1}}),
        ),
        403,
        "IF",
    );
}

#[test]
fn tag_is_required_and_must_match_a_row() {
    let rules = demo();
    // REF-P03, REF-W05
    fails(
        run(Method::Gets, &rules, json!({"Privacy": {"id": 82001}})),
        406,
        "tag",
    );
    fails(
        run(
            Method::Gets,
            &rules,
            json!({"tag": " ", "Privacy": {"id": 82001}}),
        ),
        406,
        "tag",
    );
    fails(
        run(
            Method::Gets,
            &rules,
            json!({"tag": 3, "Privacy": {"id": 82001}}),
        ),
        406,
        "tag",
    );
    // REF-P04
    fails(
        run(
            Method::Gets,
            &rules,
            json!({"tag": "Nope", "Privacy": {"id": 82001}}),
        ),
        403,
        "version: 0, method: GETS, tag: Nope",
    );
    fails(
        run(
            Method::Gets,
            &rules,
            json!({"tag": "Privacy-CIRCLE", "version": 3, "Privacy": {"id": 1}}),
        ),
        403,
        "version: 3, method: GETS, tag: Privacy-CIRCLE",
    );
    fails(
        run(
            Method::Gets,
            &rules,
            json!({"tag": "Privacy", "version": "x"}),
        ),
        406,
        "version",
    );
    // A row for another method does not count.
    fails(
        run(
            Method::Put,
            &rules,
            json!({"tag": "Comment", "Comment": {"id": 1}}),
        ),
        403,
        "method: PUT",
    );
}

#[test]
fn version_one_reaches_a_version_two_row() {
    // REF-P07 / P09: the lowest version >= the requested one.
    let v = passes(run(
        Method::Gets,
        &demo(),
        json!({"version": 1, "tag": "Privacy-CIRCLE", "Privacy": {"id": 82001}}),
    ));
    assert_eq!(
        Value::Object(v.request),
        json!({"version": 1, "tag": "Privacy-CIRCLE", "Privacy": {"id": 82001, "@role": "CIRCLE", "@column": "phone"}})
    );
}

#[test]
fn public_methods_pass_unchanged() {
    let body = json!({"User": {"id": 1, "@combine": "x"}, "f()": "g()"});
    let v = passes(run(
        Method::Get,
        &RequestRules::new(Vec::new()).0,
        body.clone(),
    ));
    assert_eq!(Value::Object(v.request), body);
    assert!(v.checks.is_empty());
}

#[test]
fn must_keys_are_required_and_structure_rewrites_apply() {
    let rules = demo();
    // REF-W02: UPDATE adds @role; the root keeps its globals where they were.
    let v = passes(run(
        Method::Post,
        &rules,
        json!({"Comment": {"momentId": 15, "content": "x"}, "tag": "Comment", "format": true}),
    ));
    assert_eq!(
        Value::Object(v.request.clone()),
        json!({"Comment": {"momentId": 15, "content": "x", "@role": "OWNER"}, "tag": "Comment", "format": true})
    );
    // Value equality ignores order, so the order is checked on its own.
    assert_eq!(keys(&v.request), ["Comment", "tag", "format"]);
    assert_eq!(
        keys(&v.request["Comment"]),
        ["momentId", "content", "@role"]
    );
    // REF-W04
    fails(
        run(
            Method::Post,
            &rules,
            json!({"Comment": {"content": "no moment"}, "tag": "Comment"}),
        ),
        406,
        "Comment must contain momentId (every key of [momentId,content])",
    );
    fails(
        run(
            Method::Post,
            &rules,
            json!({"Comment": {"momentId": null, "content": "x"}, "tag": "Comment"}),
        ),
        406,
        "momentId",
    );
    // A reference `k@` stands in for a MUST key.
    passes(run(
        Method::Post,
        &rules,
        json!({"Comment": {"momentId@": "/Moment/id", "content": "x"}, "tag": "Comment"}),
    ));
}

#[test]
fn insert_fills_absent_keys_and_update_injects_functions() {
    let rules = demo();
    // REF-W06 / W07: INSERT supplies pictureList only when absent; UPDATE adds the function.
    let v = passes(run(
        Method::Post,
        &rules,
        json!({"Moment": {"content": "x"}, "tag": "Moment"}),
    ));
    assert_eq!(
        v.request["Moment"],
        json!({"content": "x", "@role": "OWNER", "pictureList": [], "verifyURLList-()": "verifyURLList(pictureList)"})
    );
    let v = passes(run(
        Method::Post,
        &rules,
        json!({"Moment": {"content": "x", "pictureList": ["not a url"]}, "tag": "Moment"}),
    ));
    assert_eq!(v.request["Moment"]["pictureList"], json!(["not a url"]));
    // DELETE: the structure's function is allowed although a client may not send one.
    let v = passes(run(
        Method::Delete,
        &rules,
        json!({"Comment": {"id": 22}, "tag": "Comment"}),
    ));
    assert_eq!(
        v.request["Comment"],
        json!({"id": 22, "@role": "OWNER", "childCount()": "deleteChildComment(id)"})
    );
}
