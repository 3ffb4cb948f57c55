//! The retry budget and the exponential backoff between attempts.
//!
//! The delay is computed by `backon` (the `backoff` crate is unmaintained, RUSTSEC-2025-0012; see
//! `docs/adr/0004-backon-for-backoff.md`) and then *stored* in the job's `run_at` by the executor, so the next
//! attempt time survives a worker restart. Nothing here sleeps.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// How many attempts a job gets and how long to wait between them.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts a job gets by default (a job may carry its own `max_attempts`).
    pub max_attempts: i32,
    /// The wait after the first failed attempt.
    pub min_delay: Duration,
    /// The longest wait before jitter.
    pub max_delay: Duration,
    /// Growth per attempt.
    pub factor: f32,
    /// Add up to one more delay at random, so jobs that failed together do not retry together.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 10,
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            factor: 2.0,
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// The wait after attempt number `attempt` (1-based) failed: `min_delay × factor^(attempt-1)`, capped at
    /// `max_delay`, plus jitter of up to the same again when enabled.
    pub fn delay_after(&self, attempt: i32) -> Duration {
        let mut builder = ExponentialBuilder::new()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(self.factor)
            .without_max_times();
        if self.jitter {
            builder = builder.with_jitter();
        }
        let index = usize::try_from(attempt.max(1) - 1).unwrap_or(0);
        builder.build().nth(index).unwrap_or(self.max_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(jitter: bool) -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            factor: 2.0,
            jitter,
        }
    }

    #[test]
    fn delays_double_until_the_cap() {
        let p = policy(false);
        let delays: Vec<_> = (1..=6).map(|a| p.delay_after(a).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn jitter_stays_within_one_extra_delay() {
        let p = policy(true);
        for attempt in 1..=6 {
            let base = policy(false).delay_after(attempt);
            let d = p.delay_after(attempt);
            assert!(d >= base && d <= base * 2, "attempt {attempt}: {d:?} vs {base:?}");
        }
    }

    #[test]
    fn attempt_zero_or_negative_counts_as_the_first() {
        assert_eq!(policy(false).delay_after(0), Duration::from_millis(100));
        assert_eq!(policy(false).delay_after(-3), Duration::from_millis(100));
    }
}
