//! Reading the external log the probe handler appends to (`<dir>/probe-<pid>.jsonl`), and the judgements
//! made from it: executions, overlaps, concurrency. The engine's own tables are not consulted here.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;
use uuid::Uuid;

/// One line.
#[derive(Debug, Clone, Deserialize)]
pub struct Line {
    pub ev: String,
    pub run: Uuid,
    pub seq: i64,
    pub attempt: i32,
    pub token: Uuid,
    pub owner: Option<String>,
    pub t_us: i64,
}

/// Every line of every probe log in `dir`, in time order.
pub fn read(dir: &Path) -> Vec<Line> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the log folder") {
        let path = entry.expect("a log folder entry").path();
        let is_probe =
            path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("probe-") && n.ends_with(".jsonl"));
        if !is_probe {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a probe log");
        for (i, line) in text.lines().enumerate() {
            let parsed: Line =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{}:{}: {e}: {line}", path.display(), i + 1));
            lines.push(parsed);
        }
    }
    lines.sort_by_key(|l| l.t_us);
    lines
}

/// One attempt at one job, as the log tells it (grouped by lease token).
#[derive(Debug, Clone)]
pub struct Execution {
    pub run: Uuid,
    pub seq: i64,
    pub attempt: i32,
    pub token: Uuid,
    pub owner: Option<String>,
    pub start: i64,
    /// Just before COMMIT was sent: the job's work is over; its successor cannot be claimed earlier.
    pub precommit: Option<i64>,
    /// `committed`, `rejected` (lease lost), `failed` (injected), `error`, or none (killed, or still running).
    pub end: Option<(String, i64)>,
}

impl Execution {
    pub fn committed(&self) -> bool {
        matches!(&self.end, Some((ev, _)) if ev == "committed")
    }

    /// When the job's work stopped as far as its run is concerned: the pre-commit time, else the end.
    pub fn finish(&self) -> Option<i64> {
        self.precommit.or(self.end.as_ref().map(|(_, t)| *t))
    }
}

/// The executions in `lines`, in start order.
pub fn executions(lines: &[Line]) -> Vec<Execution> {
    let mut by_token: HashMap<Uuid, Execution> = HashMap::new();
    for l in lines {
        let e = by_token.entry(l.token).or_insert_with(|| Execution {
            run: l.run,
            seq: l.seq,
            attempt: l.attempt,
            token: l.token,
            owner: l.owner.clone(),
            start: l.t_us,
            precommit: None,
            end: None,
        });
        match l.ev.as_str() {
            "start" => e.start = l.t_us,
            "precommit" => e.precommit = Some(l.t_us),
            other => e.end = Some((other.to_owned(), l.t_us)),
        }
    }
    let mut all: Vec<_> = by_token.into_values().collect();
    all.sort_by_key(|e| e.start);
    all
}

/// For each run, the sequences committed and how often.
pub fn commits_per_run(executions: &[Execution]) -> HashMap<Uuid, BTreeMap<i64, usize>> {
    let mut out: HashMap<Uuid, BTreeMap<i64, usize>> = HashMap::new();
    for e in executions.iter().filter(|e| e.committed()) {
        *out.entry(e.run).or_default().entry(e.seq).or_default() += 1;
    }
    out
}

/// Pairs of executions of the same run whose [start, finish] intervals overlap.
pub fn overlaps_within_runs(executions: &[Execution]) -> Vec<(Execution, Execution)> {
    let mut by_run: HashMap<Uuid, Vec<&Execution>> = HashMap::new();
    for e in executions {
        by_run.entry(e.run).or_default().push(e);
    }
    let mut bad = Vec::new();
    for list in by_run.values_mut() {
        list.sort_by_key(|e| e.start);
        for pair in list.windows(2) {
            let finish = pair[0].finish().unwrap_or(i64::MAX);
            if pair[1].start < finish {
                bad.push((pair[0].clone(), pair[1].clone()));
            }
        }
    }
    bad
}

/// The largest number of intervals open at one instant (an interval closing at t does not overlap one
/// opening at t).
pub fn max_overlap(intervals: impl IntoIterator<Item = (i64, i64)>) -> usize {
    let mut points: Vec<(i64, i32)> = Vec::new();
    for (start, end) in intervals {
        points.push((start, 1));
        points.push((end, -1));
    }
    // Closings before openings at the same instant.
    points.sort();
    let (mut open, mut max) = (0i32, 0i32);
    for (_, delta) in points {
        open += delta;
        max = max.max(open);
    }
    max as usize
}

/// Each run's active interval: its first start to its last finish.
pub fn run_spans(executions: &[Execution]) -> Vec<(i64, i64)> {
    let mut spans: HashMap<Uuid, (i64, i64)> = HashMap::new();
    for e in executions {
        let finish = e.finish().unwrap_or(e.start);
        let span = spans.entry(e.run).or_insert((e.start, finish));
        span.0 = span.0.min(e.start);
        span.1 = span.1.max(finish);
    }
    spans.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_intervals_do_not_overlap() {
        assert_eq!(max_overlap([(0, 10), (10, 20)]), 1);
        assert_eq!(max_overlap([(0, 10), (5, 20), (6, 7)]), 3);
        assert_eq!(max_overlap(Vec::<(i64, i64)>::new()), 0);
    }
}
