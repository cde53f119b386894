//! The demo users (`apijson_user`) and their private halves (`apijson_privacy`).
//!
//! Thirty people: 82001–82026 plus four outside that range. The names mix case, digits,
//! an apostrophe and non-ASCII letters so that `name~` (regex), `name$` (LIKE) and quoting
//! all have something to bite on; several `tag`s are NULL for `tag{}` null tests.
//!
//! Login: phone `130000` + id (e.g. 13000082001 for user 82001), password `123456` for
//! everyone. Passwords are stored as argon2id hashes, as apijet stores every password it sets
//! (the server's account endpoints); a read that slips past a rule hands out no reusable password.

use serde_json::json;

use super::rng::{epoch, format_utc, Rng};
use super::sql::Lit;

/// The demo password of every user (login and pay password).
pub const PASSWORD: &str = "123456";

/// The salt of the demo's password hashes: fixed, so the rows are the same on every engine
/// and in every load.
const PASSWORD_SALT: &[u8] = b"apijet-demo-salt";

/// The argon2id hash of `password` as the demo stores it. Every user shares the published
/// password, so one salt serves them all; hashing once per distinct password keeps a demo
/// load as fast as before (a hash is deliberate work).
pub fn password_hash(password: &str) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static HASHES: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let mut hashes = HASHES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    hashes
        .entry(password.to_string())
        .or_insert_with(|| {
            apijet_auth::password::hash_with_salt(password, PASSWORD_SALT)
                .unwrap_or_else(|e| unreachable!("a fixed salt always hashes: {e}"))
        })
        .clone()
}

