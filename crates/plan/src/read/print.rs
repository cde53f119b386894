//! The printed form of a read plan: one line per statement or member, nested as the answer
//! nests, so that a test can say "this request plans to this" (`crates/plan/tests/printed`).
//!
//! The first line is the method, how the answer is produced and what the read depends on;
//! then each member of the answer under its key: an object's statement (see the printed
//! [`crate::TablePlan`]) with what runs on its row, an array's paging, main statement and SQL
//! joins, and for each other member of its items whether it is read for all items at once (a
//! batch, with its links to the main object), filled from the joined row, or read item by item.

use super::arrays::ArrayPlan;
use super::batch::{BatchKind, BatchPlan};
use super::container::{ContainerPlan, MemberPlan, ObjectPlan};
use super::paging::QueryMode;
use super::{Mode, ReadPlan};
use crate::call::Planned;
use crate::PlanError;
use std::fmt::{self, Display, Formatter, Write};

impl Display for ReadPlan {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            Mode::Point => "point",
            Mode::List => "list",
            Mode::Nested => "nested",
            Mode::General => "general",
        };
        write!(f, "{} {mode}", self.method.name())?;
        let deps = self.dependencies();
        if !deps.tables.is_empty() {
            let tables: Vec<&str> = deps.tables.iter().map(String::as_str).collect();
            write!(f, " reads {}", tables.join(", "))?;
        }
        for (flag, on) in [
            ("opaque", deps.opaque),
            ("volatile", deps.volatile),
            ("format", self.format),
            ("visitor-bound", self.visitor_bound),
            ("by-visitor-id", deps.visitor.id),
            ("by-contacts", deps.visitor.contacts),
            ("explained", deps.explained),
        ] {
            if on {
                write!(f, " {flag}")?;
            }
        }
        f.write_char('\n')?;
        let mut out = String::new();
        container(&mut out, &self.root, 0);
        for (k, v) in &self.customs {
            line(&mut out, 0, format_args!("{k}: echo {v}"));
        }
        f.write_str(&out)
    }
}

fn line(out: &mut String, depth: usize, text: fmt::Arguments<'_>) {
    for _ in 0..depth {
        out.push_str("  ");
    }
    let _ = out.write_fmt(text);
    out.push('\n');
}

fn failed(out: &mut String, depth: usize, key: &str, e: &PlanError) {
    line(out, depth, format_args!("{key}: error: {e}"));
}

fn container(out: &mut String, c: &ContainerPlan, depth: usize) {
    for m in &c.members {
        match m {
            MemberPlan::Object { key, plan } => match plan {
                Ok(o) => object(out, key, o, depth),
                Err(e) => failed(out, depth, key, e),
            },
            MemberPlan::Array { key, plan } => match plan {
                Ok(a) => array(out, key, a, depth),
                Err(e) => failed(out, depth, key, e),
            },
            MemberPlan::Reference { name, path } => {
                line(out, depth, format_args!("{name}: reference {path}"));
            }
            MemberPlan::Subquery { name } => {
                line(out, depth, format_args!("{name}: named subquery"));
            }
            MemberPlan::Function { name, call } => function(out, name, call, depth),
            MemberPlan::CurrentUser { name, plan } => match plan {
                None => line(out, depth, format_args!("{name}: current user (none)")),
                Some(Ok(o)) => object(out, &format!("{name}: current user"), o, depth),
                Some(Err(e)) => failed(out, depth, name, e),
            },
            MemberPlan::Value { key, value } => {
                line(out, depth, format_args!("{key}: echo {value}"));
            }
            MemberPlan::Fail(e) => failed(out, depth, "(member)", e),
        }
    }
}

/// An object: its statement, then what runs on its row.
fn object(out: &mut String, key: &str, o: &ObjectPlan, depth: usize) {
    let template = if o.template.is_some() {
        " [template]"
    } else {
        ""
    };
    line(out, depth, format_args!("{key}: {}{template}", o.table));
    row_work(out, o, depth + 1);
}

/// The functions and children run on an object's row.
fn row_work(out: &mut String, o: &ObjectPlan, depth: usize) {
    for (name, call) in &o.functions {
        function(out, name, call, depth);
    }
    container(out, &o.children, depth);
}

fn function(out: &mut String, name: &str, call: &Planned, depth: usize) {
    match call {
        Ok(call) => line(out, depth, format_args!("{name}: function {call}")),
        Err(e) => failed(out, depth, name, e),
    }
}

fn array(out: &mut String, key: &str, a: &ArrayPlan, depth: usize) {
    let p = &a.paging;
    let query = match p.mode {
        QueryMode::Rows => "",
        QueryMode::Total => " query=total",
        QueryMode::Both => " query=all",
    };
    let compat = if p.compat { " compat" } else { "" };
    let form = match (a.unwrapped, a.extract.is_empty()) {
        (true, true) => " rows".to_string(),
        (true, false) => format!(" rows of {}", a.extract.join("/")),
        (false, _) => String::new(),
    };
    line(
        out,
        depth,
        format_args!(
            "{key}: array count={} page={}{query}{compat}{form}",
            p.count, p.page
        ),
    );
    let depth = depth + 1;
    let template = if a.template.is_some() {
        " [template]"
    } else {
        ""
    };
    line(
        out,
        depth,
        format_args!("{}: main {}{template}", a.main_key, a.main.table),
    );
    row_work(out, &a.main, depth + 1);
    for j in a.joins() {
        let spec = &j.join.spec;
        let on = spec
            .on_key
            .as_deref()
            .map_or(String::new(), |k| format!("/{k}"));
        let carried = j
            .carried
            .as_deref()
            .map_or(String::new(), |p| format!(" [carried as {p}]"));
        line(
            out,
            depth,
            format_args!(
                "join {}/{}{on}: {}{carried}",
                spec.kind, spec.table_key, j.join
            ),
        );
    }
    for (m, key) in a.item_keys.iter().enumerate() {
        if let Some(c) = a.carried.iter().find(|c| c.member == m) {
            line(
                out,
                depth,
                format_args!("{key}: from the joined row ({})", c.prefix),
            );
            row_work(out, &c.object, depth + 1);
            continue;
        }
        match a.batches.get(m).and_then(Option::as_ref) {
            Some(Ok(b)) => batch(out, key, b, depth),
            Some(Err(e)) => failed(out, depth, key, e),
            None => {
                line(out, depth, format_args!("{key}: each item"));
                if let Some(items) = a.items.get(m) {
                    container(out, items, depth + 1);
                }
            }
        }
    }
}

pub(super) fn batch(out: &mut String, key: &str, b: &BatchPlan, depth: usize) {
    let links: Vec<String> = b
        .links
        .iter()
        .map(|l| format!("{} = main.{}", l.vice, l.main))
        .collect();
    let kind = match &b.kind {
        BatchKind::Object => "object".to_string(),
        BatchKind::List {
            count,
            page,
            extract,
            ..
        } => {
            let extract = match extract.is_empty() {
                true => String::new(),
                false => format!(" of {}", extract.join("/")),
            };
            format!("list count={count} page={page}{extract}")
        }
    };
    let added = match b.added.is_empty() {
        true => String::new(),
        false => format!(" [adds {}]", b.added.join(", ")),
    };
    line(
        out,
        depth,
        format_args!(
            "{key}: batch {kind} on {}: {}{added}",
            links.join(", "),
            b.plan
        ),
    );
}
