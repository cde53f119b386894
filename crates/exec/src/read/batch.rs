//! One statement per nesting level instead of one per item.
//!
//! A list of N moments, each with its author (`"User": {"id@": "/Moment/userId"}`) and its
//! first comments (`"Comment[]": {"count": 5, "Comment": {"momentId@": "[]/Moment/id"}}`),
//! would cost 1 + 2N statements item by item, as the reference runs it. When a member of the
//! item refers only to the item's main object by equality, its rows for every item come from
//! one statement instead: `id IN (…all authors…)` for an object, and for a nested list a
//! `row_number() OVER (PARTITION BY momentId …)` window that keeps exactly `count` rows per
//! parent from page `page`. The rows are then handed back to their items. Anything else
//! (functions, children, aggregates, joins, totals) keeps the item-by-item path.
//!
//! `@explain` does not change that: it answers the statements that ran. Every item still
//! carries the `@explain` of its object, as item by item; the first item it answered reports
//! the batched statement, the others repeat it with `"repeat": true` (it ran once).

use super::Reader;
use crate::ExecError;
use apijet_plan::array::{self, QueryMode};
use apijet_plan::TablePlan;
use apijet_request::{ArrayObject, ConditionKey, Logic, Member, Node, Op, TableEntry, TableObject};
use apijet_sql::render;
use serde_json::{json, Map, Value as Json};
use std::collections::{HashMap, HashSet};

/// A reference of a member to its item's main object: `vice = main`.
struct Link {
    vice: String,
    main: String,
}

/// The rows of one member for every item, or `None` when the member must run item by item.
pub(super) type PerItem = Option<Vec<Option<Json>>>;

/// The array path as the client writes it: without item indices (`[]/0/Comment[]` → `[]/Comment[]`).
fn template(path: &str) -> String {
    path.split('/')
        .filter(|s| s.parse::<usize>().is_err())
        .collect::<Vec<_>>()
        .join("/")
}

