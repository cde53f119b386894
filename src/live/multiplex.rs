//! Subscriptions of one plan shape, refetched as one read: a narrow multiplexing, for the form
//! of request a live view of a record takes (a general one would join the root level's slot
//! values into each statement as a table of values):
//!
//! - a GET whose first member is a table object chosen by `"id": value`, whose slot is the one
//!   value that differs between the subscriptions read together (everything else, the other
//!   slots' values and the visitor included, is the same);
//! - followed only by table objects and arrays (a record's author, its comments), which may
//!   refer to it and to each other.
//!
//! The subscriptions of a shape are read together as the items of one array, `"[]":
//! {"Moment": {…, "id{}": [every value]}, …}`, whose nested levels the reader already batches
//! (one statement per level, `batch.rs`); the answer is split by the first object's `id`, each
//! item becoming the answer of its subscriptions. What cannot be told apart this way (two rows
//! of one id, an item near a budget, a failed read) is read alone, as its GET is.
//!
//! The array's request is made from the subscriptions' shared shape ([`together`]) and goes
//! through the pipeline's stages as a read together (`Purpose::Together`), whose limits grow
//! with the number of items (each item within the request's own).

use super::answer::Written;
use super::registry::{Query, Shared};
use super::{together, Live};
use crate::observe::Facts;
use crate::pipeline::plan::{Action, Purpose};
use crate::pipeline::prepare::Shaped;
use crate::pipeline::run::Origin;
use apijet_core::Method;
use apijet_plan::read::Dependencies;
use apijet_response::success;
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::sync::Arc;

/// Subscriptions read together at most: the `IN` list of the first statement.
const CHUNK: usize = 1000;

