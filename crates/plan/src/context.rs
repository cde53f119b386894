//! What a request is planned with ([`Context`]): one context for verifying it, planning its
//! read and planning its write; and what planning one of its objects adds to it ([`Scope`]).

use crate::schema::SchemaCache;
use crate::verify::RequestRules;
use crate::{query, PlanOptions, Visitor};
use apijet_core::Method;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::ops::Deref;

/// What a request is planned with.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The schema cache.
    pub schema: &'a SchemaCache,
    /// The `Request` structures the private methods are verified by.
    pub rules: &'a RequestRules,
    /// Limits and switches.
    pub options: &'a PlanOptions,
    /// The method.
    pub method: Method,
    /// The visitor, if logged in.
    pub visitor: Option<&'a Visitor>,
    /// The server itself runs this request (`/register`, the account endpoints' writes): its
    /// `Request` structure is a whitelist (only what it names may be sent), and the `Access`
    /// role lists are not consulted. Never set from client input.
    pub trusted: bool,
}

/// The request around an object being planned: its root `@role` and `@explain`, and the
/// subqueries it named before (`"sq@": {…}`, usable as `"k{}@": "sq"` and `"@from@": "sq"`).
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub(crate) context: Context<'a>,
    /// The root `@role`, or the object's where its subqueries run with it.
    pub(crate) global_role: Option<&'a Json>,
    /// The root `@explain`.
    pub(crate) global_explain: bool,
    /// The named subqueries defined so far.
    pub(crate) subqueries: Option<&'a HashMap<String, query::Select>>,
}

impl<'a> Scope<'a> {
    /// An object planned on its own, outside any request's root keywords.
    pub fn new(context: Context<'a>) -> Scope<'a> {
        Scope {
            context,
            global_role: None,
            global_explain: false,
            subqueries: None,
        }
    }

    /// The scope of a request whose root names `role` and `explain`, with its named
    /// subqueries so far.
    pub(crate) fn of_request(
        context: Context<'a>,
        role: Option<&'a Json>,
        explain: bool,
        subqueries: Option<&'a HashMap<String, query::Select>>,
    ) -> Scope<'a> {
        Scope {
            context,
            global_role: role,
            global_explain: explain,
            subqueries,
        }
    }

    /// The subquery named `name` before (`"sq@": {…}`), for `"k{}@": "sq"` and `"@from@": "sq"`.
    pub(crate) fn named_subquery(&self, name: &str) -> Option<query::Select> {
        self.subqueries.and_then(|m| m.get(name)).cloned()
    }
}

impl<'a> Deref for Scope<'a> {
    type Target = Context<'a>;

    fn deref(&self) -> &Context<'a> {
        &self.context
    }
}
