//! Rate limits at the door: a token bucket per service, and one per client address for the requests that present
//! no known token.
//!
//! A service's bucket holds `burst` requests and refills at `per_second`; a request that finds it empty is
//! answered 429 (`rate-limited`) with `Retry-After`, before any handler or database work. A request without a
//! known token is charged to its client address's bucket instead, and an address whose bucket is empty is
//! answered 429 *before its token is hashed*: a flood of made-up tokens costs a map look-up each, not a digest
//! and a comparison with every token. Behind a proxy every client has the proxy's address: the limit is then the
//! proxy's, and a flood through it delays the calls without a token through it — never a known service's calls,
//! unless they come through it too while its bucket is empty (the limits are configurable for that case).
//!
//! The buckets live in the process: each replica limits what it serves. The set of addresses is bounded
//! ([`MAX_ADDRESSES`]); past it, new addresses share one bucket.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// The door's limits: per service, and per client address for requests without a known token.
#[derive(Debug)]
pub struct Limits {
    /// By service name.
    pub services: Buckets<String>,
    /// By client address (`None`: not known, as in a test calling the router in memory).
    pub unidentified: Buckets<Option<IpAddr>>,
}

impl Limits {
    /// Limits at `service` a second per service and `unidentified` per client address.
    pub fn new(service: Rate, unidentified: Rate) -> Arc<Limits> {
        Arc::new(Limits {
            // Services are few (the tokens name them); the bound only guards against a bug.
            services: Buckets::new(service, MAX_ADDRESSES),
            unidentified: Buckets::new(unidentified, MAX_ADDRESSES),
        })
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

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
    }
}
