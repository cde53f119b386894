//! One object of a private request against its part of the structure (protocol §8.2), in the
//! reference's order: REMOVE, MUST, declared children (ids, recursion), REFUSE and the keys no
//! private request may carry, then TYPE, VERIFY, INSERT, UPDATE, REPLACE, EXIST and UNIQUE.
//!
//! Every check on what the client sent runs before INSERT/UPDATE/REPLACE, which is what lets a
//! structure inject `@role`, `@combine` or `k-()` functions that a client may not send itself.

use std::collections::HashSet;

use apijet_core::Method;
use apijet_request::{is_table_key, ConditionKey, KeyParts};
use serde_json::{Map, Value};

use super::value::{verify_type, verify_value, verify_verified_forms};
use super::{bad_rule, ExistenceCheck};
use crate::{Context, PlanError};

/// Structure keys that are rules, never children.
pub(super) const OPERATIONS: [&str; 13] = [
    "TYPE",
    "VERIFY",
    "INSERT",
    "UPDATE",
    "REPLACE",
    "EXIST",
    "UNIQUE",
    "REMOVE",
    "MUST",
    "REFUSE",
    "IF",
    "ALLOW_PARTIAL_UPDATE_FAIL",
    "IS_ID_CONDITION_MUST",
];

/// The primary key every table object is checked by (protocol §3.3 default).
const ID: &str = "id";
/// The owner column, checked like `id` but never required.
const USER_ID: &str = "userId";

/// The verification of one request: its context (the method the structures were looked up
/// for, the rules and their compiled patterns; a trusted request's structure is a whitelist,
/// as if every object said `REFUSE: "!"`, so a sign-up can set no column the structure does
/// not name), and what the objects verified so far left.
pub(super) struct Verifier<'a> {
    pub context: &'a Context<'a>,
    /// UNIQUE / EXIST checks collected so far, in verification order.
    pub checks: Vec<ExistenceCheck>,
    /// The `@role` the client put at the root: objects without their own role inherit it.
    pub root_role: Option<Value>,
    /// How many subqueries (`k@: {…}`, `@from@: {…}`) enclose the object being verified.
    pub subqueries: usize,
}

impl<'a> std::ops::Deref for Verifier<'a> {
    type Target = Context<'a>;

    fn deref(&self) -> &Context<'a> {
        self.context
    }
}

/// The column a key names, whatever operator or form spells it (see
/// [`ConditionKey::column_of`]).
pub(super) fn column(key: &str) -> Option<&str> {
    ConditionKey::column_of(key)
}

/// Whether request key `key` names `rule_key` or, for a rule on a column, any spelling of that
/// column: rules hold for columns, not spellings.
fn names_same(key: &str, rule_key: &str, rule_column: Option<&str>) -> bool {
    key == rule_key || rule_column.is_some_and(|c| column(key) == Some(c))
}

/// How messages name an object: the root has no key.
fn show(name: &str) -> &str {
    if name.is_empty() {
        "the request root"
    } else {
        name
    }
}

fn is_missing(v: Option<&Value>) -> bool {
    v.is_none_or(Value::is_null)
}

/// A comma-separated key list (`MUST`, `REFUSE`, …), trimmed, without empty items.
fn key_list<'t>(target: &'t Map<String, Value>, op: &str) -> Result<Vec<&'t str>, PlanError> {
    match target.get(op) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(s
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .collect()),
        Some(_) => Err(bad_rule(format!("{op} must be a comma-separated string"))),
    }
}

/// An operation whose value is an object of `key: rule` pairs (`TYPE`, `INSERT`, …).
fn rule_map<'t>(
    target: &'t Map<String, Value>,
    op: &str,
) -> Result<Option<&'t Map<String, Value>>, PlanError> {
    match target.get(op) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(bad_rule(format!("{op} must be an object"))),
    }
}

