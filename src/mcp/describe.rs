//! `describe`: what this visitor may use, from the schema snapshot the requests are planned
//! against — the tables the public OpenAPI document shows (never `Verify`, nor `_` columns;
//! system tables only in debug mode) that grant this visitor some method, their columns with
//! types, the methods and roles the `Access` rows grant, the `Request` structures a logged-in
//! visitor may call, the functions requests may call — with the comments and demos of
//! [`super::details`].

use super::details::Details;
use crate::pipeline::snapshot::Snapshot;
use apijet_core::{Method, Role, Visitor};
use apijet_plan::schema::Table;
use apijet_plan::PlanOptions;
use apijet_request::is_table_key;
use serde_json::{json, Map, Value as Json};

/// The methods `Access` grants, in its column order, by their tool names.
const METHODS: [(Method, &str); 7] = [
    (Method::Get, "get"),
    (Method::Head, "head"),
    (Method::Gets, "gets"),
    (Method::Heads, "heads"),
    (Method::Post, "post"),
    (Method::Put, "put"),
    (Method::Delete, "delete"),
];

/// The roles a visitor may act as: anonymous visitors only `UNKNOWN`; ADMIN is refused to
/// everyone (as the reference's default verifier does).
pub(crate) fn roles_of(visitor: Option<&Visitor>) -> &'static [Role] {
    const ANONYMOUS: [Role; 1] = [Role::Unknown];
    const LOGGED_IN: [Role; 5] = [
        Role::Unknown,
        Role::Login,
        Role::Contact,
        Role::Circle,
        Role::Owner,
    ];
    match visitor {
        Some(_) => &LOGGED_IN,
        None => &ANONYMOUS,
    }
}

/// What `describe` answers the visitor; `only` names the tables to describe (none: all).
pub(crate) struct Describe<'a> {
    pub snapshot: &'a Snapshot,
    pub details: &'a Details,
    pub options: &'a PlanOptions,
    pub visitor: Option<&'a Visitor>,
    pub max_answer_bytes: usize,
}

