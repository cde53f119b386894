//! Settings for running more than one instance, on every engine: host lists that skip a dead
//! host, read replicas, and instance ids. The multi-server topologies themselves (Galera,
//! PostgreSQL primary + standby, haproxy) and their fault tests are scripts/cluster/*.sh, run by
//! scripts/test.sh as a stage of its own.

mod support;

use serde_json::json;
use std::net::TcpListener;
use support::{ada, code, demo_databases, post, Server};

const CONFIG: &str = "token_secret = \"cluster\"\n";

/// A loopback port nothing listens on (bound, then released).
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `scheme://user@host:port/db?q` with a dead `127.0.0.1:PORT` put first in the host list.
fn dead_host_first(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (userinfo, hosts) = rest.split_once('@').expect("a user");
    format!("{scheme}://{userinfo}@127.0.0.1:{},{hosts}", dead_port())
}

fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

#[test]
fn a_host_list_skips_a_dead_host() {
    for (engine, url) in demo_databases("cluster_hosts") {
        if engine == "sqlite" {
            continue;
        }
        let mut url = dead_host_first(&url);
        if engine == "postgres" {
            url = with_param(&url, "target_session_attrs=read-write");
        }
        let s = Server::start(&url, CONFIG);
        let mut c = ada(&s);
        let r = post(
            &mut c,
            "/post",
            &json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": "cluster-hosts"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let id = r["Comment"]["id"].as_i64().expect("id");
        let r = post(&mut c, "/get", &json!({"Comment": {"id": id}}));
        assert_eq!(r["Comment"]["content"], "cluster-hosts", "{engine}: {r}");
    }
}

#[test]
fn instance_id_decides_the_residue_of_new_ids() {
    for (engine, url) in demo_databases("cluster_ids") {
        for instance in [0_i64, 1234] {
            let s = Server::start(&url, &format!("{CONFIG}instance_id = {instance}\n"));
            let mut c = ada(&s);
            for n in 0..5 {
                let r = post(
                    &mut c,
                    "/post",
                    &json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": format!("ids-{n}")}}),
                );
                let id = r["Comment"]["id"].as_i64().expect("id");
                assert_eq!(id.rem_euclid(2048), instance, "{engine}: {r}");
            }
        }
        let refused = Server::try_start(&url, &format!("{CONFIG}instance_id = 2048\n"));
        let err = refused.err().expect("instance_id 2048 is refused");
        assert!(err.contains("instance_id"), "{engine}: {err}");
    }
}

#[test]
fn gets_go_to_the_replica_and_everything_else_to_the_primary() {
    // The "replica" is another copy of the demo data that never sees the primary's writes: a
    // GET that finds nothing there shows where it ran.
    let replicas = demo_databases("cluster_replica_copy");
    for (engine, url) in demo_databases("cluster_primary") {
        let (_, copy) = replicas
            .iter()
            .find(|(e, _)| *e == engine)
            .expect("the same engines");
        if engine == "sqlite" {
            let err = Server::try_start(&url, &format!("{CONFIG}read_replicas = [\"{copy}\"]\n"))
                .err()
                .expect("SQLite has no replicas");
            assert!(err.contains("read replica"), "{err}");
            continue;
        }
        // Its first host is dead: a replica URL is a host list like the primary's.
        let replica = dead_host_first(copy);
        let s = Server::start(&url, &format!("{CONFIG}read_replicas = [\"{replica}\"]\n"));
        let mut c = ada(&s);
        let r = post(
            &mut c,
            "/post",
            &json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": "on-the-primary"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: {r}");
        let id = r["Comment"]["id"].as_i64().expect("id");
        let r = post(&mut c, "/get", &json!({"Comment": {"id": id}}));
        assert_eq!(
            (code(&r), r.get("Comment")),
            (200, None),
            "{engine}: GET on the replica: {r}"
        );
        let r = post(&mut c, "/head", &json!({"Comment": {"id": id}}));
        assert_eq!(
            r["Comment"]["count"], 0,
            "{engine}: HEAD on the replica: {r}"
        );
        let r = post(&mut c, "/get", &json!({"Comment": {"id": 5001}}));
        assert_eq!(code(&r), 200, "{engine}: {r}");
        assert!(r["Comment"]["content"].is_string(), "{engine}: {r}");
        // The write is on the primary, and a PUT (a read-modify-write) runs there too.
        let r = post(
            &mut c,
            "/put",
            &json!({"tag": "Comment", "Comment": {"id": id, "content": "still-on-the-primary"}}),
        );
        assert_eq!(code(&r), 200, "{engine}: PUT on the primary: {r}");
        let direct = Server::start(&url, CONFIG);
        let r = post(&mut ada(&direct), "/get", &json!({"Comment": {"id": id}}));
        assert_eq!(
            r["Comment"]["content"], "still-on-the-primary",
            "{engine}: {r}"
        );

        let only_dead = {
            let (scheme, rest) = url.split_once("://").expect("a URL");
            let (userinfo, tail) = rest.split_once('@').expect("a user");
            let path = &tail[tail.find('/').expect("a database")..];
            format!("{scheme}://{userinfo}@127.0.0.1:{}{path}", dead_port())
        };
        let err = Server::try_start(
            &url,
            &format!("{CONFIG}read_replicas = [\"{only_dead}\"]\n"),
        )
        .err()
        .expect("an unreachable replica stops the start");
        assert!(err.contains("read replica"), "{engine}: {err}");
    }
}
