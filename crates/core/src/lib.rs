//! apijet-core: the vocabulary every stage shares.
//!
//! Nothing here does I/O or knows about SQL text. It holds the few types that more than one
//! stage must agree on: the APIJSON method, the role names, the database engine, and the
//! bindable [`Value`] that is the only way a client's data can reach a statement.

#![deny(missing_docs)]

mod capabilities;

pub use capabilities::Capabilities;

use std::fmt;

/// The APIJSON method, chosen by the URL path (`/get`, `/head`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Public read.
    Get,
    /// Public count.
    Head,
    /// Private read (login, tag and a `Request` row required).
    Gets,
    /// Private count.
    Heads,
    /// Insert.
    Post,
    /// Update.
    Put,
    /// Delete.
    Delete,
    /// Mixed methods declared per object.
    Crud,
}

impl Method {
    /// The methods a `/{method}` URL segment may name, in the reference's order.
    pub const URL_NAMES: [&'static str; 7] =
        ["get", "head", "gets", "heads", "post", "put", "delete"];

    /// Parses a lower-case URL segment (`get`, `heads`, `crud`).
    pub fn from_url(segment: &str) -> Option<Method> {
        Some(match segment {
            "get" => Method::Get,
            "head" => Method::Head,
            "gets" => Method::Gets,
            "heads" => Method::Heads,
            "post" => Method::Post,
            "put" => Method::Put,
            "delete" => Method::Delete,
            "crud" => Method::Crud,
            _ => return None,
        })
    }

    /// The upper-case name used in messages and in the `Access`/`Request` tables.
    pub fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Gets => "GETS",
            Method::Heads => "HEADS",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Crud => "CRUD",
        }
    }

    /// GET, GETS, HEAD and HEADS read; the others write.
    pub fn is_query(self) -> bool {
        matches!(
            self,
            Method::Get | Method::Head | Method::Gets | Method::Heads
        )
    }

    /// HEAD and HEADS answer counts instead of rows.
    pub fn is_count(self) -> bool {
        matches!(self, Method::Head | Method::Heads)
    }

    /// GET and HEAD need no login, tag or `Request` row.
    pub fn is_public(self) -> bool {
        matches!(self, Method::Get | Method::Head)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The six APIJSON roles (protocol §13.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Anonymous visitor.
    Unknown,
    /// Any logged-in visitor.
    Login,
    /// Rows owned by the visitor's contacts.
    Contact,
    /// Rows owned by the visitor or the visitor's contacts.
    Circle,
    /// Rows owned by the visitor.
    Owner,
    /// Administrator.
    Admin,
}

impl Role {
    /// All role names, in the order the reference lists them in its error message.
    pub const NAMES: [&'static str; 6] =
        ["UNKNOWN", "LOGIN", "CONTACT", "CIRCLE", "OWNER", "ADMIN"];

    /// Parses an upper-case role name.
    pub fn parse(name: &str) -> Option<Role> {
        Some(match name {
            "UNKNOWN" => Role::Unknown,
            "LOGIN" => Role::Login,
            "CONTACT" => Role::Contact,
            "CIRCLE" => Role::Circle,
            "OWNER" => Role::Owner,
            "ADMIN" => Role::Admin,
            _ => return None,
        })
    }

    /// The upper-case name.
    pub fn name(self) -> &'static str {
        Role::NAMES[self as usize]
    }
}

/// The database engine behind a deployment; chosen once at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// Embedded SQLite (the default).
    Sqlite,
    /// PostgreSQL and wire-compatible databases (CockroachDB, YugabyteDB).
    Postgres,
    /// MySQL, MariaDB and wire-compatible databases (TiDB).
    MySql,
}

impl Engine {
    /// A short lower-case name for logs and test output.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
            Engine::MySql => "mysql",
        }
    }
}

/// A value bound to a statement parameter. Client data reaches SQL only as one of these.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// Text; also the carrier for decimals, timestamps and JSON documents, which every engine
    /// parses from text according to the column it meets.
    Text(String),
}

impl Value {
    /// Converts a JSON scalar to a bindable value; arrays and objects become their JSON text,
    /// as the reference binds them (protocol §5.2).
    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::Text(u.to_string())
                } else {
                    Value::Float(n.as_f64().unwrap_or(0.0))
                }
            }
            serde_json::Value::String(s) => Value::Text(s.clone()),
            other => Value::Text(other.to_string()),
        }
    }

    /// The value as JSON, for echoing and for references between objects.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Text(s) => serde_json::Value::String(s.clone()),
        }
    }
}

/// A logged-in visitor: who they are and whose rows CONTACT and CIRCLE reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visitor {
    /// User id.
    pub id: i64,
    /// The ids of the visitor's contacts.
    pub contacts: Vec<i64>,
    /// The schema the login's `defaults` named, when it is not one the server serves: the
    /// reference applies it to every later request of the login, so those without a
    /// `@schema` of their own are refused, naming it.
    pub foreign_schema: Option<String>,
}
