//! What planning one object needs to know about its request.

use crate::schema::SchemaCache;
use crate::{query, PlanOptions, Visitor};
use apijet_core::Method;

/// Everything planning one object needs to know about its request.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The schema cache.
    pub schema: &'a SchemaCache,
    /// Limits and switches.
    pub options: &'a PlanOptions,
    /// The object's method.
    pub method: Method,
    /// The visitor, if logged in.
    pub visitor: Option<&'a Visitor>,
    /// The root `@role`.
    pub global_role: Option<&'a serde_json::Value>,
    /// The root `@explain`.
    pub global_explain: bool,
    /// Named subqueries defined so far (`"sql@": {…}`), usable as `"k{}@": "sql"` and
    /// `"@from@": "sql"`.
    pub subqueries: Option<&'a std::collections::HashMap<String, query::Select>>,
    /// The server itself runs this request (`/register`): the `Request` structure has shaped
    /// it, and the `Access` role lists are not consulted. Never set from client input.
    pub trusted: bool,
}

impl Ctx<'_> {
    /// The subquery named `name` before (`"sq@": {…}`), for `"k{}@": "sq"` and `"@from@": "sq"`.
    pub(crate) fn named_subquery(&self, name: &str) -> Option<query::Select> {
        self.subqueries.and_then(|m| m.get(name)).cloned()
    }
}
