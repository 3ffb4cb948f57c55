//! A run as an operator sees it (SPEC §7): the pipeline Selected → Held in staging → Delivered (plus not
//! taken, dead-lettered, returned), rate, ETA, the outcome on each node, the events and the errors in words.
//!
//! [`RunView::build`] is a pure function of what Postgres holds about the run, so the CLI (`runs show`,
//! `watch`) and the HTTP API show the same thing and it can be tested without brokers; [`load`] reads it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::jobs::store::record::RunEvent;
use crate::jobs::{self, RunId, RunState};
use crate::transfer::proof::taken_beyond_count_words;
use crate::transfer::relay::state::{Counters, RelayState};
pub use crate::transfer::store::preview::StoredPreviewRow;
use crate::transfer::store::view as store;
pub use crate::transfer::store::view::{LinesQuery, RunRecord};
use crate::transfer::Mode;

/// The pipeline, in messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Pipeline {
    /// The selection's size; `None` while it is not known (a filter, until the run ends).
    pub selected: Option<i64>,
    /// Taken from the source into staging and not yet delivered, dead-lettered or returned.
    pub held_in_staging: i64,
    /// Committed on the target.
    pub delivered: i64,
    /// Selected but not taken (in delivery to a consumer, scheduled, gone).
    pub not_taken: i64,
    /// Sent to a dead message queue.
    pub dead_lettered: i64,
    /// Put back on the source by a return.
    pub returned: i64,
    /// Sent to the target by a batch whose acknowledgement on the source is not known yet: each is on the
    /// target or in staging, and the next batch settles which.
    pub in_doubt: i64,
}

/// What a run did on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct NodeOutcome {
    /// `source`, `staging` or `target`.
    #[schema(value_type = String, example = "source")]
    pub role: &'static str,
    /// `cluster/node/queue`.
    pub at: String,
    /// What happened there, in words.
    pub outcome: String,
    /// The cluster, node and queue; `None` for a part not recorded.
    pub cluster: Option<String>,
    /// See `cluster`.
    pub node: Option<String>,
    /// See `cluster`.
    pub queue: Option<String>,
    /// What happened there as numbers, each under its name: the source's `taken` (into staging), `moved` (by the
    /// broker, on one node) or `copied` and `browsed`, its `not_taken_in_delivery`, `not_taken_scheduled`,
    /// `not_taken_gone`, `not_taken_left`, `returned` and `taken_beyond_count`; staging's `held`, `in_doubt` and
    /// `returned`; the target's `delivered`, `already_on_target` and `dead_lettered`.
    #[schema(value_type = BTreeMap<String, i64>)]
    pub counts: BTreeMap<&'static str, i64>,
}

/// One point of a run's rate over time: its delivered count at an instant, and the rate since the point before.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RatePoint {
    /// When the count was this.
    pub at: DateTime<Utc>,
    /// Messages delivered by then.
    pub delivered: i64,
    /// Messages per second delivered since the point before (since the run was executed, for the first).
    pub per_second: f64,
}

/// The most points a rate history holds: enough for a chart, few enough for a page.
pub const RATE_POINTS: usize = 120;

/// A run's rate over time from its `samples` (instant, delivered count; oldest first), from `executed_at`: at
/// most [`RATE_POINTS`] points, each the last sample of its share of the time, with the rate since the one before.
pub fn rate_history(samples: &[(DateTime<Utc>, i64)], executed_at: Option<DateTime<Utc>>) -> Vec<RatePoint> {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else { return Vec::new() };
    let start = executed_at.unwrap_or(first.0).min(first.0);
    let span = (last.0 - start).num_milliseconds().max(1);
    let share = |at: DateTime<Utc>| ((at - start).num_milliseconds() * RATE_POINTS as i64 / (span + 1)) as usize;
    let kept = samples.iter().enumerate().filter(|(i, s)| samples.get(i + 1).is_none_or(|n| share(n.0) != share(s.0)));
    let mut before = (start, 0_i64);
    kept.map(|(_, &(at, delivered))| {
        let secs = (at - before.0).num_milliseconds() as f64 / 1000.0;
        let per_second = if secs > 0.0 { (delivered - before.1).max(0) as f64 / secs } else { 0.0 };
        before = (at, delivered);
        RatePoint { at, delivered, per_second }
    })
    .collect()
}

