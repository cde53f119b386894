//! What a table object's plan becomes per execution: [`TablePlan::select`] completes it with
//! the request's values and the values of references, which exist only once earlier objects
//! have run, decides again what each value decides (an `id` ≤ 0 matches nothing, a list is as
//! long as it is), and passes the statement through the column gate; [`TablePlan::template`]
//! writes it with its slots in place where every value is only bound.

use super::select_list::TableNames;
use super::TablePlan;
use crate::condition::assemble::{cast_values, combine_pred, subquery_pred};
use crate::condition::predicate::{self, Outcome};
use crate::condition::{CondSpec, Operand, Resolver, ValueSource};
use crate::gate;
use crate::query::{Expr, Pred, Select, Source};
use crate::template::{SlotCheck, Template};
use crate::PlanError;
use apijet_request::{Logic, Op};
use serde_json::Value as Json;
use std::collections::HashMap;

impl TablePlan {
    /// The concrete query with the request's `values` in their slots and the references'
    /// values; `None` when the object cannot match (a null reference, `id` ≤ 0, an empty `id{}`
    /// list): no SQL runs and its key is omitted.
    pub fn select(
        &self,
        values: &[Json],
        resolve: Resolver<'_>,
    ) -> Result<Option<Select>, PlanError> {
        self.build(&mut Binding::Values(values, Some(resolve)))
    }

    /// The query without its reference conditions: the vice side of a SQL join, whose
    /// references become the ON clause instead.
    pub fn select_without_refs(&self, values: &[Json]) -> Result<Option<Select>, PlanError> {
        self.build(&mut Binding::Values(values, None))
    }

    /// The query as every request of the shape makes it, when each of its request values is
    /// only bound (see [`Template`]): its slots in place, passed through the column gate.
    pub fn template(&self) -> Option<Template> {
        let mut checks = Vec::new();
        let select = self.build(&mut Binding::Slots(&mut checks)).ok()??;
        Some(Template {
            bounded: select.is_key_lookup(&self.table.keys),
            select,
            checks,
            text: Default::default(),
            names: Default::default(),
        })
    }

    /// The value of a literal or slot condition, in the form its keywords give it.
    fn bound(&self, c: &CondSpec, values: &[Json]) -> Result<Option<Json>, PlanError> {
        Ok(match &c.operand {
            Operand::Literal(v) => Some(c.shaped(v)),
            Operand::Slot(i) => Some(c.shaped(values.get(*i).ok_or_else(|| {
                PlanError::Invalid(format!("{}: the request has no value for it", c.key.raw))
            })?)),
            _ => None,
        })
    }

