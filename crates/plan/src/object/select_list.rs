//! `@column`, `@order`, `@group`, `@having`, `@key` and `@cast` (protocol §4.3).

use crate::expr::functions::{contains_aggregate, contains_window};
use crate::expr::{check_length, Names, Parser};
use crate::query::{CastType, Direction, Expr, Ident, OrderItem, Pred, Select, SelectItem};
use crate::schema::{ColumnKind, Table};
use crate::Combine;
use crate::{ExprLimits, PlanError};
use apijet_core::Capabilities;
use apijet_request::is_name;
use std::collections::HashMap;

/// Resolves names against one table (or a FROM subquery's output), its `@key` aliases and,
/// for HAVING and ORDER BY, its select-list aliases.
pub(crate) struct TableNames<'a> {
    pub table: &'a Table,
    pub limits: ExprLimits,
    /// Output names of a FROM subquery, when the object selects from one.
    pub subquery_columns: Option<Vec<String>>,
    pub qualifier: Ident,
    pub keys: HashMap<String, Expr>,
    pub select_aliases: Vec<(String, Expr)>,
    /// Select-list aliases resolve to their expressions (HAVING on engines that cannot see
    /// output names) or to the alias itself (ORDER BY).
    pub alias_as_expr: bool,
}

impl<'a> TableNames<'a> {
    /// The names of `table` (or of the derived table `from` reads) qualified with
    /// `qualifier`, before any key or select-list alias is known.
    pub fn of(
        table: &'a Table,
        from: Option<&Select>,
        qualifier: Ident,
        limits: ExprLimits,
    ) -> TableNames<'a> {
        TableNames {
            table,
            limits,
            subquery_columns: from.map(|s| {
                s.columns
                    .iter()
                    .map(|c| c.alias.as_str().to_string())
                    .collect()
            }),
            qualifier,
            keys: HashMap::new(),
            select_aliases: Vec::new(),
            alias_as_expr: false,
        }
    }

    /// A real column of the table (or subquery) as an expression.
    pub fn column(&self, name: &str) -> Option<Expr> {
        let kind = match &self.subquery_columns {
            Some(cols) => cols
                .iter()
                .any(|c| c == name)
                .then_some(ColumnKind::Other)?,
            None => self.table.column(name)?.kind,
        };
        Some(Expr::Column {
            table: Some(self.qualifier.clone()),
            name: Ident::new(name),
            kind,
        })
    }
}

impl Names for TableNames<'_> {
    fn resolve(&self, name: &str) -> Result<Expr, PlanError> {
        if let Some(e) = self.keys.get(name) {
            return Ok(e.clone());
        }
        if let Some(e) = self.column(name) {
            return Ok(e);
        }
        if let Some((_, e)) = self.select_aliases.iter().find(|(a, _)| a == name) {
            return Ok(if self.alias_as_expr {
                e.clone()
            } else {
                Expr::Alias(Ident::new(name))
            });
        }
        Err(PlanError::UnknownColumn {
            table: self.table.api_name.clone(),
            column: name.to_string(),
        })
    }

    fn limits(&self) -> ExprLimits {
        self.limits
    }
}

/// A parsed `@column`.
pub(crate) struct ColumnList {
    pub items: Vec<SelectItem>,
    pub distinct: bool,
}

/// Whether any select item aggregates (then a missing row still yields one row).
pub(crate) fn has_aggregate(items: &[SelectItem]) -> bool {
    items.iter().any(|i| contains_aggregate(&i.expr))
}

fn bad_column(item: &str) -> PlanError {
    PlanError::Invalid(format!(
        "@column: '{item}' is not valid; write column, column:alias or function(args):alias, \
         with one function expression per ';'-separated segment"
    ))
}

/// Splits `text` on `sep` outside parentheses and quotes.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let (mut depth, mut quoted, mut start) = (0i32, false, 0);
    let mut out = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            c if c == sep && depth == 0 && !quoted => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn starts_with_case(text: &str) -> bool {
    text.get(..5)
        .is_some_and(|t| t.eq_ignore_ascii_case("CASE "))
}

/// Splits `expr:alias` at the last top-level colon.
fn split_alias(item: &str) -> (&str, Option<&str>) {
    let (mut depth, mut quoted) = (0, false);
    let mut at = None;
    for (i, c) in item.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ':' if depth == 0 && !quoted => at = Some(i),
            _ => {}
        }
    }
    match at {
        Some(i) => (&item[..i], Some(&item[i + 1..])),
        None => (item, None),
    }
}

