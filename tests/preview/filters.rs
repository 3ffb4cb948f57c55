//! A user's filter against the broker itself (issue 27, SPEC I9): every selector of a corpus we accept, the broker
//! parses as our effective filter, and the freezing terms hold — a message stamped after `t0` that the user's
//! filter matches is not counted; every escape we refuse is refused by the preview, in words that point at its
//! position, before the broker is asked anything with it.

use artemis_core::message::{durable_message, PropertyValue, SimpleString};
use artemis_core::{ConnectOptions, Connection, SessionOptions};
use artemis_transfer::broker::jolokia::{BrokerManagement, ObjectName, QueueConfig, RoutingType};
use artemis_transfer::transfer::plan::{parse_filter, FilterErrorKind};
use artemis_transfer::transfer::{Kind, Mode, Plan, Selection};
use testbed::{Node, TestBed, TestQueues};

/// Selectors we accept, each matching the message [`matching`] and not [`other`]: comments (with parentheses and
/// quotes in them), quotes, `ESCAPE`, nested parentheses, unicode in literals, hex and octal numbers, the broker's
/// precedence of `NOT`, and the `hyphenated_props:` prefix.
const ACCEPTED: &[&str] = &[
    "colour = 'it''s (odd'",
    "n = 42 /* ) OR (1=1 */",
    "n = 42 -- ) OR (1=1 'x\nAND n > 0",
    "-- a comment first\n(((n = 42)) AND (colour LIKE 'it''s%'))",
    "kind LIKE 'a!_b!%c' ESCAPE '!'",
    "kind NOT LIKE 'zz%' AND tag IN ('x', 'y''z')",
    "tag NOT IN ('none') AND n BETWEEN 40 AND 0x2A",
    "price = 0x1F AND code = 010 AND n = 42L",
    "ratio = 15E-1 AND ratio > .5 AND ratio < 2.",
    "name = 'Zoë ☃ (--)'",
    "NOT flag = FALSE",
    "hyphenated_props:a-b = 1",
    "n - -1 = 43 AND n*2+1 = 85 AND n%5 = 2 AND n/2 = 21",
    "n NOT BETWEEN 0 AND 10 AND colour IS NOT NULL AND missing IS NULL",
    "flag /* a boolean property alone */",
];

/// Escapes and what the broker accepts that we do not, each refused with the position (as the words give it).
const REFUSED: &[(&str, &str)] = &[
    ("n = 42 /* ( */) OR (1=1 /* ) */", "position 15"),
    ("n = 42 -- (\n) OR (1=1 -- )\n", "line 2, column 1"),
    ("n = 42) OR (1=1", "position 7"),
    ("n = 42 -- ) OR (1=1", "position 8"),
    ("n = 42 OR XPATH '/a'", "position 11"),
    ("ünï = 1", "position 1"),
];

/// The properties of the message the corpus matches, and of the one it does not.
fn properties(matching: bool) -> Vec<(&'static str, PropertyValue)> {
    let s = |v: &str| PropertyValue::String(SimpleString::new(v));
    let pick = |yes: PropertyValue, no: PropertyValue| if matching { yes } else { no };
    vec![
        ("colour", pick(s("it's (odd"), s("blue"))),
        ("n", pick(PropertyValue::Int(42), PropertyValue::Int(1))),
        ("price", pick(PropertyValue::Long(31), PropertyValue::Long(0))),
        ("code", pick(PropertyValue::Int(8), PropertyValue::Int(0))),
        ("ratio", pick(PropertyValue::Double(1.5), PropertyValue::Double(0.0))),
        ("name", pick(s("Zoë ☃ (--)"), s("Bob"))),
        ("flag", pick(PropertyValue::Boolean(true), PropertyValue::Boolean(false))),
        ("kind", pick(s("a_b%c"), s("zzz"))),
        ("tag", pick(s("x"), s("none"))),
        ("a-b", pick(PropertyValue::Int(1), PropertyValue::Int(0))),
    ]
}

/// Sends, in one go: a matching message stamped before `t0`, one stamped an hour after it, and a message that
/// does not match, stamped before.
async fn send_corpus_messages(node: &Node, queue: &str, t0: i64) {
    let opts = ConnectOptions::new("127.0.0.1", node.core_port).credentials(node.user.clone(), node.password.clone());
    let conn = Connection::connect(&opts).await.expect("a Core connection");
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let producer = session.producer(None);
    for (matching, timestamp) in [(true, t0 - 1_000), (true, t0 + 3_600_000), (false, t0 - 1_000)] {
        let mut m = durable_message(queue);
        m.headers.timestamp = timestamp;
        for (key, value) in properties(matching) {
            m.headers.properties.insert(key, value);
        }
        producer.send(&m).await.expect("send");
    }
    session.close().await.expect("close the producing session");
    let _ = conn.close().await;
}

