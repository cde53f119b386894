//! Who may read a table: the `Access` table's role lists and the role's row filter (§13).

use crate::query::{CmpOp, Expr, Ident, Pred};
use crate::schema::Table;
use crate::{PlanError, Scope};
use apijet_core::{Role, Value};
use serde_json::Value as Json;
use std::sync::Arc;

/// Resolves the table and the role an object runs as, or the reference's refusal:
/// unknown role 406, login needed 407, ADMIN 403, not permitted (or no such table) 401.
pub(crate) fn check(
    api_name: &str,
    role: Option<&Json>,
    ctx: &Scope<'_>,
) -> Result<(Arc<Table>, Role), PlanError> {
    if ctx.trusted {
        let table = ctx
            .schema
            .table(api_name)
            .ok_or_else(|| PlanError::AccessDenied {
                table: api_name.to_string(),
                role: Role::Unknown,
                method: ctx.method,
            })?;
        return Ok((table.clone(), Role::Unknown));
    }
    let role = match role {
        Some(Json::String(name)) => {
            Role::parse(name).ok_or_else(|| PlanError::UnknownRole(name.clone()))?
        }
        Some(other) => return Err(PlanError::UnknownRole(other.to_string())),
        None if ctx.visitor.is_some() => Role::Login,
        None => Role::Unknown,
    };
    if role != Role::Unknown && ctx.visitor.is_none() {
        return Err(PlanError::NotLoggedIn);
    }
    if role == Role::Admin {
        return Err(PlanError::Forbidden(
            "the ADMIN role is not supported by this server".into(),
        ));
    }
    let denied = || PlanError::AccessDenied {
        table: api_name.to_string(),
        role,
        method: ctx.method,
    };
    let table = ctx.schema.table(api_name).ok_or_else(denied)?;
    if crate::schema::SECRET_TABLES.contains(&table.api_name.as_str()) {
        return Err(denied());
    }
    if (table.system || table.debug_only) && !ctx.options.debug {
        return Err(denied());
    }
    if !table.roles(ctx.method).contains(&role) {
        return Err(denied());
    }
    Ok((table.clone(), role))
}

/// The owner column: `userId` where the table has one, else the table's own `id`
/// (a user owns their own `User` and `Privacy` rows).
pub fn owner_column(table: &Table) -> Option<&str> {
    if table.column("userId").is_some() {
        Some("userId")
    } else if table.column("id").is_some() {
        Some("id")
    } else {
        None
    }
}

/// The row filter a role adds: OWNER `owner = visitor`, CONTACT `owner IN contacts`,
/// CIRCLE `owner IN contacts + visitor`.
pub(crate) fn role_filter(
    table: &Table,
    role: Role,
    ctx: &Scope<'_>,
    alias: &Ident,
) -> Result<Option<Pred>, PlanError> {
    let Some(visitor) = ctx.visitor else {
        return Ok(None);
    };
    let Some(owner) = owner_column(table) else {
        return Ok(None);
    };
    let col = Expr::Column {
        table: Some(alias.clone()),
        name: Ident::new(owner),
        kind: crate::schema::ColumnKind::Int,
    };
    Ok(match role {
        Role::Owner => Some(Pred::Cmp(
            col,
            CmpOp::Eq,
            Expr::Value(Value::Int(visitor.id)),
        )),
        Role::Contact | Role::Circle => {
            let mut ids: Vec<Value> = visitor.contacts.iter().map(|&i| Value::Int(i)).collect();
            if role == Role::Circle {
                ids.push(Value::Int(visitor.id));
            }
            Some(if ids.is_empty() {
                Pred::Or(Vec::new())
            } else {
                Pred::In(col, ids)
            })
        }
        _ => None,
    })
}

/// The column of `table` named exactly `name`, unqualified: for the statements the server
/// writes itself over one table, where a client's spelling never reaches.
pub(crate) fn column_of(table: &Table, name: &str) -> Result<Expr, PlanError> {
    table
        .column(name)
        .map(|c| Expr::Column {
            table: None,
            name: Ident::new(c.name.clone()),
            kind: c.kind,
        })
        .ok_or_else(|| PlanError::UnknownColumn {
            table: table.api_name.clone(),
            column: name.to_string(),
        })
}

/// A server-internal query (login, contact lists): `columns` of `table` where `key = value`.
/// Hidden columns may be named here, since the answer never reaches a client as is.
pub fn lookup(
    table: &Table,
    columns: &[&str],
    key: &str,
    value: Value,
) -> Result<crate::query::Select, PlanError> {
    use crate::query::{Select, SelectItem};
    let col = |name: &str| column_of(table, name);
    let mut items = Vec::with_capacity(columns.len());
    for c in columns {
        items.push(SelectItem {
            expr: col(c)?,
            alias: Ident::new(*c),
        });
    }
    Ok(Select::on_table(
        table,
        items,
        Pred::Cmp(col(key)?, CmpOp::Eq, Expr::Value(value)),
        Some(1),
    ))
}

/// The columns a client may see of `table` (everything not starting with `_`).
pub fn visible_columns(table: &Table) -> Vec<&str> {
    table
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| !n.starts_with('_'))
        .collect()
}

/// OWNER, CONTACT and CIRCLE restrict which owner ids a request may name: an `id`/`userId`
/// value outside the visitor's reach is refused (401) rather than silently matching nothing.
/// The values are only known when the plan runs, so the plan keeps the reach.
#[derive(Debug, Clone)]
pub struct OwnerReach {
    owner: String,
    role: Role,
    method: apijet_core::Method,
    table: String,
    /// The owner ids the visitor may name.
    ids: Vec<i64>,
}

/// The reach of `role` on `table` for the visitor of `ctx`; `None` when every owner id may be
/// named.
pub(crate) fn owner_reach(table: &Table, role: Role, ctx: &Scope<'_>) -> Option<OwnerReach> {
    let visitor = ctx.visitor?;
    let owner = owner_column(table)?;
    let mut ids = match role {
        Role::Owner => Vec::new(),
        Role::Contact | Role::Circle => visitor.contacts.clone(),
        _ => return None,
    };
    if role != Role::Contact {
        ids.push(visitor.id);
    }
    Some(OwnerReach {
        owner: owner.to_string(),
        role,
        method: ctx.method,
        table: table.api_name.clone(),
        ids,
    })
}

impl OwnerReach {
    /// Refuses the value of condition `c` (as bound) when it names an owner out of reach.
    pub(crate) fn check(
        &self,
        c: &crate::condition::CondSpec,
        value: &Json,
    ) -> Result<(), PlanError> {
        use apijet_request::{Logic, Op};
        if c.key.column != self.owner || c.key.logic != Logic::Default {
            return Ok(());
        }
        let ids: Vec<&Json> = match (c.key.op, value) {
            (Op::Eq, v) => vec![v],
            (Op::In, Json::Array(items)) => items.iter().collect(),
            _ => return Ok(()),
        };
        for id in ids {
            let n = id
                .as_i64()
                .or_else(|| id.as_str().and_then(|s| s.parse().ok()));
            if n.is_some_and(|n| !self.ids.contains(&n)) {
                return Err(PlanError::AccessDenied {
                    table: format!("{} = {id} of {}", self.owner, self.table),
                    role: self.role,
                    method: self.method,
                });
            }
        }
        Ok(())
    }
}
