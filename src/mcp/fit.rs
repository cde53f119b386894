//! Answers sized for a model's context: a tool answer longer than `mcp_max_answer_bytes` is
//! cut where the request can ask for less — the longest list loses its last items — and a note
//! says what was cut and how to ask for the rest (`count` and `page` for a list, `@column` for
//! a long value), so the agent reads on in pages instead of losing the tail without a word.

use serde_json::{Map, Value as Json};

/// Room kept for the note beside a cut answer, within the cap.
const NOTE_ROOM: usize = 1024;
/// Lists looked for no deeper than this many objects down (answers nest a few levels).
const MAX_WALK_DEPTH: usize = 8;
/// At most this many lists are cut in one answer.
const MAX_CUTS: usize = 8;

/// What the agent is told to ask instead when an answer is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guide {
    /// An APIJSON answer: `count` and `page` for lists, `@column` for long values.
    Request,
    /// The answer of `describe`: fewer tables at once.
    Describe,
}

/// What the agent is sent.
#[derive(Debug, PartialEq)]
pub(crate) enum Fitted {
    /// The answer as it is.
    Whole(String),
    /// The answer with lists cut, and the note that says so.
    Cut { text: String, note: String },
    /// Nothing fits: only what to ask instead.
    TooLarge(String),
}

/// A list that was cut: where, how many items it had and kept.
struct Shortened {
    path: String,
    had: usize,
    kept: usize,
}

/// `answer` as text of at most `max` bytes (note included), cutting its longest lists.
pub(crate) fn fit(answer: &Json, max: usize, guide: Guide) -> Fitted {
    let text = answer.to_string();
    if text.len() <= max {
        return Fitted::Whole(text);
    }
    let whole_len = text.len();
    let budget = max.saturating_sub(NOTE_ROOM).max(max / 2);
    let mut cut = answer.clone();
    let mut cuts: Vec<Shortened> = Vec::new();
    let mut len = whole_len;
    while len > budget && cuts.len() < MAX_CUTS {
        let Some(path) = longest_list(&cut) else {
            break;
        };
        let Some(list) = pointer_mut(&mut cut, &path) else {
            break;
        };
        let had = list.len();
        let kept = keep_within(list, len, budget);
        list.truncate(kept);
        len = cut.to_string().len();
        let path = path.join("/");
        match cuts.iter_mut().find(|c| c.path == path) {
            Some(c) => c.kept = kept,
            None => cuts.push(Shortened { path, had, kept }),
        }
        if kept == 0 {
            break;
        }
    }
    if len > budget || cuts.iter().all(|c| c.kept == 0) {
        return Fitted::TooLarge(too_large(whole_len, max, &cuts));
    }
    Fitted::Cut {
        text: cut.to_string(),
        note: note(whole_len, max, &cuts, guide),
    }
}

/// How many items of `list` to keep so that an answer of `len` bytes comes within `budget`.
fn keep_within(list: &[Json], len: usize, budget: usize) -> usize {
    let mut over = len.saturating_sub(budget);
    let mut kept = list.len();
    while over > 0 && kept > 0 {
        kept -= 1;
        // The item and the comma before it.
        over = over.saturating_sub(list[kept].to_string().len() + 1);
    }
    kept
}

/// The path (object keys from the root) of the list with the longest text, outside other
/// lists: those are the ones `count` and `page` page through.
fn longest_list(answer: &Json) -> Option<Vec<String>> {
    let mut best: Option<(usize, Vec<String>)> = None;
    let mut path = Vec::new();
    walk(answer, &mut path, 0, &mut best);
    best.map(|(_, p)| p)
}

fn walk(v: &Json, path: &mut Vec<String>, depth: usize, best: &mut Option<(usize, Vec<String>)>) {
    match v {
        Json::Array(items) if !items.is_empty() => {
            let len = v.to_string().len();
            if best.as_ref().is_none_or(|(l, _)| len > *l) {
                *best = Some((len, path.clone()));
            }
        }
        Json::Object(map) if depth < MAX_WALK_DEPTH => {
            for (k, child) in map {
                path.push(k.clone());
                walk(child, path, depth + 1, best);
                path.pop();
            }
        }
        _ => {}
    }
}

fn pointer_mut<'a>(v: &'a mut Json, path: &[String]) -> Option<&'a mut Vec<Json>> {
    let mut at = v;
    for k in path {
        at = at.as_object_mut()?.get_mut(k)?;
    }
    at.as_array_mut()
}

