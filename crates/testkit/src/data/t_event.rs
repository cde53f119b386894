//! `t_event`: an event log shaped like the one APIJSON users list in bulk: `x_id`, `x_uin`
//! (bigint), `x_send_time`, seven int ids (`x_xid` indexed; two of its values, 1001 and 1002,
//! cover 55 % of the rows), `x_result` tinyint, `x_credit`, `x_create_time` and six varchar
//! columns. API name `TEvent`.

use super::{datetime, fill_table, table_options, ty};
use crate::engine::{DbConn, Engine};

/// The columns the list scenario asks for.
pub const COLUMNS: &str =
    "x_uin,x_send_time,x_xxxx_id,x_xid,x_xx_id,x_xxxxx_id,x_xxxx_result,x_result,x_credit";
/// The two frequent `x_xid` values (30 % and 25 % of the rows).
pub const HOT_XIDS: [i64; 2] = [1001, 1002];

/// Creates and fills `t_event` with `rows` rows and registers it as `TEvent`.
pub async fn generate(conn: &mut DbConn, engine: Engine, rows: u64) -> Result<(), String> {
    let t = |x: &str| ty(engine, x);
    conn.batch(&format!(
        "CREATE TABLE t_event (
  x_id {pk}, x_uin {bigint} NOT NULL, x_send_time {dt} NOT NULL,
  x_xxxx_id {int} NOT NULL, x_xid {int} NOT NULL, x_xx_id {int}, x_xxxxx_id {int} NOT NULL,
  x_xxxx_result {int} NOT NULL, x_xxx_id {int} NOT NULL, x_xxxxxx_id {int} NOT NULL,
  x_result {tiny} NOT NULL, x_credit {int} NOT NULL, x_create_time {dt} NOT NULL,
  x_channel {v32}, x_remark {v64}, x_tag {v16}, x_source {v32}, x_device {v32}, x_memo {v64}
){opts}",
        pk = t("pk"),
        bigint = t("bigint"),
        int = t("int"),
        tiny = t("tinyint"),
        dt = t("datetime"),
        v16 = t("varchar(16)"),
        v32 = t("varchar(32)"),
        v64 = t("varchar(64)"),
        opts = table_options(engine),
    ))
    .await?;
    let c = |parts: &[&str]| engine.concat(parts);
    let select = format!(
        "g + 1, 100000000 + (g * 7919) % 900000000, {send},
         g % 1000,
         CASE WHEN g % 20 < 6 THEN {a} WHEN g % 20 < 11 THEN {b} ELSE 2000 + g % 50000 END,
         CASE WHEN g % 13 = 0 THEN NULL ELSE g % 100 END,
         g % 10000, (g * 31) % 1000, g % 500, (g * 13) % 100000,
         g % 3, (g * 17) % 100000, {create},
         {ch}, {rem}, {tag}, {src}, {dev},
         CASE WHEN g % 2 = 0 THEN NULL ELSE {memo} END",
        send = datetime(engine, "g % 31536000"),
        create = datetime(engine, "g % 31536000 + 3600"),
        a = HOT_XIDS[0],
        b = HOT_XIDS[1],
        ch = c(&["'channel-'", "g % 20"]),
        rem = c(&["'remark for event '", "g"]),
        tag = c(&["'tag'", "g % 7"]),
        src = c(&["'source-'", "g % 13"]),
        dev = c(&["'device-'", "g % 1000"]),
        memo = c(&["'memo '", "g"]),
    );
    fill_table(
        conn,
        engine,
        "t_event",
        rows,
        &select,
        "CREATE INDEX t_event_x_xid ON t_event (x_xid)",
        1000,
        "TEvent",
    )
    .await
}

/// The SELECT the baselines run for the same rows apijet lists.
pub fn select_sql(rows: u64, filtered: bool) -> String {
    let filter = if filtered {
        format!(" WHERE x_xid IN ({}, {})", HOT_XIDS[0], HOT_XIDS[1])
    } else {
        String::new()
    };
    format!("SELECT {COLUMNS} FROM t_event{filter} LIMIT {rows}")
}

/// The apijet request for the same rows.
pub fn request(rows: u64, filtered: bool) -> String {
    let filter = if filtered {
        format!(",\"x_xid{{}}\":[{},{}]", HOT_XIDS[0], HOT_XIDS[1])
    } else {
        String::new()
    };
    format!(
        "{{\"TEvent[]\":{{\"count\":{rows},\"TEvent\":{{\"@column\":\"{COLUMNS}\"{filter}}}}}}}"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_shape() {
        let r = super::request(10, true);
        let v: serde_json::Value = serde_json::from_str(&r).expect("json");
        assert_eq!(v["TEvent[]"]["count"], 10);
        assert_eq!(v["TEvent[]"]["TEvent"]["x_xid{}"][1], 1002);
        assert!(super::select_sql(5, false).ends_with("FROM t_event LIMIT 5"));
    }
}
