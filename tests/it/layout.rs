//! The source tree keeps its shape: no files of a crate import each other, directly or around
//! a circle, so that every dependency inside a crate points one way (as between the crates,
//! where Cargo enforces it).
//!
//! A file's imports are read from its text: `crate::…`, `super::…`, `self::…` paths and the
//! names of its own child modules, resolved to the file of the deepest module they name.
//! Comments and string literals are skipped. A file's use of the module it is part of (its
//! `super`, `super::super`) is no arrow: a module split into files is one module, whose
//! parent file declares the children.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's files by module path (`["accounts", "login"]` for `src/accounts/login.rs`).
struct Crate {
    name: String,
    files: BTreeMap<Vec<String>, PathBuf>,
}

fn crates(root: &Path) -> Vec<Crate> {
    let mut roots = vec![(String::from("apijet"), root.join("src"))];
    let mut members: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .filter_map(|e| Some(e.ok()?.path().join("src")))
        .filter(|p| p.is_dir())
        .collect();
    members.sort();
    for src in members {
        let name = src
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        roots.push((name, src));
    }
    roots
        .into_iter()
        .map(|(name, src)| {
            let mut files = BTreeMap::new();
            collect(&src, &src, &mut files);
            Crate { name, files }
        })
        .collect()
}

/// Every `.rs` file under `dir` by its module path (the crate root's is empty). Binaries of
/// `src/bin` are crates of their own and left out.
fn collect(src: &Path, dir: &Path, out: &mut BTreeMap<Vec<String>, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path != src.join("bin") {
                collect(src, &path, out);
            }
            continue;
        }
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let rel = path.strip_prefix(src).expect("under src");
        let mut module: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        out.insert(module, path);
    }
}

/// The text of a file without comments, string and character literals.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && !b[..i]
                    .last()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let end: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i += 2 + hashes;
                while i < b.len() && !b[i..].starts_with(&end) {
                    i += 1;
                }
                i += end.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A character literal ('a', '\n', '\''), not a lifetime ('a).
            b'\'' if b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\') => {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// The paths a file's code names, each as the list of its segments, with `use` groups
/// (`a::{b, c::d}`) spread out.
fn paths_of(code: &str) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = (b[i].is_ascii_alphabetic() || b[i] == b'_')
            && (i == 0
                || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':'));
        if !starts {
            i += 1;
            continue;
        }
        let (paths, end) = path_at(b, i, Vec::new());
        out.extend(paths.into_iter().filter(|p| p.len() > 1));
        i = end.max(i + 1);
    }
    out
}

/// The path(s) starting at `i` after `prefix`, and where they end.
fn path_at(b: &[u8], mut i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut path = prefix;
    loop {
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i == start {
            return (vec![path], i);
        }
        path.push(String::from_utf8_lossy(&b[start..i]).into_owned());
        let mut j = i;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if !b[j..].starts_with(b"::") {
            return (vec![path], i);
        }
        j += 2;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if b.get(j) == Some(&b'{') {
            let mut all = Vec::new();
            j += 1;
            loop {
                while j < b.len() && (b[j].is_ascii_whitespace() || b[j] == b',') {
                    j += 1;
                }
                if j >= b.len() || b[j] == b'}' {
                    return (all, j + 1);
                }
                let (more, end) = path_at(b, j, path.clone());
                all.extend(more);
                // `x as y` and anything else up to the next item.
                j = end;
                while j < b.len() && b[j] != b',' && b[j] != b'}' {
                    j += 1;
                }
            }
        }
        i = j;
    }
}

