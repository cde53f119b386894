//! The objects of the answer: a container's members in request order ([`ContainerPlan`]) and
//! the plan of a table object with what runs on its row ([`ObjectPlan`]).

use super::{ArrayPlan, Dependencies};
use crate::call::{Call, Planned};
use crate::condition::path::RefPath;
use crate::query::Select;
use crate::template::Template;
use crate::{plan_subquery, Context, PlanError, Scope, TablePlan};
use apijet_request::{ConditionKey, Member, Node, Request, TableEntry, TableKey, TableObject};
use serde_json::Value as Json;
use std::collections::HashMap;

/// The members of one JSON object of the answer, in request order.
#[derive(Debug, Default)]
pub struct ContainerPlan {
    /// The members.
    pub members: Vec<MemberPlan>,
}

/// One member of a container.
#[derive(Debug)]
pub enum MemberPlan {
    /// `"Table": {…}`: answered under `key` when it has a row.
    Object {
        /// The key as sent.
        key: String,
        /// Its plan, or why it has none (raised when the read reaches it).
        plan: Result<Box<ObjectPlan>, PlanError>,
    },
    /// `"key[]": {…}`.
    Array {
        /// The key as sent.
        key: String,
        /// Its plan, or why it has none.
        plan: Result<Box<ArrayPlan>, PlanError>,
    },
    /// `"name@": "path"`: an earlier result, answered under `name`.
    Reference {
        /// The answer key.
        name: String,
        /// The path.
        path: RefPath,
    },
    /// `"name@": {…}`: a named subquery (planned into the statements that use it), answered
    /// as `"name": {}` after the other members.
    Subquery {
        /// The answer key.
        name: String,
    },
    /// `"name()": "fn(args)"`: a remote function over the container's results so far.
    Function {
        /// The answer key.
        name: String,
        /// The call.
        call: Planned,
    },
    /// `"name()": "getCurrentUser()"`: the visitor's `User` row (none when not logged in).
    CurrentUser {
        /// The answer key.
        name: String,
        /// The plan of `{"User": {"id": <visitor>}}`.
        plan: Option<Result<Box<ObjectPlan>, PlanError>>,
    },
    /// A value answered as sent.
    Value {
        /// The key.
        key: String,
        /// The value.
        value: Json,
    },
    /// A member that cannot be read (a limit reached, a subquery that does not plan): the read
    /// fails with this error when it reaches it.
    Fail(PlanError),
}

/// A table object: its statement and what runs on its row.
#[derive(Debug)]
pub struct ObjectPlan {
    /// The table key as written (`Comment:c`).
    pub table_key: String,
    /// Its statement.
    pub table: TablePlan,
    /// `k()` and `k+()` functions run on the row, in request order: the answer key and the
    /// call.
    pub functions: Vec<(String, Planned)>,
    /// The objects and arrays nested in it, read once its row is there.
    pub children: ContainerPlan,
    /// Its statement (one row) written once for the shape, when the request's values are
    /// only bound into it.
    pub template: Option<Template>,
}

impl ObjectPlan {
    /// Whether the answer is exactly the statement's row: nothing runs on it, nothing is
    /// added to it, and no two outputs share a name (a row object keeps one member per name).
    pub(super) fn is_point(&self) -> bool {
        let t = &self.table;
        let mut names: Vec<&str> = t.columns.iter().map(|c| c.alias.as_str()).collect();
        names.sort_unstable();
        self.functions.is_empty()
            && self.children.members.is_empty()
            && !t.explain
            && !t.drop
            && t.echoes.is_empty()
            && t.procedures.is_empty()
            && !names.windows(2).any(|w| w[0] == w[1])
    }
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}/{key}")
    }
}

/// The walk over the request that plans it.
pub(super) struct Builder<'a> {
    pub(super) inputs: &'a Context<'a>,
    global_role: Option<&'a Json>,
    global_explain: bool,
    /// Named subqueries defined so far, in request order.
    subqueries: HashMap<String, Select>,
    pub(super) visitor_bound: bool,
    pub(super) has_errors: bool,
    pub(super) deps: Dependencies,
}

