//! Key spellings: the automatic list keys of arrays and percent-decoded reference paths.

/// `[]` → `list`, `User[]` → `userList`, `Comment:c[]` → `cList`, `Comment-userId[]` →
/// `commentUseridlist`: the reference's JSONResponse.formatArrayKey, whose hyphen rule lowers
/// every part before capitalising its first letter.
pub fn list_key(array_key: &str) -> String {
    fn first(s: &str, upper: bool) -> String {
        let mut c = s.chars();
        match c.next() {
            Some(f) if upper => f.to_uppercase().chain(c).collect(),
            Some(f) => f.to_lowercase().chain(c).collect(),
            None => String::new(),
        }
    }
    let name = array_key.strip_suffix("[]").unwrap_or(array_key);
    let with_suffix = if name.is_empty() {
        "list".to_string()
    } else {
        first(name, false) + "List"
    };
    if let Some((_, alias)) = with_suffix.split_once(':') {
        return alias.to_string();
    }
    if !with_suffix.contains('-') {
        return with_suffix;
    }
    let joined: String = with_suffix
        .split('-')
        .filter(|p| !p.is_empty())
        .map(|p| first(&p.to_lowercase(), true))
        .collect();
    first(&joined, false)
}

pub(super) fn percent_decode(s: &str) -> String {
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
    fn list_keys_follow_the_format_rule() {
        assert_eq!(list_key("[]"), "list");
        assert_eq!(list_key("User[]"), "userList");
        assert_eq!(list_key("User-id[]"), "userIdlist");
        assert_eq!(list_key("Comment-userId[]"), "commentUseridlist");
        assert_eq!(list_key("Comment:c[]"), "cList");
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("User%5B%5D/id"), "User[]/id");
        assert_eq!(percent_decode("a%"), "a%");
        assert_eq!(percent_decode("%é1"), "%é1");
    }
}
