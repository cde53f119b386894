//! Settings for running more than one instance, on every engine: host lists that skip a dead
//! host, read replicas, and instance ids. The multi-server topologies themselves (Galera,
//! PostgreSQL primary + standby, haproxy) and their fault tests are scripts/cluster/*.sh, run by
//! scripts/test.sh as a stage of its own.

use crate::support::{ada, code, demo_databases, post, Engine, Server};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

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

/// A TCP forwarder on a loopback port to `target`: a stand-in for a database host that can be
/// made to die (listener closed, every forwarded connection cut) while the real one lives on.
struct Forwarder {
    port: u16,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Forwarder {
    fn start(target: &str) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (target, stop2, streams2) =
            (target.to_string(), Arc::clone(&stop), Arc::clone(&streams));
        thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let _ = client.set_nonblocking(false);
                let mut kept = streams2.lock().expect("lock");
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
                        continue;
                    };
                    thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
                kept.push(client);
                kept.push(server);
            }
            // Dropping the listener here refuses every later connection.
        });
        Forwarder {
            port,
            stop,
            streams,
        }
    }

    /// Connections forwarded so far and still open.
    fn connections(&self) -> usize {
        self.streams.lock().expect("lock").len() / 2
    }

    /// The open connections are cut (a network blip, a server-side kill); new ones still work.
    fn cut(&self) {
        for s in self.streams.lock().expect("lock").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// The host dies: no new connections, and the open ones are cut.
    fn kill(&self) {
        self.stop.store(true, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(50));
        self.cut();
    }
}

/// `HOST:PORT` of a `scheme://user@HOST:PORT/…` URL.
fn host_port(url: &str) -> String {
    let rest = url.split_once("://").expect("a URL").1;
    let authority = rest.split(['/', '?']).next().expect("an authority");
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .to_string()
}

/// mysql_async moves a connection to a local server onto its Unix socket, which would bypass a
/// [`Forwarder`]; keep MySQL connections on TCP.
fn tcp_only(engine: Engine, url: &str) -> String {
    if engine == Engine::Mariadb {
        with_param(url, "prefer_socket=false")
    } else {
        url.to_string()
    }
}

fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