/// A run as shown to operators.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RunView {
    /// The run.
    pub id: Uuid,
    /// Its state.
    pub state: RunState,
    /// A Previewed run its preview refused: it can never be executed.
    pub refused: bool,
    /// `move` or `copy`.
    #[schema(value_type = Option<Mode>)]
    pub mode: Option<String>,
    /// How many messages are selected, in words: the count at t0 (the preview's, before the run starts), "more than
    /// N" for a selection larger than the preview counts, or why it is not known.
    pub selected_words: String,
    /// `cluster/node/queue` of the source.
    pub from: String,
    /// `cluster/node/queue` of the target.
    pub to: String,
    /// The operator who started it.
    pub started_by: Option<String>,
    /// When it was executed and ended.
    pub executed_at: Option<DateTime<Utc>>,
    /// See `executed_at`.
    pub ended_at: Option<DateTime<Utc>>,
    /// The pipeline.
    pub pipeline: Pipeline,
    /// Messages per second delivered since it was executed (to its end, or to now); `None` before it ran.
    pub rate: Option<f64>,
    /// Seconds left at that rate; `None` when the selection's size or the rate is not known, or it ended.
    pub eta_secs: Option<f64>,
    /// What happened on each node.
    pub nodes: Vec<NodeOutcome>,
    /// Why it stopped, in words.
    pub stop_reason: Option<String>,
    /// Its last error, in words.
    pub last_error: Option<String>,
    /// Notes an operator should read (messages whose fate is uncertain, ids the target lacks, …).
    pub notes: Vec<String>,
    /// All the counters, for whoever needs more than the pipeline.
    pub counters: Counters,
    /// What happened, in order.
    pub events: Vec<RunEvent>,
}

/// `cluster/node/queue`, `?` for a part not recorded.
pub fn end(c: &Option<String>, n: &Option<String>, q: &Option<String>) -> String {
    format!("{}/{}/{}", c.as_deref().unwrap_or("?"), n.as_deref().unwrap_or("?"), q.as_deref().unwrap_or("?"))
}

fn node_of(c: &Option<String>, n: &Option<String>, q: &str) -> String {
    format!("{}/{}/{q}", c.as_deref().unwrap_or("?"), n.as_deref().unwrap_or("?"))
}

impl RunView {
    /// The view of `record` with its `events`, as of `now`.
    pub fn build(record: &RunRecord, events: Vec<RunEvent>, now: DateTime<Utc>) -> RunView {
        let c: Counters = serde_json::from_value(record.counters.clone()).unwrap_or_default();
        let relay: RelayState = serde_json::from_value(record.relay.clone()).unwrap_or_default();
        let pipeline = Pipeline {
            selected: c.selected,
            held_in_staging: c.held_in_staging(),
            delivered: c.delivered,
            not_taken: c.not_taken(),
            dead_lettered: c.dead_lettered,
            returned: c.returned,
            in_doubt: relay.in_doubt.len() as i64,
        };
        let rate = rate_of(record, &c, now);
        let eta_secs = eta_of(&c, rate, record.ended_at.is_some());
        let nodes = node_outcomes(record, &c, &pipeline, &events);
        RunView {
            id: record.id,
            state: record.state,
            refused: record.refused,
            mode: record.mode.clone(),
            selected_words: selected_words(record, &c),
            from: end(&record.source_cluster, &record.source_node, &record.source_queue),
            to: end(&record.target_cluster, &record.target_node, &record.target_queue),
            started_by: record.started_by.clone(),
            executed_at: record.executed_at,
            ended_at: record.ended_at,
            pipeline,
            rate,
            eta_secs,
            nodes,
            stop_reason: record.stop_reason.clone(),
            last_error: record.last_error.clone(),
            notes: notes_of(&c),
            counters: c,
            events,
        }
    }
}

/// How many messages `record` selected, in words (see [`RunView::selected_words`]).
pub fn selected_words(record: &RunRecord, c: &Counters) -> String {
    match (c.selected.or(record.previewed_size), record.previewed_at_least) {
        (Some(n), _) if record.state == RunState::Previewed => format!("{n} (counted by the preview at t0)"),
        (Some(n), _) => n.to_string(),
        (None, Some(n)) => format!(
            "more than {n} (more than the preview counts: the end is proven by a full pass over the source, not by the \
             count)"
        ),
        (None, None) => "not known (the preview could not count the selection)".to_string(),
    }
}