/// `Moment[]`, `[]/Comment[]`, `User/contactIdList`.
fn shown(path: &str) -> String {
    if path.is_empty() {
        "the answer".into()
    } else {
        format!("`{path}`")
    }
}

/// A list of the request (`[]`, `Table[]`, `Table-key[]`) pages with `count` and `page`; any
/// other array is a column's value, left out with `@column`.
fn advice(c: &Shortened, guide: Guide) -> String {
    if guide == Guide::Describe {
        return "call describe again with \"tables\" naming the few tables you need".into();
    }
    let key = c.path.rsplit('/').next().unwrap_or_default();
    if key.ends_with("[]") {
        let count = c.kept.max(1);
        format!(
            "ask for pages of at most {count}: \"{key}\":{{\"count\":{count},\"page\":1,…}} \
             (then page 2, 3, … until a page has fewer than {count}; add \"query\":2 and \
             \"total@\":\"/{}/total\" at the root to learn the total), or fewer columns with \
             \"@column\"",
            c.path
        )
    } else {
        "leave that column out (\"@column\" naming the others) or read it alone for one \
         row at a time"
            .to_string()
    }
}

fn note(whole: usize, max: usize, cuts: &[Shortened], guide: Guide) -> String {
    let mut out = format!(
        "This answer is {whole} bytes, more than mcp_max_answer_bytes ({max}) allows, so it was \
         cut:"
    );
    for c in cuts {
        out.push_str(&format!(
            " {} holds its first {} of {} items here; to read the rest, {}.",
            shown(&c.path),
            c.kept,
            c.had,
            advice(c, guide)
        ));
    }
    out
}

fn too_large(whole: usize, max: usize, cuts: &[Shortened]) -> String {
    let mut out = format!(
        "This answer is {whole} bytes, more than mcp_max_answer_bytes ({max}) allows, and no \
         part of it fits: ask for fewer columns (\"@column\") or fewer objects at once"
    );
    for c in cuts.iter().filter(|c| c.path.ends_with("[]")) {
        out.push_str(&format!(
            "; {} has {} items: ask for \"count\":1 there and page through it",
            shown(&c.path),
            c.had
        ));
    }
    out.push('.');
    out
}

