//! INSERT, UPDATE and DELETE: the statements of writes.

use super::Writer;
use crate::dialect::Dialect;
use crate::Statement;
use apijet_plan::query::{Assign, Delete, Insert, Update};

/// Renders an INSERT of every row in one statement.
pub fn render_insert(dialect: &dyn Dialect, insert: &Insert) -> Statement {
    let mut w = Writer {
        d: dialect,
        binds: Vec::new(),
        listed: None,
    };
    let mut sql = String::with_capacity(64 + insert.rows.len() * insert.columns.len() * 4);
    sql.push_str("INSERT INTO ");
    dialect.quote(insert.table.as_str(), &mut sql);
    sql.push_str(" (");
    for (i, c) in insert.columns.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        dialect.quote(c.as_str(), &mut sql);
    }
    sql.push_str(") VALUES ");
    for (r, row) in insert.rows.iter().enumerate() {
        sql.push_str(if r > 0 { ", (" } else { "(" });
        for (i, v) in row.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            w.bind(v, &mut sql);
        }
        sql.push(')');
    }
    Statement {
        sql,
        binds: w.values(),
        bounded: false,
    }
}

/// Renders an UPDATE.
pub fn render_update(dialect: &dyn Dialect, update: &Update) -> Statement {
    let mut w = Writer {
        d: dialect,
        binds: Vec::new(),
        listed: None,
    };
    let mut sql = String::from("UPDATE ");
    dialect.quote(update.table.as_str(), &mut sql);
    sql.push_str(" SET ");
    for (i, (col, assign)) in update.sets.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        let mut c = String::new();
        dialect.quote(col.as_str(), &mut c);
        sql.push_str(&c);
        sql.push_str(" = ");
        match assign {
            Assign::Value(v) => w.bind(v, &mut sql),
            Assign::Null => sql.push_str("NULL"),
            Assign::Add(v) | Assign::Sub(v) => {
                sql.push_str(&c);
                sql.push_str(if matches!(assign, Assign::Add(_)) {
                    " + "
                } else {
                    " - "
                });
                w.bind(v, &mut sql);
            }
            Assign::Append(v) => {
                let mut ph = String::new();
                w.bind(v, &mut ph);
                dialect.concat(&c, &ph, &mut sql);
            }
            Assign::RemoveText(v) => {
                sql.push_str("replace(");
                sql.push_str(&c);
                sql.push_str(", ");
                w.bind(v, &mut sql);
                sql.push_str(", '')");
            }
        }
    }
    sql.push_str(" WHERE ");
    w.pred(&update.filter, &mut sql);
    limit_write(dialect, update.limit, &mut sql);
    Statement {
        sql,
        binds: w.values(),
        bounded: false,
    }
}

/// Renders a DELETE.
pub fn render_delete(dialect: &dyn Dialect, delete: &Delete) -> Statement {
    let mut w = Writer {
        d: dialect,
        binds: Vec::new(),
        listed: None,
    };
    let mut sql = String::from("DELETE FROM ");
    dialect.quote(delete.table.as_str(), &mut sql);
    sql.push_str(" WHERE ");
    w.pred(&delete.filter, &mut sql);
    limit_write(dialect, delete.limit, &mut sql);
    Statement {
        sql,
        binds: w.values(),
        bounded: false,
    }
}

fn limit_write(dialect: &dyn Dialect, limit: Option<u64>, sql: &mut String) {
    if let (true, Some(n)) = (dialect.limits_writes(), limit) {
        sql.push_str(" LIMIT ");
        sql.push_str(&n.to_string());
    }
}
