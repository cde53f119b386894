//! Members read for all items of their array by one statement (planned in
//! `apijet_plan::read::BatchPlan`): the statement runs with every item's linked values, and
//! its rows are handed back to their items.
//!
//! `@explain` does not change that: it answers the statements that ran. Every item still
//! carries the `@explain` of its object, as item by item; the first item it answered reports
//! the batched statement, the others repeat it with `"repeat": true` (it ran once).

use super::Reader;
use crate::ExecError;
use apijet_plan::read::{ArrayPlan, BatchKind, BatchPlan, Link};
use apijet_plan::ValueSource;
use apijet_sql::render;
use serde_json::{json, Map, Value as Json};
use std::collections::{HashMap, HashSet};

/// The rows of one member for every item, or `None` when the member runs item by item.
pub(super) type PerItem = Option<Vec<Option<Json>>>;

/// The text two link values share when they are equal as the database compared them: numbers
/// by value (`1` = `1.0`), a string equal to a number's text equal to that number.
fn match_key<'a>(values: impl Iterator<Item = Option<&'a Json>>) -> Option<String> {
    use std::fmt::Write;
    let mut key = String::new();
    for v in values {
        match v? {
            Json::Number(n) => match n.as_f64() {
                Some(f) => write!(key, "{f}"),
                None => write!(key, "{n}"),
            },
            Json::String(s) => write!(key, "{s}"),
            Json::Null => return None,
            other => write!(key, "\u{1}{other}"),
        }
        .ok()?;
        key.push('\u{0}');
    }
    Some(key)
}

/// Row positions by the values of their linked columns: each item finds its rows in one
/// lookup, so handing N rows to M items costs N + M, not N × M.
fn index_rows(rows: &[Map<String, Json>], links: &[Link]) -> HashMap<String, Vec<usize>> {
    let mut index: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        if let Some(k) = match_key(links.iter().map(|l| row.get(&l.vice))) {
            index.entry(k).or_default().push(i);
        }
    }
    index
}

fn rows_of<'a>(
    index: &'a HashMap<String, Vec<usize>>,
    links: &[Link],
    main: &Map<String, Json>,
) -> &'a [usize] {
    match_key(links.iter().map(|l| main.get(&l.main)))
        .and_then(|k| index.get(&k))
        .map_or(&[], Vec::as_slice)
}

/// Values of the linked main columns for every item (each list without repeats), and which
/// items have all of them.
fn link_values(links: &[Link], mains: &[Map<String, Json>]) -> (Vec<Json>, Vec<bool>) {
    let mut values = vec![Vec::new(); links.len()];
    let mut seen = vec![HashSet::new(); links.len()];
    let mut present = Vec::with_capacity(mains.len());
    for main in mains {
        let vals: Vec<Option<&Json>> = links
            .iter()
            .map(|l| main.get(&l.main).filter(|v| !v.is_null()))
            .collect();
        let ok = vals.iter().all(Option::is_some);
        present.push(ok);
        if ok {
            for (i, v) in vals.into_iter().flatten().enumerate() {
                if seen[i].insert(match_key(std::iter::once(Some(v)))) {
                    values[i].push(v.clone());
                }
            }
        }
    }
    (values.into_iter().map(Json::Array).collect(), present)
}

/// The `@explain` of one batched statement, for each item it answered in turn.
struct Explained {
    json: Json,
    given: bool,
}

impl Explained {
    fn new(json: Json) -> Explained {
        Explained { json, given: false }
    }

    /// As the statement ran for the first item; marked `"repeat": true` for the others.
    fn next(&mut self) -> Json {
        let mut e = self.json.clone();
        if std::mem::replace(&mut self.given, true) {
            if let Json::Object(m) = &mut e {
                m.insert("repeat".into(), Json::Bool(true));
            }
        }
        e
    }
}

/// `@explain` first among an object's keys, as on an object read by itself.
fn explain_first(obj: Map<String, Json>, explained: Json) -> Map<String, Json> {
    let mut first = Map::with_capacity(obj.len() + 1);
    first.insert("@explain".into(), explained);
    first.extend(obj);
    first
}

fn strip(
    mut row: Map<String, Json>,
    added: &[String],
    echoes: &[(String, Json)],
) -> Map<String, Json> {
    for a in added {
        row.remove(a);
    }
    row.remove("__rank");
    for (k, v) in echoes {
        row.insert(k.clone(), v.clone());
    }
    row
}

