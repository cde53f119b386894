//! `format: true`: response keys rewritten for clients that want plain names (§2.3).

use serde_json::{Map, Value as Json};

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn format_key(key: &str) -> String {
    if let Some(name) = key.strip_suffix("[]") {
        if let Some((_, alias)) = name.split_once(':') {
            return alias.to_string();
        }
        if name.is_empty() {
            return "list".into();
        }
        let mut out = String::new();
        for (i, part) in name.split('-').enumerate() {
            if i == 0 {
                out.push_str(&lower_first(part));
            } else {
                let mut c = part.chars();
                if let Some(f) = c.next() {
                    out.extend(f.to_uppercase());
                    out.push_str(c.as_str());
                }
            }
        }
        return out + "List";
    }
    if let Some(k) = key.strip_prefix('@') {
        return k.to_string();
    }
    if key.starts_with(|c: char| c.is_ascii_uppercase()) {
        return match key.split_once(':') {
            Some((_, alias)) => alias.to_string(),
            None => lower_first(key),
        };
    }
    key.to_string()
}

fn format_value(v: Json) -> Json {
    match v {
        Json::Object(m) => Json::Object(format_keys(m)),
        Json::Array(a) => Json::Array(a.into_iter().map(format_value).collect()),
        other => other,
    }
}

/// Rewrites keys recursively: `Table` → `table`, `Table:alias` → `alias`, `[]` → `list`,
/// `Table[]` → `tableList`, `@key` → `key`; plain keys stay.
pub fn format_keys(m: Map<String, Json>) -> Map<String, Json> {
    m.into_iter()
        .map(|(k, v)| (format_key(&k), format_value(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::format_key;

    #[test]
    fn keys() {
        assert_eq!(format_key("[]"), "list");
        assert_eq!(format_key("Comment[]"), "commentList");
        assert_eq!(format_key("User-id[]"), "userIdList");
        assert_eq!(format_key("Moment"), "moment");
        assert_eq!(format_key("Comment:to"), "to");
        assert_eq!(format_key("userId"), "userId");
    }
}