/// The answer of a request whose text passed `limit` bytes before it was complete (it was not
/// read to the end): the list keys of the request, with what to ask instead.
pub(crate) fn unfinished(request: &Map<String, Json>, limit: usize, max: usize) -> String {
    let mut lists = Vec::new();
    list_keys(request, "", 0, &mut lists);
    let mut out = format!(
        "This answer passed {limit} bytes before it was complete (mcp_max_answer_bytes is {max}), \
         so it was not read to the end: ask for fewer rows at once"
    );
    if lists.is_empty() {
        out.push_str(" or fewer columns (\"@column\").");
    } else {
        out.push_str(&format!(
            " with \"count\" and \"page\" in {}, or fewer columns (\"@column\").",
            lists
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

fn list_keys(map: &Map<String, Json>, at: &str, depth: usize, out: &mut Vec<String>) {
    if depth >= MAX_WALK_DEPTH {
        return;
    }
    for (k, v) in map {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}/{k}")
        };
        if let Json::Object(inner) = v {
            if k.ends_with("[]") {
                out.push(path.clone());
            }
            list_keys(inner, &path, depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn moments(n: usize) -> Json {
        let items: Vec<Json> = (0..n)
            .map(|i| json!({"Moment": {"id": 1000 + i, "content": "x".repeat(200)}}))
            .collect();
        json!({"[]": items, "ok": true, "code": 200, "msg": "success"})
    }

    #[test]
    fn an_answer_within_the_cap_is_sent_whole() {
        let a = moments(3);
        assert_eq!(
            fit(&a, 1 << 20, Guide::Request),
            Fitted::Whole(a.to_string())
        );
    }

    #[test]
    fn a_long_list_keeps_its_first_items_and_the_note_says_how_to_page() {
        let a = moments(100);
        let Fitted::Cut { text, note } = fit(&a, 4096, Guide::Request) else {
            panic!("cut expected");
        };
        assert!(
            text.len() + note.len() <= 4096,
            "{} + {}",
            text.len(),
            note.len()
        );
        let cut: Json = serde_json::from_str(&text).expect("still JSON");
        let kept = cut["[]"].as_array().expect("list").len();
        assert!(kept > 0 && kept < 100, "{kept}");
        assert_eq!(cut["[]"][0], a["[]"][0], "the first items, in order");
        assert_eq!(cut["code"], 200);
        assert!(note.contains(&format!("first {kept} of 100")), "{note}");
        assert!(note.contains(&format!("\"count\":{kept}")), "{note}");
        assert!(note.contains("\"page\":1"), "{note}");
    }

    #[test]
    fn a_single_value_too_long_for_the_cap_is_refused_with_what_to_ask() {
        let a = json!({"User": {"id": 1, "name": "y".repeat(10_000)}, "code": 200});
        let Fitted::TooLarge(msg) = fit(&a, 2048, Guide::Request) else {
            panic!("too large expected");
        };
        assert!(msg.contains("@column"), "{msg}");
    }

    #[test]
    fn a_long_array_value_is_cut_with_column_advice() {
        let a = json!({"User": {"id": 1, "contactIdList": (0..5000).collect::<Vec<_>>()}});
        let Fitted::Cut { note, .. } = fit(&a, 4096, Guide::Request) else {
            panic!("cut expected");
        };
        assert!(note.contains("`User/contactIdList`"), "{note}");
        assert!(note.contains("leave that column out"), "{note}");
    }

    #[test]
    fn an_unfinished_answer_names_the_lists_of_its_request() {
        let r = json!({"[]": {"Moment": {}, "Comment[]": {"Comment": {}}}, "User[]": {}});
        let msg = unfinished(r.as_object().expect("object"), 1 << 19, 32768);
        assert!(msg.contains("`[]`") && msg.contains("`[]/Comment[]`") && msg.contains("`User[]`"));
    }

    /// A random answer: objects holding values, lists of objects and lists of numbers, a few
    /// levels deep.
    fn random_answer(rng: &mut apijet_testkit::rng::Rng, depth: u32) -> Json {
        let mut map = Map::new();
        for i in 0..1 + rng.below(4) {
            let key = match rng.below(4) {
                0 if depth < 2 => {
                    let items = (0..rng.below(25))
                        .map(|_| random_answer(rng, depth + 1))
                        .collect();
                    map.insert(format!("T{i}[]"), Json::Array(items));
                    continue;
                }
                1 if depth < 2 => {
                    map.insert(format!("T{i}"), random_answer(rng, depth + 1));
                    continue;
                }
                2 => format!("list{i}"),
                _ => format!("c{i}"),
            };
            let value = if key.starts_with("list") {
                Json::Array((0..rng.below(300)).map(Json::from).collect())
            } else {
                Json::String("v".repeat(rng.below(200) as usize))
            };
            map.insert(key, value);
        }
        Json::Object(map)
    }

    /// Whether every list of `cut` is a prefix of the list at the same place in `whole`, and
    /// everything else is equal.
    fn is_cut_of(cut: &Json, whole: &Json) -> bool {
        match (cut, whole) {
            (Json::Array(c), Json::Array(w)) => {
                c.len() <= w.len() && c.iter().zip(w).all(|(a, b)| is_cut_of(a, b))
            }
            (Json::Object(c), Json::Object(w)) => {
                c.len() == w.len()
                    && c.iter()
                        .all(|(k, v)| w.get(k).is_some_and(|wv| is_cut_of(v, wv)))
            }
            _ => cut == whole,
        }
    }

    #[test]
    fn every_fitted_answer_is_within_the_cap_and_a_cut_of_the_whole() {
        let mut rng = apijet_testkit::rng::Rng::new(28);
        let mut seen = [0usize; 3];
        for case in 0..300 {
            let answer = random_answer(&mut rng, 0);
            let max = 1024 + rng.below(8 << 10) as usize;
            match fit(&answer, max, Guide::Request) {
                Fitted::Whole(text) => {
                    seen[0] += 1;
                    assert!(text.len() <= max, "case {case}");
                    assert_eq!(text, answer.to_string(), "case {case}");
                }
                Fitted::Cut { text, note } => {
                    seen[1] += 1;
                    assert!(
                        text.len() + note.len() <= max,
                        "case {case}: {} + {}",
                        text.len(),
                        note.len()
                    );
                    let cut: Json = serde_json::from_str(&text).expect("JSON");
                    assert!(is_cut_of(&cut, &answer), "case {case}");
                    assert_ne!(cut, answer, "case {case}: something was cut");
                }
                Fitted::TooLarge(msg) => {
                    seen[2] += 1;
                    assert!(answer.to_string().len() > max, "case {case}");
                    assert!(msg.len() <= max, "case {case}");
                }
            }
        }
        // The cases reach every outcome, cuts most of all.
        assert!(seen[0] > 10 && seen[1] > 50 && seen[2] > 0, "{seen:?}");
    }
}
