//! Who may read a table: the `Access` table's role lists and the role's row filter (§13).

use crate::query::{CmpOp, Expr, Ident, Pred};
use crate::schema::Table;
use crate::{Ctx, PlanError};
use apijet_core::{Role, Value};
use serde_json::Value as Json;
use std::sync::Arc;

/// Resolves the table and the role an object runs as, or the reference's refusal:
/// unknown role 406, login needed 407, ADMIN 403, not permitted (or no such table) 401.
pub(crate) fn check(
    api_name: &str,
    role: Option<&Json>,
    ctx: &Ctx<'_>,
) -> Result<(Arc<Table>, Role), PlanError> {
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
    ctx: &Ctx<'_>,
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
