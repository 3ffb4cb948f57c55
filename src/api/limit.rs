//! Rate limits at the door: a token bucket per caller — a service and the operator it acts for — and one per
//! client address for the requests that present no known token; and a cap on the event streams a caller holds open.
//!
//! The door identifies a request first ([`super::auth::door`]): a known token is charged to its caller's bucket and
//! never to its address's, so behind a load balancer, where every browser shares the proxy's address, a client
//! flooding without a token cannot starve the services that present theirs; and one operator of a service (the
//! console's crowd) cannot starve the service's other operators. A bucket holds `burst` requests and refills at
//! `per_second`; a request that finds it empty is answered 429 (`rate-limited`) with `Retry-After`, before any
//! handler or database work.
//!
//! A request without a known token is charged to its client address: the peer's, or — when the peer is one of the
//! configured proxies (`api.trusted_proxies`) — the first address in `X-Forwarded-For`, read from the right, that
//! is not a trusted proxy's ([`TrustedProxies::client_address`]). From any other peer the header is ignored: a
//! client names itself whatever it likes there.
//!
//! The buckets live in the process: each replica limits what it serves. The keys are bounded ([`MAX_ADDRESSES`]);
//! past the bound, new keys share one bucket.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The client addresses tracked at once; past this (a flood from many addresses), new ones share one bucket.
pub const MAX_ADDRESSES: usize = 10_000;

/// A rate: `per_second` on average, `burst` at once after a quiet spell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Tokens added a second.
    pub per_second: f64,
    /// The most a bucket holds.
    pub burst: u32,
}

/// A token bucket; its tokens are counted as of `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Bucket {
        Bucket { tokens: f64::from(rate.burst), at: now }
    }

    /// The tokens as of `now` (never fewer than before: a clock read out of order adds nothing).
    fn refill(&mut self, rate: Rate, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate.per_second).min(f64::from(rate.burst));
        self.at = self.at.max(now);
    }

    /// Whether a token is there, or how long until one is.
    fn check(&self, rate: Rate) -> Result<(), Duration> {
        if self.tokens >= 1.0 {
            return Ok(());
        }
        Err(Duration::from_secs_f64((1.0 - self.tokens) / rate.per_second))
    }

    fn is_full(&self, rate: Rate) -> bool {
        self.tokens >= f64::from(rate.burst)
    }
}

/// Buckets by key, at most `max_keys` of them; new keys past that share the `overflow` bucket. A short lock: no
/// request waits on anything slower than a map look-up.
#[derive(Debug)]
pub struct Buckets<K> {
    rate: Rate,
    max_keys: usize,
    inner: Mutex<(HashMap<K, Bucket>, Option<Bucket>)>,
}

impl<K: Hash + Eq + Clone> Buckets<K> {
    /// Empty buckets (each starts full) at `rate`.
    pub fn new(rate: Rate, max_keys: usize) -> Buckets<K> {
        Buckets { rate, max_keys, inner: Mutex::new((HashMap::new(), None)) }
    }

    /// Takes a token from `key`'s bucket, or says how long until one is there (nothing taken).
    pub fn take(&self, key: &K, now: Instant) -> Result<(), Duration> {
        self.with(key, now, |bucket, rate| {
            bucket.check(rate)?;
            bucket.tokens -= 1.0;
            Ok(())
        })
    }

    /// Whether `key`'s bucket has a token, without taking it.
    pub fn check(&self, key: &K, now: Instant) -> Result<(), Duration> {
        self.with(key, now, |bucket, rate| bucket.check(rate))
    }

    /// `f` on `key`'s bucket, refilled to `now`.
    fn with<T>(&self, key: &K, now: Instant, f: impl FnOnce(&mut Bucket, Rate) -> T) -> T {
        let rate = self.rate;
        let mut guard = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (map, overflow) = &mut *guard;
        if !map.contains_key(key) && map.len() >= self.max_keys {
            // A full bucket says nothing a new one would not: forget those first.
            map.retain(|_, b| {
                b.refill(rate, now);
                !b.is_full(rate)
            });
        }
        let bucket = if map.len() < self.max_keys || map.contains_key(key) {
            map.entry(key.clone()).or_insert_with(|| Bucket::full(rate, now))
        } else {
            overflow.get_or_insert_with(|| Bucket::full(rate, now))
        };
        bucket.refill(rate, now);
        f(bucket, rate)
    }
}

/// A caller, as limits count it: a service and the operator it acts for.
pub type CallerKey = (String, String);

/// The event streams a caller may hold open at once when the configuration does not say.
pub const DEFAULT_STREAMS_PER_CALLER: usize = 20;