/// Verifies `real` (the object the client sent under `name`) against `target` and applies the
/// structure's rewrites to it.
pub(super) fn verify_object(
    ctx: &mut Verifier<'_>,
    name: &str,
    target: &Map<String, Value>,
    real: &mut Map<String, Value>,
) -> Result<(), PlanError> {
    let m = ctx.method.name();
    if target.contains_key("IF") {
        // A script condition we cannot evaluate must not be skipped silently: it may be the
        // only thing that restricts this tag.
        return Err(PlanError::Forbidden(format!(
            "the Request structure of {} uses IF, which this server does not support",
            show(name)
        )));
    }

    for k in key_list(target, "REMOVE")? {
        let col = column(k);
        real.retain(|key, _| !names_same(key, k, col));
    }

    let must = key_list(target, "MUST")?;
    for k in &must {
        if is_missing(real.get(*k)) && is_missing(real.get(&format!("{k}@"))) {
            return Err(PlanError::Invalid(format!(
                "{m} request: {} must contain {k} (every key of [{}])",
                show(name),
                must.join(",")
            )));
        }
    }

    // Children declared by the structure: required, checked and verified recursively.
    let mut declared: HashSet<&str> = HashSet::new();
    for (key, rule) in target {
        if OPERATIONS.contains(&key.as_str()) {
            continue;
        }
        match rule {
            Value::Object(child_target) => {
                match real.get_mut(key) {
                    Some(Value::Object(child)) => {
                        if is_table_key(key) {
                            check_ids(ctx, name, key, child_target, child)?;
                        }
                        let subquery = usize::from(key.ends_with('@'));
                        ctx.subqueries += subquery;
                        let verified = verify_object(ctx, key, child_target, child);
                        ctx.subqueries -= subquery;
                        verified?;
                    }
                    None | Some(Value::Null) => {
                        return Err(PlanError::Invalid(format!(
                            "{m} request: put {key}:{{}} inside {}",
                            show(name)
                        )))
                    }
                    Some(_) => {
                        return Err(PlanError::WrongType(format!(
                            "{key}:value is invalid: its type must be OBJECT {{}}"
                        )))
                    }
                }
                declared.insert(key);
            }
            Value::Array(_) => {
                let list = match real.get(key) {
                    None | Some(Value::Null) => None,
                    Some(Value::Array(a)) => Some(a),
                    Some(_) => {
                        return Err(PlanError::WrongType(format!(
                            "{key}:value is invalid: its type must be ARRAY []"
                        )))
                    }
                };
                if matches!(ctx.method, Method::Post | Method::Put) && key.ends_with("[]") {
                    let len = list.map_or(0, Vec::len);
                    if len == 0 {
                        return Err(PlanError::Invalid(format!(
                            "{m} request: put {key}:[{{…}}] inside {}: a batch must be a \
                             non-empty array of objects, each one verified against the \
                             structure of tag {}",
                            show(name),
                            &key[..key.len() - 2]
                        )));
                    }
                    let max = ctx.rules.max_update_count();
                    if len > max {
                        return Err(PlanError::Limit(format!(
                            "{m} request: {name}/{key}:[] may hold at most {max} items (setting \
                             max_batch)"
                        )));
                    }
                    declared.insert(key);
                }
            }
            // Plain values in a structure leave the request as it is (as in the reference).
            _ => {}
        }
    }

    check_refused(ctx, name, target, &must, &declared, real)?;

    if let Some(types) = rule_map(target, "TYPE")? {
        for (k, ty) in types {
            if !OPERATIONS.contains(&k.as_str()) {
                verify_type(k, ty, real)?;
            }
        }
    }
    if let Some(rules) = rule_map(target, "VERIFY")? {
        verify_verified_forms(rules, real)?;
        for (k, rule) in rules {
            if !OPERATIONS.contains(&k.as_str()) {
                verify_value(k, rule, real, ctx.rules.patterns())?;
            }
        }
    }
    for (op, apply) in [
        ("INSERT", Apply::IfAbsent),
        ("UPDATE", Apply::Always),
        ("REPLACE", Apply::IfPresent),
    ] {
        let Some(values) = rule_map(target, op)? else {
            continue;
        };
        for (k, v) in values {
            if OPERATIONS.contains(&k.as_str()) {
                continue;
            }
            let col = column(k);
            let present = real.keys().any(|key| names_same(key, k, col));
            if k == "@role" && matches!(apply, Apply::IfAbsent) {
                // A role the structure gives is the role: a client may not choose a wider one
                // (the reference lets the client's @role win here).
                if let Some(sent) = real.get(k).filter(|sent| *sent != v) {
                    return Err(PlanError::Forbidden(format!(
                        "{m} request: {} may not contain @role:{sent}: the Request structure \
                         gives this object the role {v}",
                        show(name)
                    )));
                }
            }
            let set = match apply {
                Apply::IfAbsent => !present,
                Apply::Always => true,
                Apply::IfPresent => present,
            };
            if set {
                // What the structure sets replaces every spelling of the column the client
                // sent, so `balance+` cannot ride along with a structure-given `balance`.
                real.retain(|key, _| key == k || !names_same(key, k, col));
                real.insert(k.clone(), v.clone());
            }
        }
    }

    for (op, must_exist) in [("EXIST", true), ("UNIQUE", false)] {
        let keys = key_list(target, op)?;
        if keys.is_empty() {
            continue;
        }
        let table = name.split_once(':').map_or(name, |(t, _)| t);
        if !is_table_key(table) {
            return Err(bad_rule(format!(
                "{op} in {} is not inside a table object",
                show(name)
            )));
        }
        for k in &keys {
            let col = column(k);
            if let Some(other) = real.keys().find(|key| *key != k && names_same(key, k, col)) {
                return Err(PlanError::Invalid(format!(
                    "{m} request: {} may not contain {other}: {op} checks {k} and only a plain \
                     {k}:value can be checked",
                    show(name)
                )));
            }
        }
        if keys.iter().all(|k| is_missing(real.get(*k))) {
            // Nothing is written to these columns, so there is nothing to collide with or
            // to look up.
            continue;
        }
        let values = keys
            .iter()
            .map(|k| (k.to_string(), real.get(*k).cloned().unwrap_or(Value::Null)))
            .collect();
        let exclude_id = if must_exist {
            None
        } else {
            real.get(ID).filter(|id| is_positive_id(id)).cloned()
        };
        ctx.checks.push(ExistenceCheck {
            table: table.to_string(),
            values,
            must_exist,
            exclude_id,
        });
    }
    Ok(())
}

