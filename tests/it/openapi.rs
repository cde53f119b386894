//! `/openapi.json` validates as OpenAPI 3.1 with a standard validator (Python's
//! openapi-spec-validator, which `scripts/test.sh` installs) and says what the schema cache, the
//! Access rows and the Request rows say, on every engine: publicly without system tables, `_`
//! columns and Request structures, in debug mode with the structures too (who may read it at
//! all: tests/it/exposure.rs).

use crate::support::{demo_databases, skip, Server};
use serde_json::Value;
use std::process::Command;

/// The Python that has `openapi_spec_validator`: `APIJET_TEST_PYTHON`, else `python3`.
fn validator() -> Option<String> {
    let python = std::env::var("APIJET_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import openapi_spec_validator"])
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

fn validate(python: &str, doc: &str, dir: &std::path::Path) -> Result<(), String> {
    let file = dir.join("openapi.json");
    std::fs::write(&file, doc).map_err(|e| e.to_string())?;
    let out = Command::new(python)
        .args([
            "-c",
            "import sys, json; from openapi_spec_validator import validate; \
             from openapi_spec_validator.validation.validators import OpenAPIV31SpecValidator; \
             validate(json.load(open(sys.argv[1])), cls=OpenAPIV31SpecValidator); print('valid')",
        ])
        .arg(&file)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn openapi_document_validates_and_follows_the_schema() {
    let Some(python) = validator() else {
        skip(
            "openapi: python3 with openapi-spec-validator not found (scripts/test.sh installs it)",
        );
        return;
    };
    for (engine, url) in demo_databases("openapi") {
        let server = Server::start(&url, "");
        let reply = server.client().get("/openapi.json").expect("openapi");
        assert_eq!(reply.status, 200);
        validate(&python, &reply.text, server.dir())
            .unwrap_or_else(|e| panic!("{engine}: /openapi.json is not valid OpenAPI 3.1:\n{e}"));
        let doc: Value = serde_json::from_str(&reply.text).expect("json");
        assert_eq!(doc["openapi"], "3.1.0");
        let schemas = &doc["components"]["schemas"];
        // Columns from the schema cache; `_password` is never listed.
        let user = &schemas["User"];
        for column in ["id", "name", "contactIdList"] {
            assert!(
                user["properties"].get(column).is_some(),
                "{engine}: User.{column}"
            );
        }
        assert!(schemas["Privacy"]["properties"].get("_password").is_none());
        // Access rows: who may do what.
        let access = &user["x-apijson-access"];
        assert!(access["GET"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == "UNKNOWN")));
        let privacy_get = schemas["Privacy"]["x-apijson-access"]["GET"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !privacy_get.iter().any(|x| x == "UNKNOWN"),
            "{engine}: {privacy_get:?}"
        );
        // System tables stay hidden outside debug mode.
        for system in ["Access", "Request", "Function", "Verify", "Document"] {
            assert!(schemas.get(system).is_none(), "{engine}: {system}");
        }
        // Request rows: the tags a client calls, without their structures.
        let paths = doc["paths"].as_object().expect("paths");
        for p in [
            "/get", "/gets", "/post", "/put", "/delete", "/crud", "/login", "/health",
        ] {
            assert!(paths.contains_key(p), "{engine}: no {p}");
        }
        assert!(!paths.contains_key("/metrics"), "{engine}");
        assert!(
            paths.contains_key("/post/Moment"),
            "{engine}: no /post/Moment in {:?}",
            paths.keys().collect::<Vec<_>>()
        );
        for leak in [
            "\"x-apijson-requests\":",
            "\"structure\"",
            "_password",
            "_payPassword",
        ] {
            assert!(
                !reply.text.contains(leak),
                "{engine}: {leak} in the public document"
            );
        }

        // In debug mode: the structures of private methods, per method and tag.
        drop(server);
        let server = Server::start(&url, "debug = true\nopenapi = \"debug\"\n");
        let reply = server.client().get("/openapi.json").expect("openapi");
        validate(&python, &reply.text, server.dir())
            .unwrap_or_else(|e| panic!("{engine}: debug /openapi.json is not valid:\n{e}"));
        let doc: Value = serde_json::from_str(&reply.text).expect("json");
        let post_moment = &doc["paths"]["/post/Moment"]["post"];
        assert!(
            post_moment["x-apijson-requests"][0]["structure"].is_object(),
            "{engine}: {post_moment}"
        );
        let privacy = &doc["components"]["schemas"]["Privacy"]["properties"];
        assert!(
            privacy.get("phone").is_some() && privacy.get("_password").is_none(),
            "{engine}: never _ columns: {privacy}"
        );
    }
}
