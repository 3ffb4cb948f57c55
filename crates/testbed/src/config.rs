//! The test bed's layout, read from `config/testbed.toml` with the same environment overrides as
//! `scripts/testbed` (`TESTBED_DIR`, `ARTEMIS_VERSION`, `TESTBED_PG_PORT`, `TESTBED_PORT_SHIFT`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;

/// First Core port and HTTP port of a broker made by `artemis create`; each node adds its `port_offset`.
const CORE_BASE_PORT: u16 = 61616;
const HTTP_BASE_PORT: u16 = 8161;

/// What a node is in its cluster's HA pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeRole {
    /// A live node.
    Primary,
    /// A passive shared-store backup.
    Backup,
}

/// One broker node of the test bed.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its name, which is also the broker name in its MBeans (`broker="<name>"`).
    pub name: String,
    /// The cluster it belongs to (`east`, `west`).
    pub cluster: String,
    /// Primary or backup.
    pub role: NodeRole,
    /// The Core acceptor's port on 127.0.0.1.
    pub core_port: u16,
    /// The web server's port on 127.0.0.1 (Jolokia lives under `/console/jolokia`).
    pub http_port: u16,
    /// The broker user.
    pub user: String,
    /// The broker user's password.
    pub password: String,
    /// `Some` for a node that speaks TLS only (`tls = true` in config/testbed.toml).
    pub tls: Option<NodeTls>,
}

/// A TLS node's other acceptors and the test bed's PKI (`scripts/testbed`, `ensure_pki`, makes it).
#[derive(Debug, Clone)]
pub struct NodeTls {
    /// The acceptor that requires a client certificate (the Core port + 1).
    pub mtls_port: u16,
    /// The acceptor whose certificate has expired (the Core port + 2).
    pub expired_port: u16,
    /// `target/testbed/pki`.
    pub pki_dir: PathBuf,
}

impl NodeTls {
    /// The test bed's CA, which signed the broker's and the client's certificates.
    pub fn ca_pem(&self) -> PathBuf {
        self.pki_dir.join("ca.pem")
    }

    /// A CA that signed nothing of the test bed's.
    pub fn other_ca_pem(&self) -> PathBuf {
        self.pki_dir.join("other-ca.pem")
    }

    /// The client certificate's chain.
    pub fn client_cert_pem(&self) -> PathBuf {
        self.pki_dir.join("client.pem")
    }

    /// The client certificate's key (unencrypted PKCS#8).
    pub fn client_key_pem(&self) -> PathBuf {
        self.pki_dir.join("client-key.pem")
    }

    /// Key and chain in one file (Artemis' PEM key store).
    pub fn client_bundle_pem(&self) -> PathBuf {
        self.pki_dir.join("client-bundle.pem")
    }

    /// The Artemis URL of a TLS acceptor on `port`: trusting the test bed's CA, with the client certificate when
    /// `client_certificate`.
    pub fn core_url(&self, port: u16, client_certificate: bool) -> String {
        let bundle = self.client_bundle_pem();
        self.core_url_with_key_store(port, client_certificate.then_some(bundle.as_path()))
    }

    /// The Artemis URL of a TLS acceptor on `port`, trusting the test bed's CA, with `key_store` (a PEM key and
    /// chain) as the client certificate when given.
    pub fn core_url_with_key_store(&self, port: u16, key_store: Option<&Path>) -> String {
        let mut url = format!(
            "tcp://127.0.0.1:{port}?sslEnabled=true&trustStoreType=PEM&trustStorePath={}",
            self.ca_pem().display()
        );
        if let Some(store) = key_store {
            url.push_str(&format!("&keyStoreType=PEM&keyStorePath={}", store.display()));
        }
        url
    }