/// How INSERT, UPDATE and REPLACE treat a key.
#[derive(Clone, Copy)]
enum Apply {
    IfAbsent,
    Always,
    IfPresent,
}

/// REFUSE, then the keys that no private request may carry, whatever the structure says.
///
/// A refused column is refused in every spelling (`balance` refuses `balance+`, `_password`
/// refuses `_password$`); what `!` lets through is only what is named exactly (MUST keys, their
/// `k@` form, `!key` exemptions, declared children), so `!` never lets in another operator on
/// an allowed column.
fn check_refused(
    ctx: &Verifier<'_>,
    name: &str,
    target: &Map<String, Value>,
    must: &[&str],
    declared: &HashSet<&str>,
    real: &Map<String, Value>,
) -> Result<(), PlanError> {
    let m = ctx.method.name();
    let mut refused: Vec<&str> = Vec::new();
    let mut exempt: HashSet<&str> = HashSet::new();
    let mut all_others = ctx.trusted;
    for item in key_list(target, "REFUSE")? {
        match item.strip_prefix('!') {
            Some("") => all_others = true,
            Some(k) => {
                exempt.insert(k);
            }
            None => refused.push(item),
        }
    }
    let named = |k: &str| {
        exempt.contains(k)
            || must.contains(&k)
            || declared.contains(k)
            || k.strip_suffix('@').is_some_and(|b| must.contains(&b))
    };
    // A column the structure types or verifies is one it expects: under the `/register`
    // whitelist those are allowed too (in the exact spelling the rule names).
    let typed: HashSet<&str> = if ctx.trusted {
        ["TYPE", "VERIFY"]
            .into_iter()
            .filter_map(|op| target.get(op).and_then(Value::as_object))
            .flat_map(|rules| rules.keys())
            .map(|k| super::value::verify_target(k).unwrap_or(k.as_str()))
            .collect()
    } else {
        HashSet::new()
    };
    let role_named = named("@role");
    let structure_sets_role = ["INSERT", "UPDATE"].into_iter().any(|op| {
        target
            .get(op)
            .and_then(Value::as_object)
            .is_some_and(|o| o.contains_key("@role"))
    });
    if ctx.subqueries > 0 && real.contains_key("@role") && !role_named && !structure_sets_role {
        // The enclosing object's role is what the tag allows; a subquery inherits it.
        return Err(PlanError::Forbidden(format!(
            "{m} request: {} may not contain @role: an object inside a subquery runs with the \
             role of the object it is in, unless its Request structure names @role",
            show(name)
        )));
    }
    if all_others {
        // `!` refuses everything not named; `@` keys stay allowed, except `@role`: a client
        // may not pick a role that the structure did not ask for (the reference lets it).
        for k in real.keys() {
            let k = k.as_str();
            let allowed = (k.starts_with('@') && k != "@role") || named(k) || typed.contains(k);
            if !allowed && !refused.contains(&k) {
                refused.push(k);
            }
        }
        if !role_named && !real.contains_key("@role") && is_table_key(name) {
            if let Some(role) = &ctx.root_role {
                if !structure_sets_role {
                    return Err(PlanError::Invalid(format!(
                        "{m} request: the root @role:{role} would apply to {name}, whose \
                         structure refuses every key it does not name (REFUSE \"!\"), @role \
                         included"
                    )));
                }
            }
        }
    }
    let refused_columns: Vec<&str> = refused.iter().filter_map(|k| column(k)).collect();
    for k in real.keys() {
        if let Some(c) = column(k) {
            if refused_columns.contains(&c) && !refused.contains(&k.as_str()) {
                return Err(PlanError::Invalid(format!(
                    "{m} request: {} may not contain {k}: it names {c}, and none of [{}] may \
                     be sent in any form",
                    show(name),
                    refused.join(",")
                )));
            }
        }
    }

    for (k, v) in real {
        if refused.contains(&k.as_str()) {
            return Err(PlanError::Invalid(format!(
                "{m} request: {} may not contain {k} (none of [{}])",
                show(name),
                refused.join(",")
            )));
        }
        if k.ends_with("()") && v.is_string() {
            return Err(PlanError::Forbidden(format!(
                "{m} request: {k} is not allowed: private requests may not call remote \
                 functions key():\"fun()\""
            )));
        }
        if k == "@key" {
            return Err(PlanError::Forbidden(format!(
                "{m} request: {} may not contain @key: only the public methods GET and HEAD \
                 accept @key",
                show(name)
            )));
        }
        if k.ends_with('@') && v.is_object() && !declared.contains(k.as_str()) {
            // The reference lets subqueries through unverified (they end in @); their objects
            // would then run under no structure at all, with any role Access grants.
            return Err(PlanError::Forbidden(format!(
                "{m} request: {} may not contain {k}:{{}}: a subquery (k@, @from@) must be \
                 declared by the Request structure, which then verifies its objects",
                show(name)
            )));
        }
        if !k.starts_with('@') && !k.ends_with('@') && !declared.contains(k.as_str()) {
            if v.is_object() {
                return Err(PlanError::Forbidden(format!(
                    "{m} request: {} may not contain {k}:{{}}",
                    show(name)
                )));
            }
            if matches!(ctx.method, Method::Post | Method::Put) && v.is_array() && k.ends_with("[]")
            {
                return Err(PlanError::Forbidden(format!(
                    "{m} request: {} may not contain {k}:[]: batch lists Table[]:[{{…}}] must \
                     be declared by the Request structure",
                    show(name)
                )));
            }
        }
    }
    // Hidden columns never leave the server: a private read may test one only where the
    // structure names that exact key (e.g. a password check), and no request may reach one
    // through another operator (`_password$` would be a LIKE oracle).
    // DELETE keys are conditions too.
    let hidden_needs_naming = ctx.method.is_query() || ctx.method == Method::Delete;
    for k in real.keys() {
        let Some(c) = column(k) else {
            continue;
        };
        let plain = || KeyParts::of(k).is_some_and(|ck| ck.is_plain());
        if c.starts_with('_') && (hidden_needs_naming || !plain()) && !named(k) {
            return Err(PlanError::Forbidden(format!(
                "{m} request: {} may not contain {k}: {c} is a hidden column, and this \
                 Request structure does not name {k}",
                show(name)
            )));
        }
    }
    Ok(())
}

