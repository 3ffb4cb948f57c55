//! Where a batch's time went, step by step: the `batch timings` debug line that throughput work reads
//! (docs/BENCHMARKS.md).

use std::time::Duration;

/// Where a batch's time went, for the debug log that throughput work reads.
pub(super) struct Laps {
    last: std::time::Instant,
    laps: Vec<(&'static str, Duration)>,
}

impl Laps {
    pub(super) fn start() -> Laps {
        Laps { last: std::time::Instant::now(), laps: Vec::new() }
    }

    pub(super) fn lap(&mut self, step: &'static str) {
        let now = std::time::Instant::now();
        self.laps.push((step, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Laps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (step, d)) in self.laps.iter().enumerate() {
            write!(f, "{}{step} {:.1}ms", if i == 0 { "" } else { ", " }, d.as_secs_f64() * 1000.0)?;
        }
        Ok(())
    }
}
