//! apijet-plan: a request tree resolved against the schema cache and the visitor's roles.
//!
//! This is the only stage where client strings become identifiers, and only through the schema
//! cache. Its output ([`query::Select`]) describes each statement without any SQL text; the
//! `sql` stage renders it for one dialect. Objects whose conditions refer to other objects'
//! results are planned once ([`TablePlan`]) and completed per execution ([`TablePlan::select`]).

#![deny(missing_docs)]

mod access;
pub mod call;
mod condition;
mod context;
mod error;
mod expr;
pub mod gate;
pub mod keywords;
mod object;
mod options;
pub mod query;
pub mod read;
pub mod schema;
pub mod shape;
pub mod template;
pub mod verify;
pub mod write;

pub use access::{lookup, owner_column, visible_columns, OwnerReach};
pub use condition::combine::Combine;
pub use condition::path::RefPath;
pub use condition::predicate::check_pattern_budget;
pub use condition::{CondSpec, Operand, Resolver, ValueSource};
pub use expr::functions;
pub use object::{plan_subquery, procedure, raw, TablePlan};

pub use apijet_core::Visitor;
pub use context::{Context, Scope};
pub use error::PlanError;
pub use options::{ExprLimits, PlanOptions};