/// How a user's `contactIdList` is filled.
#[derive(Debug, Clone, Copy)]
pub enum Contacts {
    /// Exactly these ids, for users the docs and tests talk about.
    Fixed(&'static [i64]),
    /// A few random other users.
    Random,
    /// SQL NULL, to exercise null JSON columns.
    Null,
}

/// One person: public fields plus how many moments they post.
#[derive(Debug, Clone, Copy)]
pub struct Person {
    /// User id, also the `Privacy` id.
    pub id: i64,
    /// 0 = male, 1 = female (the APIJSON demo's convention).
    pub sex: i64,
    /// Display name.
    pub name: &'static str,
    /// Optional free-text tag.
    pub tag: Option<&'static str>,
    /// Contact list.
    pub contacts: Contacts,
    /// How many `Moment` rows this user authors: the fan-out varies on purpose.
    pub moments: usize,
}

/// Shorthand for the table below.
const fn p(
    id: i64,
    sex: i64,
    name: &'static str,
    tag: Option<&'static str>,
    contacts: Contacts,
    moments: usize,
) -> Person {
    Person {
        id,
        sex,
        name,
        tag,
        contacts,
        moments,
    }
}

use Contacts::{Fixed, Null, Random};

/// The demo users. Moment counts add up to 100.
pub const PEOPLE: [Person; 30] = [
    p(10001, 0, "apijet", Some("admin"), Fixed(&[82001, 82002]), 2),
    p(50001, 1, "TestUser1", Some("test"), Random, 1),
    p(66666, 0, "Lucky6", None, Null, 0),
    p(
        82001,
        1,
        "Ada",
        Some("rustacean"),
        Fixed(&[82002, 82003, 82004, 82005, 10001]),
        9,
    ),
    p(82002, 0, "bob42", None, Fixed(&[82001, 82003, 82006]), 7),
    p(
        82003,
        1,
        "CarolW",
        Some("sqlite fan"),
        Fixed(&[82001, 82002]),
        6,
    ),
    p(82004, 0, "dave_ops", None, Fixed(&[82001]), 5),
    p(82005, 1, "Eve2024", Some("security"), Fixed(&[]), 5),
    p(82006, 0, "Frank", Some("photographer"), Random, 5),
    p(82007, 1, "grace.h", None, Random, 4),
    p(82008, 1, "Heidi", Some("postgres"), Random, 4),
    p(82009, 0, "IVAN", None, Random, 4),
    p(82010, 1, "judy9", Some("mysql"), Random, 4),
    p(82011, 0, "KarlK", None, Random, 3),
    p(82012, 1, "Lena", Some("travel"), Random, 3),
    p(82013, 0, "mallory", None, Random, 3),
    p(82014, 0, "Niaj", Some("gamer"), Random, 3),
    p(82015, 1, "Olivia O'Brien", Some("writer"), Random, 3),
    p(82016, 1, "Peggy", None, Random, 3),
    p(82017, 0, "quentin3", Some("runner"), Random, 3),
    p(82018, 0, "Rupert", None, Random, 3),
    p(82019, 1, "Sybil", Some("chef"), Random, 3),
    p(82020, 0, "Trent", None, Random, 3),
    p(82021, 1, "Uma", Some("yoga"), Random, 3),
    p(82022, 0, "Victor", None, Random, 3),
    p(82023, 1, "Wendy", Some("Rust&SQL"), Random, 3),
    p(82024, 0, "Xavier", None, Random, 0),
    p(82025, 1, "Yuki 雪", Some("日本語"), Random, 2),
    p(82026, 1, "Zoë", None, Random, 2),
    p(99001, 1, "Renée", Some("café"), Random, 1),
];

/// All user ids, in table order.
pub fn user_ids() -> Vec<i64> {
    PEOPLE.iter().map(|p| p.id).collect()
}

/// The phone number of a user: `130000` + the five-digit id.
pub fn phone(id: i64) -> String {
    format!("130000{id}")
}

/// Rows of `apijson_user`, in the column order of `schema::USER`.
pub fn user_rows(rng: &mut Rng) -> Vec<Vec<Lit>> {
    let ids = user_ids();
    let mut when = epoch(2023, 1, 5, 9, 0, 0);
    PEOPLE
        .iter()
        .map(|person| {
            when += rng.range(3 * 86_400, 15 * 86_400) + rng.range(0, 86_399);
            let contacts = match person.contacts {
                Fixed(list) => Lit::json(&json!(list)),
                Null => Lit::Null,
                Random => {
                    let others: Vec<i64> =
                        ids.iter().copied().filter(|&i| i != person.id).collect();
                    let k = rng.index(6);
                    Lit::json(&json!(rng.sample(&others, k)))
                }
            };
            let pictures: Vec<String> = (1..=rng.below(4))
                .map(|k| format!("https://img.example.com/apijet/user/{}/{k}.jpg", person.id))
                .collect();
            // One user without an avatar, to show a NULL string column.
            let head = (person.id != 66666)
                .then(|| format!("https://img.example.com/apijet/head/{}.png", person.id));
            vec![
                Lit::Int(person.id),
                Lit::Int(person.sex),
                Lit::s(person.name),
                Lit::opt(person.tag),
                Lit::opt(head.as_deref()),
                contacts,
                Lit::json(&json!(pictures)),
                Lit::s(format_utc(when)),
            ]
        })
        .collect()
}

/// Rows of `apijson_privacy`, in the column order of `schema::PRIVACY`.
pub fn privacy_rows(rng: &mut Rng) -> Vec<Vec<Lit>> {
    PEOPLE
        .iter()
        .map(|person| {
            let certified = i64::from(rng.below(3) != 0);
            let email = if certified == 1 {
                format!("user{}@example.com", person.id)
            } else {
                String::new()
            };
            // Balances always have non-zero cents: SQLite's DECIMAL affinity would otherwise
            // store e.g. 2000.00 as the integer 2000, and the answer's type would differ
            // between engines.
            let mut cents = rng.range(100, 2_000_000);
            if cents % 100 == 0 {
                cents += 37;
            }
            vec![
                Lit::Int(person.id),
                Lit::Int(certified),
                Lit::s(phone(person.id)),
                Lit::s(email),
                Lit::Cents(cents),
                Lit::s(password_hash(PASSWORD)),
                Lit::s(password_hash(PASSWORD)),
            ]
        })
        .collect()
}
