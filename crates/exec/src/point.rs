//! Point lookups: one table object found by plain comparisons (`{"User":{"id":82001}}`) is
//! planned once per request shape and its statement kept, so later lookups of the same shape
//! only bind their values.
//!
//! A shape is the request with its condition values replaced by typed slots; keywords and
//! every value that could change the plan beyond a bound value (null, booleans, numbers ≤ 0,
//! empty strings, floats) stay in it verbatim. It is keyed with the method and with whether
//! the visitor is logged in, which is all the role of such an object depends on (UNKNOWN or
//! LOGIN, neither of which adds a row filter): the `Access` check runs when the shape is
//! planned, and a shape the role may not read is never stored. The cache belongs to the
//! schema snapshot, so a reload starts it empty.
//!
//! A shape is stored only when planning it again with different values in its slots gives
//! the same SQL with exactly those values in the binds: anything the planner does with a
//! value besides binding it keeps the request on the ordinary path.

use crate::read::ReadEnv;
use crate::ExecError;
use apijet_core::{Method, Value};
use apijet_plan::{Ctx, TablePlan};
use apijet_request::{is_table_key, Logic, Node, Op, Request, TableEntry};
use apijet_sql::{render, Statement};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Shapes kept per snapshot; past it, an arbitrary one makes room.
pub const POINT_SHAPES: usize = 1024;

/// Keywords a point lookup may carry: they shape the SQL only, never the answer around it.
const KEYWORDS: [&str; 3] = ["column", "order", "json"];

/// Planned point lookups by shape.
#[derive(Debug, Default)]
pub struct PointCache {
    shapes: RwLock<HashMap<ShapeKey, Arc<PointPlan>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ShapeKey {
    method: Method,
    logged_in: bool,
    shape: String,
}

/// Where a bind of a stored statement takes its value.
#[derive(Debug)]
enum Bind {
    /// The request's value in this slot.
    Slot(usize),
    /// The same value for every request of the shape.
    Fixed(Value),
}

/// A stored point lookup.
#[derive(Debug)]
pub struct PointPlan {
    /// The answer key (the table key as sent).
    pub key: String,
    /// Output columns answered as JSON.
    pub json_outputs: Vec<String>,
    sql: String,
    binds: Vec<Bind>,
}

/// One point lookup ready to run.
pub struct PointQuery {
    /// Its plan.
    pub plan: Arc<PointPlan>,
    /// The statement with this request's values.
    pub statement: Statement,
}

impl PointCache {
    /// Shapes stored.
    pub fn len(&self) -> usize {
        self.shapes.read().map_or(0, |m| m.len())
    }

    /// Whether no shape is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, key: &ShapeKey) -> Option<Arc<PointPlan>> {
        self.shapes.read().ok()?.get(key).cloned()
    }

    fn put(&self, key: ShapeKey, plan: Arc<PointPlan>) {
        let Ok(mut shapes) = self.shapes.write() else {
            return;
        };
        if shapes.len() >= POINT_SHAPES && !shapes.contains_key(&key) {
            if let Some(old) = shapes.keys().next().cloned() {
                shapes.remove(&old);
            }
        }
        shapes.insert(key, plan);
    }
}

/// The point lookup of a GET or GETS body, or `None` when it takes the ordinary read path
/// (any other request, and every one that fails to plan: that path answers its error).
pub fn point_query(
    map: &Map<String, Json>,
    env: &ReadEnv<'_>,
    cache: &PointCache,
) -> Result<Option<PointQuery>, ExecError> {
    if !env.method.is_query() || env.method.is_count() {
        return Ok(None);
    }
    let Some((shape, slots)) = shape(map) else {
        return Ok(None);
    };
    let key = ShapeKey {
        method: env.method,
        logged_in: env.visitor.is_some(),
        shape,
    };
    let plan = match cache.get(&key) {
        Some(plan) => plan,
        None => {
            let Some(plan) = learn(map, &slots, env) else {
                return Ok(None);
            };
            let plan = Arc::new(plan);
            cache.put(key, Arc::clone(&plan));
            plan
        }
    };
    let binds = plan
        .binds
        .iter()
        .map(|b| match b {
            Bind::Slot(i) => Value::from_json(slots[*i]),
            Bind::Fixed(v) => v.clone(),
        })
        .collect();
    let statement = Statement {
        sql: plan.sql.clone(),
        binds,
    };
    Ok(Some(PointQuery { plan, statement }))
}

/// The shape of `{"Table":{…}}` with its slot values in order, or `None` when the body is
/// not a single table object of scalar conditions and keywords.
fn shape(map: &Map<String, Json>) -> Option<(String, Vec<&Json>)> {
    let mut members = map.iter();
    let (table, Json::Object(entries)) = members.next()? else {
        return None;
    };
    if members.next().is_some() || !is_table_key(table) {
        return None;
    }
    let mut shape = String::with_capacity(64);
    let mut slots = Vec::with_capacity(entries.len());
    push_json_str(&mut shape, table);
    shape.push('{');
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            shape.push(',');
        }
        push_json_str(&mut shape, k);
        if let Some(name) = k.strip_prefix('@') {
            if !KEYWORDS.contains(&name) || v.is_object() || v.is_array() {
                return None;
            }
            push_verbatim(&mut shape, v);
            continue;
        }
        if k.ends_with('@') || k.ends_with("()") || v.is_object() || v.is_array() {
            return None;
        }
        if is_slot(k, v) {
            shape.push_str(if v.is_string() { ":#s" } else { ":#i" });
            slots.push(v);
        } else {
            push_verbatim(&mut shape, v);
        }
    }
    shape.push('}');
    Some((shape, slots))
}

