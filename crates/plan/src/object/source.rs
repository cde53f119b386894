//! Where an object's rows come from: its table and the role it reads as (`@role`, or the
//! root's, against the table's `Access` lists), its alias in SQL, and a derived table
//! (`@from@`, a subquery or one named before).

use super::select_list::TableNames;
use super::Keywords;
use crate::query::{Ident, Select};
use crate::schema::Table;
use crate::{access, PlanError, Scope};
use apijet_core::Role;
use apijet_request::{TableEntry, TableObject};
use serde_json::Value as Json;
use std::sync::Arc;

/// The rows an object reads.
pub(super) struct Source {
    pub(super) table: Arc<Table>,
    pub(super) role: Role,
    pub(super) alias: Ident,
    pub(super) from: Option<Box<Select>>,
}

/// The source of `obj`, and the context its subqueries are planned in.
pub(super) fn source<'c>(
    obj: &'c TableObject,
    kw: Keywords<'c>,
    ctx: &Scope<'c>,
) -> Result<(Source, Scope<'c>), PlanError> {
    let role_value = kw.value("role").or(ctx.global_role);
    let (table, role) = access::check(&obj.key.table, role_value, ctx)?;
    // Under a Request structure, the subqueries of an object run with the object's role
    // unless they name one: a subquery is part of what the tag allows, not a way around it.
    let nested = Scope {
        global_role: if ctx.method.is_public() {
            ctx.global_role
        } else {
            role_value
        },
        ..*ctx
    };
    // Writes name their table without an alias (not every engine accepts one in UPDATE and
    // DELETE), so their conditions are qualified with the table's own name.
    let alias = if ctx.method.is_query() {
        Ident::new(obj.key.sql_alias())
    } else {
        Ident::new(table.sql_name.clone())
    };
    let from = match obj.entries.iter().find_map(|e| match e {
        TableEntry::FromSubquery(sq) => Some(sq),
        _ => None,
    }) {
        Some(sq) => Some(Box::new(super::subquery::plan_subquery(sq, &nested)?)),
        None => match kw.value("from@").and_then(Json::as_str) {
            Some(name) => Some(Box::new(ctx.named_subquery(name).ok_or_else(|| {
                PlanError::Invalid(format!("@from@:'{name}' names no subquery defined before"))
            })?)),
            None => None,
        },
    };
    let source = Source {
        table,
        role,
        alias,
        from,
    };
    Ok((source, nested))
}

impl Source {
    /// The names the object's expressions resolve against: the table's columns (or the
    /// derived table's outputs), qualified with its alias.
    pub(super) fn names(&self, ctx: &Scope<'_>) -> TableNames<'_> {
        TableNames::of(
            &self.table,
            self.from.as_deref(),
            self.alias.clone(),
            ctx.options.expr,
        )
    }
}