/// Messages per second delivered since the run was executed, to its end or to `now`; `None` before it ran.
fn rate_of(record: &RunRecord, c: &Counters, now: DateTime<Utc>) -> Option<f64> {
    record.executed_at.map(|from| {
        let to = record.ended_at.unwrap_or(now);
        let secs = (to - from).num_milliseconds() as f64 / 1000.0;
        if secs > 0.0 {
            c.delivered as f64 / secs
        } else {
            0.0
        }
    })
}

/// Seconds left at `rate` for what the selection has not yet accounted for; `None` when either is not known, or
/// the run ended.
fn eta_of(c: &Counters, rate: Option<f64>, ended: bool) -> Option<f64> {
    match (c.selected, rate, ended) {
        (Some(total), Some(r), false) if r > 0.0 => {
            let left = (total - c.delivered - c.dead_lettered - c.not_taken() - c.returned).max(0);
            Some(left as f64 / r)
        }
        _ => None,
    }
}

/// What happened on the source, on staging (when the run has one) and on the target.
fn node_outcomes(record: &RunRecord, c: &Counters, pipeline: &Pipeline, events: &[RunEvent]) -> Vec<NodeOutcome> {
    let source_queue = record.source_queue.clone().unwrap_or_else(|| "?".into());
    let target_queue = record.target_queue.clone().unwrap_or_else(|| "?".into());
    let mut nodes = vec![NodeOutcome {
        role: "source",
        at: node_of(&record.source_cluster, &record.source_node, &source_queue),
        outcome: source_outcome(record, c),
        cluster: record.source_cluster.clone(),
        node: record.source_node.clone(),
        queue: record.source_queue.clone(),
        counts: source_counts(record, c),
    }];
    if let Some(staging) = &record.staging_queue {
        let removed = events.iter().any(|e| e.kind == "staging_removed");
        nodes.push(NodeOutcome {
            role: "staging",
            at: node_of(&record.source_cluster, &record.source_node, staging),
            outcome: staging_outcome(removed, pipeline),
            cluster: record.source_cluster.clone(),
            node: record.source_node.clone(),
            queue: Some(staging.clone()),
            counts: BTreeMap::from([
                ("held", pipeline.held_in_staging),
                ("in_doubt", pipeline.in_doubt),
                ("returned", c.returned),
            ]),
        });
    }
    nodes.push(NodeOutcome {
        role: "target",
        at: node_of(&record.target_cluster, &record.target_node, &target_queue),
        outcome: target_outcome(c),
        cluster: record.target_cluster.clone(),
        node: record.target_node.clone(),
        queue: record.target_queue.clone(),
        counts: BTreeMap::from([
            ("delivered", c.delivered),
            ("already_on_target", c.already_on_target),
            ("dead_lettered", c.dead_lettered),
        ]),
    });
    nodes
}

/// What the source gave, as numbers (see [`NodeOutcome::counts`]): the words of [`source_outcome`] are made of
/// the same counters.
fn source_counts(record: &RunRecord, c: &Counters) -> BTreeMap<&'static str, i64> {
    let same_node = record.source_cluster == record.target_cluster && record.source_node == record.target_node;
    let mut counts = if record.mode.as_deref() == Some("copy") {
        BTreeMap::from([("copied", c.delivered), ("browsed", c.browsed)])
    } else if same_node {
        BTreeMap::from([("moved", c.delivered)])
    } else {
        BTreeMap::from([("taken", c.staged)])
    };
    counts.extend([
        ("not_taken_in_delivery", c.not_taken_in_delivery),
        ("not_taken_scheduled", c.not_taken_scheduled),
        ("not_taken_gone", c.not_taken_gone),
        ("not_taken_left", c.not_taken_left),
        ("returned", c.returned),
        ("taken_beyond_count", c.taken_beyond_count),
    ]);
    counts
}

/// What the source gave, in words: copied from, moved by the broker, or taken into staging; and what was not.
fn source_outcome(record: &RunRecord, c: &Counters) -> String {
    let same_node = record.source_cluster == record.target_cluster && record.source_node == record.target_node;
    let copy = record.mode.as_deref() == Some("copy");
    let mut source = if copy {
        format!("{} copied from it, which keeps every message ({} browsed)", c.delivered, c.browsed)
    } else if same_node {
        format!("{} moved by the broker to the target queue", c.delivered)
    } else {
        format!("{} taken into staging", c.staged)
    };
    if c.not_taken() > 0 {
        source.push_str(&format!("; {} selected but not {}", c.not_taken(), if copy { "copied" } else { "taken" }));
        source.push_str(&format!(
            " (in delivery {}, scheduled {}, gone {}, left by a return {})",
            c.not_taken_in_delivery, c.not_taken_scheduled, c.not_taken_gone, c.not_taken_left
        ));
    }
    if c.taken_beyond_count > 0 {
        source.push_str(&format!("; {}", taken_beyond_count_words(c.taken_beyond_count)));
    }
    if c.beyond_count > 0 {
        source.push_str(&format!("; {}", beyond_count_words(c.beyond_count)));
    }
    if c.returned > 0 {
        source.push_str(&format!("; {} returned to it", c.returned));
    }
    source
}

