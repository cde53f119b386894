//! MariaDB's and MySQL's errors as the backend's: the server's error numbers (and SQLSTATE
//! classes where a number is not listed) decide the class.

use crate::{DbErrorKind, ExecError};

pub(super) fn db_error(e: mysql_async::Error) -> ExecError {
    match e {
        mysql_async::Error::Server(se) => {
            let kind = match se.code {
                1062 => DbErrorKind::Unique,
                1451 | 1452 | 1048 | 3819 => DbErrorKind::Constraint,
                // 1191: `match(…) AGAINST` on columns without a FULLTEXT index, which only
                // the database knows.
                1366 | 1292 | 1264 | 1406 | 3140 | 3141 | 3143 | 3146 | 1191 => {
                    DbErrorKind::BadValue
                }
                1969 | 3024 => DbErrorKind::Timeout,
                1139 | 3685..=3698 => DbErrorKind::BadPattern,
                1305 => DbErrorKind::Unsupported,
                1054 | 1064 | 1146 | 1582 | 1584 => DbErrorKind::Syntax,
                // 1429/1430: a Spider (or FEDERATED) table's remote server cannot be reached;
                // 12701: Spider's remote server went away; 1047: a Galera node not yet synced
                // (WSREP has not yet prepared the node); 1290: the server runs read-only (a
                // demoted primary).
                1429 | 1430 | 12701 | 1047 | 1290 => DbErrorKind::Unavailable,
                // SQLSTATE class 22, data exception: a value out of range, a bad conversion,
                // a division by zero (`power(10,400)`), as PostgreSQL classes them.
                _ if se.state.starts_with("22") => DbErrorKind::BadValue,
                _ if se.state.starts_with("23") => DbErrorKind::Constraint,
                _ => DbErrorKind::Other,
            };
            ExecError::Db {
                kind,
                message: se.message,
            }
        }
        other => ExecError::Db {
            kind: DbErrorKind::Connection,
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_or_node_that_cannot_serve_is_unavailable_and_a_duplicate_is_not() {
        let kind = |code: u16, state: &str| match db_error(mysql_async::Error::Server(
            mysql_async::ServerError {
                code,
                message: String::new(),
                state: state.into(),
            },
        )) {
            ExecError::Db { kind, .. } => kind,
            other => panic!("{other}"),
        };
        // Spider's remote shard unreachable or gone, a Galera node not synced, read-only.
        for code in [1429, 1430, 12701, 1047, 1290] {
            assert_eq!(kind(code, "HY000"), DbErrorKind::Unavailable, "{code}");
        }
        assert_eq!(kind(1062, "23000"), DbErrorKind::Unique);
        assert_eq!(kind(1146, "42S02"), DbErrorKind::Syntax);
    }
}