/// A queue on `node` holding the corpus's three messages around `t0`, read from its broker's clock, removed with
/// `queues`: its management, name, MBean and `t0`.
async fn corpus_queue(queues: &TestQueues, node: &Node, label: &str) -> (BrokerManagement, String, ObjectName, i64) {
    let mgmt = super::management(node);
    let queue = queues.name(node, label);
    mgmt.create_queue(&QueueConfig::plain_anycast(&queue)).await.unwrap();
    let mbean = mgmt.queue_mbean(&queue, RoutingType::Anycast, &queue);
    let t0 = mgmt.broker_state().await.unwrap().current_time_millis.expect("2.40 has CurrentTimeMillis");
    send_corpus_messages(node, &queue, t0).await;
    (mgmt, queue, mbean, t0)
}

fn plan(node: &Node, queue: &str, filter: &str, t0_millis: i64) -> Plan {
    let q = super::queue_ref(node, queue);
    Plan {
        mode: Mode::Copy,
        source: q.clone(),
        target: q,
        selection: Selection::Filter(filter.into()),
        t0_millis,
        destination: Default::default(),
    }
}

async fn count(mgmt: &BrokerManagement, mbean: &ObjectName, filter: &str) -> i64 {
    mgmt.count_messages(mbean, Some(filter)).await.unwrap_or_else(|e| panic!("the broker refused {filter:?}: {e}"))
}

#[tokio::test]
async fn the_broker_reads_every_effective_filter_we_build_and_its_freeze_holds() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let queues = TestQueues::new();
    let (mgmt, queue, mbean, t0) = corpus_queue(&queues, node, "filters_corpus").await;

    for filter in ACCEPTED {
        // The broker reads the user's text and our tree of it alike: both match the two matching messages.
        let tree = parse_filter(filter).unwrap_or_else(|e| panic!("{filter:?}: {e}"));
        assert_eq!(count(&mgmt, &mbean, filter).await, 2, "the user's text {filter:?}");
        assert_eq!(count(&mgmt, &mbean, &tree.to_string()).await, 2, "our tree of {filter:?}: {tree}");
        // The effective filter: only the one stamped before t0.
        let effective = plan(node, &queue, filter, t0).effective_filter().unwrap().unwrap();
        assert_eq!(count(&mgmt, &mbean, &effective).await, 1, "{filter:?} frozen as {effective}");
    }
    // The broker trims a filter given through management (`FilterImpl.createFilter(String)`), so a filter ending
    // in a `--` comment loses the comment's line break there and reads as `n = 42 - -c`: nothing matches. Our tree
    // has no comment, and the effective filter is never the user's text.
    let ends_in_a_comment = "n = 42 -- c\n";
    assert_eq!(count(&mgmt, &mbean, ends_in_a_comment).await, 0, "the broker's reading, trimmed");
    assert_eq!(count(&mgmt, &mbean, &parse_filter(ends_in_a_comment).unwrap().to_string()).await, 2);
}

#[tokio::test]
async fn every_escape_is_refused_by_the_preview_with_its_position() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let queues = TestQueues::new();
    let (mgmt, queue, mbean, t0) = corpus_queue(&queues, node, "filters_escapes").await;

    // What wrapping the text did (before issue 27): the broker reads `(n = 42 /* ( */) OR (1=1 /* ) */) AND <t0>`
    // as `(n = 42) OR ((1=1) AND <t0>)`, and counts the matching message stamped an hour after t0 too.
    let frozen = "AMQTimestamp <= {t0} AND (_AMQ_SCHED_DELIVERY IS NULL OR _AMQ_SCHED_DELIVERY <= {t0})";
    let wrapped = format!("({}) AND {}", REFUSED[0].0, frozen.replace("{t0}", &t0.to_string()));
    assert_eq!(count(&mgmt, &mbean, &wrapped).await, 3, "the escape, live");

    let target = queues.name(bed.node("west-1"), "filters_target");
    super::management(bed.node("west-1")).create_queue(&QueueConfig::plain_anycast(&target)).await.unwrap();
    for (filter, place) in REFUSED {
        let p = super::run_preview(&queue, "west-1", &target, Selection::Filter((*filter).into())).await;
        let refusal = p.findings.iter().find(|f| f.code == "invalid-filter").unwrap_or_else(|| panic!("{filter:?}"));
        assert_eq!(refusal.kind, Kind::Refused);
        assert!(refusal.words.starts_with(&format!("The filter cannot be read at {place}: ")), "{}", refusal.words);
        assert!(!p.can_start());
        assert_eq!(p.findings.iter().filter(|f| f.code == "invalid-filter").count(), 1, "{:?}", p.findings);
        // The run would read it with the same parser: no effective filter to apply.
        assert!(plan(node, &queue, filter, t0).effective_filter().is_err());
    }
}

