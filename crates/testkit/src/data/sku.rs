//! `purch_sku_master`: a product master table looked up by a uuid-like `sku_id` (unique
//! index) with six short strings. API name `PurchSkuMaster`.
//!
//! Row `g` (0-based) has `sku_id` = the uuid template below with its first L hex places
//! replaced by the L-digit zero-padded decimal `g`: computable the same way in SQL (every
//! engine) and in Rust, so the bench can draw random existing keys without reading them back.

use super::{fill_table, table_options, ty};
use crate::engine::{DbConn, Engine};

/// The uuid shape: the `x` places carry the key digits, then filler.
const TEMPLATE: &str = "xxxxxxxx-xxxx-4b7d-a1c2-e5f60718293a";
/// What the `x` places beyond the key digits hold.
const FILLER: &str = "c0ffee42d1e5";

/// Digits needed for keys `0..rows`.
pub fn key_digits(rows: u64) -> usize {
    rows.saturating_sub(1).max(1).to_string().len()
}

/// The `sku_id` of row `g`.
pub fn sku_id(g: u64, digits: usize) -> String {
    let code = format!("{g:0digits$}");
    let mut code = code.chars();
    let mut filler = FILLER.chars();
    TEMPLATE
        .chars()
        .map(|c| match c {
            'x' => code.next().or_else(|| filler.next()).unwrap_or('0'),
            other => other,
        })
        .collect()
}

/// The SQL expression of `sku_id` for row `g` (a column named `g`).
fn sku_sql(engine: Engine, digits: usize) -> String {
    sku_sql_for(engine, digits, "g")
}

/// The SQL expression of `sku_id` for the row number given by the SQL expression `g`.
pub fn sku_sql_for(engine: Engine, digits: usize, g: &str) -> String {
    let code = match engine {
        Engine::Postgres => format!("lpad(({g})::text, {digits}, '0')"),
        Engine::Mariadb => format!("LPAD({g}, {digits}, '0')"),
        Engine::Sqlite => format!("substr('000000000000' || {g}, -{digits})"),
    };
    // Literal runs and runs of code digits, in template order.
    let mut parts: Vec<String> = Vec::new();
    let (mut lit, mut used, mut filler) = (String::new(), 0usize, FILLER.chars());
    let mut code_run: Option<(usize, usize)> = None;
    let flush_code = |parts: &mut Vec<String>, run: &mut Option<(usize, usize)>| {
        if let Some((start, len)) = run.take() {
            parts.push(format!("substr({code}, {}, {len})", start + 1));
        }
    };
    for c in TEMPLATE.chars() {
        if c == 'x' && used < digits {
            if !lit.is_empty() {
                parts.push(format!("'{lit}'"));
                lit.clear();
            }
            code_run = match code_run {
                Some((s, l)) => Some((s, l + 1)),
                None => Some((used, 1)),
            };
            used += 1;
        } else {
            flush_code(&mut parts, &mut code_run);
            lit.push(if c == 'x' {
                filler.next().unwrap_or('0')
            } else {
                c
            });
        }
    }
    flush_code(&mut parts, &mut code_run);
    if !lit.is_empty() {
        parts.push(format!("'{lit}'"));
    }
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    engine.concat(&refs)
}

/// Creates and fills `purch_sku_master` with `rows` rows and registers it as `PurchSkuMaster`.
pub async fn generate(conn: &mut DbConn, engine: Engine, rows: u64) -> Result<(), String> {
    let t = |x: &str| ty(engine, x);
    conn.batch(&format!(
        "CREATE TABLE purch_sku_master (
  id {pk}, sku_id {v36} NOT NULL, sku_name {v32}, brand {v16}, category {v16},
  color {v8}, size {v8}, unit {v8}
){opts}",
        pk = t("pk"),
        v36 = t("varchar(36)"),
        v32 = t("varchar(32)"),
        v16 = t("varchar(16)"),
        v8 = t("varchar(8)"),
        opts = table_options(engine),
    ))
    .await?;
    let c = |parts: &[&str]| engine.concat(parts);
    let select = format!(
        "g + 1, {sku}, {name}, {brand}, {cat}, {color}, {size}, {unit}",
        sku = sku_sql(engine, key_digits(rows)),
        name = c(&["'SKU '", "g"]),
        brand = c(&["'brand-'", "g % 50"]),
        cat = c(&["'cat-'", "g % 200"]),
        color = c(&["'col-'", "g % 8"]),
        size = c(&["'S'", "g % 5"]),
        unit = c(&["'unit-'", "g % 4"]),
    );
    fill_table(
        conn,
        engine,
        "purch_sku_master",
        rows,
        &select,
        "CREATE UNIQUE INDEX purch_sku_master_sku_id ON purch_sku_master (sku_id)",
        1001,
        "PurchSkuMaster",
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_uuid_shaped_and_distinct() {
        assert_eq!(key_digits(2_000_000), 7);
        assert_eq!(key_digits(2_000), 4);
        assert_eq!(key_digits(1), 1);
        let a = sku_id(1_234_567, 7);
        assert_eq!(a, "1234567c-0ffe-4b7d-a1c2-e5f60718293a");
        assert_eq!(a.len(), 36);
        assert_ne!(sku_id(1, 7), sku_id(10, 7));
        let long = sku_id(123_456_789_012, 12);
        assert_eq!(long, "12345678-9012-4b7d-a1c2-e5f60718293a");
    }

    #[test]
    fn sql_expression_mirrors_rust() {
        // Evaluate the SQLite spelling with rusqlite and compare with the Rust function.
        let conn = rusqlite::Connection::open_in_memory().expect("open");
        for (g, digits) in [
            (0u64, 7usize),
            (1_234_567, 7),
            (42, 4),
            (9, 1),
            (123_456_789, 9),
        ] {
            let sql = format!(
                "SELECT {} FROM (SELECT {g} AS g)",
                sku_sql(Engine::Sqlite, digits)
            );
            let got: String = conn.query_row(&sql, [], |r| r.get(0)).expect("query");
            assert_eq!(got, sku_id(g, digits), "g={g} digits={digits}");
        }
    }
}