impl Describe<'_> {
    /// The tables of the snapshot this visitor may use at all, sorted by name.
    pub(crate) fn tables(&self) -> Vec<&Table> {
        let roles = roles_of(self.visitor);
        let mut tables: Vec<&Table> = self
            .snapshot
            .schema
            .tables()
            .map(|t| t.as_ref())
            .filter(|t| crate::openapi::visible(t, self.options.debug))
            .filter(|t| {
                METHODS
                    .iter()
                    .any(|(m, _)| t.roles(*m).iter().any(|r| roles.contains(r)))
            })
            .collect();
        tables.sort_by(|a, b| a.api_name.cmp(&b.api_name));
        tables
    }

    /// The whole answer.
    pub(crate) fn answer(&self, only: Option<&[String]>) -> Map<String, Json> {
        let usable = self.tables();
        let rules = self.requests();
        let mut tables = Vec::new();
        let mut unknown = Vec::new();
        match only {
            Some(names) => {
                for name in names {
                    match usable.iter().find(|t| &t.api_name == name) {
                        Some(t) => tables.push(self.table(t, &rules)),
                        None => unknown.push(name.clone()),
                    }
                }
            }
            None => tables = usable.iter().map(|t| self.table(t, &rules)).collect(),
        }
        let mut out = Map::new();
        out.insert("visitor".into(), self.who());
        out.insert("tables".into(), Json::Array(tables));
        if !unknown.is_empty() {
            out.insert(
                "not_served".into(),
                json!({
                    "tables": unknown,
                    "msg": "no table of these names is served to you (names are case-sensitive)"
                }),
            );
        }
        let shown: Vec<Json> = rules
            .iter()
            .filter(|r| only.is_none_or(|names| r.tables.iter().any(|t| names.contains(t))))
            .map(|r| r.shown.clone())
            .collect();
        out.insert("requests".into(), Json::Array(shown));
        out.insert("functions".into(), Json::Array(self.functions()));
        out.insert(
            "limits".into(),
            json!({
                "max_count": self.options.max_count,
                "max_page": self.options.max_page,
                "max_depth": self.options.max_depth,
                "max_objects": self.options.max_objects,
                "mcp_max_answer_bytes": self.max_answer_bytes,
            }),
        );
        out
    }

    fn who(&self) -> Json {
        let roles: Vec<&str> = roles_of(self.visitor).iter().map(|r| r.name()).collect();
        match self.visitor {
            Some(v) => json!({"logged_in": true, "id": v.id, "roles": roles}),
            None => json!({
                "logged_in": false,
                "roles": roles,
                "msg": "not logged in: public reads (get, head) only; private reads and writes \
                        need a token from /login"
            }),
        }
    }

    fn table(&self, t: &Table, rules: &[Rule]) -> Json {
        let roles = roles_of(self.visitor);
        let columns: Vec<Json> = t
            .columns
            .iter()
            .filter(|c| !c.name.starts_with('_'))
            .map(|c| {
                let mut col = json!({"name": c.name, "type": crate::console::type_name(c.kind)});
                let key = (t.sql_name.clone(), c.name.clone());
                if let Some(comment) = self.details.columns.get(&key) {
                    col["comment"] = json!(comment);
                }
                col
            })
            .collect();
        let mut methods = Map::new();
        for (method, name) in METHODS {
            let granted: Vec<&str> = if method.is_public() {
                t.roles(method)
                    .iter()
                    .filter(|r| roles.contains(r))
                    .map(|r| r.name())
                    .collect()
            } else {
                // A private method needs a Request structure naming the table; it runs as
                // the structure's role.
                let mut via: Vec<&str> = rules
                    .iter()
                    .filter(|r| r.method == method && r.tables.contains(&t.api_name))
                    .map(|r| r.role.name())
                    .collect();
                via.sort_unstable();
                via.dedup();
                via
            };
            if !granted.is_empty() {
                methods.insert(name.into(), json!(granted));
            }
        }
        let mut out = json!({"name": t.api_name, "columns": columns, "methods": methods});
        if let Some(comment) = self.details.tables.get(&t.sql_name) {
            out["comment"] = json!(comment);
        }
        out
    }

    /// The `Request` structures this visitor may call: a logged-in visitor, and tables that
    /// grant the method to a role the visitor may act as. Their structures only in debug mode,
    /// as `/openapi.json` shows them.
    fn requests(&self) -> Vec<Rule> {
        if self.visitor.is_none() {
            return Vec::new();
        }
        let roles = roles_of(self.visitor);
        let schema = &self.snapshot.schema;
        let mut out: Vec<Rule> = Vec::new();
        for ((method, tag, version), detail) in &self.details.requests {
            let Some(rule) = self.snapshot.rules.find(*method, tag, Some(*version)) else {
                continue;
            };
            if rule.version != *version {
                continue;
            }
            let tables = rule_tables(tag, &rule.structure, |name| {
                schema
                    .table(name)
                    .is_some_and(|t| crate::openapi::visible(t, self.options.debug))
            });
            // A private request runs as the role its structure sets, else as LOGIN.
            let role = structure_role(&rule.structure).unwrap_or(Role::Login);
            let allowed = roles.contains(&role)
                && !tables.is_empty()
                && tables.iter().all(|name| {
                    schema
                        .table(name)
                        .is_some_and(|t| t.roles(*method).contains(&role))
                });
            let Some((_, tool)) = METHODS.iter().find(|(m, _)| m == method) else {
                continue;
            };
            if !allowed || method.is_public() {
                continue;
            }
            let mut shown = json!({
                "method": tool,
                "tag": tag,
                "version": version,
                "tables": tables,
                "role": role.name(),
                "detail": detail,
            });
            if self.options.debug {
                shown["structure"] = rule.structure.clone();
            }
            out.push(Rule {
                method: *method,
                role,
                tables,
                shown,
            });
        }
        out.sort_by(|a, b| {
            (a.shown["tag"].as_str(), a.shown["method"].as_str())
                .cmp(&(b.shown["tag"].as_str(), b.shown["method"].as_str()))
        });
        out
    }

    /// The `Function` rows requests may call: in `get` and `head` (private requests may not
    /// call functions), those whose `methods` allow one of them; debug rows in debug mode.
    fn functions(&self) -> Vec<Json> {
        self.details
            .functions
            .iter()
            .filter(|f| self.options.debug || !f.debug)
            .filter(|f| f.methods.is_empty() || f.methods.iter().any(|m| m == "get" || m == "head"))
            .map(|f| {
                let mut doc = f.doc.clone();
                let name = doc.get("name").and_then(Json::as_str).unwrap_or_default();
                let args = doc
                    .get("arguments")
                    .and_then(Json::as_str)
                    .unwrap_or_default();
                doc.insert(
                    "usage".into(),
                    json!(format!(
                        "in a get or head request: \"key()\":\"{name}({args})\" inside a table \
                         object, the arguments naming keys of that object"
                    )),
                );
                Json::Object(doc)
            })
            .collect()
    }
}