impl<'a> Builder<'a> {
    pub(super) fn new(req: &'a Request, inputs: &'a Context<'a>) -> Builder<'a> {
        Builder {
            inputs,
            global_role: req.global("role"),
            global_explain: req
                .global("explain")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            subqueries: HashMap::new(),
            visitor_bound: false,
            has_errors: false,
            deps: Dependencies::default(),
        }
    }

    pub(super) fn ctx(&self) -> Scope<'_> {
        Scope::of_request(
            *self.inputs,
            self.global_role,
            self.global_explain,
            Some(&self.subqueries),
        )
    }

    /// Records what a statement's plan tells about the whole read: what it depends on (see
    /// [`Dependencies`]), and whether it holds the visitor's own values.
    pub(super) fn note(&mut self, plan: &TablePlan) {
        self.deps.note_object(plan);
        if plan.role_filter.is_some() || plan.owner_reach.is_some() {
            self.visitor_bound = true;
        }
    }

    pub(super) fn kept<T>(&mut self, r: Result<T, PlanError>) -> Result<Box<T>, PlanError> {
        self.has_errors |= r.is_err();
        r.map(Box::new)
    }

    pub(super) fn check_depth(&self, path: &str, depth: usize) -> Result<(), PlanError> {
        let max = self.inputs.options.max_depth;
        if depth > max {
            return Err(PlanError::Limit(format!(
                "{path}:{{}} is nested {depth} levels deep, more than the limit of 1-{max} \
                 (setting max_depth)"
            )));
        }
        Ok(())
    }

    /// Plans the members of a container at `path` (as the read will name it: item indices
    /// are those of the first item), `depth` levels deep.
    pub(super) fn container(
        &mut self,
        members: &[Member],
        path: &str,
        depth: usize,
    ) -> ContainerPlan {
        let options = self.inputs.options;
        let mut out = Vec::with_capacity(members.len());
        let (mut tables, mut arrays) = (0usize, 0usize);
        for m in members {
            let member = match &m.node {
                Node::Table(t) => {
                    tables += 1;
                    if tables > options.max_objects {
                        out.push(self.fail(PlanError::Limit(format!(
                            "{path}: the number of objects reaches {tables} at {}:{{}}, more \
                             than the limit of {} (setting max_objects)",
                            m.key, options.max_objects
                        ))));
                        break;
                    }
                    let plan = self.object(t, &join(path, &m.key), depth, true);
                    MemberPlan::Object {
                        key: m.key.clone(),
                        plan: self.kept(plan),
                    }
                }
                Node::Array(a) => {
                    arrays += 1;
                    if arrays > options.max_arrays {
                        out.push(self.fail(PlanError::Limit(format!(
                            "{path}: the number of arrays reaches {arrays} at {}, more than the \
                             limit of {} (a fixed limit, as in the reference)",
                            m.key, options.max_arrays
                        ))));
                        break;
                    }
                    let plan = self.array(a, &m.key, path, depth);
                    MemberPlan::Array {
                        key: m.key.clone(),
                        plan: self.kept(plan),
                    }
                }
                Node::Reference(p) => MemberPlan::Reference {
                    name: m.key.trim_end_matches('@').to_string(),
                    path: RefPath::read(p),
                },
                Node::Subquery(sq) => {
                    let name = m.key.trim_end_matches('@').to_string();
                    match plan_subquery(sq, &self.ctx()) {
                        Ok(select) => {
                            self.subqueries.insert(name.clone(), select);
                            MemberPlan::Subquery { name }
                        }
                        Err(e) => self.fail(e),
                    }
                }
                Node::Function(call) => {
                    let name = m.key.trim_end_matches("()").trim_end_matches(['-', '+']);
                    if call.trim() == "getCurrentUser()" {
                        let plan = self.current_user(path, depth);
                        MemberPlan::CurrentUser {
                            name: name.to_string(),
                            plan,
                        }
                    } else {
                        MemberPlan::Function {
                            name: name.to_string(),
                            call: self.call(call),
                        }
                    }
                }
                Node::Value(v) if m.key.starts_with('@') => {
                    // Root keywords with an object value (`"@gets":{…}`, the CRUD declarations'
                    // object form) are checked like the others; any other `@` key of a
                    // container is a custom value, echoed as the reference does, unless it
                    // looks like a misspelt keyword.
                    let global = [(m.key[1..].to_string(), v.clone())];
                    match crate::keywords::check_root_keywords(&global, self.inputs.method, options)
                    {
                        Err(e) => self.fail(e),
                        Ok(customs) if depth > 1 || !v.is_object() || !customs.is_empty() => {
                            MemberPlan::Value {
                                key: m.key.clone(),
                                value: v.clone(),
                            }
                        }
                        Ok(_) => continue,
                    }
                }
                Node::Value(v) => MemberPlan::Value {
                    key: m.key.clone(),
                    value: v.clone(),
                },
            };
            out.push(member);
        }
        ContainerPlan { members: out }
    }