/// The broker's own parser (the artemis-selector jar of the test bed's distribution, `tests/java/SelectorOracle.java`)
/// against ours over a fixed corpus of generated selectors: for every one we read, the broker reads our
/// serialisation as the same expression as the user's text (or refuses both, by a type rule); every one we refuse
/// that the broker reads is refused for a reason we give on purpose.
#[tokio::test]
async fn the_brokers_own_parser_reads_our_serialisation_as_it_reads_the_users_text() {
    let bed = TestBed::require().await;
    let corpus = generated_corpus(3_000);
    let ours: Vec<_> = corpus.iter().map(|s| parse_filter(s)).collect();
    let serialised: Vec<String> = ours.iter().flatten().map(|tree| tree.to_string()).collect();
    let (as_written, as_serialised) = (broker_reading(bed, &corpus), broker_reading(bed, &serialised));
    let mut as_serialised = as_serialised.into_iter();
    let mut accepted = 0;
    for ((text, ours), broker) in corpus.iter().zip(&ours).zip(&as_written) {
        match ours {
            Ok(tree) => {
                accepted += 1;
                let again = as_serialised.next().expect("one reading a serialisation");
                let same = (broker.starts_with("OK ") && &again == broker)
                    || (broker.starts_with("ERR ") && again.starts_with("ERR "));
                assert!(same, "{text:?}\n the broker read: {broker}\n our tree {tree}\n the broker read it: {again}");
            }
            Err(e) if broker.starts_with("OK ") => assert!(
                matches!(
                    e.kind,
                    FilterErrorKind::LineCommentWithoutLineBreak
                        | FilterErrorKind::BodySelector(_)
                        | FilterErrorKind::TooLarge
                ),
                "{text:?}: the broker reads {broker}, we refuse: {e}"
            ),
            Err(_) => {}
        }
    }
    assert!(accepted > 1_000, "the corpus reaches the parser's acceptance: {accepted} of {}", corpus.len());
}

/// `count` selectors made of pieces users write, joined and cut by the tokens that trip filters up; the same
/// every run (a fixed seed).
fn generated_corpus(count: usize) -> Vec<String> {
    const PIECES: [&str; 16] = [
        "x = 1",
        "y LIKE 'a%' ESCAPE '!'",
        "z IN ('a','b''c')",
        "w BETWEEN -1 AND 0x1F",
        "v IS NOT NULL",
        "NOT u",
        "(a + b) * 2 > c",
        "s <> 'é'",
        "t NOT IN ('x')",
        "q NOT LIKE '_'",
        "r NOT BETWEEN 1.5e3 AND .5",
        "- - k = +2",
        "p = 017",
        "TRUE",
        "m = 5L",
        "hyphenated_props:a-b = 1",
    ];
    const JOINS: [&str; 4] = [" AND ", " OR ", " and ", "\nor "];
    const TRICKY: [&str; 24] = [
        "(",
        ")",
        "/* ( */",
        "/* ) */",
        "-- (\n",
        "-- )\n",
        "\n",
        "'",
        "''",
        "--",
        "/*",
        "*/",
        " NOT ",
        ")) OR ((",
        ") OR (1=1",
        "1AND",
        "ſ",
        "08",
        "1.5F",
        "XPATH '/a'",
        "\u{a0}",
        "\r\n",
        "0x",
        "$",
    ];
    let mut seed: u64 = 0x5eed_0027;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    (0..count)
        .map(|_| {
            let mut s = PIECES[next(PIECES.len())].to_string();
            for _ in 0..next(4) {
                s += JOINS[next(JOINS.len())];
                s += PIECES[next(PIECES.len())].trim_start_matches("hyphenated_props:");
            }
            for _ in 0..next(3) {
                let at = s.char_indices().map(|(i, _)| i).chain([s.len()]).nth(next(s.chars().count() + 1));
                s.insert_str(at.unwrap_or(s.len()), TRICKY[next(TRICKY.len())]);
            }
            s
        })
        .collect()
}

/// What the broker's parser reads of each selector, in order: `OK <expression>` or `ERR <why>`.
fn broker_reading(bed: &TestBed, selectors: &[String]) -> Vec<String> {
    use base64::Engine;
    use std::io::Write;
    let lib = bed.artemis_home().join("lib").join("*");
    let build = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("selector-oracle");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/SelectorOracle.java");
    // Compiled every time (a second or two): a class left from an older source would judge by older rules.
    let javac = std::process::Command::new("javac")
        .arg("-nowarn")
        .arg("-d")
        .arg(&build)
        .arg("-cp")
        .arg(&lib)
        .arg(&source)
        .output()
        .expect("javac (a JDK) runs");
    assert!(javac.status.success(), "javac: {}", String::from_utf8_lossy(&javac.stderr));
    let mut java = std::process::Command::new("java")
        .arg("-cp")
        .arg(format!("{}:{}", build.display(), lib.display()))
        .arg("SelectorOracle")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("java runs");
    let input: String =
        selectors.iter().map(|s| base64::engine::general_purpose::STANDARD.encode(s.as_bytes()) + "\n").collect();
    let mut stdin = java.stdin.take().expect("java's stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = java.wait_with_output().expect("the oracle's answer");
    writer.join().expect("the writer").expect("selectors written");
    assert!(out.status.success(), "SelectorOracle failed");
    let lines: Vec<String> = String::from_utf8(out.stdout).expect("UTF-8").lines().map(str::to_string).collect();
    assert_eq!(lines.len(), selectors.len(), "one answer a selector");
    lines
}