/// A reference-style output name, unless the engine would answer it cut (PostgreSQL cuts
/// them at 63 bytes): such a name needs an alias there.
fn output_name(key: String, engine: Capabilities) -> Result<String, PlanError> {
    match engine.max_output_name_bytes {
        Some(max) if key.len() > max => Err(PlanError::Invalid(format!(
            "@column: '{key}' is longer than the {max} bytes {} allows for a column name; \
             give it an alias: expression:alias",
            engine.name
        ))),
        _ => Ok(key),
    }
}

/// Parses `@column`.
pub(crate) fn columns(text: &str, names: &TableNames<'_>) -> Result<ColumnList, PlanError> {
    let mut items = Vec::new();
    let mut distinct = false;
    for segment in text.split(';') {
        let segment = segment.trim();
        if segment.is_empty() {
            continue;
        }
        let pieces = if segment.contains('(') || starts_with_case(segment) {
            vec![segment]
        } else {
            split_top(segment, ',')
        };
        for raw in pieces {
            let mut item = raw.trim();
            if items.is_empty() {
                if let Some(rest) = item.strip_prefix("DISTINCT ") {
                    distinct = true;
                    item = rest.trim();
                }
            }
            let (expr_text, alias) = split_alias(item);
            // `` `id` ``: a back-quoted column is the column.
            let expr_text = expr_text
                .strip_prefix('`')
                .and_then(|t| t.strip_suffix('`'))
                .filter(|t| is_name(t))
                .unwrap_or(expr_text);
            if let Some(a) = alias {
                if !is_name(a) {
                    return Err(bad_column(item));
                }
            }
            if is_name(expr_text) {
                if expr_text.starts_with('_') {
                    continue; // hidden columns are never selected
                }
                let expr = names.resolve(expr_text)?;
                items.push(SelectItem {
                    expr,
                    alias: Ident::new(alias.unwrap_or(expr_text)),
                });
                continue;
            }
            if !expr_text.contains('(') && !starts_with_case(expr_text) {
                return Err(bad_column(item));
            }
            if expr_text.len() > 100 {
                return Err(PlanError::Forbidden(format!(
                    "@column: '{expr_text}' is longer than 100 characters"
                )));
            }
            let mut p = Parser::new(expr_text, names)?;
            let expr = p.comparison()?;
            if !p.at_end() {
                return Err(bad_column(item));
            }
            let alias = match alias {
                Some(a) => a.to_string(),
                None => output_name(p.key_text(), names.limits.engine)?,
            };
            items.push(SelectItem {
                expr,
                alias: Ident::new(alias),
            });
        }
    }
    if items.is_empty() {
        return Err(PlanError::Invalid(format!(
            "@column: '{text}' selects no column"
        )));
    }
    Ok(ColumnList { items, distinct })
}

/// Parses `@order`: `name-`, `name+`, `name`, `rand()`, comma-separated, no spaces.
pub(crate) fn order(text: &str, names: &TableNames<'_>) -> Result<Vec<OrderItem>, PlanError> {
    let mut out = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if item.eq_ignore_ascii_case("rand()") {
            out.push(OrderItem::Random);
            continue;
        }
        let (name, dir) = if let Some(n) = item.strip_suffix('-') {
            (n, Direction::Desc)
        } else if let Some(n) = item.strip_suffix('+') {
            (n, Direction::Asc)
        } else {
            (item, Direction::Default)
        };
        // The reference refuses function items here (REF-N15): name them in @column with an
        // alias and order by the alias.
        if !is_name(name) {
            return Err(PlanError::Invalid(format!(
                "@order: '{item}' is not valid; each item must be rand() or a column name or \
                 @column alias optionally followed by + or -"
            )));
        }
        out.push(OrderItem::By(names.resolve(name)?, dir));
    }
    Ok(out)
}

/// Parses `@group`: plain names.
pub(crate) fn group(text: &str, names: &TableNames<'_>) -> Result<Vec<Expr>, PlanError> {
    let mut out = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if !is_name(item) {
            return Err(PlanError::Invalid(format!(
                "@group: '{item}' is not a column name"
            )));
        }
        out.push(names.resolve(item)?);
    }
    Ok(out)
}

/// Parses `@having` (items OR-ed) or `@having&` (AND-ed); every item needs a function call
/// or a parenthesised name, as the reference requires since 5.0. The object form
/// (`{"a":"(toId)>0","b":"(avgId)<=100000","@combine":"a | !b"}`, as JSON text) combines its
/// items by its own `@combine` (all AND-ed without one).
pub(crate) fn having(text: &str, and: bool, names: &TableNames<'_>) -> Result<Pred, PlanError> {
    if text.trim_start().starts_with('{') {
        return having_object(text, names);
    }
    let mut preds = Vec::new();
    for item in text.split(';') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        preds.push(having_item(item, names)?);
    }
    Ok(if and {
        Pred::And(preds)
    } else {
        Pred::Or(preds)
    })
}