    /// Writes into `dir` the client's key encrypted with `passphrase` (PKCS#8, PBES2 with AES-256-CBC, as
    /// `openssl pkcs8 -topk8` makes it) followed by its chain: Artemis' PEM key store as an operator whose keys are
    /// encrypted has it. Returns its path. Needs `openssl` (`.ci/run` installs it).
    pub fn encrypted_client_bundle(&self, dir: &Path, passphrase: &str) -> PathBuf {
        let key = dir.join("client-key-encrypted.pem");
        let out = std::process::Command::new("openssl")
            .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", "env:TESTBED_KEY_PASSPHRASE", "-in"])
            .arg(self.client_key_pem())
            .arg("-out")
            .arg(&key)
            .env("TESTBED_KEY_PASSPHRASE", passphrase)
            .output()
            .expect("openssl is needed to encrypt the test bed's client key (apt-get install openssl)");
        assert!(out.status.success(), "openssl pkcs8 -topk8: {}", String::from_utf8_lossy(&out.stderr));
        let chain = std::fs::read_to_string(self.client_cert_pem()).expect("the test bed's client certificate");
        let bundle = dir.join("client-bundle-encrypted.pem");
        let text = std::fs::read_to_string(&key).expect("the encrypted key") + &chain;
        std::fs::write(&bundle, text).expect("write the encrypted key store");
        std::fs::remove_file(key).ok();
        bundle
    }
}

/// The rule scripts/testbed follows too: a TLS node's mutual-TLS and expired-certificate acceptors follow its Core
/// port.
const MTLS_PORT_STEP: u16 = 1;
const EXPIRED_PORT_STEP: u16 = 2;

impl Node {
    /// `tcp://127.0.0.1:<core port>`; for a TLS node, with `sslEnabled=true` and the test bed's CA (the form
    /// Artemis' own Java client reads, and so does ours).
    pub fn core_url(&self) -> String {
        match &self.tls {
            Some(tls) => tls.core_url(self.core_port, false),
            None => format!("tcp://127.0.0.1:{}", self.core_port),
        }
    }

    /// The Core URL an operator registers: for a TLS node, with the client certificate too (the node's HTTPS
    /// Jolokia requires one, and the registry gives an endpoint's Jolokia the TLS material of its Core URL).
    pub fn registered_core_url(&self) -> String {
        match &self.tls {
            Some(tls) => tls.core_url(self.core_port, true),
            None => self.core_url(),
        }
    }

    /// The Jolokia endpoint (HTTPS on a TLS node).
    pub fn jolokia_url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/console/jolokia", self.http_port)
    }

    /// The broker MBean's ObjectName.
    pub fn broker_mbean(&self) -> String {
        format!("org.apache.activemq.artemis:broker=\"{}\"", self.name)
    }
}

/// The whole test bed.
#[derive(Debug, Clone)]
pub struct TestBed {
    /// The folder everything lives in (`target/testbed`).
    pub dir: PathBuf,
    /// The Artemis version the brokers run.
    pub artemis_version: String,
    /// The nodes, in start order.
    pub nodes: Vec<Node>,
    /// `postgres://…` of the project's database.
    pub database_url: String,
    /// Postgres' TCP address.
    pub postgres_addr: (String, u16),
}

#[derive(Deserialize)]
struct RawConfig {
    paths: RawPaths,
    artemis: RawArtemis,
    postgres: RawPostgres,
    node: Vec<RawNode>,
}

#[derive(Deserialize)]
struct RawPaths {
    dir: String,
}

#[derive(Deserialize)]
struct RawArtemis {
    version: String,
    user: String,
    password: String,
}

#[derive(Deserialize)]
struct RawPostgres {
    host: String,
    port: u16,
    database: String,
    user: String,
    password: String,
}

#[derive(Deserialize)]
struct RawNode {
    name: String,
    cluster: String,
    port_offset: u16,
    role: NodeRole,
    #[serde(default)]
    tls: bool,
}

/// The repository root (this crate lives in `crates/testbed`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