    /// A remote function call, read; one that cannot be read is kept as its error.
    fn call(&mut self, text: &str) -> Planned {
        let call = Call::read(text);
        self.has_errors |= call.is_err();
        self.deps.visitor.note_call(&call);
        call
    }

    fn fail(&mut self, e: PlanError) -> MemberPlan {
        self.has_errors = true;
        MemberPlan::Fail(e)
    }

    /// A table object read on its own (`k-()` functions give conditions).
    pub(super) fn object(
        &mut self,
        t: &TableObject,
        path: &str,
        depth: usize,
        functions: bool,
    ) -> Result<ObjectPlan, PlanError> {
        self.check_depth(path, depth)?;
        let ctx = self.ctx();
        let table = match functions {
            true => TablePlan::with_functions(t, &ctx)?,
            false => TablePlan::new(t, &ctx)?,
        };
        Ok(self.finish(t, table, path, depth))
    }

    /// What runs on the row of `t` (planned as `table`) at `path`, `depth` levels deep.
    pub(super) fn finish(
        &mut self,
        t: &TableObject,
        table: TablePlan,
        path: &str,
        depth: usize,
    ) -> ObjectPlan {
        self.note(&table);
        let functions = t
            .entries
            .iter()
            .filter_map(|e| match e {
                TableEntry::Function { key, call } if !key.ends_with("-()") => Some((
                    key.trim_end_matches("()").trim_end_matches('+').to_string(),
                    call,
                )),
                _ => None,
            })
            .map(|(name, call)| (name, self.call(call)))
            .collect();
        // A count answers no row, so nothing nested in it is read.
        let children = if self.inputs.method.is_count() {
            ContainerPlan::default()
        } else {
            let members: Vec<Member> = t
                .entries
                .iter()
                .filter_map(|e| match e {
                    TableEntry::Child(m) => Some((**m).clone()),
                    _ => None,
                })
                .collect();
            self.container(&members, path, depth + 1)
        };
        // A count's statement is made from the object's (see `TablePlan::count_select`).
        let template = match self.inputs.method.is_count() {
            true => None,
            false => table.template().map(|mut t| {
                t.select.limit = Some(1);
                t
            }),
        };
        ObjectPlan {
            table_key: t.key.text(),
            table,
            functions,
            children,
            template,
        }
    }

    /// `getCurrentUser()`: the visitor's `User` row, planned as `{"User":{"id":…}}` would be.
    fn current_user(
        &mut self,
        container: &str,
        depth: usize,
    ) -> Option<Result<Box<ObjectPlan>, PlanError>> {
        let visitor = self.inputs.visitor?;
        self.visitor_bound = true;
        self.deps.visitor.id = true;
        let object = (|| {
            let key = TableKey::parse("User")
                .ok_or_else(|| PlanError::Invalid("User is not a table key".into()))?;
            let id = ConditionKey::parse("id").map_err(|e| PlanError::Invalid(e.to_string()))?;
            Ok(TableObject {
                key,
                entries: vec![TableEntry::Condition {
                    key: id,
                    value: Json::from(visitor.id),
                }],
            })
        })();
        let plan =
            object.and_then(|t| self.object(&t, &join(container, "__currentUser"), depth, true));
        Some(self.kept(plan))
    }
}
