//! The cluster registry against the test bed: discovery from one seed node, the live endpoint of a
//! primary/backup pair, and the Postgres rows.

use std::collections::BTreeMap;
use std::time::Duration;

use artemis_transfer::registry::discover::{discover, Seed};
use artemis_transfer::registry::live::live_endpoint;
use artemis_transfer::registry::{store, Cluster, Credentials, EndpointRole, RegistryError};
use testbed::TestBed;

fn credentials(bed: &TestBed) -> Credentials {
    let node = &bed.nodes[0];
    Credentials { user: node.user.clone(), password: node.password.clone().into(), key_passphrase: None }
}

fn seed(jolokia_url: String) -> Seed {
    Seed { jolokia_url, core_url: None, jolokia_by_core: BTreeMap::new() }
}

#[tokio::test]
async fn discovers_the_east_cluster_from_one_node() {
    let bed = TestBed::require().await;
    let nodes =
        discover(&seed(bed.node("east-2").jolokia_url()), &credentials(bed), Duration::from_secs(10)).await.unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["east-1", "east-2"]);
    for (node, tb) in nodes.iter().zip([bed.node("east-1"), bed.node("east-2")]) {
        assert_eq!(node.endpoints.len(), 1);
        assert_eq!(node.endpoints[0].core_url, tb.core_url());
        assert_eq!(node.endpoints[0].jolokia_url, tb.jolokia_url());
        assert_eq!(node.endpoints[0].role, EndpointRole::Primary);
    }
    assert_ne!(nodes[0].node_id, nodes[1].node_id);
}

/// A shared-store pair is one logical node with two endpoints, keyed by the NodeID they share.
#[tokio::test]
async fn a_primary_and_its_backup_are_one_node() {
    let bed = TestBed::require().await;
    let nodes =
        discover(&seed(bed.node("west-1").jolokia_url()), &credentials(bed), Duration::from_secs(10)).await.unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let west = &nodes[0];
    assert_eq!(west.name, "west-1");
    let roles: Vec<(EndpointRole, &str)> = west.endpoints.iter().map(|e| (e.role, e.broker_name.as_str())).collect();
    assert_eq!(roles, [(EndpointRole::Primary, "west-1"), (EndpointRole::Backup, "west-1-backup")]);
    let (_, live) = live_endpoint(west, &credentials(bed), Duration::from_secs(10)).await.unwrap();
    assert_eq!(live.broker_name, "west-1", "the primary is live until it fails over");
}

/// A Jolokia URL that answers for another node is refused, in words.
#[tokio::test]
async fn a_wrong_jolokia_url_is_caught_by_the_node_id() {
    let bed = TestBed::require().await;
    let mut s = seed(bed.node("east-1").jolokia_url());
    let east2_core = format!("127.0.0.1:{}", bed.node("east-2").core_port);
    s.jolokia_by_core.insert(east2_core, bed.node("east-1").jolokia_url());
    let err = discover(&s, &credentials(bed), Duration::from_secs(10)).await.unwrap_err().to_string();
    assert!(err.contains("answers as node"), "{err}");
}

#[tokio::test]
async fn clusters_are_stored_listed_and_removed() {
    let bed = TestBed::require().await;
    let url = testbed::postgres::fresh_database("registry_rows").await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    // The schema as every path brings it up: the migrations, then the SQL functions' current definitions.
    let defaults = artemis_transfer::config::Config::from_sources(None, Vec::new()).unwrap().settings;
    artemis_transfer::jobs::migrate(&pool, &defaults, "test").await.unwrap();
    let nodes =
        discover(&seed(bed.node("west-1").jolokia_url()), &credentials(bed), Duration::from_secs(10)).await.unwrap();
    let cluster = Cluster { name: "west".into(), credentials_ref: "testbed".into(), nodes };
    store::add(&pool, &cluster).await.unwrap();
    assert_eq!(store::get(&pool, "west").await.unwrap(), cluster);
    let again = store::add(&pool, &cluster).await.unwrap_err().to_string();
    assert!(again.contains("already registered"), "{again}");
    // The same brokers under a second name: a broker belongs to one cluster, known by its NodeID.
    let twin = Cluster { name: "west-again".into(), ..cluster.clone() };
    let refused = store::add(&pool, &twin).await.unwrap_err();
    assert!(matches!(refused, RegistryError::Conflict(_)), "{refused:?}");
    let words = refused.to_string();
    assert!(words.contains("already registered as node west-1 of cluster west"), "{words}");
    assert!(words.contains("artemis-transfer cluster remove west"), "{words}");
    assert!(store::get(&pool, "west-again").await.is_err(), "nothing of the refused cluster is stored");
    assert_eq!(store::list(&pool).await.unwrap().len(), 1);
    assert!(store::remove(&pool, "west").await.unwrap());
    assert!(!store::remove(&pool, "west").await.unwrap());
    assert!(store::get(&pool, "west").await.unwrap_err().to_string().contains("no cluster named west"));
    let leftovers: i64 = sqlx::query_scalar("SELECT count(*) FROM cluster_endpoint").fetch_one(&pool).await.unwrap();
    assert_eq!(leftovers, 0, "endpoints go with their cluster");
}

/// The TLS node as an operator registers it: its Core URL with the TLS parameters (the test bed's CA, the client
/// certificate its HTTPS Jolokia requires), its Jolokia over HTTPS.
fn tls_seed(node: &testbed::Node) -> Seed {
    Seed {
        jolokia_url: node.jolokia_url(),
        core_url: Some(node.registered_core_url()),
        jolokia_by_core: BTreeMap::new(),
    }
}

