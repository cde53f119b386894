use super::*;

#[test]
fn a_kept_body_is_cut_before_its_time() {
    let body = br#"{"User":{"id":1},"ok":true,"code":200,"msg":"success","time":1700000000000}"#;
    let head = head_of(body).expect("a successful envelope");
    assert!(head.ends_with(b"\"time\":"));
    assert_eq!(head_of(br#"{"ok":false,"code":400,"msg":"x"}"#), None);
    assert_eq!(head_of(br#"{"a":"\"time\":1}"#), None);
}

/// Two lists of values are written alike only when they are equal: every list of up to two
/// of some values that look alike in other spellings (numbers of each kind, strings that
/// hold JSON, lengths that could run into the next value).
#[test]
fn values_are_written_alike_only_when_equal() {
    let one: Vec<Json> = [
        "null",
        "true",
        "false",
        "0",
        "1",
        "-1",
        "1.0",
        "1.5",
        "1e2",
        "100",
        "18446744073709551615",
        "-9223372036854775808",
        "9223372036854775808",
        "\"\"",
        "\"1\"",
        "\"true\"",
        "\"null\"",
        "\"a\"",
        "\"a\\u0000\"",
        "\"\\\"\"",
        "\"\\u0001\\u0000\\u0000\\u0000\\u0000\\u0000\\u0000\\u0000s\"",
        "\"é\"",
        "[]",
        "[1]",
        "[\"1\"]",
        "[1,2]",
        "[[1],2]",
        "{}",
        "{\"a\":1}",
        "{\"a\":\"1\"}",
        "{\"b\":1,\"a\":2}",
    ]
    .iter()
    .map(|t| serde_json::from_str(t).expect("json"))
    .collect();
    let mut lists: Vec<Vec<Json>> = vec![vec![]];
    for a in &one {
        lists.push(vec![a.clone()]);
        for b in &one {
            lists.push(vec![a.clone(), b.clone()]);
        }
    }
    let mut seen: HashMap<Vec<u8>, &Vec<Json>> = HashMap::new();
    for list in &lists {
        let mut out = Vec::new();
        write_values(list, &mut out);
        if let Some(before) = seen.insert(out, list) {
            assert_eq!(before, list, "two lists written alike");
        }
    }
    assert_eq!(seen.len(), lists.len());
}

fn cache(bytes: usize, ttl: Option<Duration>) -> Arc<AnswerCache<u64>> {
    let ttl = ttl.map(|t| t.as_millis() as u64);
    let c = AnswerCache::new(bytes, true, ttl, Duration::from_secs(10), Arc::default())
        .expect("a store");
    c.heard_by(true, true);
    Arc::new(c)
}

fn body(n: usize) -> Vec<u8> {
    format!(
        r#"{{"x":"{}","ok":true,"code":200,"msg":"success","time":1}}"#,
        "a".repeat(n)
    )
    .into_bytes()
}

fn key(n: u32) -> Key {
    Key(n.to_le_bytes().to_vec().into_boxed_slice())
}

#[test]
fn an_entry_is_given_until_what_it_read_moved() {
    let c = cache(1 << 20, None);
    c.keep_body(key(1), 7, &body(10), 1);
    assert!(c.get(&key(1), |stamp| stamp != 7).is_some());
    assert!(c.get(&key(1), |_| true).is_none(), "moved: dead");
    assert!(c.get(&key(1), |_| false).is_none(), "and gone");
    assert_eq!(c.counters.invalidations.load(Relaxed), 1);
    assert_eq!(c.counters.hits.load(Relaxed), 1);
    assert_eq!(c.counters.misses.load(Relaxed), 2);
}

#[test]
fn an_entry_expires_after_the_ttl() {
    let c = cache(1 << 20, Some(Duration::from_millis(1)));
    c.keep_body(key(1), 0, &body(10), 1);
    std::thread::sleep(Duration::from_millis(5));
    assert!(c.get(&key(1), |_| false).is_none());
}

#[test]
fn the_store_stays_within_its_bytes_and_no_entry_past_its_limit_is_kept() {
    let limit = 64 << 10;
    let c = cache(limit, None);
    c.keep_body(key(0), 0, &body(limit / 8), 1);
    assert!(c.get(&key(0), |_| false).is_none(), "larger than an eighth");
    for i in 1..2000 {
        c.keep_body(key(i), 0, &body(500), 1);
        assert!(c.bytes_held() <= limit as u64);
    }
    assert!(c.counters.evictions.load(Relaxed) > 0);
}

#[test]
fn a_store_with_room_evicts_nothing() {
    let c = cache(64 << 20, None);
    for i in 0..20_000 {
        c.keep_body(key(i), 0, &body(200), 1);
    }
    for i in 0..20_000 {
        c.keep_body(key(i % 1000), 0, &body(200), 1);
    }
    assert_eq!(c.counters.evictions.load(Relaxed), 0);
}

#[test]
fn a_hit_carries_the_time_of_its_own_answer() {
    let c = cache(1 << 20, None);
    c.keep_body(key(1), 0, &body(3), 1);
    let Some(Answer::Bytes { body, .. }) = c.get(&key(1), |_| false) else {
        panic!("a kept body");
    };
    let v: Json = serde_json::from_slice(&body).expect("JSON");
    assert!(v["time"].as_u64().is_some_and(|t| t > 1));
    assert_eq!(v["x"], "aaa");
}
/// Readers of one key that miss together: one leads, the others wait and are given what
/// it kept; when it keeps nothing, each waiter reads on its own at once (none waits for
/// another waiter).
#[tokio::test]
async fn concurrent_misses_of_one_key_read_once_and_wait_for_it() {
    for keeps in [true, false] {
        let c = cache(1 << 20, None);
        let Lookup::Miss(Some(leading)) = c.lookup(&key(1), |_| false).await else {
            panic!("the first reader leads");
        };
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let c = Arc::clone(&c);
                tokio::spawn(async move {
                    match c.lookup(&key(1), |_| false).await {
                        Lookup::Hit(_) => "hit",
                        Lookup::Miss(Some(_)) => "led",
                        Lookup::Miss(None) => "read alone",
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            c.counters.waited.load(Relaxed),
            8,
            "all wait for the leader"
        );
        if keeps {
            c.keep_body(key(1), 0, &body(10), 1);
        }
        drop(leading);
        for w in waiters {
            let got = tokio::time::timeout(Duration::from_secs(10), w)
                .await
                .expect("woken")
                .expect("joined");
            assert_eq!(got, if keeps { "hit" } else { "read alone" });
        }
        assert!(c.flights().is_empty(), "no flight left behind");
    }
}

#[test]
fn unheard_writes_bound_an_entrys_life_whatever_the_setting() {
    let ttl = |setting: Option<u64>, programs: bool| {
        let c = AnswerCache::<u64>::new(
            1 << 20,
            true,
            setting,
            Duration::from_secs(1),
            Arc::default(),
        )
        .expect("a store");
        c.heard_by(programs, programs);
        c.ttl_ms.load(Relaxed)
    };
    assert_eq!(ttl(None, true), 0, "heard: until a write");
    assert_eq!(ttl(Some(0), true), 0);
    assert_eq!(ttl(Some(50), true), 50, "a TTL set still bounds");
    assert_eq!(ttl(None, false), UNHEARD_TTL_MS);
    assert_eq!(ttl(Some(0), false), UNHEARD_TTL_MS, "never forever unheard");
    assert_eq!(ttl(Some(5000), false), 5000);
}
