//! Structure verification of private requests (protocol §8): the `Request` table says which
//! shapes GETS, HEADS, POST, PUT and DELETE accept for each `tag`, and rewrites them (INSERT,
//! UPDATE, REPLACE, REMOVE) before anything is planned.
//!
//! Verification is pure: it reads no database. What only the database can answer (UNIQUE and
//! EXIST) comes back as [`ExistenceCheck`]s for the caller to run inside the request's
//! transaction, so a failed check rolls back with everything else.

mod object;
mod value;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_batch;
#[cfg(test)]
mod tests_columns;
#[cfg(test)]
mod tests_keys;
#[cfg(test)]
mod tests_nested;

use std::collections::HashMap;

use apijet_core::Method;
use apijet_request::is_table_key;
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

use crate::{Context, PlanError};
use object::{check_ids, verify_object, Verifier, OPERATIONS};

/// The reference's `MAX_UPDATE_COUNT`: most rows one write may name (`id{}`, `Table[]`).
pub const DEFAULT_MAX_UPDATE_COUNT: usize = 10;

/// Named patterns a `VERIFY` `k~` rule may use instead of a regular expression.
const NAMED_PATTERNS: [(&str, &str); 3] = [
    ("PHONE", r"1[3-9][0-9]{9}"),
    (
        "EMAIL",
        r"[A-Za-z0-9_]+([-+.][A-Za-z0-9_]+)*@[A-Za-z0-9_]+([-.][A-Za-z0-9_]+)*\.[A-Za-z0-9_]+([-.][A-Za-z0-9_]+)*",
    ),
    ("ID_CARD", r"[0-9]{15}|[0-9]{17}[0-9Xx]"),
];

/// A row of the `Request` table.
#[derive(Debug, Clone)]
pub struct RequestRule {
    /// Row id, for messages about the row.
    pub id: i64,
    /// The method the row applies to.
    pub method: Method,
    /// The request's `tag`.
    pub tag: String,
    /// Version; a request asks for a minimum version (see [`RequestRules::find`]).
    pub version: i64,
    /// The structure (protocol §8.2).
    pub structure: Value,
}

/// The versions of one method's rules per tag, each with its wrapped structure.
type RulesByTag = HashMap<String, Vec<(RequestRule, Map<String, Value>)>>;

/// All rows, indexed by (method, tag), versions sorted; built once per schema snapshot.
#[derive(Debug, Clone)]
pub struct RequestRules {
    /// Rules per method and tag, ascending by version, each with its structure as it applies
    /// to a whole body ([`wrap_structure`]), wrapped once here rather than per request.
    rules: HashMap<Method, RulesByTag>,
    /// Every `VERIFY` regular expression of the rows plus the named patterns, compiled once.
    patterns: HashMap<String, Regex>,
    max_update_count: usize,
}

impl Default for RequestRules {
    /// No structures: every private request is refused for want of one.
    fn default() -> RequestRules {
        RequestRules::new(Vec::new()).0
    }
}

impl RequestRules {
    /// `rows` as read from the table; rows whose structure is not a JSON object are skipped and
    /// reported (id + reason) in the returned warnings, as are patterns that do not compile,
    /// unknown TYPE names and duplicate versions (the first row read wins).
    pub fn new(rows: Vec<RequestRule>) -> (RequestRules, Vec<String>) {
        let mut warnings = Vec::new();
        let mut patterns = HashMap::new();
        for (name, p) in NAMED_PATTERNS {
            if let Ok(re) = compile(p) {
                patterns.insert(name.to_string(), re);
            }
        }
        let mut rules: HashMap<Method, RulesByTag> = HashMap::new();
        for row in rows {
            let Value::Object(structure) = &row.structure else {
                warnings.push(format!(
                    "Request row {}: skipped: the structure of {} {} is not a JSON object",
                    row.id,
                    row.method.name(),
                    row.tag
                ));
                continue;
            };
            scan_structure(row.id, structure, &mut patterns, &mut warnings);
            let target = wrap_structure(row.method, &row.tag, structure);
            let versions = rules
                .entry(row.method)
                .or_default()
                .entry(row.tag.clone())
                .or_default();
            if let Some((kept, _)) = versions.iter().find(|(r, _)| r.version == row.version) {
                warnings.push(format!(
                    "Request row {}: skipped: row {} already defines version {} of {} {}",
                    row.id,
                    kept.id,
                    row.version,
                    row.method.name(),
                    row.tag
                ));
                continue;
            }
            versions.push((row, target));
        }
        for versions in rules.values_mut().flat_map(HashMap::values_mut) {
            versions.sort_by_key(|(r, _)| r.version);
        }
        let rules = RequestRules {
            rules,
            patterns,
            max_update_count: DEFAULT_MAX_UPDATE_COUNT,
        };
        (rules, warnings)
    }