/// The door's limits: per caller, per client address for requests without a known token, and open event streams
/// per caller.
#[derive(Debug)]
pub struct Limits {
    /// By caller: service and operator.
    pub callers: Buckets<CallerKey>,
    /// By client address (`None`: not known, as in a test calling the router in memory).
    pub unidentified: Buckets<Option<IpAddr>>,
    /// The peers whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
    /// Open event streams by caller.
    pub streams: StreamSlots,
}

impl Limits {
    /// Limits at `caller` per service and operator and `unidentified` per client address, no trusted proxy, and
    /// [`DEFAULT_STREAMS_PER_CALLER`].
    pub fn new(caller: Rate, unidentified: Rate) -> Arc<Limits> {
        Limits::build(caller, unidentified, TrustedProxies::default(), DEFAULT_STREAMS_PER_CALLER)
    }

    /// Limits at `caller` per service and operator, `unidentified` per client address as `proxies` tell it, and
    /// `streams_per_caller` open event streams per caller.
    pub fn build(caller: Rate, unidentified: Rate, proxies: TrustedProxies, streams_per_caller: usize) -> Arc<Limits> {
        Arc::new(Limits {
            callers: Buckets::new(caller, MAX_ADDRESSES),
            unidentified: Buckets::new(unidentified, MAX_ADDRESSES),
            trusted_proxies: proxies,
            streams: StreamSlots::new(streams_per_caller),
        })
    }
}

/// The proxies (addresses and ranges) whose `X-Forwarded-For` is believed (`api.trusted_proxies`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Each entry an address (`10.0.0.7`, `::1`) or a range (`10.0.0.0/8`, `fd00::/8`); what is not one is named.
    pub fn parse(entries: &[String]) -> Result<TrustedProxies, String> {
        let one = |entry: &String| {
            let entry = entry.trim();
            entry.parse::<IpNet>().or_else(|_| entry.parse::<IpAddr>().map(IpNet::from)).map_err(|_| {
                format!("api.trusted_proxies: {entry:?} is neither an address (10.0.0.7) nor a range (10.0.0.0/8)")
            })
        };
        entries.iter().map(one).collect::<Result<_, _>>().map(TrustedProxies)
    }

    /// Whether `address` is one of these proxies (or in one of their ranges).
    pub fn trusts(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.0.iter().any(|net| net.contains(&address))
    }

    /// The client of a request from `peer`: `peer` itself unless it is a trusted proxy; then the nearest address
    /// in `X-Forwarded-For` (read from the right, each proxy appending the one it heard from) that is not a
    /// trusted proxy's. An entry that is not an address stops the walk at the trusted hop that passed it on: what
    /// lies to its left was written by someone unknown.
    pub fn client_address(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer;
        if !self.trusts(peer) {
            return client;
        }
        let entries: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .map(|v| v.to_str().unwrap_or("?"))
            .flat_map(|v| v.split(','))
            .collect();
        for entry in entries.into_iter().rev() {
            let Some(hop) = forwarded_address(entry) else { return client };
            client = hop;
            if !self.trusts(hop) {
                break;
            }
        }
        client
    }
}