#[test]
fn a_host_list_skips_a_dead_host() {
    for (engine, url) in demo_databases("cluster_hosts") {
        if engine == Engine::Sqlite {
            continue;
        }
        let mut url = dead_host_first(&url);
        if engine == Engine::Postgres {
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
fn a_running_server_moves_to_the_next_host_when_its_host_dies() {
    for (engine, url) in demo_databases("cluster_failover") {
        if engine == Engine::Sqlite {
            continue;
        }
        let real = host_port(&url);
        let doomed = Forwarder::start(&real);
        let mut list = url.replacen(&real, &format!("127.0.0.1:{},{real}", doomed.port), 1);
        list = tcp_only(engine, &list);
        if engine == Engine::Postgres {
            list = with_param(&list, "target_session_attrs=read-write");
        }
        let s = Server::start(&list, CONFIG);
        let mut c = ada(&s);
        let write = |c: &mut crate::support::Client, content: &str| {
            post(
                c,
                "/post",
                &json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": content}}),
            )
        };
        assert_eq!(code(&write(&mut c, "before-failover")), 200, "{engine}");
        assert!(
            doomed.connections() > 0,
            "{engine}: the first host was not used"
        );
        doomed.kill();
        // Requests on connections that were cut fail; within a few seconds, without a restart,
        // the server writes on the surviving host.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut failures = 0;
        let id = loop {
            let r = write(&mut c, "after-failover");
            if code(&r) == 200 {
                break r["Comment"]["id"].as_i64().expect("id");
            }
            failures += 1;
            assert!(
                Instant::now() < deadline,
                "{engine}: no write after the failover: {r}"
            );
            thread::sleep(Duration::from_millis(100));
        };
        let r = post(&mut c, "/get", &json!({"Comment": {"id": id}}));
        assert_eq!(r["Comment"]["content"], "after-failover", "{engine}: {r}");
        eprintln!("{engine}: {failures} failed requests before the first write on the survivor");
    }
}

#[test]
fn cut_connections_to_a_live_host_do_not_move_the_server_off_it() {
    for (engine, url) in demo_databases("cluster_blip") {
        if engine == Engine::Sqlite {
            continue;
        }
        let real = host_port(&url);
        let (first, second) = (Forwarder::start(&real), Forwarder::start(&real));
        let list = tcp_only(
            engine,
            &url.replacen(
                &real,
                &format!("127.0.0.1:{},127.0.0.1:{}", first.port, second.port),
                1,
            ),
        );
        let s = Server::start(&list, CONFIG);
        let mut c = ada(&s);
        for round in 0..3 {
            first.cut();
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                // A write (its transaction takes a pooled connection) and a read.
                let w = post(
                    &mut c,
                    "/post",
                    &json!({"tag": "Comment", "Comment": {"momentId": 1001, "content": "blip"}}),
                );
                let r = post(&mut c, "/get", &json!({"Comment": {"id": 5001}}));
                if code(&w) == 200 && code(&r) == 200 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{engine}: no answer after a cut: {r}"
                );
                thread::sleep(Duration::from_millis(50));
            }
            assert!(
                first.connections() > 0,
                "{engine}, round {round}: {} / {} new connections",
                first.connections(),
                second.connections()
            );
            assert_eq!(
                second.connections(),
                0,
                "{engine}, round {round}: moved off a live host"
            );
        }
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
        if engine == Engine::Sqlite {
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
        let found = |r: &serde_json::Value| r["Comment[]"].as_array().map_or(0, Vec::len);
        let list = json!({"Comment[]": {"count": 3, "Comment": {"id": id}}});
        let r = post(&mut c, "/get", &list);
        assert_eq!(
            (code(&r), found(&r)),
            (200, 0),
            "{engine}: streamed list on the replica: {r}"
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
        let r = post(&mut ada(&direct), "/get", &list);
        assert_eq!(found(&r), 1, "{engine}: the same list on the primary: {r}");

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

#[test]
fn a_host_list_option_the_driver_does_not_know_is_refused_naming_it() {
    // libpq's target_session_attrs=primary is not tokio-postgres' (any, read-write, read-only):
    // the start fails, before any connection, saying which option and value.
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=primary",
        dead_port(),
        dead_port()
    );
    let err = Server::try_start(&url, CONFIG)
        .err()
        .expect("an unknown target_session_attrs is refused");
    assert!(err.contains("target_session_attrs"), "{err}");
}

/// A demoted primary (read-only after a failover) refuses writes: the answer says the database
/// cannot serve the write now and to try again (503), and nothing of the write took effect.
/// PostgreSQL: a read-only default per database leaves the other tests' databases alone (the
/// read-only switch of MariaDB is per server, and does not bind its root).
#[test]
fn a_write_to_a_read_only_primary_answers_503_and_changes_nothing() {
    for (engine, url) in demo_databases("cluster_read_only") {
        if engine != Engine::Postgres {
            continue;
        }
        let database = url.rsplit('/').next().expect("a database name");
        engine
            .cli(
                engine.admin_database(),
                &format!("ALTER DATABASE {database} SET default_transaction_read_only = on"),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let s = Server::start(&url, CONFIG);
        let mut c = ada(&s);
        let before = post(&mut c, "/get", &json!({"Moment": {"id": 15}}));
        assert_eq!(code(&before), 200, "{before}");
        let r = post(
            &mut c,
            "/put",
            &json!({"tag": "Moment", "Moment": {"id": 15, "content": "read-only"}}),
        );
        assert_eq!(code(&r), 503, "{r}");
        let msg = r["msg"].as_str().unwrap_or_default();
        assert!(msg.contains("try again"), "{r}");
        let after = post(&mut c, "/get", &json!({"Moment": {"id": 15}}));
        assert_eq!(after["Moment"], before["Moment"], "{after}");
    }
}