/// Ids of a table object: POST may not choose its id; the other writes (and reads whose
/// structure says `IS_ID_CONDITION_MUST: true`) must name their rows, a bounded number of them.
pub(super) fn check_ids(
    ctx: &Verifier<'_>,
    parent: &str,
    key: &str,
    target: &Map<String, Value>,
    real: &Map<String, Value>,
) -> Result<(), PlanError> {
    let m = ctx.method.name();
    if ctx.method == Method::Post {
        if real.contains_key(ID) {
            return Err(PlanError::Invalid(format!(
                "{m} request: {parent}/{key} may not contain {ID}: the server assigns it"
            )));
        }
        return Ok(());
    }
    let id_must = target.get("IS_ID_CONDITION_MUST").and_then(Value::as_bool);
    if id_must == Some(true) || !ctx.method.is_query() {
        check_id(ctx, parent, key, real, ID, id_must.unwrap_or(true))?;
        check_id(ctx, parent, key, real, USER_ID, false)?;
    }
    Ok(())
}

fn check_id(
    ctx: &Verifier<'_>,
    parent: &str,
    key: &str,
    real: &Map<String, Value>,
    id_key: &str,
    required: bool,
) -> Result<(), PlanError> {
    let m = ctx.method.name();
    let here = format!("{parent}/{key}");
    let id = real.get(id_key).filter(|v| !v.is_null());
    if let Some(id) = id {
        if !(id.is_number() || id.is_string()) {
            return Err(PlanError::Invalid(format!(
                "{m} request: {here}: {id_key}:value must be a Long or a String"
            )));
        }
    }
    let in_key = format!("{id_key}{{}}");
    let ref_key = format!("{in_key}@");
    let list = match real.get(&in_key) {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(a),
        Some(_) => {
            return Err(PlanError::Invalid(format!(
                "{m} request: {here}: {in_key}:value must be an array [Long]"
            )))
        }
    };
    let Some(list) = list else {
        if required && id.is_none() && is_missing(real.get(&ref_key)) {
            return Err(PlanError::Invalid(format!(
                "{m} request: {here} needs at least one of {id_key},{in_key},{ref_key}"
            )));
        }
        return Ok(());
    };
    let max = ctx.rules.max_update_count();
    if list.len() > max {
        return Err(PlanError::Limit(format!(
            "{m} request: {here}: {in_key}:[] may hold at most {max} items (setting max_batch)"
        )));
    }
    for item in list {
        if !(item.is_number() || item.is_string() || item.is_null()) {
            return Err(PlanError::Invalid(format!(
                "{m} request: {here}: every item of {in_key}:[] must be a Long or a String"
            )));
        }
        if !is_positive_id(item) {
            return Err(PlanError::Invalid(format!(
                "{m} request: {here}: no item of {in_key}:[] may be null, a number <= 0 or an \
                 empty string"
            )));
        }
    }
    Ok(())
}

/// A usable row id: a number whose integer part is > 0, or a non-blank string.
fn is_positive_id(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_i64().map_or_else(
            || n.as_u64().is_some() || n.as_f64().is_some_and(|f| f >= 1.0),
            |i| i > 0,
        ),
        Value::String(s) => !s.trim().is_empty(),
        _ => false,
    }
}
