//! Subscriptions of one shape, refetched as one read: the narrow multiplexing that stands in
//! until the planner's `ReadPlan` gives every read a shape with value slots (issue 18). Then
//! the root level's slots become a table of subscriber values joined into each statement, for
//! any request; here one form of request is covered, the one a live view of a record takes:
//!
//! - a GET whose first member is a table object chosen by `"id": value`, the one value that
//!   differs between the subscriptions of a shape (everything else, the visitor included, is
//!   the same);
//! - followed only by table objects and arrays (a record's author, its comments), which may
//!   refer to it and to each other.
//!
//! The subscriptions of a shape are read together as the items of one array, `"[]":
//! {"Moment": {…, "id{}": [every value]}, …}`, whose nested levels the reader already batches
//! (one statement per level, `batch.rs`); the answer is split by the first object's `id`, each
//! item becoming the answer of its subscriptions. What cannot be told apart this way (two rows
//! of one id, an item near a budget, a failed read) is read alone, as its GET is.
//!
//! The request is rewritten for the array, not planned here: references to the root's members
//! (`"userId@": "Moment/userId"`) become references into the item (`"[]/Moment/userId"`), and
//! the read's limits grow with the number of items (each item within the request's own).

use super::answer::Written;
use super::registry::{Query, Shared};
use crate::app::AppState;
use apijet_core::Method;
use apijet_exec::read::read;
use apijet_plan::reads::Reads;
use apijet_request::{is_table_key, Request};
use apijet_response::success;
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Subscriptions read together at most: the `IN` list of the first statement.
const CHUNK: usize = 1000;

/// The key of the array the subscriptions become items of.
const ITEMS: &str = "[]";

/// The value a shape's key holds in place of the varying `id`.
const SLOT: &str = "\u{0}slot\u{0}";

/// The shape of a query that can be multiplexed, or `None`.
pub fn shape(query: &Query) -> Option<String> {
    let (first, _) = slot(query)?;
    let mut map = query.map.clone();
    if let Some(Json::Object(t)) = map.get_mut(&first) {
        t.insert("id".into(), Json::String(SLOT.into()));
    }
    let body = serde_json::to_string(&map).ok()?;
    Some(format!("together\u{0}{:?}\u{0}{body}", query.visitor))
}

/// The first member's key and its `id`, when the query has the form this module reads
/// together.
fn slot(query: &Query) -> Option<(String, Json)> {
    if query.method != Method::Get {
        return None;
    }
    let mut members = query.map.iter();
    let (first, Json::Object(t)) = members.next()? else {
        return None;
    };
    if !is_table_key(first) || t.contains_key("id{}") {
        return None;
    }
    let id = t.get("id").filter(|v| v.is_number() || v.is_string())?;
    let rest_ok =
        members.all(|(k, v)| v.is_object() && k != ITEMS && (is_table_key(k) || k.ends_with("[]")));
    rest_ok.then(|| (first.clone(), id.clone()))
}

/// An id as the database compares it: numbers by value, a string holding a number as that
/// number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum IdKey {
    Int(i64),
    /// Any other number, by its bits (`-0.0` as `0.0`).
    Float(u64),
    Text(String),
}

fn number_key(f: f64) -> IdKey {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        IdKey::Int(f as i64)
    } else {
        IdKey::Float((f + 0.0).to_bits())
    }
}

fn id_key(v: &Json) -> Option<IdKey> {
    match v {
        Json::Number(n) => match n.as_i64() {
            Some(i) => Some(IdKey::Int(i)),
            None => n.as_f64().map(number_key),
        },
        Json::String(s) => Some(match s.trim().parse::<i64>() {
            Ok(i) => IdKey::Int(i),
            Err(_) => match s.trim().parse::<f64>() {
                Ok(f) if f.is_finite() => number_key(f),
                _ => IdKey::Text(s.clone()),
            },
        }),
        _ => None,
    }
}