/// The module a path names from `module`, resolved to a file of `files`.
fn resolve(
    module: &[String],
    path: &[String],
    files: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        // A child module of this file, named without `self::`.
        Some(first) => {
            let mut child = module.to_vec();
            child.push(first.to_string());
            if !files.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    let mut found = files.contains_key(&base).then(|| base.clone());
    for seg in rest {
        base.push(seg.clone());
        if files.contains_key(&base) {
            found = Some(base.clone());
        } else {
            break;
        }
    }
    found
}

type Edges = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// Which files of a crate each of its files imports.
fn edges(krate: &Crate) -> Edges {
    let mut edges = Edges::new();
    for (module, path) in &krate.files {
        let text = std::fs::read_to_string(path).expect("read a source file");
        let code = code_of(&text);
        // Unit tests (`#[cfg(test)] mod tests { use super::*; … }`) import their parent by
        // design; the circle guard is about the code that ships.
        let shipped = match code.find("#[cfg(test)]\nmod tests") {
            Some(at) => &code[..at],
            None => &code[..],
        };
        let targets = edges.entry(module.clone()).or_default();
        for p in paths_of(shipped) {
            if let Some(target) = resolve(module, &p, &krate.files) {
                let ancestor = module.starts_with(&target);
                if !ancestor {
                    targets.insert(target);
                }
            }
        }
    }
    edges
}

/// The import circles among `edges`: each a set of files that reach each other.
fn circles(edges: &Edges) -> Vec<Vec<String>> {
    // Strongly connected components (Tarjan; recursion is fine: a crate has tens of files).
    struct Walk<'a> {
        edges: &'a Edges,
        index: BTreeMap<Vec<String>, usize>,
        low: BTreeMap<Vec<String>, usize>,
        stack: Vec<Vec<String>>,
        on_stack: BTreeSet<Vec<String>>,
        found: Vec<Vec<String>>,
    }
    fn visit(w: &mut Walk<'_>, v: &Vec<String>) {
        let n = w.index.len();
        w.index.insert(v.clone(), n);
        w.low.insert(v.clone(), n);
        w.stack.push(v.clone());
        w.on_stack.insert(v.clone());
        let next: Vec<Vec<String>> = w.edges.get(v).into_iter().flatten().cloned().collect();
        for u in next {
            if !w.index.contains_key(&u) {
                visit(w, &u);
                let l = w.low[&u].min(w.low[v]);
                w.low.insert(v.clone(), l);
            } else if w.on_stack.contains(&u) {
                let l = w.index[&u].min(w.low[v]);
                w.low.insert(v.clone(), l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut component = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(&u);
                let done = &u == v;
                component.push(u.join("::"));
                if done {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                w.found.push(component);
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for module in edges.keys() {
        if !walk.index.contains_key(module) {
            visit(&mut walk, module);
        }
    }
    walk.found
}

#[test]
fn no_files_of_a_crate_import_each_other_around_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in crates(root) {
        assert!(!krate.files.is_empty(), "{}: no source files", krate.name);
        for circle in circles(&edges(&krate)) {
            found.push(format!("{}: {}", krate.name, circle.join(" ↔ ")));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other (move what both need into a file of its own, or turn \
         the dependency around):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_guard_reads_paths_as_the_tree_writes_them_and_finds_circles() {
    let code = code_of(
        "use super::{a, b::{C, d as e}};\n// crate::x::y\nlet s = \"crate::z::w\";\nchild::f();",
    );
    assert_eq!(
        paths_of(&code),
        [
            vec!["super", "a"],
            vec!["super", "b", "C"],
            vec!["super", "b", "d"],
            vec!["child", "f"],
        ]
    );
    let module = |m: &str| -> Vec<String> {
        m.split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let files: BTreeMap<Vec<String>, PathBuf> = ["", "app", "accounts", "accounts::login"]
        .into_iter()
        .map(|m| (module(m), PathBuf::new()))
        .collect();
    let from_login = |p: &str| resolve(&module("accounts::login"), &module(p), &files);
    assert_eq!(from_login("crate::app::AppState"), Some(module("app")));
    assert_eq!(from_login("super::Accounts"), Some(module("accounts")));
    assert_eq!(from_login("std::sync::Arc"), None);
    // The circle the state once made: it wired the accounts, which extended the state.
    let mut edges = Edges::new();
    edges.insert(module("app"), [module("accounts")].into());
    edges.insert(module("accounts"), [module("accounts::login")].into());
    edges.insert(module("accounts::login"), [module("app")].into());
    assert_eq!(
        circles(&edges),
        [vec!["accounts", "accounts::login", "app"]]
    );
    edges.insert(module("accounts::login"), BTreeSet::new());
    assert!(circles(&edges).is_empty());
}
