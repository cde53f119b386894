//! The demo tables, described once and spelled per engine.
//!
//! Table and column names follow the APIJSON demo database, because APIJSON clients (APIAuto,
//! the reference test cases, hand-written requests from the docs) expect exactly those names:
//! `apijson_user` exposed as `User`, `Moment.praiseUserIdList`, `Access.get`, and so on.
//! Ids have no auto-increment: an APIJSON server generates ids itself on POST (protocol §10.1).

use apijet_core::Engine;

use super::sql::{ident, quote_str};

/// The portable type of a column; [`Ty::spell`] maps it to each engine's type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// The 64-bit primary key `id`.
    Id,
    /// A 64-bit integer (foreign ids).
    BigInt,
    /// A small integer used as a flag or enum (`sex`, `certified`, `debug`, `version`).
    TinyInt,
    /// Bounded text.
    Varchar(u32),
    /// A JSON document. SQLite has no JSON type, so the column is declared `JSON`: the server
    /// recognises JSON columns there by that declared type and answers them as JSON values.
    Json,
    /// A UTC timestamp without zone; text `YYYY-MM-DD HH:MM:SS` on SQLite.
    DateTime,
    /// Money: `decimal(10,2)`.
    Decimal,
}

impl Ty {
    /// The type name on `engine`.
    fn spell(self, engine: Engine) -> String {
        match (engine, self) {
            (Engine::Sqlite, Ty::Id) => "INTEGER PRIMARY KEY".into(),
            (Engine::Sqlite, Ty::BigInt | Ty::TinyInt) => "INTEGER".into(),
            (Engine::Sqlite, Ty::Varchar(_)) => "TEXT".into(),
            (Engine::Sqlite, Ty::Json) => "JSON".into(),
            (Engine::Sqlite, Ty::DateTime) => "DATETIME".into(),
            (Engine::Sqlite, Ty::Decimal) => "DECIMAL(10,2)".into(),
            (Engine::Postgres, Ty::Id) => "bigint PRIMARY KEY".into(),
            (Engine::Postgres, Ty::BigInt) => "bigint".into(),
            (Engine::Postgres, Ty::TinyInt) => "smallint".into(),
            (Engine::Postgres, Ty::Varchar(n)) => format!("varchar({n})"),
            (Engine::Postgres, Ty::Json) => "jsonb".into(),
            (Engine::Postgres, Ty::DateTime) => "timestamp".into(),
            (Engine::Postgres, Ty::Decimal) => "numeric(10,2)".into(),
            (Engine::MySql, Ty::Id) => "bigint NOT NULL PRIMARY KEY".into(),
            (Engine::MySql, Ty::BigInt) => "bigint".into(),
            (Engine::MySql, Ty::TinyInt) => "tinyint".into(),
            (Engine::MySql, Ty::Varchar(n)) => format!("varchar({n})"),
            (Engine::MySql, Ty::Json) => "json".into(),
            (Engine::MySql, Ty::DateTime) => "datetime".into(),
            (Engine::MySql, Ty::Decimal) => "decimal(10,2)".into(),
        }
    }
}

/// A column default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Def {
    /// No default.
    None,
    /// An integer constant.
    Int(i64),
    /// A string constant (also used for decimals and JSON-text role lists).
    Str(&'static str),
    /// The current UTC time, so rows POSTed without a `date` still get one.
    Now,
    /// The stored form of a password (`super::people::password_hash`): a new account's
    /// default pay password is hashed like every other.
    Password(&'static str),
}

/// One column.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    /// The exact (case-sensitive) column name.
    pub name: &'static str,
    /// Its portable type.
    pub ty: Ty,
    /// Whether NULL is refused.
    pub not_null: bool,
    /// Its default.
    pub default: Def,
}

/// A nullable column without default.
const fn col(name: &'static str, ty: Ty) -> Col {
    Col {
        name,
        ty,
        not_null: false,
        default: Def::None,
    }
}

/// A NOT NULL column with `default`.
const fn req(name: &'static str, ty: Ty, default: Def) -> Col {
    Col {
        name,
        ty,
        not_null: true,
        default,
    }
}

/// One table: name, columns (the INSERTs list values in this order) and unique columns.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// The real table name (the API name may differ, via `Access.alias`).
    pub name: &'static str,
    /// Columns in declaration order.
    pub cols: &'static [Col],
    /// Single columns with a UNIQUE constraint.
    pub unique: &'static [&'static str],
}

