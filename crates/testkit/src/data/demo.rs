//! The demo dataset scaled up: `apijet demo` loads the 30 demo users, their moments and
//! comments, the `Access` and `Request` rows; this adds `users` users, `moments` moments
//! (about ten per user) and five comments per moment on average (spread like a Poisson
//! distribution: some moments have none, some a dozen), plus the indexes a real deployment
//! has on the foreign keys (`Comment.momentId`, `Moment.userId`).
//!
//! Ada (82001, the demo login) writes every 50th generated comment, so the update scenario
//! has thousands of rows she may change.

use super::{analyze, datetime, fill, series};
use crate::engine::{DbConn, Engine};

/// First generated user id.
pub const USER_BASE: i64 = 1_000_000;
/// First generated moment id.
pub const MOMENT_BASE: i64 = 10_000_000;
/// First generated comment id.
pub const COMMENT_BASE: i64 = 100_000_000;
/// Comments per moment, on average.
pub const COMMENTS_PER_MOMENT: u64 = 5;
/// The demo login: Ada, user 82001, phone and password.
pub const ADA: i64 = 82001;
pub const ADA_PHONE: &str = "13000082001";
pub const ADA_PASSWORD: &str = "123456";
/// Ada writes every `ADA_EVERY`-th generated comment.
pub const ADA_EVERY: u64 = 50;

/// The nested list of the demo data: page `page` of `size` Moments, newest first, each with its
/// User (`id@`) and up to 5 Comments (`Comment[]` by `momentId@`).
pub fn nested_page(size: u64, page: u64) -> String {
    format!(
        "{{\"[]\":{{\"count\":{size},\"page\":{page},\
         \"Moment\":{{\"@order\":\"id-\",\"@column\":\"id,userId,date,content\"}},\
         \"User\":{{\"id@\":\"/Moment/userId\",\"@column\":\"id,name\"}},\
         \"Comment[]\":{{\"count\":5,\"Comment\":{{\"momentId@\":\"[]/Moment/id\",\"@column\":\"id,userId,content\"}}}}}}}}"
    )
}

/// The sizes of the scaled-up dataset.
#[derive(Clone, Copy, Debug)]
pub struct DemoScale {
    pub users: u64,
    pub moments: u64,
}

impl DemoScale {
    pub fn comments(self) -> u64 {
        self.moments * COMMENTS_PER_MOMENT
    }

    /// Ids of Ada's generated comments.
    pub fn ada_comment(self, j: u64) -> i64 {
        COMMENT_BASE + (j * ADA_EVERY) as i64
    }

    pub fn ada_comments(self) -> u64 {
        self.comments().div_ceil(ADA_EVERY)
    }
}

/// Adds the generated users, moments and comments (after `apijet demo` created the tables).
pub async fn scale_up(conn: &mut DbConn, engine: Engine, s: DemoScale) -> Result<(), String> {
    let q = |x: &str| engine.ident(x);
    let c = |parts: &[&str]| engine.concat(parts);
    let empty = match engine {
        Engine::Postgres => "'[]'::jsonb",
        Engine::Mariadb | Engine::Sqlite => "'[]'",
    };
    let users = s.users.max(1);
    let moments = s.moments.max(1);
    let user_cols = ["id", "sex", "name", "contactIdList", "pictureList", "date"]
        .map(q)
        .join(", ");
    let user_sel = format!(
        "{USER_BASE} + g, g % 2, {name}, {empty}, {empty}, {date}",
        name = c(&["'user'", "g"]),
        date = datetime(engine, "g * 60"),
    );
    fill(
        conn,
        &format!("{} users", engine.name()),
        users,
        100_000,
        |a, b| {
            format!(
                "INSERT INTO {} ({user_cols}) SELECT {user_sel} FROM {}",
                q("apijson_user"),
                series(engine, a, b)
            )
        },
    )
    .await?;
    let moment_cols = [
        "id",
        "userId",
        "date",
        "content",
        "praiseUserIdList",
        "pictureList",
    ]
    .map(q)
    .join(", ");
    let moment_sel = format!(
        "{MOMENT_BASE} + g, {USER_BASE} + (g * 7919) % {users}, {date}, {content}, {empty}, {empty}",
        date = datetime(engine, "g * 30"),
        content = c(&["'moment number '", "g"]),
    );
    fill(
        conn,
        &format!("{} moments", engine.name()),
        moments,
        100_000,
        |a, b| {
            format!(
                "INSERT INTO {} ({moment_cols}) SELECT {moment_sel} FROM {}",
                q("Moment"),
                series(engine, a, b)
            )
        },
    )
    .await?;
    let comment_cols = ["id", "toId", "userId", "momentId", "date", "content"]
        .map(q)
        .join(", ");
    // A multiplicative hash, reduced mod 2^32 and then mod the moment count: close to uniform
    // but random, so comment counts per moment vary like a Poisson(5).
    let comment_sel = format!(
        "{COMMENT_BASE} + g, 0,
         CASE WHEN g % {ADA_EVERY} = 0 THEN {ADA} ELSE {USER_BASE} + (g * 31) % {users} END,
         {MOMENT_BASE} + ((g * 2654435761) % 4294967296) % {moments},
         {date}, {content}",
        date = datetime(engine, "g * 6"),
        content = c(&["'comment number '", "g"]),
    );
    fill(
        conn,
        &format!("{} comments", engine.name()),
        s.comments(),
        100_000,
        |a, b| {
            format!(
                "INSERT INTO {} ({comment_cols}) SELECT {comment_sel} FROM {}",
                q("Comment"),
                series(engine, a, b)
            )
        },
    )
    .await?;
    conn.batch(&format!(
        "CREATE INDEX comment_moment_id ON {} ({})",
        q("Comment"),
        q("momentId")
    ))
    .await?;
    conn.batch(&format!(
        "CREATE INDEX moment_user_id ON {} ({})",
        q("Moment"),
        q("userId")
    ))
    .await?;
    for t in ["apijson_user", "Moment", "Comment"] {
        analyze(conn, engine, t).await?;
    }
    Ok(())
}