impl TestBed {
    /// The test bed's layout, read once per process. Does not check that anything runs: see [`TestBed::require`].
    pub fn get() -> &'static TestBed {
        static BED: OnceLock<TestBed> = OnceLock::new();
        BED.get_or_init(|| TestBed::load().unwrap_or_else(|e| panic!("cannot read config/testbed.toml: {e}")))
    }

    fn load() -> Result<TestBed, String> {
        let root = repo_root();
        let text = std::fs::read_to_string(root.join("config/testbed.toml")).map_err(|e| e.to_string())?;
        let raw: RawConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let dir = PathBuf::from(env("TESTBED_DIR").unwrap_or(raw.paths.dir));
        let dir = if dir.is_absolute() { dir } else { root.join(dir) };
        let pg_port = match env("TESTBED_PG_PORT") {
            Some(p) => p.parse().map_err(|_| format!("TESTBED_PG_PORT={p} is not a port"))?,
            None => raw.postgres.port,
        };
        // A second test bed beside the first (see scripts/testbed) shifts every port.
        let shift: u16 = match env("TESTBED_PORT_SHIFT") {
            Some(s) => s.parse().map_err(|_| format!("TESTBED_PORT_SHIFT={s} is not a number"))?,
            None => 0,
        };
        let pg_port = pg_port + shift;
        let pg = raw.postgres;
        let nodes = raw
            .node
            .into_iter()
            .map(|n| {
                let core_port = CORE_BASE_PORT + n.port_offset + shift;
                Node {
                    name: n.name,
                    cluster: n.cluster,
                    role: n.role,
                    core_port,
                    http_port: HTTP_BASE_PORT + n.port_offset + shift,
                    user: raw.artemis.user.clone(),
                    password: raw.artemis.password.clone(),
                    tls: n.tls.then(|| NodeTls {
                        mtls_port: core_port + MTLS_PORT_STEP,
                        expired_port: core_port + EXPIRED_PORT_STEP,
                        pki_dir: dir.join("pki"),
                    }),
                }
            })
            .collect();
        Ok(TestBed {
            dir,
            artemis_version: env("ARTEMIS_VERSION").unwrap_or(raw.artemis.version),
            nodes,
            database_url: format!("postgres://{}:{}@{}:{}/{}", pg.user, pg.password, pg.host, pg_port, pg.database),
            postgres_addr: (pg.host, pg_port),
        })
    }

    /// The node called `name`; panics on a name the test bed does not have (a typo in a test).
    pub fn node(&self, name: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("the test bed has no node {name:?}; see config/testbed.toml"))
    }

    /// The unpacked Artemis distribution (its `lib/` holds the official client jars).
    pub fn artemis_home(&self) -> PathBuf {
        self.dir.join("dist").join(format!("apache-artemis-{}", self.artemis_version))
    }

    /// Where `scripts/testbed up` compiled `tests/java`.
    pub fn java_build_dir(&self) -> PathBuf {
        self.dir.join("java")
    }

    /// Fails the calling test, with the command that starts it, unless Postgres and every node answer.
    ///
    /// Call it first in every test that needs the test bed.
    pub async fn require() -> &'static TestBed {
        static CHECKED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
        let bed = TestBed::get();
        CHECKED
            .get_or_init(|| async {
                let mut missing = Vec::new();
                let (host, port) = &bed.postgres_addr;
                let pg = tokio::time::timeout(
                    Duration::from_secs(2),
                    tokio::net::TcpStream::connect((host.as_str(), *port)),
                );
                if !matches!(pg.await, Ok(Ok(_))) {
                    missing.push(format!("Postgres on {host}:{port}"));
                }
                for node in &bed.nodes {
                    if crate::jolokia::Jolokia::new(node).broker_state().await.is_err() {
                        missing.push(format!("node {} ({})", node.name, node.jolokia_url()));
                    }
                }
                if !bed.java_build_dir().join("Fidelity.class").exists() {
                    missing.push(format!("the Java fidelity helper in {}", bed.java_build_dir().display()));
                }
                assert!(
                    missing.is_empty(),
                    "the test bed is not running ({} did not answer). Start it with `scripts/testbed up`, \
                     then run the tests again.",
                    missing.join(", ")
                );
            })
            .await;
        bed
    }
}