impl Table {
    /// The column names in declaration order.
    pub fn col_names(&self) -> Vec<&'static str> {
        self.cols.iter().map(|c| c.name).collect()
    }

    /// `CREATE TABLE` for `engine`.
    pub fn create(&self, engine: Engine) -> String {
        let mut parts: Vec<String> = self.cols.iter().map(|c| column_sql(engine, c)).collect();
        for u in self.unique {
            parts.push(format!("UNIQUE ({})", ident(engine, u)));
        }
        let options = match engine {
            Engine::MySql => " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
            Engine::Sqlite | Engine::Postgres => "",
        };
        format!(
            "CREATE TABLE {} (\n  {}\n){options}",
            ident(engine, self.name),
            parts.join(",\n  ")
        )
    }

    /// `DROP TABLE IF EXISTS` for `engine`.
    pub fn drop(&self, engine: Engine) -> String {
        format!("DROP TABLE IF EXISTS {}", ident(engine, self.name))
    }
}

/// One column definition.
fn column_sql(engine: Engine, c: &Col) -> String {
    let mut sql = format!("{} {}", ident(engine, c.name), c.ty.spell(engine));
    if c.not_null && c.ty != Ty::Id {
        sql.push_str(" NOT NULL");
    }
    match c.default {
        Def::None => {}
        Def::Int(n) => sql.push_str(&format!(" DEFAULT {n}")),
        Def::Str(s) => sql.push_str(&format!(" DEFAULT {}", quote_str(engine, s))),
        Def::Password(p) => sql.push_str(&format!(
            " DEFAULT {}",
            quote_str(engine, &super::people::password_hash(p))
        )),
        // SQLite's CURRENT_TIMESTAMP is UTC text in our format. PostgreSQL's would follow the
        // session time zone and carry microseconds, so it is converted to UTC and cut to whole
        // seconds like the other engines'. MySQL's follows the session `time_zone`, which the
        // server sets to '+00:00' on every connection.
        Def::Now => sql.push_str(match engine {
            Engine::Sqlite | Engine::MySql => " DEFAULT CURRENT_TIMESTAMP",
            Engine::Postgres => " DEFAULT date_trunc('second', now() AT TIME ZONE 'UTC')",
        }),
    }
    sql
}

/// Role lists used as column defaults of `Access`, as in the reference: reads open to
/// everyone, private reads to logged-in users, writes to the owner.
pub const ALL_ROLES: &str = r#"["UNKNOWN","LOGIN","CONTACT","CIRCLE","OWNER","ADMIN"]"#;
/// Every role except the anonymous one.
pub const LOGGED_IN: &str = r#"["LOGIN","CONTACT","CIRCLE","OWNER","ADMIN"]"#;
/// The owner and the administrator.
pub const OWNER_ADMIN: &str = r#"["OWNER","ADMIN"]"#;

/// `apijson_user`: public profile, API name `User`.
pub const USER: Table = Table {
    name: "apijson_user",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("sex", Ty::TinyInt, Def::Int(0)),
        req("name", Ty::Varchar(20), Def::None),
        col("tag", Ty::Varchar(45)),
        col("head", Ty::Varchar(300)),
        col("contactIdList", Ty::Json),
        col("pictureList", Ty::Json),
        req("date", Ty::DateTime, Def::Now),
    ],
    unique: &[],
};

/// Width of the password columns: an argon2id PHC string with room for larger parameters.
pub const PASSWORD_WIDTH: u32 = 255;

/// `apijson_privacy`: the private half of a user (same id), API name `Privacy`.
/// Columns starting with `_` never leave the server (protocol §15.5). The password columns hold
/// argon2id PHC strings (about 97 characters; the APIJSON demo's `varchar(20)` held plain text).
pub const PRIVACY: Table = Table {
    name: "apijson_privacy",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("certified", Ty::TinyInt, Def::Int(0)),
        req("phone", Ty::Varchar(20), Def::None),
        req("email", Ty::Varchar(100), Def::Str("")),
        req("balance", Ty::Decimal, Def::Str("0.00")),
        req("_password", Ty::Varchar(PASSWORD_WIDTH), Def::None),
        req(
            "_payPassword",
            Ty::Varchar(PASSWORD_WIDTH),
            Def::Password(super::people::PASSWORD),
        ),
    ],
    unique: &["phone"],
};

/// `Moment`: a post by a user.
pub const MOMENT: Table = Table {
    name: "Moment",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("userId", Ty::BigInt, Def::None),
        req("date", Ty::DateTime, Def::Now),
        col("content", Ty::Varchar(300)),
        col("praiseUserIdList", Ty::Json),
        col("pictureList", Ty::Json),
    ],
    unique: &[],
};