/// The address of one `X-Forwarded-For` entry: an address, with or without a port.
fn forwarded_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    entry.parse::<IpAddr>().ok().or_else(|| entry.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

/// The event streams each caller holds open, at most `per_caller` each.
#[derive(Debug)]
pub struct StreamSlots {
    per_caller: usize,
    open: Arc<Mutex<HashMap<CallerKey, usize>>>,
}

/// One open stream of a caller: its slot is freed when this is dropped (the stream ended or its client left).
#[derive(Debug)]
pub struct StreamSlot {
    key: CallerKey,
    open: Arc<Mutex<HashMap<CallerKey, usize>>>,
}

impl StreamSlots {
    /// No stream open yet, at most `per_caller` each.
    pub fn new(per_caller: usize) -> StreamSlots {
        StreamSlots { per_caller, open: Arc::default() }
    }

    /// The most a caller may hold open.
    pub fn per_caller(&self) -> usize {
        self.per_caller
    }

    /// A slot for one more stream of `key`, or `None` when it holds [`StreamSlots::per_caller`] open already.
    pub fn open(&self, key: CallerKey) -> Option<StreamSlot> {
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = open.entry(key.clone()).or_insert(0);
        if *held >= self.per_caller {
            return None;
        }
        *held += 1;
        Some(StreamSlot { key, open: self.open.clone() })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(held) = open.get_mut(&self.key) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// `Retry-After` for a wait of `wait`: whole seconds, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: Rate = Rate { per_second: 2.0, burst: 3 };

    #[test]
    fn a_bucket_gives_its_burst_then_its_rate() {
        let buckets = Buckets::new(RATE, 10);
        let t0 = Instant::now();
        for _ in 0..3 {
            buckets.take(&"studio", t0).unwrap();
        }
        let wait = buckets.take(&"studio", t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(retry_after_secs(wait), 1);
        // Another key has its own bucket.
        buckets.take(&"ops", t0).unwrap();
        // Half a second later one token is back, not two.
        let t1 = t0 + Duration::from_millis(500);
        buckets.take(&"studio", t1).unwrap();
        assert!(buckets.take(&"studio", t1).is_err());
        // A long quiet spell fills it to its burst, no further.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            buckets.take(&"studio", t2).unwrap();
        }
        assert!(buckets.take(&"studio", t2).is_err());
    }

    #[test]
    fn a_check_takes_nothing_and_a_refused_take_neither() {
        let buckets = Buckets::new(Rate { per_second: 1.0, burst: 1 }, 10);
        let t0 = Instant::now();
        for _ in 0..5 {
            buckets.check(&1, t0).unwrap();
        }
        buckets.take(&1, t0).unwrap();
        assert_eq!(buckets.check(&1, t0), Err(Duration::from_secs(1)));
        assert_eq!(buckets.take(&1, t0 + Duration::from_millis(250)), Err(Duration::from_millis(750)));
        buckets.take(&1, t0 + Duration::from_secs(1)).unwrap();
    }

    #[test]
    fn a_clock_read_out_of_order_adds_nothing() {
        let buckets = Buckets::new(Rate { per_second: 1.0, burst: 1 }, 10);
        let t0 = Instant::now() + Duration::from_secs(10);
        buckets.take(&1, t0).unwrap();
        assert!(buckets.take(&1, t0 - Duration::from_secs(5)).is_err());
        assert!(buckets.take(&1, t0).is_err());
    }

    #[test]
    fn past_its_bound_new_keys_share_one_bucket_and_full_ones_are_forgotten() {
        let buckets = Buckets::new(Rate { per_second: 1.0, burst: 1 }, 2);
        let t0 = Instant::now();
        buckets.take(&1, t0).unwrap();
        buckets.take(&2, t0).unwrap();
        // 3 and 4 share the overflow bucket.
        buckets.take(&3, t0).unwrap();
        assert!(buckets.take(&4, t0).is_err());
        // Once 1 and 2 are full again they are forgotten, and 4 gets its own.
        let t1 = t0 + Duration::from_secs(2);
        buckets.take(&4, t1).unwrap();
        assert_eq!(buckets.inner.lock().unwrap().0.len(), 1);
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", v.parse().unwrap());
        }
        headers
    }

    #[test]
    fn x_forwarded_for_names_the_client_only_through_trusted_proxies() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8".into(), " 192.168.1.5 ".into(), "fd00::/8".into()]).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // From a peer that is not a proxy, the header is the client's own claim: ignored.
        assert_eq!(proxies.client_address(ip("203.0.113.9"), &forwarded(&["198.51.100.1"])), ip("203.0.113.9"));
        // Through a trusted proxy: the nearest untrusted hop, whatever the client wrote to its left.
        let through = forwarded(&["6.6.6.6, 198.51.100.1", "10.1.1.1"]);
        assert_eq!(proxies.client_address(ip("192.168.1.5"), &through), ip("198.51.100.1"));
        assert_eq!(
            proxies.client_address(ip("::ffff:10.2.2.2"), &forwarded(&["[2001:db8::1]:443"])),
            ip("2001:db8::1")
        );
        // No header, or a hop that is not an address: the last trusted hop is all that is known.
        assert_eq!(proxies.client_address(ip("10.2.2.2"), &HeaderMap::new()), ip("10.2.2.2"));
        assert_eq!(proxies.client_address(ip("10.2.2.2"), &forwarded(&["1.2.3.4, unknown, 10.3.3.3"])), ip("10.3.3.3"));
        // No proxy configured: the header is never read.
        assert_eq!(TrustedProxies::default().client_address(ip("10.2.2.2"), &through), ip("10.2.2.2"));
        let e = TrustedProxies::parse(&["10.0.0.0/33".into()]).unwrap_err();
        assert!(e.contains("api.trusted_proxies") && e.contains("10.0.0.0/33"), "{e}");
    }

    #[test]
    fn a_caller_holds_at_most_its_streams_and_a_closed_one_frees_its_slot() {
        let slots = StreamSlots::new(2);
        let alice = || ("studio".to_string(), "alice".to_string());
        let one = slots.open(alice()).unwrap();
        let _two = slots.open(alice()).unwrap();
        assert!(slots.open(alice()).is_none());
        assert!(slots.open(("studio".into(), "bob".into())).is_some(), "another operator has their own");
        drop(one);
        assert!(slots.open(alice()).is_some());
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
    }
}