/// What a whole-queue move left on the source beyond the count at `t0` ([`Counters::beyond_count`], a lower
/// bound), in words.
pub fn beyond_count_words(n: i64) -> String {
    format!(
        "at least {n} more there without a timestamp match the frozen filter, beyond the count at t0 (a producer \
         that sends timestamp 0, whose messages carry no time): not selected, left there"
    )
}

/// What staging holds, in words, or that it was removed.
fn staging_outcome(removed: bool, pipeline: &Pipeline) -> String {
    if removed {
        "removed with its address settings".to_string()
    } else if pipeline.in_doubt > 0 {
        format!(
            "holds {} ({} of them in doubt: sent, acknowledgement not yet known)",
            pipeline.held_in_staging, pipeline.in_doubt
        )
    } else {
        format!("holds {}", pipeline.held_in_staging)
    }
}

/// What the target received, in words.
fn target_outcome(c: &Counters) -> String {
    let mut target = format!("{} delivered", c.delivered);
    if c.already_on_target > 0 {
        target.push_str(&format!(
            " ({} of them were already there from an earlier attempt and were kept once)",
            c.already_on_target
        ));
    }
    if c.dead_lettered > 0 {
        target.push_str(&format!("; {} refused and dead-lettered on the source broker", c.dead_lettered));
    }
    target
}

/// What an operator should read beside the counters.
fn notes_of(c: &Counters) -> Vec<String> {
    let mut notes = Vec::new();
    if c.uncertain > 0 {
        notes.push(format!(
            "{} messages' fate is not known to the counters (the broker's answer to a move was lost): each is on \
             the target queue or still on the source queue, never on both and never lost",
            c.uncertain
        ));
    }
    if c.original_id_missing > 0 {
        notes.push(format!(
            "{} delivered messages carry no _studio_orig_message_id: the broker dropped _AMQ_ORIG_MESSAGE_ID \
             from their staging copy (paged large messages)",
            c.original_id_missing
        ));
    }
    if c.one_by_one_batches > 0 {
        notes.push(format!(
            "{} batches were re-sent one message per transaction after the target refused a duplicate",
            c.one_by_one_batches
        ));
    }
    notes
}