/// `Comment`: a comment on a moment, or (`toId` ≠ 0) a reply to another comment.
pub const COMMENT: Table = Table {
    name: "Comment",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("toId", Ty::BigInt, Def::Int(0)),
        req("userId", Ty::BigInt, Def::None),
        req("momentId", Ty::BigInt, Def::None),
        req("date", Ty::DateTime, Def::Now),
        req("content", Ty::Varchar(1000), Def::None),
    ],
    unique: &[],
};

/// `Access`: which roles may use which method on which table (protocol §13.1). The role lists
/// are JSON text in plain string columns, as in the reference (MySQL JSON columns cannot have
/// defaults, and these need them).
pub const ACCESS: Table = Table {
    name: "Access",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("debug", Ty::TinyInt, Def::Int(0)),
        col("schema", Ty::Varchar(100)),
        req("name", Ty::Varchar(50), Def::None),
        col("alias", Ty::Varchar(20)),
        req("get", Ty::Varchar(100), Def::Str(ALL_ROLES)),
        req("head", Ty::Varchar(100), Def::Str(ALL_ROLES)),
        req("gets", Ty::Varchar(100), Def::Str(LOGGED_IN)),
        req("heads", Ty::Varchar(100), Def::Str(LOGGED_IN)),
        req("post", Ty::Varchar(100), Def::Str(OWNER_ADMIN)),
        req("put", Ty::Varchar(100), Def::Str(OWNER_ADMIN)),
        req("delete", Ty::Varchar(100), Def::Str(OWNER_ADMIN)),
        req("date", Ty::DateTime, Def::Now),
        col("detail", Ty::Varchar(1000)),
    ],
    unique: &["alias"],
};

/// `Request`: the allowed shapes of private requests (protocol §8).
pub const REQUEST: Table = Table {
    name: "Request",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("debug", Ty::TinyInt, Def::Int(0)),
        req("version", Ty::TinyInt, Def::Int(1)),
        col("method", Ty::Varchar(10)),
        req("tag", Ty::Varchar(30), Def::None),
        req("structure", Ty::Json, Def::None),
        col("detail", Ty::Varchar(1000)),
        req("date", Ty::DateTime, Def::Now),
    ],
    unique: &[],
};

/// `Function`: the remote functions requests may call, with their permission metadata
/// (protocol §11).
pub const FUNCTION: Table = Table {
    name: "Function",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("debug", Ty::TinyInt, Def::Int(0)),
        req("userId", Ty::BigInt, Def::Int(0)),
        col("language", Ty::Varchar(45)),
        req("name", Ty::Varchar(50), Def::None),
        col("returnType", Ty::Varchar(50)),
        col("arguments", Ty::Varchar(100)),
        req("demo", Ty::Json, Def::None),
        req("detail", Ty::Varchar(1000), Def::None),
        req("version", Ty::TinyInt, Def::Int(0)),
        col("tag", Ty::Varchar(20)),
        col("methods", Ty::Varchar(50)),
        req("date", Ty::DateTime, Def::Now),
        col("return", Ty::Varchar(45)),
    ],
    unique: &[],
};

/// `Verify`: verification codes of the account endpoints (`/post/verify`), readable only by
/// the server itself (its `Access` row gives no role anything).
pub const VERIFY: Table = Table {
    name: "Verify",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("type", Ty::TinyInt, Def::Int(0)),
        req("phone", Ty::Varchar(20), Def::None),
        req("verify", Ty::Varchar(32), Def::None),
        req("date", Ty::DateTime, Def::Now),
    ],
    unique: &[],
};

/// `Document`: request templates of `/router/{method}/{tag}` (the `url` column), in the
/// columns of the APIJSON demo's table that the router reads.
pub const DOCUMENT: Table = Table {
    name: "Document",
    cols: &[
        req("id", Ty::Id, Def::None),
        req("debug", Ty::TinyInt, Def::Int(0)),
        req("version", Ty::TinyInt, Def::Int(1)),
        req("name", Ty::Varchar(100), Def::None),
        req("url", Ty::Varchar(250), Def::None),
        req("request", Ty::Varchar(1000), Def::None),
        col("apijson", Ty::Varchar(1000)),
        req("date", Ty::DateTime, Def::Now),
    ],
    unique: &[],
};

/// Every demo table, in creation order (there are no foreign keys, so any order works).
pub const TABLES: [Table; 9] = [
    USER, PRIVACY, MOMENT, COMMENT, ACCESS, REQUEST, FUNCTION, VERIFY, DOCUMENT,
];
