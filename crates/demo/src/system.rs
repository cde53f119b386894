//! The configuration tables the server reads at start-up: `Access`, `Request`, `Function`.
//!
//! The Access policy follows the APIJSON demo's: public reads of users, moments and comments;
//! private reads (`GETS`/`HEADS`) for logged-in users; writes for the owner. `Privacy` is never
//! publicly readable. The Request structures are our own, written in the grammar of protocol §8
//! (MUST, REFUSE, TYPE, VERIFY, INSERT/UPDATE with `"@role":"OWNER"`, UNIQUE).

use serde_json::{json, Value};

use super::schema::{ALL_ROLES, LOGGED_IN, OWNER_ADMIN};
use super::sql::Lit;

/// The creation date of every configuration row (UTC).
const CONFIG_DATE: &str = "2024-01-01 00:00:00";
/// Only the administrator.
const ADMIN: &str = r#"["ADMIN"]"#;
/// Nobody (through the API).
const NOBODY: &str = "[]";

/// One `Access` row: table, API alias, role lists for get/head/gets/heads/post/put/delete.
type AccessRow = (
    &'static str,
    Option<&'static str>,
    [&'static str; 7],
    &'static str,
);

/// The `Access` rows.
const ACCESS_ROWS: [AccessRow; 9] = [
    (
        "apijson_user",
        Some("User"),
        [
            ALL_ROLES,
            ALL_ROLES,
            LOGGED_IN,
            LOGGED_IN,
            OWNER_ADMIN,
            OWNER_ADMIN,
            ADMIN,
        ],
        "Public profiles. Real table name hidden behind the alias User.",
    ),
    (
        "apijson_privacy",
        Some("Privacy"),
        [
            NOBODY,
            NOBODY,
            r#"["OWNER","ADMIN","CIRCLE"]"#,
            OWNER_ADMIN,
            OWNER_ADMIN,
            OWNER_ADMIN,
            ADMIN,
        ],
        "Phone, balance and passwords: no public reads at all.",
    ),
    (
        "Moment",
        None,
        // PUT is open to every logged-in role so friends can like a moment; the Request
        // structures still force OWNER for content edits.
        [
            ALL_ROLES,
            ALL_ROLES,
            LOGGED_IN,
            LOGGED_IN,
            OWNER_ADMIN,
            LOGGED_IN,
            OWNER_ADMIN,
        ],
        "Posts.",
    ),
    (
        "Comment",
        None,
        [
            ALL_ROLES,
            ALL_ROLES,
            LOGGED_IN,
            LOGGED_IN,
            OWNER_ADMIN,
            OWNER_ADMIN,
            OWNER_ADMIN,
        ],
        "Comments on posts; toId > 0 is a reply.",
    ),
    (
        "Access",
        None,
        [
            ALL_ROLES, ALL_ROLES, ALL_ROLES, ALL_ROLES, NOBODY, NOBODY, NOBODY,
        ],
        "System table: readable only when the server runs in debug mode.",
    ),
    (
        "Request",
        None,
        [
            ALL_ROLES,
            ALL_ROLES,
            LOGGED_IN,
            LOGGED_IN,
            r#"["LOGIN","ADMIN"]"#,
            NOBODY,
            NOBODY,
        ],
        "System table: readable only when the server runs in debug mode.",
    ),
    (
        "Function",
        None,
        [
            ALL_ROLES, ALL_ROLES, LOGGED_IN, LOGGED_IN, NOBODY, NOBODY, NOBODY,
        ],
        "System table: readable only when the server runs in debug mode.",
    ),
    (
        "Document",
        None,
        [
            ALL_ROLES, ALL_ROLES, LOGGED_IN, LOGGED_IN, NOBODY, NOBODY, NOBODY,
        ],
        "System table: the templates of /router/{method}/{tag}.",
    ),
    (
        "Verify",
        None,
        [NOBODY, NOBODY, NOBODY, NOBODY, NOBODY, NOBODY, NOBODY],
        "Verification codes: only the account endpoints (/post/verify, /login type 1, \
         /register, /put/password) use them.",
    ),
];

/// Rows of `Access`, in the column order of `schema::ACCESS`.
pub fn access_rows() -> Vec<Vec<Lit>> {
    ACCESS_ROWS
        .iter()
        .zip(1..)
        .map(|(&(name, alias, roles, detail), id)| {
            let mut row = vec![Lit::Int(id), Lit::Int(0), Lit::Null, Lit::s(name)];
            row.push(Lit::opt(alias));
            row.extend(roles.iter().map(|r| Lit::s(*r)));
            row.extend([Lit::s(CONFIG_DATE), Lit::s(detail)]);
            row
        })
        .collect()
}

/// One `Request` row: method, tag, structure, detail.
type RequestRow = (&'static str, &'static str, Value, &'static str);

/// The `Request` rows, all version 1.
fn request_list() -> Vec<RequestRow> {
    let owner = json!({"@role": "OWNER"});
    // Per-item batches: the items are checked against the single-object structure of the
    // same method (tag `Comment`), so only the list itself is declared here.
    let comment_batch = json!({
        "Comment[]": [],
        "TYPE": {"Comment[]": "OBJECT[]"},
        "INSERT": {"@role": "OWNER"}
    });
    let moment_types = json!({
        "content": "STRING",
        "praiseUserIdList": "NUMBER[]",
        "pictureList": "URL[]"
    });
    vec![
        (
            "POST",
            "register",
            json!({
                "Privacy": {
                    "MUST": "phone,_password",
                    "REFUSE": "id",
                    "UNIQUE": "phone",
                    "VERIFY": {"phone~": "PHONE", "_password[{}": ">=6"}
                },
                "User": {
                    "MUST": "name",
                    "REFUSE": "id",
                    "UPDATE": {"id@": "Privacy/id"}
                }
            }),
            "Sign-up: Privacy first, then User with the same id. The phone must be new.",
        ),
        (
            "POST",
            "Moment",
            json!({
                "REFUSE": "id,date",
                "TYPE": moment_types,
                "INSERT": {"praiseUserIdList": [], "pictureList": []},
                "UPDATE": owner
            }),
            "Post a moment as yourself; missing lists default to [].",
        ),
        (
            "PUT",
            "Moment",
            json!({
                "MUST": "id",
                "REFUSE": "userId,date",
                "TYPE": moment_types,
                "UPDATE": owner
            }),
            "Edit your own moment; author and date are fixed.",
        ),
        (
            "DELETE",
            "Moment",
            json!({"MUST": "id", "REFUSE": "!", "UPDATE": owner}),
            "Delete your own moment by id.",
        ),
        (
            "POST",
            "Comment",
            json!({
                "MUST": "momentId,content",
                "REFUSE": "id,date",
                "TYPE": {"toId": "NUMBER", "momentId": "NUMBER", "content": "STRING"},
                "UPDATE": owner
            }),
            "Comment on a moment (toId: the comment replied to, default 0).",
        ),
        (
            "PUT",
            "Comment",
            json!({"MUST": "id,content", "REFUSE": "!", "UPDATE": owner}),
            "Only the text of your own comment can change.",
        ),
        (
            "DELETE",
            "Comment",
            json!({"MUST": "id", "REFUSE": "!", "UPDATE": owner}),
            "Delete your own comment by id.",
        ),
        (
            "PUT",
            "Comment[]",
            json!({"Comment": {"MUST": "id{},content", "REFUSE": "!", "UPDATE": owner}}),
            "Same new text for several of your comments: Comment.id{} lists them.",
        ),
        (
            "DELETE",
            "Comment[]",
            json!({"Comment": {"MUST": "id{}", "REFUSE": "!", "UPDATE": owner}}),
            "Delete several of your comments at once.",
        ),
        (
            "POST",
            "Comment:[]",
            comment_batch.clone(),
            "Several comments in one request; each item is checked like POST Comment.",
        ),
        (
            "PUT",
            "Comment:[]",
            comment_batch,
            "Several comment edits in one request; each item is checked like PUT Comment.",
        ),
        (
            "GETS",
            "Privacy",
            json!({"MUST": "id", "REFUSE": "!", "UPDATE": owner}),
            "Read your own private data (hidden _ columns never leave the server).",
        ),
        (
            "HEADS",
            "Privacy",
            json!({"MUST": "id", "REFUSE": "!", "UPDATE": owner}),
            "Count your own row. Passwords are stored hashed, so no condition can check one: \
             /login and /put/password do.",
        ),
        (
            "PUT",
            "Privacy",
            json!({
                "MUST": "id",
                "REFUSE": "certified,balance,_password,_payPassword",
                "UPDATE": owner
            }),
            "Change your own phone or email. Passwords change through /put/password, which \
             hashes them; the balance through /put/balance (or tag balance+).",
        ),
        (
            "PUT",
            "balance+",
            json!({
                "Privacy": {
                    "MUST": "id,balance+",
                    "REFUSE": "!",
                    "VERIFY": {"balance+&{}": ">0,<=10000"},
                    "UPDATE": owner
                }
            }),
            "Top up your balance by more than 0 and at most 10000 at a time.",
        ),
        (
            "GET",
            "moments",
            json!({}),
            "/router/get/moments: the Document template's page of moments; any page.",
        ),
        (
            "PUT",
            "User",
            json!({"MUST": "id", "REFUSE": "date", "UPDATE": owner}),
            "Edit your own public profile.",
        ),
    ]
}

/// Rows of `Document`: the `/router` templates, in the column order of `schema::DOCUMENT`.
pub fn document_rows() -> Vec<Vec<Lit>> {
    let template = json!({"Moment[]": {"count": 3, "page": 0, "Moment": {"@order": "id+"}}});
    vec![vec![
        Lit::Int(1),
        Lit::Int(0),
        Lit::Int(1),
        Lit::s("Moments, three a page"),
        Lit::s("/get/moments"),
        Lit::json(&json!({"Moment[].page": 0})),
        Lit::json(&template),
        Lit::s(CONFIG_DATE),
    ]]
}

/// Rows of `Request`, in the column order of `schema::REQUEST`.
pub fn request_rows() -> Vec<Vec<Lit>> {
    request_list()
        .into_iter()
        .zip(1..)
        .map(|((method, tag, structure, detail), id)| {
            vec![
                Lit::Int(id),
                Lit::Int(0),
                Lit::Int(1),
                Lit::s(method),
                Lit::s(tag),
                Lit::json(&structure),
                Lit::s(detail),
                Lit::s(CONFIG_DATE),
            ]
        })
        .collect()
}

/// One `Function` row: name, returnType, arguments, demo, detail, return example.
type FunctionRow = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Value,
    &'static str,
    &'static str,
);

/// The `Function` rows.
fn function_list() -> Vec<FunctionRow> {
    vec![
        (
            "isContain",
            "boolean",
            Some("array,value"),
            json!({"array": [82001, 82002, 82003], "value": 82002}),
            "Whether array holds value.",
            "true",
        ),
        (
            "countArray",
            "int",
            Some("array"),
            json!({"array": ["a", "b", "c"]}),
            "The length of array; 0 when it is null.",
            "3",
        ),
        (
            "getFromArray",
            "Object",
            Some("array,position"),
            json!({"array": ["x", "y", "z"], "result()": "getFromArray(array,1)"}),
            "The item of array at position (0-based); a number argument is an index, not a key.",
            "\"y\"",
        ),
        (
            "plus",
            "Object",
            Some("a,b"),
            json!({"a": 40, "b": 2}),
            "a + b.",
            "42",
        ),
        (
            "minus",
            "Object",
            Some("a,b"),
            json!({"a": 44, "b": 2}),
            "a - b.",
            "42",
        ),
        (
            "getCurrentUserId",
            "Long",
            None,
            json!({}),
            "The id of the logged-in visitor; null when anonymous.",
            "82001",
        ),
    ]
}

/// Rows of `Function`, in the column order of `schema::FUNCTION`.
pub fn function_rows() -> Vec<Vec<Lit>> {
    function_list()
        .into_iter()
        .zip(1..)
        .map(|((name, returns, args, demo, detail, example), id)| {
            vec![
                Lit::Int(id),
                Lit::Int(0),
                Lit::Int(0),
                Lit::Null,
                Lit::s(name),
                Lit::s(returns),
                Lit::opt(args),
                Lit::json(&demo),
                Lit::s(detail),
                Lit::Int(0),
                Lit::Null,
                Lit::Null,
                Lit::s(CONFIG_DATE),
                Lit::s(example),
            ]
        })
        .collect()
}
