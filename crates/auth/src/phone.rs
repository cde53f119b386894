//! The one spelling of a phone number, the login identity of the account endpoints.
//!
//! Databases compare phones in their own ways: the APIJSON demo stores them as `bigint` on
//! MySQL and PostgreSQL, where `' 013000082003'`, `'+13000082003'` and (on MariaDB)
//! `'13000082003abc'` all equal 13000082003. Anything keyed by the client's text (a failed-login
//! counter, a code's guesses) would give each spelling a fresh count for the same account. So
//! every account path turns the client's value into a [`Phone`] first, and only a `Phone` is a
//! limiter key or a bound value: one canonical text per account, or a refusal.

use serde_json::Value;
use std::fmt;

/// A phone number in its canonical spelling: 11 ASCII digits, the first `1` (the reference's
/// rule, without its carrier prefixes). Made only by [`Phone::parse`] and [`Phone::from_json`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Phone(String);

/// Why a value is not a phone; the message says what a phone is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{field} must be a phone number: 11 digits starting with 1 and nothing else (no sign, \
     country code, leading zero, inner space or letter)"
)]
pub struct PhoneError {
    /// The request field, for the message (`phone`, `Privacy/phone`).
    pub field: &'static str,
}

impl Phone {
    /// Canonicalises `text`: surrounding ASCII whitespace goes (it is how clients pad a form
    /// field, and the databases ignore it too); anything else that is not exactly 11 digits
    /// starting with `1` is refused: leading zeros, `+`, a country code, trailing letters,
    /// inner spaces, non-ASCII digits.
    pub fn parse(text: &str, field: &'static str) -> Result<Phone, PhoneError> {
        let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
        if t.len() == 11 && t.starts_with('1') && t.bytes().all(|b| b.is_ascii_digit()) {
            Ok(Phone(t.to_string()))
        } else {
            Err(PhoneError { field })
        }
    }

    /// A phone from a JSON value: a string as [`Phone::parse`] reads it, or a whole number
    /// (MySQL clients of the APIJSON demo send phones as numbers). Anything else is refused.
    pub fn from_json(v: Option<&Value>, field: &'static str) -> Result<Phone, PhoneError> {
        match v {
            Some(Value::String(s)) => Phone::parse(s, field),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(n) => Phone::parse(&n.to_string(), field),
                None => Err(PhoneError { field }),
            },
            _ => Err(PhoneError { field }),
        }
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The number, for columns that store phones as integers.
    pub fn as_i64(&self) -> i64 {
        // 11 ASCII digits always fit.
        self.0.parse().unwrap_or_default()
    }
}

impl fmt::Display for Phone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn padding_is_the_only_variation_accepted() {
        let canonical = Phone::parse("13000082003", "phone").expect("canonical");
        for same in [" \t13000082003\n ", "13000082003", "\r13000082003"] {
            assert_eq!(
                Phone::parse(same, "phone"),
                Ok(canonical.clone()),
                "{same:?}"
            );
        }
        assert_eq!(
            Phone::from_json(Some(&json!(13000082003_u64)), "phone"),
            Ok(canonical)
        );
    }

    #[test]
    fn spellings_a_database_would_read_as_the_same_number_are_refused() {
        for other in [
            "013000082003",
            "+13000082003",
            "13000082003abc",
            "00013000082001",
            "1300008 2003",
            "1300008200",
            "130000820030",
            "23000082003",
            "１3000082003",
            "13000082003\u{a0}",
            "",
            "-13000082003",
            "1.3000082003e10",
        ] {
            assert!(Phone::parse(other, "phone").is_err(), "{other:?}");
        }
        for v in [
            json!(13000082003.0),
            json!(-13000082003_i64),
            json!(true),
            json!(null),
            json!(["13000082003"]),
            json!({"phone": "13000082003"}),
        ] {
            assert!(Phone::from_json(Some(&v), "phone").is_err(), "{v}");
        }
        assert!(Phone::from_json(None, "phone").is_err());
    }

    /// Property: whatever text a client sends, either it is refused or its canonical spelling
    /// is the digits a numeric comparison would see, so two accepted texts that a database
    /// compares equal as numbers are one `Phone`.
    #[test]
    fn accepted_spellings_of_one_number_are_one_phone() {
        let pieces = [
            "",
            " ",
            "\t",
            "\n",
            "0",
            "00",
            "+",
            "-",
            "1",
            "13000082003",
            "3000082003",
            "abc",
            ".0",
            "e0",
            "\u{a0}",
            "１",
        ];
        let mut seen: std::collections::HashMap<i128, Phone> = std::collections::HashMap::new();
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let text = format!("{a}{b}{c}");
                    let Ok(p) = Phone::parse(&text, "phone") else {
                        continue;
                    };
                    assert_eq!(p.as_str().len(), 11, "{text:?}");
                    assert!(!p.as_str().starts_with('0'), "{text:?}");
                    let n: i128 = p.as_str().parse().expect("digits");
                    assert_eq!(i128::from(p.as_i64()), n);
                    if let Some(earlier) = seen.insert(n, p.clone()) {
                        assert_eq!(earlier, p, "{text:?}");
                    }
                }
            }
        }
        assert!(!seen.is_empty());
    }
}
