//! What the database says the API is, read at start-up and again on every reload.

use apijet_exec::Backend;
use apijet_plan::read::PlanCache;
use apijet_plan::schema::SchemaCache;
use apijet_plan::verify::RequestRules;

/// What the database says the API is: tables and roles (and, for private methods, the
/// `Request` rules). Replaced whole on reload, so requests in flight keep the one they started
/// with.
pub struct Snapshot {
    pub schema: SchemaCache,
    pub rules: RequestRules,
    /// `/openapi.json`, built from the two above.
    pub openapi: bytes::Bytes,
    /// Read plans by request shape; they hold for this schema only.
    pub plans: PlanCache,
}

/// Prints start-up warnings without flooding: a demo database names many absent tables.
fn report(warnings: &[String]) {
    for w in warnings.iter().take(3) {
        eprintln!("apijet: warning: {w}");
    }
    if warnings.len() > 3 {
        eprintln!(
            "apijet: warning: … and {} more rows skipped",
            warnings.len() - 3
        );
    }
}

pub(super) async fn load_snapshot(
    backend: &Backend,
    debug: bool,
    max_batch: usize,
) -> Result<Snapshot, String> {
    let schema = apijet_exec::load_schema(backend)
        .await
        .map_err(|e| e.to_string())?;
    let has_request = schema.tables().any(|t| t.sql_name == "Request");
    let (rows, mut warnings) = apijet_exec::load_request_rules(backend, has_request, debug)
        .await
        .map_err(|e| e.to_string())?;
    let openapi_rules = rows.clone();
    let (rules, more) = RequestRules::new(rows);
    let rules = rules.with_max_update_count(max_batch);
    warnings.extend(more);
    warnings.splice(0..0, schema.warnings.iter().cloned());
    report(&warnings);
    let openapi = crate::openapi::document(&schema, &openapi_rules, debug);
    Ok(Snapshot {
        schema,
        rules,
        openapi,
        plans: PlanCache::default(),
    })
}