    /// Sets the most rows one write may name: the length of `id{}` lists and of `Table[]`
    /// batches.
    pub fn with_max_update_count(mut self, max: usize) -> RequestRules {
        self.max_update_count = max;
        self
    }

    /// The most rows one write may name.
    pub fn max_update_count(&self) -> usize {
        self.max_update_count
    }

    /// The rule for a call: `version` None or <= 0 → the highest version; otherwise the lowest
    /// version >= the requested one; None when there is none.
    pub fn find(&self, method: Method, tag: &str, version: Option<i64>) -> Option<&RequestRule> {
        self.find_with_target(method, tag, version).map(|(r, _)| r)
    }

    /// [`find`](Self::find), with the rule's structure as it applies to a whole body.
    fn find_with_target(
        &self,
        method: Method,
        tag: &str,
        version: Option<i64>,
    ) -> Option<(&RequestRule, &Map<String, Value>)> {
        let versions = self.rules.get(&method)?.get(tag)?;
        let found = match version {
            Some(v) if v > 0 => versions.iter().find(|(r, _)| r.version >= v),
            _ => versions.last(),
        };
        found.map(|(r, target)| (r, target))
    }

    fn patterns(&self) -> &HashMap<String, Regex> {
        &self.patterns
    }
}

/// Java's `matches()` semantics: the whole value must match.
fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(1 << 20)
        .build()
}

/// Compiles the `VERIFY` patterns of one structure and reports what cannot work at run time.
fn scan_structure(
    row: i64,
    structure: &Map<String, Value>,
    patterns: &mut HashMap<String, Regex>,
    warnings: &mut Vec<String>,
) {
    if structure.contains_key("IF") {
        warnings.push(format!(
            "Request row {row}: IF is not supported; requests for this row are refused"
        ));
    }
    if let Some(Value::Object(types)) = structure.get("TYPE") {
        for (k, ty) in types {
            if !ty.as_str().is_some_and(value::is_known_type) {
                warnings.push(format!("Request row {row}: TYPE {k}: unknown type {ty}"));
            }
        }
    }
    if let Some(Value::Object(rules)) = structure.get("VERIFY") {
        for (k, rule) in rules.iter().filter(|(k, _)| k.ends_with('~')) {
            let list = match rule {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            for p in list.into_iter().filter_map(Value::as_str) {
                if patterns.contains_key(p) {
                    continue;
                }
                match compile(p) {
                    Ok(re) => {
                        patterns.insert(p.to_string(), re);
                    }
                    Err(e) => warnings.push(format!(
                        "Request row {row}: VERIFY {k}: {p:?} is not a usable regular \
                         expression: {e}"
                    )),
                }
            }
        }
    }
    for (k, child) in structure {
        if let (false, Value::Object(child)) = (OPERATIONS.contains(&k.as_str()), child) {
            scan_structure(row, child, patterns, warnings);
        }
    }
}

/// What a verified request still needs from the database before it may run (UNIQUE / EXIST).
#[derive(Debug, Clone, PartialEq)]
pub struct ExistenceCheck {
    /// API table key, e.g. "Privacy".
    pub table: String,
    /// Column = value, AND-ed. A listed column the request leaves out is given as `Null` and
    /// means `IS NULL` (as in the reference); when the request leaves out every listed column
    /// no check is produced.
    pub values: Vec<(String, Value)>,
    /// EXIST: true (a matching row must exist), UNIQUE: false (none may exist).
    pub must_exist: bool,
    /// UNIQUE on PUT: the row's own id, which may keep its values.
    pub exclude_id: Option<Value>,
}

/// A request that passed verification.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The request to run, rewritten by the structure; `tag`, `version` and the other globals
    /// are still at the root, where they were.
    pub request: Map<String, Value>,
    /// UNIQUE / EXIST checks to run before the request (409 when one fails).
    pub checks: Vec<ExistenceCheck>,
}

