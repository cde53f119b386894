//! Reference paths (`"id@": "/Moment/userId"`, `"total@": "/[]/total"`, `"userId{}@":
//! "User-id[]"`), read once while planning: their `%XX` escapes decoded, whether they start
//! from the container they are in, and their segments.

use std::fmt;

/// A path to an earlier result of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefPath {
    /// As sent, for messages and printed plans.
    text: String,
    /// Decoded, without the leading `/` of a relative path.
    path: String,
    /// Starts with `/`: from the container the reference is in.
    relative: bool,
}

impl RefPath {
    /// Reads a path as the client wrote it.
    pub fn read(text: &str) -> RefPath {
        let decoded = percent_decode(text);
        let (path, relative) = match decoded.strip_prefix('/') {
            Some(rel) => (rel.to_string(), true),
            None => (decoded, false),
        };
        RefPath {
            text: text.to_string(),
            path,
            relative,
        }
    }

    /// The path as sent.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The decoded path, from the container when [`RefPath::is_relative`], else from the
    /// answer's root.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether it starts from the container the reference is in (`/Moment/userId`).
    pub fn is_relative(&self) -> bool {
        self.relative
    }

    /// Its segments, decoded.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.path.split('/')
    }
}

impl fmt::Display for RefPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A reference path with its `%XX` escapes decoded (`User%5B%5D/id` → `User[]/id`).
pub fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("User%5B%5D/id"), "User[]/id");
        assert_eq!(percent_decode("a%"), "a%");
        assert_eq!(percent_decode("%é1"), "%é1");
    }

    #[test]
    fn paths_are_read_once() {
        let p = RefPath::read("/Moment%5B%5D/0/id");
        assert!(p.is_relative());
        assert_eq!(p.path(), "Moment[]/0/id");
        assert_eq!(p.segments().collect::<Vec<_>>(), ["Moment[]", "0", "id"]);
        assert_eq!(p.text(), "/Moment%5B%5D/0/id");
        assert!(!RefPath::read("[]/total").is_relative());
    }
}
