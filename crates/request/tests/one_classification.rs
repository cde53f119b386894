//! A body read straight from its text into the request tree gives the tree (or the error) that
//! the same body read into a JSON map and classified from it gives: the two sources share one
//! classification, and the text path leaves to the map whatever it does not read itself
//! (repeated keys, large objects, errors).

use apijet_request::{parse, parse_body, Request, RequestError};
use proptest::prelude::*;

/// Keys in every spelling of the grammar, some of them twice (one escaped), some refused.
const KEYS: &[&str] = &[
    "User",
    "Moment",
    "User:me",
    "Comment:c",
    "[]",
    "User[]",
    "Moment-id[]",
    "Comment:c[]",
    "[]:list",
    "id",
    "userId",
    "name$",
    "name%$",
    "id{}",
    "id!",
    "id!{}",
    "name~",
    "name*~",
    "tags<>",
    "id&{}",
    "id|{}",
    "id>",
    "id>=",
    "id!>",
    "id&<",
    "id}{",
    "name[~",
    "id@",
    "id{}@",
    "userId@",
    "name()",
    "f-()",
    "g+()",
    "balance+",
    "@column",
    "@order",
    "@from@",
    "@schema",
    "@role",
    "@explain",
    "@raw",
    "@f()",
    "@x[]",
    "@",
    "tag",
    "version",
    "format",
    "count",
    "page",
    "query",
    "join",
    "compat",
    "from",
    "range",
    "with",
    "x",
    "n@",
    "total@",
    "",
    "1bad",
    "a b",
    "na\\u006de",
    "Us\\u0065r",
    "-",
    "()",
    "User[]@",
];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(str::to_string)
}

/// Values of every JSON type, strings that look like paths, comments and tables among them.
const LEAVES: &[&str] = &[
    "null",
    "true",
    "false",
    "0",
    "-7",
    "18446744073709551615",
    "1.5e300",
    "-0.25",
    "\"/Moment/userId\"",
    "\"a//b/*c*/\"",
    "\"ANY\"",
    "\"User\"",
    "\"id,name\"",
    "\"\\u00e9\\n\"",
    "[]",
    "[1,\"a\",null,{\"k\":[2]}]",
    "{}",
];

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(LEAVES).prop_map(str::to_string),
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

/// Where a comment may go between tokens.
fn gap() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        8 => Just(""),
        1 => Just(" "),
        1 => Just("/* c */"),
        1 => Just("// c\n"),
    ]
}

fn value() -> impl Strategy<Value = String> {
    leaf().prop_recursive(6, 64, 6, |inner| {
        prop::collection::vec((key(), inner, gap()), 0..6).prop_map(|members| {
            let members: Vec<String> = members
                .into_iter()
                .map(|(k, v, g)| format!("{g}\"{k}\"{g}:{v}"))
                .collect();
            format!("{{{}}}", members.join(","))
        })
    })
}

fn body() -> impl Strategy<Value = String> {
    let object = prop::collection::vec((key(), value(), gap()), 0..8).prop_map(|members| {
        let members: Vec<String> = members
            .into_iter()
            .map(|(k, v, g)| format!("\"{k}\"{g}:{g}{v}"))
            .collect();
        format!("{{{}}}", members.join(","))
    });
    (object, 0..20usize, any::<prop::sample::Index>()).prop_map(|(text, damage, at)| {
        match damage {
            // Cut short, trailing text, another top level.
            0 => text[..at.index(text.len())].to_string(),
            1 => format!("{text} x"),
            2 => format!("[{text}]"),
            _ => text,
        }
    })
}

/// Trees and errors have no equality of their own: their printed forms are compared.
fn printed(r: Result<Request, RequestError>) -> String {
    format!("{r:?}")
}

fn through_map(body: &[u8]) -> Result<Request, RequestError> {
    Request::from_map(parse_body(body)?)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn text_and_map_give_the_same_tree_or_error(body in body()) {
        prop_assert_eq!(
            printed(parse(body.as_bytes())),
            printed(through_map(body.as_bytes())),
            "{}", body
        );
    }
}

#[test]
fn a_repeated_key_keeps_its_first_place_and_its_last_value() {
    for body in [
        r#"{"User":{"id":1,"name":"a","id":2}}"#,
        r#"{"a":null,"User":{"id":1},"a":2}"#,
        r#"{"[]":{"count":1},"x":1,"[]":{"User":{}}}"#,
        r#"{"User":{"id":1},"Us\u0065r":{"id":2}}"#,
    ] {
        assert_eq!(
            printed(parse(body.as_bytes())),
            printed(through_map(body.as_bytes())),
            "{body}"
        );
    }
    let r = parse(br#"{"a":null,"User":{"id":1},"a":2}"#).expect("a request");
    let keys: Vec<&str> = r.root.members.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(keys, ["a", "User"]);
}

#[test]
fn nesting_past_the_parsers_limit_is_refused_by_both() {
    let deep = format!("{}{}", r#"{"User":"#.repeat(200), "}".repeat(200));
    let text = printed(parse(deep.as_bytes()));
    assert!(text.contains("recursion limit"), "{text}");
    assert_eq!(text, printed(through_map(deep.as_bytes())));
}

#[test]
fn nesting_within_the_parsers_limit_gives_the_same_tree() {
    for depth in [20, 30, 120] {
        let deep = format!(
            "{}{{\"id\":1}}{}",
            r#"{"[]":{"User":"#.repeat(depth / 2),
            "}}".repeat(depth / 2)
        );
        let text = printed(parse(deep.as_bytes()));
        assert!(text.starts_with("Ok("), "{text}");
        assert_eq!(text, printed(through_map(deep.as_bytes())), "{depth}");
    }
}

#[test]
fn objects_of_many_keys_give_the_same_tree() {
    let members: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
    let body = format!("{{\"User\":{{{}}}}}", members.join(","));
    assert_eq!(
        printed(parse(body.as_bytes())),
        printed(through_map(body.as_bytes()))
    );
}

#[test]
fn bodies_that_are_not_utf8_json_objects_are_refused_alike() {
    let bodies: [&[u8]; 8] = [
        b"{\"User\":{\"name\":\"\xff\"}}",
        b"{\"User\":{\"name\":\"a\"}}\xff",
        b"{\"Us\xc3\xa9r\":{\"n\xc3\xa9\":\"\xc3\xa9\"}}",
        b"{\"User\":{\"name\":\"a\"}} /* \xff */",
        b"",
        b"  \n ",
        b"// only a comment",
        b"\"User\"",
    ];
    for body in bodies {
        assert_eq!(
            printed(parse(body)),
            printed(through_map(body)),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    assert!(printed(parse(bodies[0])).contains("not UTF-8"));
}