/// Why a view could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// No such run.
    #[error("there is no run {0}")]
    NotFound(Uuid),
    /// Postgres.
    #[error("the database: {0}")]
    Db(#[from] sqlx::Error),
    /// The engine.
    #[error(transparent)]
    Jobs(#[from] jobs::Error),
}

/// The newest runs that `query` selects.
pub async fn lines(pool: &PgPool, query: &LinesQuery) -> Result<Vec<RunRecord>, sqlx::Error> {
    store::run_lines(pool, query).await
}

/// The instant a list of runs read after this call is complete up to: its `as_of`, the next poll's
/// `changed_after` (ADR 0025). Ask it before the list, never after: a write that commits between the two would
/// otherwise be in neither.
pub async fn changes_as_of(pool: &PgPool) -> Result<DateTime<Utc>, sqlx::Error> {
    store::changes_as_of(pool).await
}

/// One run's record, if it exists.
pub async fn line(pool: &PgPool, run: Uuid) -> Result<Option<RunRecord>, sqlx::Error> {
    store::run_record(pool, run).await
}

/// Whether `run` exists and `principal` may see both of its clusters. A run they may not see is answered exactly
/// as one that does not exist (SPEC §9).
pub async fn visible(pool: &PgPool, run: Uuid, principal: &str) -> Result<bool, sqlx::Error> {
    store::run_visible(pool, run, principal).await
}

/// `run`'s rate over time (see [`rate_history`]), from the samples its counters left.
pub async fn rate(pool: &PgPool, run: Uuid) -> Result<Vec<RatePoint>, ViewError> {
    let record = record(pool, run).await?;
    let samples = store::rate_samples(pool, run).await?;
    Ok(rate_history(&samples, record.executed_at))
}

/// `run`'s stored preview (plan, plan hash, findings, expiry) as the preview wrote it, if it has one: what a client
/// that did not make the preview needs to show it and to execute the run.
pub async fn stored_preview(pool: &PgPool, run: Uuid) -> Result<Option<StoredPreviewRow>, sqlx::Error> {
    crate::transfer::store::preview::run_stored_preview(pool, run).await
}

/// The run's record (no events).
pub async fn record(pool: &PgPool, run: Uuid) -> Result<RunRecord, ViewError> {
    line(pool, run).await?.ok_or(ViewError::NotFound(run))
}

/// The view of `run` now.
pub async fn load(pool: &PgPool, run: Uuid) -> Result<RunView, ViewError> {
    let record = record(pool, run).await?;
    let events = jobs::runs::events(pool, RunId(run)).await?;
    Ok(RunView::build(&record, events, Utc::now()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_rate_history_keeps_the_last_sample_of_each_share_and_the_rate_since_the_one_before() {
        let t0 = chrono::TimeZone::timestamp_opt(&Utc, 1_800_000_000, 0).unwrap();
        let at = |ms: i64| t0 + chrono::Duration::milliseconds(ms);
        let points = |samples: &[(DateTime<Utc>, i64)]| -> Vec<(i64, f64)> {
            rate_history(samples, Some(t0)).iter().map(|p| (p.delivered, p.per_second)).collect()
        };
        assert_eq!(
            points(&[(at(1_000), 100), (at(2_000), 300), (at(3_000), 350)]),
            [(100, 100.0), (300, 200.0), (350, 50.0)]
        );
        // Two samples a millisecond apart share one point: the later.
        assert_eq!(
            points(&[(at(1_000), 100), (at(2_000), 300), (at(2_001), 350)]),
            [(100, 100.0), (350, 250.0 / 1.001)]
        );
        let many: Vec<_> = (0..10_000).map(|i| (at(i * 10), i)).collect();
        let history = rate_history(&many, Some(t0));
        assert!(history.len() <= RATE_POINTS, "{}", history.len());
        assert_eq!(history.last().map(|p| p.delivered), Some(9_999), "the last sample is always kept");
        assert!(rate_history(&[], Some(t0)).is_empty());
    }

    use super::*;
    use serde_json::json;

    fn record(state: &str, counters: serde_json::Value, relay: serde_json::Value) -> RunRecord {
        let state = state.parse().expect("a run state");
        let t0 = DateTime::parse_from_rfc3339("2026-12-03T00:00:00Z").unwrap().with_timezone(&Utc);
        RunRecord {
            id: Uuid::nil(),
            state,
            mode: Some("move".into()),
            source_cluster: Some("east".into()),
            source_node: Some("east-1".into()),
            source_queue: Some("orders".into()),
            target_cluster: Some("west".into()),
            target_node: Some("west-1".into()),
            target_queue: Some("orders".into()),
            counters,
            relay,
            stop_reason: None,
            last_error: None,
            started_by: Some("alice".into()),
            created_at: t0,
            executed_at: Some(t0),
            ended_at: None,
            updated_at: t0,
            staging_queue: Some("studio.transfer.x".into()),
            refused: false,
            previewed_size: None,
            previewed_at_least: None,
        }
    }

    #[test]
    fn what_a_run_selected_is_said_from_the_count_at_t0_before_and_after_it_runs() {
        let mut r = record("previewed", json!({}), json!({}));
        r.previewed_size = Some(200);
        assert_eq!(RunView::build(&r, vec![], at(1)).selected_words, "200 (counted by the preview at t0)");
        let r = record("running", json!({ "selected": 200 }), json!({}));
        assert_eq!(RunView::build(&r, vec![], at(1)).selected_words, "200");
        let mut r = record("unproven", json!({}), json!({}));
        r.previewed_at_least = Some(100_000);
        assert!(RunView::build(&r, vec![], at(1)).selected_words.starts_with("more than 100000"));
        let r = record("running", json!({}), json!({}));
        assert_eq!(
            RunView::build(&r, vec![], at(1)).selected_words,
            "not known (the preview could not count the selection)"
        );
    }

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-03T00:00:00Z").unwrap().with_timezone(&Utc)
            + chrono::Duration::seconds(secs)
    }

    #[test]
    fn a_running_move_shows_its_pipeline_rate_eta_and_each_node() {
        let r = record(
            "running",
            json!({ "selected": 1000, "staged": 600, "delivered": 400, "not_taken_scheduled": 0 }),
            json!({ "in_doubt": [{ "ids": [7, 8], "window": null }, { "ids": [9] }] }),
        );
        let v = RunView::build(&r, Vec::new(), at(10));
        assert_eq!(v.pipeline.held_in_staging, 200);
        assert_eq!(v.pipeline.in_doubt, 3);
        assert_eq!(v.rate, Some(40.0));
        assert_eq!(v.eta_secs, Some(15.0));
        let roles: Vec<&str> = v.nodes.iter().map(|n| n.role).collect();
        assert_eq!(roles, ["source", "staging", "target"]);
        assert_eq!(v.nodes[0].at, "east/east-1/orders");
        assert_eq!(v.nodes[1].at, "east/east-1/studio.transfer.x");
        assert!(v.nodes[1].outcome.contains("holds 200 (3 of them in doubt"), "{}", v.nodes[1].outcome);
        assert_eq!(v.nodes[2].outcome, "400 delivered");
    }

    #[test]
    fn an_ended_partial_move_says_what_was_not_taken_and_has_no_eta() {
        let mut r = record(
            "partial",
            json!({ "selected": 10, "staged": 8, "delivered": 8, "not_taken_in_delivery": 1, "not_taken_scheduled": 1,
                    "already_on_target": 2, "one_by_one_batches": 1 }),
            json!({}),
        );
        r.ended_at = Some(at(4));
        let events = vec![RunEvent { id: 1, at: at(4), kind: "staging_removed".into(), detail: json!({}) }];
        let v = RunView::build(&r, events, at(100));
        assert_eq!(v.rate, Some(2.0), "the rate runs to the end, not to now");
        assert_eq!(v.eta_secs, None);
        assert!(v.nodes[0]
            .outcome
            .contains("2 selected but not taken (in delivery 1, scheduled 1, gone 0, left by a return 0)"));
        assert_eq!(v.nodes[1].outcome, "removed with its address settings");
        assert!(v.nodes[2].outcome.contains("2 of them were already there"));
        assert!(v.notes.iter().any(|n| n.contains("1 batches were re-sent one message per transaction")));
    }

    #[test]
    fn a_succeeded_move_says_what_it_left_beyond_the_count_at_t0() {
        let mut r =
            record("succeeded", json!({ "selected": 10, "staged": 10, "delivered": 10, "beyond_count": 3 }), json!({}));
        r.ended_at = Some(at(4));
        let v = RunView::build(&r, Vec::new(), at(5));
        assert!(
            v.nodes[0].outcome.contains(
                "; at least 3 more there without a timestamp match the frozen filter, beyond the count at t0"
            ),
            "{}",
            v.nodes[0].outcome
        );
        assert!(!v.nodes[0].outcome.contains("selected but not taken"), "{}", v.nodes[0].outcome);
    }

    #[test]
    fn a_succeeded_move_says_what_it_took_beyond_the_count_at_t0() {
        let counters = json!({ "selected": 10, "staged": 12, "delivered": 12, "taken_beyond_count": 2 });
        let mut r = record("succeeded", counters, json!({}));
        r.ended_at = Some(at(4));
        let v = RunView::build(&r, Vec::new(), at(5));
        assert!(
            v.nodes[0].outcome.contains("; 2 more than the count at t0 were in the selection and included"),
            "{}",
            v.nodes[0].outcome
        );
    }

    #[test]
    fn a_same_node_move_has_no_staging_and_reports_uncertain_messages() {
        let mut r = record("succeeded", json!({ "selected": 5, "delivered": 3, "uncertain": 2 }), json!({}));
        r.target_cluster = Some("east".into());
        r.target_node = Some("east-1".into());
        r.target_queue = Some("orders.b".into());
        r.staging_queue = None;
        let v = RunView::build(&r, Vec::new(), at(1));
        assert_eq!(v.nodes.len(), 2);
        assert_eq!(v.nodes[0].outcome, "3 moved by the broker to the target queue");
        assert!(v.notes[0].starts_with("2 messages' fate is not known"), "{:?}", v.notes);
    }

    #[test]
    fn before_it_runs_rate_and_size_are_unknown_not_zero() {
        let mut r = record("queued", json!({}), json!({}));
        r.executed_at = None;
        let v = RunView::build(&r, Vec::new(), at(1));
        assert_eq!(v.rate, None);
        assert_eq!(v.eta_secs, None);
        assert_eq!(v.pipeline.selected, None);
    }
}