/// A `Request` structure as `describe` lists it.
struct Rule {
    method: Method,
    /// The role it runs as.
    role: Role,
    /// The tables it names, by API name.
    tables: Vec<String>,
    shown: Json,
}

/// The role a `Request` structure gives its request (`"@role"` in its `UPDATE` or `INSERT`,
/// at its root or in one of its table objects).
fn structure_role(structure: &Json) -> Option<Role> {
    let given = |level: &Json| {
        ["UPDATE", "INSERT"]
            .iter()
            .find_map(|op| level.get(op)?.get("@role")?.as_str())
            .and_then(Role::parse)
    };
    given(structure).or_else(|| {
        structure
            .as_object()?
            .values()
            .filter(|v| v.is_object())
            .find_map(given)
    })
}

/// The tables a `Request` row touches: its tag's table (`Comment`, `Comment[]`,
/// `Comment:[]`), else the table objects of its structure (`register`, `balance+`).
fn rule_tables(tag: &str, structure: &Json, served: impl Fn(&str) -> bool) -> Vec<String> {
    let table = tag.trim_end_matches(":[]").trim_end_matches("[]");
    if served(table) {
        return vec![table.to_string()];
    }
    let mut out: Vec<String> = structure
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .map(|k| k.trim_end_matches("[]"))
        .filter(|k| is_table_key(k) && served(k))
        .map(str::to_string)
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::{rule_tables, structure_role};
    use apijet_core::Role;
    use serde_json::json;

    #[test]
    fn a_structure_gives_its_role_at_its_root_or_in_a_table_object() {
        let owner = json!({"MUST": "id", "UPDATE": {"@role": "OWNER"}});
        assert_eq!(structure_role(&owner), Some(Role::Owner));
        let nested = json!({"Privacy": {"INSERT": {"@role": "CIRCLE"}}});
        assert_eq!(structure_role(&nested), Some(Role::Circle));
        assert_eq!(structure_role(&json!({"Privacy": {"MUST": "id"}})), None);
    }

    #[test]
    fn a_rule_touches_its_tags_table_else_the_tables_of_its_structure() {
        let served = |t: &str| matches!(t, "Comment" | "Privacy" | "User");
        assert_eq!(rule_tables("Comment:[]", &json!({}), served), ["Comment"]);
        assert_eq!(rule_tables("Comment[]", &json!({}), served), ["Comment"]);
        assert_eq!(
            rule_tables("balance+", &json!({"Privacy": {"MUST": "id"}}), served),
            ["Privacy"]
        );
        assert_eq!(
            rule_tables(
                "register",
                &json!({"Privacy": {}, "User": {}, "MUST": "x"}),
                served
            ),
            ["Privacy", "User"]
        );
        assert!(rule_tables("Verify", &json!({}), served).is_empty());
    }
}