/// A condition value that becomes a bind whatever it is: a non-empty string or a positive
/// integer (an empty string, 0 or a negative `id` means no row, without SQL).
fn is_slot(key: &str, v: &Json) -> bool {
    !key.starts_with('@')
        && match v {
            Json::String(s) => !s.is_empty(),
            Json::Number(n) => n.as_i64().is_some_and(|i| i > 0),
            _ => false,
        }
}

/// A key in quotes, its quotes and backslashes escaped: enough to keep shapes unambiguous.
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

fn push_verbatim(out: &mut String, v: &Json) {
    out.push(':');
    out.push_str(&v.to_string());
}

/// Plans a shape seen for the first time, and proves that its statement binds the slots.
fn learn(map: &Map<String, Json>, slots: &[&Json], env: &ReadEnv<'_>) -> Option<PointPlan> {
    let (key, json_outputs, real) = plan_once(map.clone(), env)?;
    let probes: Vec<Json> = slots
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Json::String(_) => Json::String(format!("\u{1}apijet-probe-{i}")),
            _ => Json::from(7_000_000_000_000_000i64 + i as i64),
        })
        .collect();
    let (_, _, probe) = plan_once(with_slots(map, &probes)?, env)?;
    if probe.sql != real.sql || probe.binds.len() != real.binds.len() {
        return None;
    }
    let probe_values: Vec<Value> = probes.iter().map(Value::from_json).collect();
    let mut used = vec![false; slots.len()];
    let mut binds = Vec::with_capacity(real.binds.len());
    for (p, r) in probe.binds.iter().zip(&real.binds) {
        match probe_values.iter().position(|v| v == p) {
            Some(i) if Value::from_json(slots[i]) == *r => {
                used[i] = true;
                binds.push(Bind::Slot(i));
            }
            Some(_) => return None,
            None if p == r => binds.push(Bind::Fixed(r.clone())),
            None => return None,
        }
    }
    if used.contains(&false) {
        return None;
    }
    Some(PointPlan {
        key,
        json_outputs,
        sql: real.sql,
        binds,
    })
}

/// `map` with its slot values replaced, in the order [`shape`] found them.
fn with_slots(map: &Map<String, Json>, values: &[Json]) -> Option<Map<String, Json>> {
    let mut map = map.clone();
    let (_, Json::Object(entries)) = map.iter_mut().next()? else {
        return None;
    };
    let mut next = values.iter();
    for (k, v) in entries.iter_mut() {
        if is_slot(k, v) {
            *v = next.next()?.clone();
        }
    }
    Some(map)
}

/// The answer key, JSON outputs and statement of a point lookup, planned as the read path
/// plans a root table object; `None` when it is not a plain lookup or does not plan.
fn plan_once(
    map: Map<String, Json>,
    env: &ReadEnv<'_>,
) -> Option<(String, Vec<String>, Statement)> {
    let opts = env.options;
    if opts.max_depth < 1 || opts.max_objects < 1 || opts.max_rows < 1 {
        return None;
    }
    let req = Request::from_map(map).ok()?;
    if req.format || req.tag.is_some() || req.version.is_some() || !req.globals.is_empty() {
        return None;
    }
    let [member] = req.root.members.as_slice() else {
        return None;
    };
    let Node::Table(t) = &member.node else {
        return None;
    };
    let plain = t.entries.iter().all(|e| match e {
        TableEntry::Condition { key, .. } => {
            key.length.is_none()
                && !key.reference
                && match key.op {
                    Op::Eq => matches!(key.logic, Logic::Default | Logic::Not),
                    Op::Gt | Op::Ge | Op::Lt | Op::Le => key.logic == Logic::Default,
                    _ => false,
                }
        }
        TableEntry::Keyword { name, .. } => KEYWORDS.contains(&name.as_str()),
        _ => false,
    });
    if !plain {
        return None;
    }
    let ctx = Ctx {
        schema: env.schema,
        options: env.options,
        method: env.method,
        visitor: env.visitor,
        global_role: None,
        global_explain: false,
        subqueries: None,
        trusted: false,
    };
    let plan = TablePlan::new(t, &ctx).ok()?;
    if plan.explain || plan.drop || !plan.echoes.is_empty() || !plan.procedures.is_empty() {
        return None;
    }
    let mut select = plan.select(&[], &mut |_| None).ok()??;
    let mut names: Vec<&str> = select.columns.iter().map(|c| c.alias.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        // A row object keeps one member per name; the byte writer would repeat it.
        return None;
    }
    select.limit = Some(1);
    let statement = render(env.dialect, &select);
    Some((member.key.clone(), plan.json_outputs, statement))
}
