//! Plans by request shape: a request whose shape was planned before binds its values into
//! that plan instead of being planned again.
//!
//! The shape is the request with its condition values in slots ([`crate::shape`]), written out
//! whole (every key, keyword and value left in it), and keyed with what planning reads beside
//! the request: the method and whether the visitor is logged in (the role of an object without
//! `@role` is UNKNOWN or LOGIN by that alone, and the `Access` check is decided by the role). A
//! plan that holds the visitor's own values (a role's row filter, `getCurrentUser()`) or an
//! error is not kept. The cache belongs to the schema snapshot, so a reload starts it empty;
//! past [`PLAN_SHAPES`] shapes, an arbitrary one makes room.

use super::{ReadInputs, ReadPlan};
use crate::PlanError;
use apijet_core::Method;
use apijet_request::Request;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Shapes kept per snapshot.
pub const PLAN_SHAPES: usize = 1024;

/// What a plan is kept under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShapeKey {
    method: Method,
    logged_in: bool,
    shape: String,
}

impl ShapeKey {
    /// The key of the request `req`, whose condition values are slots already.
    pub fn of(req: &Request, method: Method, logged_in: bool) -> ShapeKey {
        use std::fmt::Write;
        let mut shape = String::with_capacity(256);
        // Every field of the tree, by the derived `Debug`: a field added later is in the key too.
        let _ = write!(shape, "{req:?}");
        ShapeKey {
            method,
            logged_in,
            shape,
        }
    }

    /// The request's shape, as written in the key.
    pub fn shape(&self) -> &str {
        &self.shape
    }
}

/// Read plans by shape.
#[derive(Debug, Default)]
pub struct PlanCache {
    plans: RwLock<HashMap<ShapeKey, Arc<ReadPlan>>>,
}

impl PlanCache {
    /// The plan of `req` (condition values in slots): the one kept for its shape, else a new
    /// one, kept when it may be shared.
    pub fn plan(&self, req: &Request, inputs: &ReadInputs<'_>) -> Result<Arc<ReadPlan>, PlanError> {
        let key = ShapeKey::of(req, inputs.method, inputs.visitor.is_some());
        if let Some(plan) = self.plans.read().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(plan);
        }
        let plan = Arc::new(ReadPlan::build(req, inputs)?);
        if !plan.visitor_bound && !plan.has_errors {
            self.put(key, Arc::clone(&plan));
        }
        Ok(plan)
    }

    /// Shapes kept.
    pub fn len(&self) -> usize {
        self.plans.read().map_or(0, |m| m.len())
    }

    /// Whether no shape is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn put(&self, key: ShapeKey, plan: Arc<ReadPlan>) {
        let Ok(mut plans) = self.plans.write() else {
            return;
        };
        if plans.len() >= PLAN_SHAPES && !plans.contains_key(&key) {
            if let Some(old) = plans.keys().next().cloned() {
                plans.remove(&old);
            }
        }
        plans.insert(key, plan);
    }
}
