//! The printed form of a write plan: the method and the tables it changes, the structure's
//! checks, then each root member's statement in request order, an insert's values as planned
//! (`new id` for the id the server gives, `id of [n]` for the id the insert of step n got), and the
//! functions run before and after it.

use super::{ObjectCalls, RowValue, WritePlan, WriteStep};
use crate::call::Planned;
use crate::query::print::{Joined, Literal};
use std::fmt::{self, Display, Formatter, Write};

impl Display for RowValue {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            RowValue::Value(v) => write!(f, "{}", Literal(v)),
            RowValue::NewId => f.write_str("new id"),
            RowValue::IdOf(step) => write!(f, "id of [{step}]"),
        }
    }
}

impl Display for WritePlan {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.method.name())?;
        if !self.changes.is_empty() {
            write!(f, " changes {}", self.changes.join(", "))?;
        }
        if self.queueable {
            f.write_str(" queueable")?;
        }
        f.write_char('\n')?;
        for c in &self.checks {
            let kind = if c.must_exist { "EXIST" } else { "UNIQUE" };
            writeln!(f, "check {kind} {} ({}): {}", c.table, c.described, c.count)?;
        }
        for (i, step) in self.steps.iter().enumerate() {
            write!(f, "[{i}] ")?;
            match step {
                WriteStep::Insert(s) => {
                    let explain = if s.explain { " [@explain]" } else { "" };
                    let batch = if s.batch { " batch" } else { "" };
                    writeln!(f, "{}: insert{batch}{explain}", s.key)?;
                    for (row, calls) in s.rows.iter().zip(&s.calls) {
                        let id = row
                            .id
                            .as_ref()
                            .map_or(String::new(), |id| format!(" id {id}"));
                        writeln!(
                            f,
                            "  INSERT INTO {} ({}) VALUES ({}){id}",
                            s.table,
                            Joined(&row.columns, ", "),
                            Joined(&row.values, ", ")
                        )?;
                        write_calls(f, calls, "    ")?;
                    }
                }
                WriteStep::Update(s) => {
                    writeln!(f, "{}: {}", s.key, s.update)?;
                    for e in &s.edits {
                        let op = if e.add { "+" } else { "-" };
                        writeln!(
                            f,
                            "  edit {}{op} {} from {}",
                            e.column,
                            serde_json::Value::Array(e.items.clone()),
                            e.current
                        )?;
                    }
                    write_calls(f, &s.calls, "  ")?;
                }
                WriteStep::UpdateBatch { key, items } => {
                    writeln!(f, "{key}: update batch")?;
                    for s in items {
                        writeln!(f, "  {}", s.update)?;
                        write_calls(f, &s.calls, "    ")?;
                    }
                }
                WriteStep::Delete(s) => {
                    writeln!(f, "{}: {}", s.key, s.delete)?;
                    write_calls(f, &s.calls, "  ")?;
                }
                WriteStep::Echo { key, value } => writeln!(f, "{key}: echo {value}")?,
                WriteStep::Fail(e) => writeln!(f, "error: {e}")?,
            }
        }
        Ok(())
    }
}

fn write_calls(f: &mut Formatter<'_>, calls: &ObjectCalls, indent: &str) -> fmt::Result {
    let text = |c: &Planned| match c {
        Ok(call) => call.to_string(),
        Err(e) => format!("(error: {e})"),
    };
    for call in &calls.before {
        writeln!(f, "{indent}before: {}", text(call))?;
    }
    for (name, call) in &calls.after {
        writeln!(f, "{indent}after: {name} = {}", text(call))?;
    }
    Ok(())
}