fn having_item(item: &str, names: &TableNames<'_>) -> Result<Pred, PlanError> {
    if !item.contains('(') {
        return Err(PlanError::Invalid(format!(
            "@having: '{item}' contains no SQL function; write fun(col)>0 or (alias)>0"
        )));
    }
    let mut p = Parser::new(item, names)?;
    let l = p.expr()?;
    let op = p.take_cmp()?;
    let r = p.expr()?;
    if !p.at_end() {
        return Err(PlanError::Invalid(format!(
            "@having: '{item}' is not valid"
        )));
    }
    if contains_window(&l) || contains_window(&r) {
        return Err(PlanError::Invalid(format!(
            "@having: '{item}': a window function (OVER) cannot be used in HAVING"
        )));
    }
    Ok(Pred::Cmp(l, op, r))
}

fn having_object(text: &str, names: &TableNames<'_>) -> Result<Pred, PlanError> {
    check_length("@having", text, names.limits.max_length)?;
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
        .map_err(|_| PlanError::Invalid("@having: the object form must be an object".into()))?;
    let mut items: HashMap<&str, Pred> = HashMap::new();
    let mut order = Vec::new();
    let mut combine = None;
    for (key, value) in &map {
        let serde_json::Value::String(v) = value else {
            return Err(PlanError::WrongType(format!(
                "@having: {{\"{key}\": …}} must be a string like \"fun(col)>0\""
            )));
        };
        if key == "@combine" {
            combine = Some(crate::condition::combine::parse(v, names.limits.max_depth)?);
        } else if key.starts_with('@') {
            return Err(PlanError::Invalid(format!(
                "@having: key {key} is not allowed; the object form takes names and @combine"
            )));
        } else {
            items.insert(key, having_item(v.trim(), names)?);
            order.push(key.as_str());
        }
    }
    let Some(combine) = combine else {
        return Ok(Pred::And(
            order.iter().filter_map(|k| items.remove(k)).collect(),
        ));
    };
    let mentioned = combine.keys();
    if let Some(k) = mentioned.iter().find(|k| !items.contains_key(**k)) {
        return Err(PlanError::Invalid(format!(
            "@having: @combine names {k}, which the @having object does not have"
        )));
    }
    let mut rest: Vec<Pred> = order
        .iter()
        .filter(|k| !mentioned.contains(k))
        .filter_map(|k| items.get(k).cloned())
        .collect();
    rest.push(combined(&combine, &items));
    Ok(Pred::And(rest))
}

/// The predicate of a `@combine` tree (its depth is bounded by `combine::parse`).
fn combined(c: &Combine, items: &HashMap<&str, Pred>) -> Pred {
    match c {
        Combine::Key(k) => items
            .get(k.as_str())
            .cloned()
            .unwrap_or(Pred::And(Vec::new())),
        Combine::Not(inner) => Pred::Not(Box::new(combined(inner, items))),
        Combine::And(cs) => Pred::And(cs.iter().map(|c| combined(c, items)).collect()),
        Combine::Or(cs) => Pred::Or(cs.iter().map(|c| combined(c, items)).collect()),
    }
}

/// Parses `@key`: `"alias:expr;alias2:(col)"`.
pub(crate) fn keys(text: &str, names: &TableNames<'_>) -> Result<HashMap<String, Expr>, PlanError> {
    let mut out = HashMap::new();
    for item in text.split(';') {
        let (alias, expr_text) = item
            .split_once(':')
            .filter(|(a, _)| is_name(a.trim()))
            .ok_or_else(|| {
                PlanError::Invalid(format!("@key: '{item}' must be alias:expression"))
            })?;
        let mut p = Parser::new(expr_text.trim(), names)?;
        let e = p.expr()?;
        out.insert(alias.trim().to_string(), e);
    }
    Ok(out)
}

/// Parses `@cast`: `"key:TYPE,…"` keyed by the full condition key.
pub(crate) fn casts(text: &str) -> Result<HashMap<String, CastType>, PlanError> {
    let mut out = HashMap::new();
    for item in text.split(',') {
        let Some((key, ty)) = item.rsplit_once(':') else {
            return Err(PlanError::Invalid(format!(
                "@cast: '{item}' must be key:TYPE"
            )));
        };
        let t = CastType::parse(ty.trim()).ok_or_else(|| {
            PlanError::WrongType(format!(
                "@cast: type {} is not supported; use {}",
                ty.trim(),
                CastType::NAMES
            ))
        })?;
        out.insert(key.trim().to_string(), t);
    }
    Ok(out)
}