/// Structure misconfigurations are reported with the reference's code for the failing rule
/// (406) and a prefix that points at the `Request` table rather than at the client.
fn bad_rule(msg: String) -> PlanError {
    PlanError::Invalid(format!("Request structure error: {msg}"))
}

/// Verifies the root body of a private request (`tag`, `version` and the objects) for the
/// context's method against its `Request` structures, and returns the request to run (with
/// INSERT/UPDATE/REPLACE/REMOVE applied) or the reference's error.
///
/// GET and HEAD are public and come back unchanged. `/crud` bodies must be split by the caller
/// into per-method parts (each with its own tag) first: a `Request` row is always for one
/// method.
///
/// A request the server runs itself without the `Access` role lists (`/register`, a trusted
/// context) is verified as if every structure said `REFUSE: "!"`: only what the structure
/// names (MUST, `!key`, TYPE and VERIFY keys, declared objects) may be sent. Without this a
/// sign-up could set any column, e.g. `User.contactIdList`, which logins turn into CONTACT
/// and CIRCLE reach.
pub fn verify(mut body: Map<String, Value>, context: &Context<'_>) -> Result<Verified, PlanError> {
    if context.method.is_public() {
        return Ok(Verified {
            request: body,
            checks: Vec::new(),
        });
    }
    reject_client_combine(&body)?;
    let tag =
        match body.get("tag") {
            Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
            _ => return Err(PlanError::Invalid(
                "put tag at the root of the request, usually a table name, e.g. \"tag\": \"User\""
                    .into(),
            )),
        };
    let version = match body.get("version") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_i64().or_else(|| {
            n.as_f64()
                .map(|f| f.clamp(i64::MIN as f64, i64::MAX as f64) as i64)
        }),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(_) => None,
    };
    if version.is_none() && !body.get("version").is_none_or(Value::is_null) {
        return Err(PlanError::Invalid("version must be an integer".into()));
    }

    // `tag` and `version` select the structure; they are not part of what it verifies.
    let order: Vec<String> = body.keys().cloned().collect();
    let globals: Vec<(String, Value)> = ["tag", "version"]
        .into_iter()
        .filter_map(|k| body.shift_remove(k).map(|v| (k.to_string(), v)))
        .collect();

    let mut ctx = Verifier {
        context,
        checks: Vec::new(),
        root_role: body.get("@role").cloned(),
        subqueries: 0,
    };
    verify_tagged(&mut ctx, &tag, version, &mut body)?;

    let mut request = Map::new();
    for k in order {
        if let Some((_, v)) = globals.iter().find(|(g, _)| *g == k) {
            request.insert(k, v.clone());
        } else if let Some(v) = body.shift_remove(&k) {
            request.insert(k, v);
        }
    }
    request.extend(body);
    Ok(Verified {
        request,
        checks: ctx.checks,
    })
}

/// `@combine` moves value keys into WHERE; only a structure may ask for that in a private
/// request. The reference refuses it in the objects a client sends before it looks at the tag
/// (406, REF-W14); here nested objects and `Table[]` batch items are covered too, while arrays
/// under other keys are plain values and are left alone.
fn reject_client_combine(body: &Map<String, Value>) -> Result<(), PlanError> {
    fn scan(name: &str, v: &Value) -> Result<(), PlanError> {
        match v {
            Value::Object(o) => {
                if o.contains_key("@combine") {
                    return Err(PlanError::Invalid(format!(
                        "{name}:{{}} may not contain @combine: only the public methods GET and \
                         HEAD accept @combine"
                    )));
                }
                o.iter().try_for_each(|(k, v)| scan(k, v))
            }
            Value::Array(a) if name.ends_with("[]") => a.iter().try_for_each(|v| scan(name, v)),
            _ => Ok(()),
        }
    }
    if body.contains_key("@combine") {
        return Err(PlanError::Invalid(
            "@combine is not allowed at the root of a private request".into(),
        ));
    }
    body.iter().try_for_each(|(k, v)| scan(k, v))
}