/// What the subscriptions read together share, and the query's own `id`: `None` when the
/// query is not of the form read together. The subscriptions of one plan shape share the
/// request but for their values; those whose values differ only in the first object's `id`
/// slot (and that have the same visitor) are read together.
fn together_key(query: &Query) -> Option<(String, Json)> {
    let form = together::form(query)?;
    let id = query.read.values.get(form.slot)?.clone();
    id_key(&id)?;
    let mut others = query.read.values.clone();
    others[form.slot] = Json::Null;
    let others = serde_json::to_string(&others).ok()?;
    Some((
        format!("{:?}\u{0}{}\u{0}{others}", query.visitor(), form.first),
        id,
    ))
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

/// What reading a shape's results together gave.
pub struct Together {
    /// The results it could not answer: each is read alone.
    pub alone: Vec<usize>,
    /// What the plans it ran depend on.
    pub deps: Dependencies,
    /// How many reads ran.
    pub ran: usize,
}

/// Reads the results of one shape together, one group of results that differ only in their
/// first object's `id` at a time, a chunk of a group per read, each chunk a task of its own (so
/// that chunks use every core) as `permits` allow; each answer is published as soon as its
/// chunk is read.
pub async fn read_together(
    live: &Arc<Live>,
    results: &Arc<[Arc<Shared>]>,
    permits: &Arc<tokio::sync::Semaphore>,
) -> Together {
    let mut alone = Vec::new();
    let mut groups: HashMap<String, Vec<(usize, Json)>> = HashMap::new();
    for (i, r) in results.iter().enumerate() {
        match together_key(&r.query) {
            Some((key, id)) => groups.entry(key).or_default().push((i, id)),
            None => alone.push(i),
        }
    }
    let mut chunks: Vec<Vec<(usize, Json)>> = Vec::new();
    for (_, group) in groups {
        if group.len() < 2 {
            alone.extend(group.iter().map(|(i, _)| *i));
            continue;
        }
        chunks.extend(group.chunks(CHUNK).map(<[_]>::to_vec));
    }
    let tasks = chunks.iter().map(|chunk| {
        let (live, results, permits) = (Arc::clone(live), Arc::clone(results), Arc::clone(permits));
        let chunk = chunk.clone();
        tokio::spawn(async move {
            let _permit = permits.acquire().await;
            read_chunk(&live, &results, &chunk).await
        })
    });
    let done = futures_util::future::join_all(tasks.collect::<Vec<_>>()).await;
    let mut deps = Dependencies::default();
    let ran = done.len();
    for (chunk, done) in chunks.iter().zip(done) {
        match done {
            Ok((unanswered, d)) => {
                alone.extend(unanswered);
                deps.merge(&d);
            }
            // The task failed: its results are read alone.
            Err(_) => alone.extend(chunk.iter().map(|(i, _)| *i)),
        }
    }
    Together { alone, deps, ran }
}

/// One chunk read together: publishes what it could answer; returns the rest and what the
/// read's plan depends on.
async fn read_chunk(
    live: &Live,
    results: &[Arc<Shared>],
    chunk: &[(usize, Json)],
) -> (Vec<usize>, Dependencies) {
    let ids: Vec<Json> = chunk.iter().map(|(_, id)| id.clone()).collect();
    let query = &results[chunk[0].0].query;
    let mut unanswered = Vec::new();
    let Some(form) = together::form(query) else {
        unanswered.extend(chunk.iter().map(|(i, _)| *i));
        return (unanswered, Dependencies::default());
    };
    let (answer, deps) = read_items(live, query, &form, &ids).await;
    let Some(items) = answer else {
        unanswered.extend(chunk.iter().map(|(i, _)| *i));
        return (unanswered, deps);
    };
    // Two rows of one id may have taken the place of another id's row in the page.
    let shared_ids = items.values().any(Option::is_none);
    for (i, id) in chunk {
        let answer = match id_key(id).and_then(|k| items.get(&k)) {
            Some(Some(item)) => within_budget(live, item),
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
    (unanswered, deps)
}

/// The answer of one item as its GET gives it, unless it is near a budget of one answer:
/// the read together counted its budgets over every item, so such an item is read alone.
fn within_budget(live: &Live, item: &Map<String, Json>) -> Option<Written> {
    let answer = success(item.clone(), false);
    let opts = &live.pipeline.options;
    let rows = crate::observe::rows_in(&answer, 0) as usize;
    let written = Written::of(answer);
    (rows * 2 <= opts.max_rows && written.text.len() * 2 <= opts.max_answer_bytes)
        .then_some(written)
}

/// The items read together, by their id (`None` for an id two items share).
type Items = HashMap<IdKey, Option<Map<String, Json>>>;

/// One read of `ids` as array items: the items by their id, or `None` when the read failed;
/// and what its plan depends on.
async fn read_items(
    live: &Live,
    query: &Query,
    form: &together::Form,
    ids: &[Json],
) -> (Option<Items>, Dependencies) {
    let pipeline = &live.pipeline;
    let first = form.first.as_str();
    let mut deps = Dependencies::default();
    let read = async {
        let (req, values) = together::request(&query.read.req, form.slot, &query.read.values, ids)?;
        let shaped = Shaped {
            method: Method::Get,
            req,
            values,
        };
        let together = Purpose::Together { items: ids.len() };
        let snapshot = pipeline.snapshot();
        let action = pipeline
            .plan_read(&snapshot, &shaped, &query.client, together)
            .ok()?;
        deps = action.plan.dependencies().clone();
        let action = Action::Read(action);
        let mut facts = Facts::default();
        let answered = pipeline.run(action, &query.client, Origin::Refetch, &mut facts);
        answered.await.ok()?.into_json().ok()
    };
    let Some(Json::Object(mut answer)) = read.await else {
        return (None, deps);
    };
    let mut items: Items = HashMap::new();
    if let Some(Json::Array(list)) = answer.remove(together::ITEMS) {
        for item in list {
            let Json::Object(item) = item else { continue };
            let Some(key) = item.get(first).and_then(|t| t.get("id")).and_then(id_key) else {
                // The first object answers no id (`@column` left it out): nothing to split by.
                return (None, deps);
            };
            match items.get_mut(&key) {
                Some(seen) => *seen = None,
                None => {
                    items.insert(key, Some(item));
                }
            }
        }
    }
    (Some(items), deps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn query(v: Json) -> Query {
        Query::parsed(v)
    }

    #[test]
    fn subscriptions_that_differ_only_in_the_first_objects_id_are_read_together() {
        let a = query(json!({"Moment": {"id": 1}, "User": {"id@": "Moment/userId"}}));
        let b = query(json!({"Moment": {"id": 2}, "User": {"id@": "Moment/userId"}}));
        let c =
            query(json!({"Moment": {"id": 2}, "User": {"id@": "Moment/userId", "@column": "id"}}));
        let d = query(json!({"Moment": {"id": 2, "userId": 3}}));
        let e = query(json!({"Moment": {"id": 2, "userId": 4}}));
        assert_eq!(a.shape, b.shape);
        assert_ne!(a.shape, c.shape);
        let key = |q: &Query| together_key(q).map(|(k, _)| k);
        assert_eq!(key(&a), key(&b));
        assert_eq!(together_key(&b).map(|(_, id)| id), Some(json!(2)));
        // One shape, but another value than the id's differs.
        assert_eq!(d.shape, e.shape);
        assert_ne!(key(&d), key(&e));
        // Forms it does not read together.
        for other in [
            json!({"Moment": {"userId": 1}}),
            json!({"Moment": {"id": 1}, "format": true}),
            json!({"Moment": {"id": 1}, "n@": "Moment/id"}),
            json!({"Moment": {"id": 1}, "[]": {"User": {}}}),
            json!({"[]": {"Moment": {"id": 1}}}),
        ] {
            assert_eq!(key(&query(other.clone())), None, "{other}");
        }
    }

    #[test]
    fn ids_compare_as_the_database_does() {
        assert_eq!(id_key(&json!(12)), id_key(&json!("12")));
        assert_eq!(id_key(&json!(12)), id_key(&json!(12.0)));
        assert_ne!(id_key(&json!(12)), id_key(&json!("a")));
        assert_eq!(id_key(&json!(null)), None);
    }
}
