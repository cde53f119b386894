//! Containers and objects in request order: the members of each, the row of each object and
//! what runs on it.

use super::{accepting, join, written, BoxFuture, Reader, Site};
use crate::functions;
use crate::ExecError;
use apijet_plan::read::{ContainerPlan, MemberPlan, ObjectPlan};
use apijet_sql::{render, Statement};
use serde_json::{json, Map, Value as Json};

impl<'a> Reader<'a> {
    /// Evaluates a container's members; returns false when the first-child rule emptied it.
    pub(super) fn container<'s>(
        &'s mut self,
        c: &'a ContainerPlan,
        path: &'s str,
        out: &'s mut Map<String, Json>,
        first_rule: bool,
    ) -> BoxFuture<'s, Result<bool, ExecError>>
    where
        'a: 's,
    {
        Box::pin(async move {
            let mut first = first_rule;
            // Named subqueries are echoed as `"name": {}` after the other members, as the
            // reference answers them.
            let mut subquery_echoes = Vec::new();
            for m in &c.members {
                match m {
                    MemberPlan::Object { key, plan } => {
                        let plan = plan.as_ref().map_err(Clone::clone)?;
                        let obj_path = join(path, key);
                        match self.object(plan, &obj_path, path).await? {
                            Some((obj, drop)) => {
                                if drop && first {
                                    out.clear();
                                    return Ok(false);
                                }
                                if !drop {
                                    out.insert(key.clone(), obj);
                                }
                            }
                            None if first => {
                                out.clear();
                                return Ok(false);
                            }
                            None => {}
                        }
                        first = false;
                    }
                    MemberPlan::Array { key, plan } => {
                        let plan = plan.as_ref().map_err(Clone::clone)?;
                        let res = self.array(plan, key, path).await?;
                        if let Some((total, info)) = res.totals {
                            out.insert(plan.totals_keys.0.clone(), total);
                            out.insert(plan.totals_keys.1.clone(), info);
                        }
                        match res.value {
                            Some(v) => {
                                if self.plan.refs.whole_arrays.contains(key) {
                                    self.results.insert(join(path, key), v.clone());
                                }
                                out.insert(key.clone(), v);
                            }
                            None if first && res.empty => {
                                out.clear();
                                return Ok(false);
                            }
                            None => {}
                        }
                        first = false;
                    }
                    MemberPlan::Reference { name, path: p } => {
                        if let Some(v) = self.resolve(p, path) {
                            self.results.insert(join(path, name), v.clone());
                            out.insert(name.clone(), v);
                        }
                    }
                    MemberPlan::Subquery { name } => subquery_echoes.push(name.clone()),
                    MemberPlan::Function { name, call } => {
                        if let Some(v) = functions::call(call, out, self.env.visitor)? {
                            // Referable like any result: `"User":{"id@":"curId"}`.
                            self.results.insert(join(path, name), v.clone());
                            out.insert(name.clone(), v);
                        }
                    }
                    MemberPlan::CurrentUser { name, plan } => {
                        let value = match plan {
                            None => None,
                            Some(plan) => {
                                let plan = plan.as_ref().map_err(Clone::clone)?;
                                let user_path = join(path, "__currentUser");
                                self.object(plan, &user_path, path).await?.map(|(v, _)| v)
                            }
                        };
                        if let Some(v) = value {
                            self.results.insert(join(path, name), v.clone());
                            out.insert(name.clone(), v);
                        }
                    }
                    MemberPlan::Value { key, value } => {
                        out.insert(key.clone(), value.clone());
                    }
                    MemberPlan::Fail(e) => return Err(e.clone().into()),
                }
            }
            for name in subquery_echoes {
                out.insert(name, json!({}));
            }
            Ok(true)
        })
    }

    /// One table object; `None` when it has no row (or cannot match).
    pub(super) async fn object(
        &mut self,
        plan: &'a ObjectPlan,
        obj_path: &str,
        container: &str,
    ) -> Result<Option<(Json, bool)>, ExecError> {
        let table = &plan.table;
        if let Some(stmt) =
            accepting(plan.template.as_ref(), self.env).map(|t| written(t, self.env))
        {
            return self.row_object(plan, &stmt, obj_path).await;
        }
        let Some(mut select) = self.bind(plan, container)? else {
            return Ok(None);
        };
        if self.plan.method.is_count() {
            let count_select = table.count_select(select);
            let stmt = render(self.env.dialect, &count_select);
            let n = self.count(&count_select).await?;
            // The answer's envelope goes around the count (see `Form::Members`).
            let mut obj = Map::new();
            if table.explain {
                obj.insert("@explain".into(), self.explain(&stmt).await?);
            }
            obj.insert("count".into(), Json::from(n));
            return Ok(Some((Json::Object(obj), table.drop)));
        }
        select.limit = Some(1);
        let stmt = render(self.env.dialect, &select);
        self.row_object(plan, &stmt, obj_path).await
    }

    /// The object answered from the row of its statement `stmt`.
    async fn row_object(
        &mut self,
        plan: &'a ObjectPlan,
        stmt: &Statement,
        obj_path: &str,
    ) -> Result<Option<(Json, bool)>, ExecError> {
        let table = &plan.table;
        let explain = table.explain && !self.quiet_explain.contains(&plan.table_key);
        let rows = self.rows(stmt, &table.json_outputs).await?;
        let Some(obj) = rows.into_iter().next() else {
            // With @explain the object answers its statement even when no row matched.
            if !explain {
                return Ok(None);
            }
            let explained = self.explain(stmt).await?;
            return Ok(Some((json!({ "@explain": explained }), table.drop)));
        };
        let site = Site {
            path: obj_path,
            explain,
        };
        let obj = self.finish_object(plan, obj, stmt, site).await?;
        Ok(Some((Json::Object(obj), table.drop)))
    }

    /// Adds echoes, `@explain`, functions and children to a fetched row.
    pub(super) async fn finish_object(
        &mut self,
        plan: &'a ObjectPlan,
        mut obj: Map<String, Json>,
        stmt: &Statement,
        site: Site<'_>,
    ) -> Result<Map<String, Json>, ExecError> {
        let Site {
            path: obj_path,
            explain,
        } = site;
        let table = &plan.table;
        for (k, v) in &table.echoes {
            obj.insert(k.clone(), v.clone());
        }
        if explain {
            let mut first = Map::with_capacity(obj.len() + 1);
            first.insert("@explain".into(), self.explain(stmt).await?);
            first.extend(obj);
            obj = first;
        }
        for (name, call) in &plan.functions {
            if let Some(v) = functions::call(call, &obj, self.env.visitor)? {
                obj.insert(name.clone(), v);
            }
        }
        for call in &table.procedures {
            let opts = self.env.options;
            let answer = crate::procedure::run(
                self.backend,
                self.env.dialect,
                call,
                &obj,
                opts.max_rows,
                opts.max_answer_bytes,
            )
            .await?;
            self.statements
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Some(v) = answer {
                obj.insert(call.answer_key.clone(), v);
            }
        }
        let keep = self.plan.refs.object(obj_path);
        if keep {
            self.results
                .insert(obj_path.to_string(), Json::Object(obj.clone()));
        }
        if !plan.children.members.is_empty() {
            self.container(&plan.children, obj_path, &mut obj, false)
                .await?;
            if keep {
                self.results
                    .insert(obj_path.to_string(), Json::Object(obj.clone()));
            }
        }
        Ok(obj)
    }
}