/// Looks up and applies the structure of `tag`, then the per-item structure of a `Table:[]`
/// batch.
fn verify_tagged(
    ctx: &mut Verifier<'_>,
    tag: &str,
    version: Option<i64>,
    body: &mut Map<String, Value>,
) -> Result<(), PlanError> {
    let target = tag_structure(ctx, tag, version)?;
    verify_object(ctx, "", target, body)?;

    let Some(table) = batch_table(ctx.method, tag) else {
        return Ok(());
    };
    let list_key = format!("{table}[]");
    let Some(Value::Array(items)) = body
        .get_mut(&list_key)
        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
    else {
        return Ok(());
    };
    // Every item is verified against the same structure, looked up once.
    let item_target = tag_structure(ctx, table, version)?;
    // A structure that is only the table's object (`{"Comment": {…}}`, as wrap_structure makes
    // of most) asks nothing of the `{"Comment": item}` wrapper around an item beyond what the
    // wrapper's one key gets: its ids checked and its object verified. That is done directly,
    // without building the wrapper for each item.
    let only_table = match item_target.get(table) {
        Some(Value::Object(t)) if item_target.len() == 1 => Some(t),
        _ => None,
    };
    for item in items.iter_mut() {
        let Value::Object(obj) = item else {
            return Err(PlanError::WrongType(format!(
                "{list_key}:value is invalid: its type must be OBJECT[]"
            )));
        };
        if let Some(child_target) = only_table {
            check_ids(ctx, "", table, child_target, obj)?;
            verify_object(ctx, table, child_target, obj)?;
            continue;
        }
        let mut wrapped = Map::with_capacity(1);
        wrapped.insert(table.to_string(), Value::Object(std::mem::take(obj)));
        verify_object(ctx, "", item_target, &mut wrapped)?;
        *item = wrapped
            .shift_remove(table)
            .unwrap_or_else(|| Value::Object(Map::new()));
    }
    Ok(())
}

/// The structure of `tag` as it applies to a whole body (see [`wrap_structure`]).
fn tag_structure<'r>(
    ctx: &Verifier<'r>,
    tag: &str,
    version: Option<i64>,
) -> Result<&'r Map<String, Value>, PlanError> {
    let method = ctx.method;
    let rules: &'r RequestRules = ctx.rules;
    let (_, target) = rules
        .find_with_target(method, tag, version)
        .ok_or_else(|| {
            PlanError::Forbidden(format!(
                "no Request structure for version: {}, method: {}, tag: {tag}: a private request \
             must be an operation that a row of the Request table allows",
                version.unwrap_or(0),
                method.name()
            ))
        })?;
    Ok(target)
}

/// `Table` for a POST/PUT tag `Table:[]`, whose `Table[]` items are each verified against the
/// single-object structure of tag `Table`.
fn batch_table(method: Method, tag: &str) -> Option<&str> {
    let table = tag.strip_suffix(":[]")?;
    (matches!(method, Method::Post | Method::Put) && is_table_key(table)).then_some(table)
}

/// The structure as it applies to the whole body (the reference's `wrapRequest`): a structure
/// that does not name its tag's table is that table's object, so `(POST, Comment,
/// {"MUST": …})` applies to `{"Comment": {…}}`; `Table:[]` structures get their `Table[]`
/// list declared as an array of objects.
fn wrap_structure(method: Method, tag: &str, structure: &Map<String, Value>) -> Map<String, Value> {
    if structure.contains_key(tag) {
        return structure.clone();
    }
    let (table, batch, array) = if let Some(t) = tag.strip_suffix(":[]") {
        (t, true, true)
    } else if let Some(t) = tag.strip_suffix("[]") {
        (t, false, true)
    } else {
        (tag, false, false)
    };
    if !is_table_key(table) {
        return structure.clone();
    }
    let wrap = |key: &str| {
        let mut m = Map::new();
        m.insert(key.to_string(), Value::Object(structure.clone()));
        m
    };
    if batch {
        let mut target = structure.clone();
        if matches!(method, Method::Post | Method::Put) {
            let list_key = format!("{table}[]");
            target
                .entry(list_key.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            let types = target
                .entry("TYPE")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(types) = types {
                types
                    .entry(list_key)
                    .or_insert_with(|| Value::String("OBJECT[]".into()));
            }
        }
        return target;
    }
    if !array || matches!(method, Method::Get | Method::Gets) {
        return wrap(tag);
    }
    if structure.contains_key(table) {
        return structure.clone();
    }
    wrap(table)
}