impl Reader<'_> {
    /// For each member of an array item after its main object, its rows for every item when
    /// the plan batched it.
    pub(super) async fn batch_members(
        &mut self,
        plan: &ArrayPlan,
        mains: &[Map<String, Json>],
    ) -> Result<Vec<PerItem>, ExecError> {
        let mut out = Vec::with_capacity(plan.batches.len());
        for batch in &plan.batches {
            let per_item = match batch {
                None => None,
                Some(Err(e)) => return Err(e.clone().into()),
                Some(Ok(b)) => Some(self.batch(b, mains).await?),
            };
            out.push(per_item);
        }
        Ok(out)
    }

    /// The rows of the member `b` for each of `mains`, in their order.
    pub(super) async fn batch(
        &mut self,
        b: &BatchPlan,
        mains: &[Map<String, Json>],
    ) -> Result<Vec<Option<Json>>, ExecError> {
        let (values, present) = link_values(&b.links, mains);
        if values
            .iter()
            .any(|v| v.as_array().is_none_or(Vec::is_empty))
        {
            return Ok(vec![None; mains.len()]);
        }
        let mut parents = |v: ValueSource<'_>| match v {
            ValueSource::Parent(i) => values.get(i).cloned(),
            _ => None,
        };
        let Some(select) = b.plan.select(self.env.values, &mut parents)? else {
            return Ok(vec![None; mains.len()]);
        };
        let explain = b.plan.explain && !self.quiet_explain.contains(&b.table_key);
        match &b.kind {
            BatchKind::Object => {
                let stmt = render(self.env.dialect, &select);
                let rows = self.rows(&stmt, &b.plan.json_outputs).await?;
                let mut explained = match explain {
                    true => Some(Explained::new(self.explain(&stmt).await?)),
                    false => None,
                };
                let index = index_rows(&rows, &b.links);
                let mut placed_rows = 0;
                let mut placed: Vec<Option<Json>> = Vec::with_capacity(mains.len());
                for (main, ok) in mains.iter().zip(present) {
                    let row = rows_of(&index, &b.links, main)
                        .first()
                        .filter(|_| ok)
                        .map(|&i| strip(rows[i].clone(), &b.added, &b.plan.echoes));
                    placed_rows += usize::from(row.is_some());
                    placed.push(match (row, explained.as_mut()) {
                        (Some(obj), Some(e)) => Some(Json::Object(explain_first(obj, e.next()))),
                        (Some(obj), None) => Some(Json::Object(obj)),
                        // With @explain an object answers its statement even when no row
                        // matched.
                        (None, Some(e)) if ok => Some(json!({ "@explain": e.next() })),
                        (None, _) => None,
                    });
                }
                self.hold_copies(placed_rows, &rows)?;
                Ok(placed)
            }
            BatchKind::List {
                item_key,
                unwrapped,
                extract,
                count,
                page,
                key_order,
            } => {
                let partition: Vec<String> = b.links.iter().map(|l| l.vice.clone()).collect();
                let windowed =
                    select.per_parent_page(&partition, *count, *page, key_order.as_deref());
                let stmt = render(self.env.dialect, &windowed);
                let rows = self.rows(&stmt, &b.plan.json_outputs).await?;
                let mut explained = match explain {
                    true => Some(Explained::new(self.explain(&stmt).await?)),
                    false => None,
                };
                let wrap = |obj: Json| match unwrapped {
                    true => obj,
                    false => json!({ item_key.clone(): obj }),
                };
                let index = index_rows(&rows, &b.links);
                let placed_rows: usize = mains
                    .iter()
                    .zip(&present)
                    .filter(|(_, ok)| **ok)
                    .map(|(main, _)| rows_of(&index, &b.links, main).len())
                    .sum();
                self.hold_copies(placed_rows, &rows)?;
                let mut lists: Vec<Option<Json>> = Vec::with_capacity(mains.len());
                for (main, ok) in mains.iter().zip(present) {
                    if !ok {
                        lists.push(None);
                        continue;
                    }
                    let mut items = Vec::new();
                    for (n, &i) in rows_of(&index, &b.links, main).iter().enumerate() {
                        let mut obj = strip(rows[i].clone(), &b.added, &b.plan.echoes);
                        if let Some(e) = explained.as_mut().filter(|_| n == 0) {
                            // On the first row of each list, as item by item (extracted
                            // columns never batch with @explain).
                            obj = explain_first(obj, e.next());
                        }
                        let obj = Json::Object(obj);
                        items.push(if *unwrapped {
                            extract
                                .iter()
                                .fold(obj, |v, seg| v.get(seg).cloned().unwrap_or(Json::Null))
                        } else {
                            wrap(obj)
                        });
                    }
                    if let (true, Some(e)) = (items.is_empty(), explained.as_mut()) {
                        // No row: the statement is still answered, in the list's shape.
                        items.push(wrap(json!({ "@explain": e.next() })));
                    }
                    lists.push((!items.is_empty()).then_some(Json::Array(items)));
                }
                Ok(lists)
            }
        }
    }
}
