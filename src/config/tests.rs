//! The settings' sources and their order of precedence.

use super::*;

/// `apijet.example.toml` holds every setting and nothing else.
#[test]
fn the_example_file_has_every_setting() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("apijet.example.toml");
    let text = std::fs::read_to_string(&path).expect("apijet.example.toml");
    // Settings whose absence means something (a random instance id) are shown commented
    // out, as `# key = value`: they count as present.
    let uncommented: String = text
        .lines()
        .map(|line| {
            let setting = line.strip_prefix("# ").filter(|rest| {
                rest.split_once(" = ").is_some_and(|(key, _)| {
                    !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                })
            });
            setting.unwrap_or(line)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let p: Partial = toml::from_str(&uncommented).expect("every key is a setting");
    let shown = format!("{p:?}");
    assert!(
        !shown.contains("None"),
        "apijet.example.toml misses a setting: {shown}"
    );
    Config::load(Some(&path), Partial::default()).expect("it loads");
}

#[test]
fn flags_win_over_the_file() {
    let dir = std::env::temp_dir().join(format!("apijet-config-{}", std::process::id()));
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(dir.clone());
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("apijet.toml");
    std::fs::write(&file, "db = \"sqlite://file.db\"\nmax_count = 1000\n").expect("write");
    let c = Config::load(
        Some(&file),
        Partial::flags(Some("sqlite://flag.db".into()), None, false),
    )
    .expect("loads");
    assert_eq!(c.db, "sqlite://flag.db");
    assert_eq!(c.max_count, 1000);
    std::fs::write(&file, "nonsense = 1\n").expect("write");
    assert!(Config::load(Some(&file), Partial::default()).is_err());
    std::fs::write(
        &file,
        "instance_id = 7\nread_replicas = [\"postgres://u@a:1,b:2/db\"]\n",
    )
    .expect("write");
    let c = Config::load(Some(&file), Partial::default()).expect("loads");
    assert_eq!(c.instance_id, Some(7));
    assert_eq!(c.read_replicas, ["postgres://u@a:1,b:2/db"]);
}

/// `raw_sql` as a list (each fragment as it is) or as the reference's RAW_MAP (text →
/// SQL, "" for the text itself); docs/raw-sql-demo.toml is such a configuration.
#[test]
fn raw_sql_takes_a_list_or_the_reference_map() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/raw-sql-demo.toml");
    let c = Config::load(Some(&demo), Partial::default()).expect("the demo's raw SQL loads");
    let sql = |text: &str| {
        c.raw_sql
            .iter()
            .find(|(t, _)| t == text)
            .map(|(_, s)| s.as_str())
    };
    assert_eq!(sql("to.momentId"), Some("`to`.`momentId`"));
    assert_eq!(sql("`to`.`id`"), Some("`to`.`id`"));
    assert_eq!(
        sql("sumUserIdIsEven"),
        Some("sum(if(`userId`%2=0,1,0)) AS sumUserIdIsEven")
    );
    assert_eq!(c.raw_sql.len(), 7);
    let list: Partial = toml::from_str("raw_sql = [\"now()\"]").expect("a list");
    let mut c = Config::default();
    c.apply(list);
    assert_eq!(c.raw_sql, [("now()".to_string(), "now()".to_string())]);
}

/// `apijet serve --help` says every setting has a variable `APIJET_` + its key in capitals,
/// except `raw_sql` and `procedures` (structured values: only in the file).
#[test]
fn every_setting_but_the_structured_ones_has_its_variable() {
    let example = include_str!("../../apijet.example.toml");
    let source = [include_str!("mod.rs"), include_str!("env.rs")].concat();
    let keys: Vec<&str> = example
        .lines()
        .filter_map(|line| {
            let line = line.strip_prefix("# ").unwrap_or(line);
            let (key, _) = line.split_once(" = ")?;
            key.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
                .then_some(key)
        })
        .collect();
    assert!(
        keys.contains(&"db") && keys.contains(&"live_concurrency"),
        "{keys:?}"
    );
    let missing: Vec<String> = keys
        .into_iter()
        .filter(|key| !matches!(*key, "raw_sql" | "procedures"))
        .map(|key| format!("APIJET_{}", key.to_ascii_uppercase()))
        .filter(|var| !source.contains(&format!("\"{var}\"")))
        .collect();
    assert!(
        missing.is_empty(),
        "settings without their variable: {missing:?}"
    );
}
