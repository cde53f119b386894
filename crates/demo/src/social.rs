//! The generated social content: 100 `Moment` rows and 300 `Comment` rows.
//!
//! Ids are in their own ranges (moments 1001–1100, comments 5001–5300, users 10001–99001) so
//! a request that joins on the wrong column finds nothing instead of a plausible wrong row.
//! Authors follow `people::PEOPLE[..].moments`. Comments cluster on a few popular moments and
//! on older ones (16+ moments have none, the busiest has 22); about one in five is a reply
//! (`toId` = an earlier comment on the same moment, dated after it).

use serde_json::json;

use super::people::{user_ids, PEOPLE};
use super::rng::{epoch, format_utc, Rng};
use super::sql::Lit;

/// The first `Moment` id.
pub const FIRST_MOMENT_ID: i64 = 1001;
/// The first `Comment` id.
pub const FIRST_COMMENT_ID: i64 = 5001;
/// How many comments are generated.
pub const COMMENT_COUNT: usize = 300;

/// Indexes of the moments that attract many comments.
const POPULAR: [usize; 5] = [2, 19, 41, 64, 88];

/// Moment texts. Some carry characters that need care on the way to SQL and back: a quote,
/// a backslash, `%` and `_` (LIKE wildcards), double quotes, CJK text and a 4-byte emoji.
const MOMENT_TEXTS: &[&str] = &[
    "First post from apijet. One JSON in, one JSON out.",
    "Morning run along the river, 7 km before breakfast.",
    "Trying the new ramen place downtown: worth the queue.",
    "Rainy Sunday, good book, better coffee.",
    "Finally fixed that flaky test. It was the time zone. It is always the time zone.",
    "Don't forget: the meetup moved to Thursday!",
    "Our cat learned to open the fridge. Send help.",
    "Benchmark day: SQLite still surprises me.",
    "Sunset from the ferry, no filter.",
    "Reading about B-trees at 2 a.m. again.",
    "Build is green, shipping it.",
    "100% done with the migration, 0% sleep.",
    "snake_case or camelCase? The API says camelCase.",
    "He said \"it works on my machine\" and left.",
    "Weekend hike: 3 peaks, 2 blisters, 1 very happy dog.",
    "Homemade bread attempt #4. Getting there.",
    "Conference talk slides are up, link in bio.",
    "Learning PostgreSQL window functions today.",
    "Moved the home server to a fanless box. Silence!",
    "Who else is still on the old laptop? ¯\\_(ツ)_/¯",
    "Cherry blossoms are out. 桜がきれい。",
    "New keyboard day 🎉",
    "今天天气很好，去公园散步。",
    "Garden update: tomatoes 12, slugs 0.",
    "Pair programming is underrated.",
    "Tried to explain JSON to my grandmother. She asked for XML.",
    "Found my old notebooks from university.",
    "Cooking for ten people tonight, wish me luck.",
    "The bus was late, so I wrote a parser.",
    "Tiny wins: inbox zero at 5 p.m.",
];

/// Top-level comment texts.
const COMMENT_TEXTS: &[&str] = &[
    "Nice!",
    "Love this.",
    "Where is this?",
    "Congrats!",
    "Same here.",
    "Haha, classic.",
    "Can't wait to try it.",
    "Great photo.",
    "Tell me more.",
    "This made my day.",
    "I'd go with camelCase too.",
    "Looks delicious.",
    "Been there, done that.",
    "Good luck!",
    "Interesting, thanks for sharing.",
    "See you there?",
    "Respect.",
    "That's a 50% improvement!",
    "Bookmarking this.",
    "很好！",
];

/// Reply texts (`toId` ≠ 0).
const REPLY_TEXTS: &[&str] = &[
    "Agreed.",
    "Thanks!",
    "Not sure about that.",
    "Exactly what I thought.",
    "Ha, yes.",
    "Let's talk tomorrow.",
    "Good point.",
    "You're right, I'll fix it.",
    "+1",
    "🙂",
];

/// A generated moment, kept for the comment generator.
#[derive(Debug, Clone)]
pub struct Moment {
    /// Its id.
    pub id: i64,
    /// Posting time, seconds since the epoch (UTC).
    pub at: i64,
    /// The row, in the column order of `schema::MOMENT`.
    pub row: Vec<Lit>,
}

/// The moments, in id (and time) order.
pub fn moments(rng: &mut Rng) -> Vec<Moment> {
    let ids = user_ids();
    let mut authors: Vec<i64> = PEOPLE
        .iter()
        .flat_map(|p| std::iter::repeat_n(p.id, p.moments))
        .collect();
    rng.shuffle(&mut authors);
    let mut at = epoch(2024, 3, 1, 8, 0, 0);
    authors
        .into_iter()
        .enumerate()
        .map(|(i, user_id)| {
            let id = FIRST_MOMENT_ID + i as i64;
            at += rng.range(3_600, 30 * 3_600);
            // Two picture-only moments without text, to show a NULL `content`.
            let picture_only = i == 17 || i == 63;
            let content = if picture_only {
                Lit::Null
            } else {
                Lit::s(*rng.pick(MOMENT_TEXTS))
            };
            let praise_count = rng.index(8);
            let praise = rng.sample(&ids, praise_count);
            let picture_count = if picture_only { 2 } else { rng.below(4) };
            let pictures: Vec<String> = (1..=picture_count)
                .map(|k| format!("https://img.example.com/apijet/moment/{id}/{k}.jpg"))
                .collect();
            let row = vec![
                Lit::Int(id),
                Lit::Int(user_id),
                Lit::s(format_utc(at)),
                content,
                Lit::json(&json!(praise)),
                Lit::json(&json!(pictures)),
            ];
            Moment { id, at, row }
        })
        .collect()
}

/// The comments, in the column order of `schema::COMMENT`.
pub fn comment_rows(rng: &mut Rng, moments: &[Moment]) -> Vec<Vec<Lit>> {
    let ids = user_ids();
    // Per moment: (comment id, time) of the comments generated so far, for replies.
    let mut threads: Vec<Vec<(i64, i64)>> = vec![Vec::new(); moments.len()];
    (0..COMMENT_COUNT)
        .map(|i| {
            let id = FIRST_COMMENT_ID + i as i64;
            // A quarter of the comments go to a few popular moments (a dozen or more each);
            // the rest favour older moments (the smaller of two draws), so recent ones get
            // few or none.
            let m = if rng.below(4) == 0 {
                *rng.pick(&POPULAR)
            } else {
                rng.index(moments.len()).min(rng.index(moments.len()))
            };
            let moment = &moments[m];
            let user_id = *rng.pick(&ids);
            let thread = &mut threads[m];
            let (to_id, at, content) = if !thread.is_empty() && rng.below(3) == 0 {
                let (parent, parent_at) = *rng.pick(thread);
                let at = parent_at + rng.range(300, 6 * 3_600);
                (parent, at, *rng.pick(REPLY_TEXTS))
            } else {
                let at = moment.at + rng.range(600, 3 * 86_400);
                (0, at, *rng.pick(COMMENT_TEXTS))
            };
            thread.push((id, at));
            vec![
                Lit::Int(id),
                Lit::Int(to_id),
                Lit::Int(user_id),
                Lit::Int(moment.id),
                Lit::s(format_utc(at)),
                Lit::s(content),
            ]
        })
        .collect()
}