/// The links of `t`, when every reference of it is `column@: <main>/<column>` by equality and
/// nothing else in it needs per-item work.
fn links(t: &TableObject, main_key: &str, paths: &[String]) -> Option<Vec<Link>> {
    let mut out = Vec::new();
    for e in &t.entries {
        match e {
            TableEntry::RefCondition { key, path } => {
                if key.op != Op::Eq || key.logic != Logic::Default || key.length.is_some() {
                    return None;
                }
                let main = paths.iter().find_map(|p| path.strip_prefix(p.as_str()))?;
                let main = main.strip_prefix(main_key)?.strip_prefix('/')?;
                if main.contains('/') {
                    return None;
                }
                out.push(Link {
                    vice: key.column.clone(),
                    main: main.to_string(),
                });
            }
            TableEntry::Child(_) | TableEntry::Function { .. } | TableEntry::FromSubquery(_) => {
                return None
            }
            _ => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `t` with its references replaced by `IN (every item's value)`, and the linked columns added
/// to `@column` when missing (they are taken out of the answers again).
fn in_object(
    t: &TableObject,
    links: &[Link],
    values: &[Vec<Json>],
) -> Result<(TableObject, Vec<String>), ExecError> {
    let mut entries = Vec::with_capacity(t.entries.len());
    let mut added = Vec::new();
    for e in &t.entries {
        match e {
            TableEntry::RefCondition { key, .. } => {
                let i = links.iter().position(|l| l.vice == key.column).unwrap_or(0);
                let mut seen = HashSet::new();
                let distinct: Vec<Json> = values[i]
                    .iter()
                    .filter(|v| seen.insert(match_key(std::iter::once(Some(*v)))))
                    .cloned()
                    .collect();
                let key = ConditionKey::parse(&format!("{}{{}}", key.column))
                    .map_err(|e| ExecError::Invalid(e.to_string()))?;
                entries.push(TableEntry::Condition {
                    key,
                    value: Json::Array(distinct),
                });
            }
            TableEntry::Keyword { name, value } if name == "column" => {
                let mut text = value.as_str().unwrap_or_default().to_string();
                for l in links {
                    let listed = text.split([',', ';']).any(|item| item.trim() == l.vice);
                    if !listed && !added.contains(&l.vice) {
                        text.push(if text.contains(';') || text.contains('(') {
                            ';'
                        } else {
                            ','
                        });
                        text.push_str(&l.vice);
                        added.push(l.vice.clone());
                    }
                }
                entries.push(TableEntry::Keyword {
                    name: name.clone(),
                    value: Json::String(text),
                });
            }
            other => entries.push(other.clone()),
        }
    }
    Ok((
        TableObject {
            key: t.key.clone(),
            entries,
        },
        added,
    ))
}

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
    /// For each member of an array item, its rows for every item when one statement can give
    /// them (see the module comment).
    pub(super) async fn batch_members(
        &mut self,
        members: &[Member],
        main_key: &str,
        arr_path: &str,
        mains: &[Map<String, Json>],
    ) -> Result<Vec<PerItem>, ExecError> {
        let mut out = Vec::with_capacity(members.len());
        for m in members {
            let per_item = match &m.node {
                Node::Table(t) => {
                    let paths = [format!("/{}", ""), format!("{}/", template(arr_path))];
                    self.batch_table(t, main_key, &paths, mains).await?
                }
                Node::Array(a) => {
                    self.batch_array(a, &m.key, main_key, arr_path, mains)
                        .await?
                }
                _ => None,
            };
            out.push(per_item);
        }
        Ok(out)
    }

    /// Values of the linked main columns per item; `None` for an item missing one.
    fn link_values(links: &[Link], mains: &[Map<String, Json>]) -> (Vec<Vec<Json>>, Vec<bool>) {
        let mut values = vec![Vec::new(); links.len()];
        let mut present = Vec::with_capacity(mains.len());
        for main in mains {
            let vals: Vec<Option<&Json>> = links
                .iter()
                .map(|l| main.get(&l.main).filter(|v| !v.is_null()))
                .collect();
            let ok = vals.iter().all(Option::is_some);
            present.push(ok);
            if ok {
                for (i, v) in vals.into_iter().enumerate() {
                    values[i].extend(v.cloned());
                }
            }
        }
        (values, present)
    }

    async fn batch_table(
        &mut self,
        t: &TableObject,
        main_key: &str,
        paths: &[String],
        mains: &[Map<String, Json>],
    ) -> Result<PerItem, ExecError> {
        let Some(links) = links(t, main_key, paths) else {
            return Ok(None);
        };
        let probe = TablePlan::new(t, &self.ctx())?;
        if probe.drop
            || !probe.procedures.is_empty()
            || probe.aggregate
            || !probe.group.is_empty()
            || self.env.method.is_count()
        {
            return Ok(None);
        }
        let explain = probe.explain && !self.quiet_explain.contains(&t.key.text());
        let (values, present) = Self::link_values(&links, mains);
        if values.iter().any(Vec::is_empty) {
            return Ok(Some(vec![None; mains.len()]));
        }
        let (obj, added) = in_object(t, &links, &values)?;
        let plan = TablePlan::new(&obj, &self.ctx())?;
        let Some(select) = plan.select(self.env.values, &mut |_| None)? else {
            return Ok(Some(vec![None; mains.len()]));
        };
        let stmt = render(self.env.dialect, &select);
        let rows = self.rows(&stmt, &plan.json_outputs).await?;
        let mut explained = match explain {
            true => Some(Explained::new(self.explain(&stmt).await?)),
            false => None,
        };
        let index = index_rows(&rows, &links);
        let mut placed_rows = 0;
        let mut placed: Vec<Option<Json>> = Vec::with_capacity(mains.len());
        for (main, ok) in mains.iter().zip(present) {
            let row = rows_of(&index, &links, main)
                .first()
                .filter(|_| ok)
                .map(|&i| strip(rows[i].clone(), &added, &plan.echoes));
            placed_rows += usize::from(row.is_some());
            placed.push(match (row, explained.as_mut()) {
                (Some(obj), Some(e)) => Some(Json::Object(explain_first(obj, e.next()))),
                (Some(obj), None) => Some(Json::Object(obj)),
                // With @explain an object answers its statement even when no row matched.
                (None, Some(e)) if ok => Some(json!({ "@explain": e.next() })),
                (None, _) => None,
            });
        }
        self.hold_copies(placed_rows, &rows)?;
        Ok(Some(placed))
    }

    async fn batch_array(
        &mut self,
        a: &ArrayObject,
        key: &str,
        main_key: &str,
        arr_path: &str,
        mains: &[Map<String, Json>],
    ) -> Result<PerItem, ExecError> {
        let [item] = a.items.members.as_slice() else {
            return Ok(None);
        };
        let Node::Table(t) = &item.node else {
            return Ok(None);
        };
        if a.join.is_some()
            || !matches!(
                self.env.method,
                apijet_core::Method::Get | apijet_core::Method::Gets
            )
        {
            return Ok(None);
        }
        let opts = self.env.options;
        let paging = array::paging(
            a,
            &format!("{arr_path}/{key}"),
            opts.max_count,
            opts.max_page,
        )?;
        if paging.mode != QueryMode::Rows {
            return Ok(None);
        }
        // A nested list's main table refers outward by absolute path only.
        let paths = [format!("{}/", template(arr_path))];
        let Some(links) = links(t, main_key, &paths) else {
            return Ok(None);
        };
        let probe = TablePlan::new(t, &self.ctx())?;
        if probe.drop
            || !probe.procedures.is_empty()
            || probe.aggregate
            || !probe.group.is_empty()
            || probe.distinct
            || (probe.explain && !a.key.extract.is_empty())
        {
            return Ok(None);
        }
        let (values, present) = Self::link_values(&links, mains);
        if values.iter().any(Vec::is_empty) {
            return Ok(Some(vec![None; mains.len()]));
        }
        let (obj, added) = in_object(t, &links, &values)?;
        let plan = TablePlan::new(&obj, &self.ctx())?;
        let Some(select) = plan.select(self.env.values, &mut |_| None)? else {
            return Ok(Some(vec![None; mains.len()]));
        };
        let partition: Vec<String> = links.iter().map(|l| l.vice.clone()).collect();
        let key_order = plan.table.column("id").map(|c| c.name.as_str());
        let windowed = select.per_parent_page(&partition, paging.count, paging.page, key_order);
        let stmt = render(self.env.dialect, &windowed);
        let rows = self.rows(&stmt, &plan.json_outputs).await?;
        let mut explained = match probe.explain && !self.quiet_explain.contains(&t.key.text()) {
            true => Some(Explained::new(self.explain(&stmt).await?)),
            false => None,
        };
        let unwrapped = a.key.table.is_some();
        let wrap = |obj: Json| match unwrapped {
            true => obj,
            false => json!({ item.key.clone(): obj }),
        };
        let index = index_rows(&rows, &links);
        let placed_rows: usize = mains
            .iter()
            .zip(&present)
            .filter(|(_, ok)| **ok)
            .map(|(main, _)| rows_of(&index, &links, main).len())
            .sum();
        self.hold_copies(placed_rows, &rows)?;
        let mut lists: Vec<Option<Json>> = Vec::with_capacity(mains.len());
        for (main, ok) in mains.iter().zip(present) {
            if !ok {
                lists.push(None);
                continue;
            }
            let mut items = Vec::new();
            for (n, &i) in rows_of(&index, &links, main).iter().enumerate() {
                let mut obj = strip(rows[i].clone(), &added, &plan.echoes);
                if let Some(e) = explained.as_mut().filter(|_| n == 0) {
                    // On the first row of each list, as item by item (extracted columns never
                    // batch with @explain).
                    obj = explain_first(obj, e.next());
                }
                let obj = Json::Object(obj);
                items.push(if unwrapped {
                    a.key
                        .extract
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
        Ok(Some(lists))
    }
}