/// `value` with every absolute reference to a root member (`"Moment/userId"`) pointed into
/// the array item instead (`"[]/Moment/userId"`). Relative references (`"/Moment/userId"`)
/// already resolve against the item.
fn into_item(value: &Json, roots: &[&str], depth: usize) -> Json {
    match value {
        Json::Object(m) if depth < 64 => Json::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Json::String(p) if k.ends_with('@') => {
                            let head = p.split('/').next().unwrap_or_default();
                            if !p.starts_with('/') && roots.contains(&head) {
                                Json::String(format!("{ITEMS}/{p}"))
                            } else {
                                v.clone()
                            }
                        }
                        other => into_item(other, roots, depth + 1),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The request that reads `ids` as the items of one array.
fn together(query: &Query, first: &str, ids: &[Json]) -> Map<String, Json> {
    let roots: Vec<&str> = query.map.keys().map(String::as_str).collect();
    let mut items = Map::new();
    items.insert("count".into(), Json::from(ids.len()));
    for (k, v) in &query.map {
        let mut v = into_item(v, &roots, 0);
        if k == first {
            if let Json::Object(t) = &mut v {
                t.remove("id");
                t.insert("id{}".into(), Json::Array(ids.to_vec()));
            }
        }
        items.insert(k.clone(), v);
    }
    let mut map = Map::new();
    map.insert(ITEMS.into(), Json::Object(items));
    map
}

/// What reading a shape's results together gave.
pub struct Together {
    /// The results it could not answer: each is read alone.
    pub alone: Vec<usize>,
    /// What the reads depended on.
    pub reads: Reads,
    /// How many reads ran.
    pub ran: usize,
}

/// Reads the results of one shape together, a chunk of them per read, each chunk a task of
/// its own (so that chunks use every core) as `permits` allow; each answer is published as
/// soon as its chunk is read.
pub async fn read_together(
    state: &Arc<AppState>,
    results: &Arc<[Arc<Shared>]>,
    permits: &Arc<tokio::sync::Semaphore>,
) -> Together {
    let Some((first, _)) = results.first().and_then(|r| slot(&r.query)) else {
        return Together {
            alone: (0..results.len()).collect(),
            reads: Reads::default(),
            ran: 0,
        };
    };
    let mut alone = Vec::new();
    let mut indexed: Vec<(usize, Json)> = Vec::with_capacity(results.len());
    for (i, r) in results.iter().enumerate() {
        match slot(&r.query) {
            Some((_, id)) => indexed.push((i, id)),
            None => alone.push(i),
        }
    }
    let first: Arc<str> = first.into();
    let tasks = indexed.chunks(CHUNK).map(|chunk| {
        let (state, results, permits, first) = (
            Arc::clone(state),
            Arc::clone(results),
            Arc::clone(permits),
            Arc::clone(&first),
        );
        let chunk = chunk.to_vec();
        tokio::spawn(async move {
            let _permit = permits.acquire().await;
            read_chunk(&state, &results, &first, &chunk).await
        })
    });
    let chunks = futures_util::future::join_all(tasks.collect::<Vec<_>>()).await;
    let mut all = Reads::default();
    let ran = chunks.len();
    for (chunk, done) in indexed.chunks(CHUNK).zip(chunks) {
        match done {
            Ok((unanswered, reads)) => {
                alone.extend(unanswered);
                all.merge(&reads);
            }
            // The task failed: its results are read alone.
            Err(_) => alone.extend(chunk.iter().map(|(i, _)| *i)),
        }
    }
    Together {
        alone,
        reads: all,
        ran,
    }
}

/// One chunk read together: publishes what it could answer; returns the rest and what the
/// read depended on.
async fn read_chunk(
    state: &AppState,
    results: &[Arc<Shared>],
    first: &str,
    chunk: &[(usize, Json)],
) -> (Vec<usize>, Reads) {
    let ids: Vec<Json> = chunk.iter().map(|(_, id)| id.clone()).collect();
    let query = &results[chunk[0].0].query;
    let (answer, reads) = read_items(state, query, first, &ids).await;
    let mut unanswered = Vec::new();
    let Some(items) = answer else {
        unanswered.extend(chunk.iter().map(|(i, _)| *i));
        return (unanswered, reads);
    };
    // Two rows of one id may have taken the place of another id's row in the page.
    let shared_ids = items.values().any(Option::is_none);
    for (i, id) in chunk {
        let answer = match id_key(id).and_then(|k| items.get(&k)) {
            Some(Some(item)) => within_budget(state, item),
            // No row: the first-child rule answers nothing but the envelope.
            None if !shared_ids => Some(Written::of(success(Map::new(), false))),
            // Two items of one id: only the item's own read can tell.
            _ => None,
        };
        match answer {
            Some(written) => {
                results[*i].publish(written);
            }
            None => unanswered.push(*i),
        }
    }
    (unanswered, reads)
}

/// The answer of one item as its GET gives it, unless it is near a budget of one answer:
/// the read together counted its budgets over every item, so such an item is read alone.
fn within_budget(state: &AppState, item: &Map<String, Json>) -> Option<Written> {
    let answer = success(item.clone(), false);
    let opts = &state.options;
    let rows = crate::observe::rows_in(&answer, 0) as usize;
    let written = Written::of(answer);
    (rows * 2 <= opts.max_rows && written.text.len() * 2 <= opts.max_answer_bytes)
        .then_some(written)
}

/// One read of `ids` as array items: the items by their id (`None` for an id two items
/// share), or `None` when the read failed.
async fn read_items(
    state: &AppState,
    query: &Query,
    first: &str,
    ids: &[Json],
) -> (Option<HashMap<IdKey, Option<Map<String, Json>>>>, Reads) {
    let reads = Mutex::new(Reads::default());
    let map = together(query, first, ids);
    let mut options = state.options.clone();
    let n = ids.len();
    options.max_count = options.max_count.max(n as u64);
    options.expr.max_list_items = options.expr.max_list_items.max(n);
    options.max_depth += 1;
    options.max_rows = options.max_rows.saturating_mul(n);
    options.max_answer_bytes = options.max_answer_bytes.saturating_mul(n);
    let visitor = query.visitor.as_ref();
    let run = async {
        let req = Request::from_map(map).ok()?;
        let snapshot = state.snapshot();
        let reader = state.reader(Method::Get);
        let mut env = state.read_env(reader, Method::Get, visitor, &snapshot);
        env.options = &options;
        env.reads = Some(&reads);
        read(&req, &env).await.ok()
    };
    let mut watch = apijet_exec::cancel::current();
    if visitor.is_none() {
        watch = watch.with_timeout(state.anonymous.timeout, "anonymous_statement_timeout_ms");
    }
    let outcome = apijet_exec::cancel::watched(watch, run).await;
    let reads = reads.into_inner().unwrap_or_else(|e| e.into_inner());
    let Some(mut outcome) = outcome else {
        return (None, reads);
    };
    let mut items: HashMap<IdKey, Option<Map<String, Json>>> = HashMap::new();
    if let Some(Json::Array(list)) = outcome.results.remove(ITEMS) {
        for item in list {
            let Json::Object(item) = item else { continue };
            let Some(key) = item.get(first).and_then(|t| t.get("id")).and_then(id_key) else {
                // The first object answers no id (`@column` left it out): nothing to split by.
                return (None, reads);
            };
            match items.get_mut(&key) {
                Some(seen) => *seen = None,
                None => {
                    items.insert(key, Some(item));
                }
            }
        }
    }
    (Some(items), reads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn query(v: Json) -> Query {
        Query {
            method: Method::Get,
            map: v.as_object().cloned().unwrap_or_default(),
            visitor: None,
        }
    }

    #[test]
    fn the_shape_leaves_out_only_the_first_objects_id() {
        let a = query(json!({"Moment": {"id": 1}, "User": {"id@": "Moment/userId"}}));
        let b = query(json!({"Moment": {"id": 2}, "User": {"id@": "Moment/userId"}}));
        let c =
            query(json!({"Moment": {"id": 2}, "User": {"id@": "Moment/userId", "@column": "id"}}));
        assert_eq!(shape(&a), shape(&b));
        assert_ne!(shape(&a), shape(&c));
        // Forms it does not read together.
        for other in [
            json!({"Moment": {"userId": 1}}),
            json!({"Moment": {"id": 1}, "format": true}),
            json!({"Moment": {"id": 1}, "n@": "Moment/id"}),
            json!({"Moment": {"id": 1}, "[]": {"User": {}}}),
            json!({"[]": {"Moment": {"id": 1}}}),
        ] {
            assert_eq!(shape(&query(other.clone())), None, "{other}");
        }
    }

    #[test]
    fn references_to_the_root_point_into_the_item() {
        let q = query(json!({
            "Moment": {"id": 7, "@column": "id,userId"},
            "User": {"id@": "Moment/userId", "x@": "/Moment/id"},
            "Comment[]": {"count": 3, "Comment": {"momentId@": "Moment/id", "toId@": "Comment[]/x"}}
        }));
        let m = together(&q, "Moment", &[json!(7), json!(8)]);
        assert_eq!(
            Json::Object(m),
            json!({"[]": {
                "count": 2,
                "Moment": {"@column": "id,userId", "id{}": [7, 8]},
                "User": {"id@": "[]/Moment/userId", "x@": "/Moment/id"},
                "Comment[]": {"count": 3, "Comment": {"momentId@": "[]/Moment/id", "toId@": "[]/Comment[]/x"}}
            }})
        );
    }

    #[test]
    fn ids_compare_as_the_database_does() {
        assert_eq!(id_key(&json!(12)), id_key(&json!("12")));
        assert_eq!(id_key(&json!(12)), id_key(&json!(12.0)));
        assert_ne!(id_key(&json!(12)), id_key(&json!("a")));
        assert_eq!(id_key(&json!(null)), None);
    }
}