    fn build(&self, binding: &mut Binding<'_, '_>) -> Result<Option<Select>, PlanError> {
        if let Some(reach) = &self.owner_reach {
            let Binding::Values(values, _) = binding else {
                // The owner ids a request may name are checked on its values.
                return Ok(None);
            };
            for c in &self.conds {
                if let Some(v) = self.bound(c, values)? {
                    reach.check(c, &v)?;
                }
            }
        }
        // Expressions in condition values (`"len{}":"length(len)>1"`) name the columns of
        // the `@from@` derived table, as the keys do, not those of the base table.
        let names = TableNames::of(
            &self.table,
            self.from.as_deref(),
            self.alias.clone(),
            self.limits,
        );
        let mut forced = Vec::new();
        let mut plain = Vec::new();
        let mut by_key: HashMap<&str, Pred> = HashMap::new();
        for c in &self.conds {
            let (values, resolve) = match binding {
                Binding::Values(values, resolve) => (*values, resolve),
                Binding::Slots(checks) => match (&c.operand, c.slot_check()) {
                    (Operand::Slot(slot), Some((op, check))) => {
                        checks.push((*slot, check));
                        let pred = Pred::Cmp(c.lhs.clone(), op, Expr::Slot(*slot));
                        self.place(c, pred, &mut forced, &mut plain, &mut by_key);
                        continue;
                    }
                    (Operand::Literal(_) | Operand::Subquery(..) | Operand::Raw(_), _) => {
                        (&[][..], &mut None)
                    }
                    // A value that is not only bound, or one known only while the plan runs.
                    _ => return Ok(None),
                },
            };
            let value = match &c.operand {
                Operand::Subquery(sub, range) => {
                    Resolved::Pred(subquery_pred(&c.key, &c.lhs, sub, *range)?)
                }
                Operand::Ref(path) => match resolve.as_mut().map(|r| r(ValueSource::Path(path))) {
                    None => continue,
                    Some(Some(v)) if !v.is_null() => Resolved::Value(v),
                    Some(_) => return Ok(None),
                },
                Operand::Function(call) => {
                    match resolve
                        .as_mut()
                        .and_then(|r| r(ValueSource::Function(call)))
                    {
                        Some(v) => Resolved::Value(v),
                        None => continue,
                    }
                }
                Operand::Parent(n) => {
                    match resolve.as_mut().and_then(|r| r(ValueSource::Parent(*n))) {
                        Some(v) => Resolved::Value(v),
                        None => return Ok(None),
                    }
                }
                Operand::Literal(_) | Operand::Slot(_) => match self.bound(c, values)? {
                    Some(v) => Resolved::Value(v),
                    None => continue,
                },
                Operand::Raw(sql) => Resolved::Pred(super::raw::raw_pred(&c.key, &c.lhs, sql)?),
            };
            let pred = match value {
                Resolved::Pred(pred) => pred,
                Resolved::Value(value) => {
                    if c.key.column == "id" && c.key.op == Op::Eq && c.key.logic == Logic::Default {
                        let gone = match &value {
                            Json::Number(n) => n.as_f64().is_some_and(|f| f <= 0.0),
                            Json::String(s) => s.is_empty(),
                            _ => false,
                        };
                        if gone {
                            return Ok(None);
                        }
                    }
                    match predicate::build(&c.key, c.lhs.clone(), &value, &names)? {
                        Outcome::Pred(p) => p,
                        Outcome::Skip => continue,
                        Outcome::NotExist => return Ok(None),
                    }
                }
            };
            self.place(c, pred, &mut forced, &mut plain, &mut by_key);
        }
        let mut all = forced;
        all.extend(self.role_filter.clone());
        all.extend(plain);
        if let Some(cb) = &self.combine {
            all.push(combine_pred(cb, &by_key));
        }
        let source = match &self.from {
            Some(sub) => Source::Select(sub.clone()),
            None => self.table_source(),
        };
        let select = Select {
            distinct: self.distinct,
            columns: self.columns.clone(),
            source,
            alias: self.alias.clone(),
            joins: Vec::new(),
            filter: (!all.is_empty()).then_some(Pred::And(all)),
            group: self.group.clone(),
            having: self.having.clone(),
            order: self.default_order(),
            limit: None,
            offset: 0,
        };
        gate::admit_select(&select, &[self.known()])?;
        Ok(Some(select))
    }

    /// Puts a condition's predicate (cast by `@cast`) where it belongs in WHERE: with the
    /// keys always AND-ed, under `@combine`, or with the others.
    fn place<'c>(
        &self,
        c: &'c CondSpec,
        pred: Pred,
        forced: &mut Vec<Pred>,
        plain: &mut Vec<Pred>,
        by_key: &mut HashMap<&'c str, Pred>,
    ) {
        let pred = match self.casts.get(&c.key.raw) {
            Some(t) => cast_values(pred, *t),
            None => pred,
        };
        if self.is_forced(c) {
            forced.push(pred);
        } else if self
            .combine
            .as_ref()
            .is_some_and(|cb| cb.keys().contains(&c.key.raw.as_str()))
        {
            by_key.insert(&c.key.raw, pred);
        } else {
            plain.push(pred);
        }
    }
}

/// A condition's value once references are looked up.
enum Resolved {
    Pred(Pred),
    Value(Json),
}

/// How [`TablePlan::build`] takes the values of conditions.
enum Binding<'v, 'r> {
    /// The request's values, and the references' (none: without references).
    Values(&'v [Json], Option<Resolver<'r>>),
    /// The request's values as slots, for a [`Template`]: the slots each bound value takes,
    /// with what its value must be.
    Slots(&'v mut Vec<(usize, SlotCheck)>),
}