/// Discovery from a TLS seed yields TLS endpoints only: the Core URL keeps its TLS parameters, Jolokia is https,
/// and the live endpoint is then found over HTTPS with the client certificate the URL names.
#[tokio::test]
async fn discovery_from_a_tls_seed_yields_tls_endpoints_only() {
    let bed = TestBed::require().await;
    let secure = bed.node("secure-1");
    let nodes = discover(&tls_seed(secure), &credentials(bed), Duration::from_secs(10)).await.unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    for endpoint in &nodes[0].endpoints {
        assert!(endpoint.core_url.contains("sslEnabled=true"), "{endpoint:?}");
        assert!(endpoint.jolokia_url.starts_with("https://"), "{endpoint:?}");
    }
    let (_, live) = live_endpoint(&nodes[0], &credentials(bed), Duration::from_secs(10)).await.unwrap();
    assert_eq!(live.broker_name, "secure-1");
}

/// A TLS seed whose Jolokia URL is plain http would send the credentials in clear: refused in words, as is an
/// HTTPS seed without the Core URL that says how Core reaches it.
#[tokio::test]
async fn a_tls_seed_is_never_downgraded() {
    let bed = TestBed::require().await;
    let secure = bed.node("secure-1");
    let mut plain_jolokia = tls_seed(secure);
    plain_jolokia.jolokia_url = plain_jolokia.jolokia_url.replace("https://", "http://");
    let err = discover(&plain_jolokia, &credentials(bed), Duration::from_secs(10)).await.unwrap_err().to_string();
    assert!(err.contains("registered over TLS") && err.contains("not https"), "{err}");

    let no_core = Seed { core_url: None, ..tls_seed(secure) };
    let err = discover(&no_core, &credentials(bed), Duration::from_secs(10)).await.unwrap_err().to_string();
    assert!(err.contains("give its Core URL too"), "{err}");

    // A Core acceptor that is plain TCP where the cluster is registered over TLS (east-1's port with the TLS
    // parameters): the check finds it, and nothing is registered plain.
    let plain_port = bed.node("east-1").core_port;
    let plain_core = secure.registered_core_url().replace(&secure.core_port.to_string(), &plain_port.to_string());
    let seed = Seed { core_url: Some(plain_core), ..tls_seed(secure) };
    let err = discover(&seed, &credentials(bed), Duration::from_secs(10)).await.unwrap_err().to_string();
    assert!(err.contains("does not answer Core over TLS") && err.contains("never falls back to plain"), "{err}");
}

/// Jolokia over HTTPS fails in words naming what failed: a CA that did not sign the broker's certificate, and no
/// client certificate where the web server requires one.
#[tokio::test]
async fn https_management_failures_are_named() {
    use artemis_transfer::broker::jolokia::{Endpoint, JolokiaClient, JolokiaError};
    let bed = TestBed::require().await;
    let secure = bed.node("secure-1");
    let tls = secure.tls.as_ref().unwrap();
    let client = |core_url: String| {
        JolokiaClient::new(
            Endpoint {
                node: secure.name.clone(),
                url: secure.jolokia_url(),
                user: secure.user.clone(),
                password: secure.password.clone().into(),
                origin: None,
                tls: artemis_transfer::registry::tls::of_endpoint(&core_url, None),
            },
            Duration::from_secs(10),
        )
    };
    let started = std::time::Instant::now();
    let wrong_ca = secure.registered_core_url().replace("ca.pem", "other-ca.pem");
    let err = client(wrong_ca).agent_version().await.unwrap_err();
    assert!(matches!(&err, JolokiaError::Tls { failure: artemis_core::TlsFailure::UnknownIssuer, .. }), "{err:?}");
    assert!(err.to_string().contains("not signed by a trusted CA"), "{err}");

    let err = client(tls.core_url(secure.core_port, false)).agent_version().await.unwrap_err();
    assert!(matches!(&err, JolokiaError::Tls { .. }), "{err:?}");
    assert!(err.to_string().contains("client certificate"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(6), "took {:?}", started.elapsed());
}

/// Registering the TLS node with material that does not fit fails within seconds, in words naming what failed:
/// a CA that did not sign its certificate, an expired certificate (its `expired` acceptor), a host name its
/// certificate does not carry, no client certificate where its web server requires one.
#[tokio::test]
async fn registering_with_tls_material_that_does_not_fit_fails_in_words_within_seconds() {
    let bed = TestBed::require().await;
    let secure = bed.node("secure-1");
    let tls = secure.tls.as_ref().unwrap();
    let good = tls_seed(secure);
    let expired_core = tls.core_url(tls.expired_port, true);
    let cases = [
        (
            "wrong CA",
            Seed { core_url: good.core_url.as_ref().map(|u| u.replace("ca.pem", "other-ca.pem")), ..good.clone() },
            "not signed by a trusted CA",
        ),
        ("expired", Seed { core_url: Some(expired_core), ..good.clone() }, "has expired"),
        (
            "host name",
            Seed {
                jolokia_url: good.jolokia_url.replace("127.0.0.1", "localhost"),
                core_url: good.core_url.as_ref().map(|u| u.replace("127.0.0.1", "localhost")),
                ..good.clone()
            },
            "host name mismatch",
        ),
        (
            "no client certificate",
            Seed { core_url: Some(tls.core_url(secure.core_port, false)), ..good.clone() },
            "client certificate",
        ),
    ];
    for (what, seed, words) in cases {
        let started = std::time::Instant::now();
        let err = discover(&seed, &credentials(bed), Duration::from_secs(10)).await.unwrap_err().to_string();
        let elapsed = started.elapsed();
        assert!(err.contains(words), "{what}: `{words}` missing from: {err}");
        assert!(elapsed < Duration::from_secs(6), "{what}: took {elapsed:?}: {err}");
    }
}
