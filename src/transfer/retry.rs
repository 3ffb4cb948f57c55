//! A retry from a dead-letter queue: every selected message back to the queue it was dead-lettered (or expired)
//! from — the broker's `_AMQ_ORIG_QUEUE` — on the same node. An operator's everyday job with Artemis DLQs; the
//! broker's own `retryMessages()` takes no count and no selection in 2.40 and answers only how many it moved, so a
//! crash in it loses the answer with no way to settle it.
//!
//! It is a variation of the move on one node (`relay::local`), and only its preview is its own (this file): the
//! run is a [`Plan`] whose [`Destination`] lists the original queues, frozen at preview, and whose selection says
//! so itself (`_AMQ_ORIG_QUEUE IN (…)`, [`Plan::retry`]). So what is selected, counted at the end and proven
//! against the source broker's counts is exactly what can go somewhere; the chunks move one original queue's
//! messages at a time (`Plan::filter_into`), each target checked by the same rule table before every chunk.
//!
//! The preview:
//! 1. finds the original queues of the selected messages: one `browse(1, 1, filter)` per queue, each excluding the
//!    queues found so far (the broker scans the whole queue for a match, so no queue is missed behind a full
//!    browse page — `countMessages(filter, groupBy)` would scan only the first page);
//! 2. keeps those that exist on the node; messages from a queue that no longer exists, and messages with no
//!    original queue, are not selected (the preview says how many, at least);
//! 3. previews a one-node move into each original queue with the same facts and rules as any other move, and
//!    merges those previews: every finding once, the sizes summed.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use sqlx::PgPool;

use super::gather::{gather, EndAccess};
use super::plan::{
    from_original_queue, original_queue_is, parse_filter, Mode, Plan, QueueRef, Selection, Selector, ORIGINAL_QUEUE,
};
use super::preview::filter_refusal;
use super::preview::{preview, Finding, Kind, Preview, PreviewSettings};
use super::service::{
    audit_preview, node_management, run_facts, store_preview, visible_cluster, PreviewRequest, ServiceError,
    StoredPreview,
};
use crate::broker::jolokia::{BrokerManagement, JolokiaError, ObjectName, RoutingType};
use crate::broker::permits::PermitSource;
use crate::limiter::PgPermits;
use crate::registry::Credentials;
use crate::transfer::permissions;
use artemis_selector::Expr;

/// At most this many original queues in one retry; a selection from more is refused, to be narrowed by a filter.
pub const MAX_ORIGINAL_QUEUES: usize = 50;

/// How the preview words where a retry's messages go.
pub const TO_ORIGINAL_QUEUES: &str = "each message's original queue";

/// Previews a retry of `request.source`'s selected messages to their original queues and stores it as a
/// Previewed run (`request.target` and `request.mode` are not read: a retry is a move on the source's node).
/// Audited as every preview is.
pub async fn preview_retry_and_store(
    pool: &PgPool,
    request: &PreviewRequest,
    settings: &PreviewSettings,
    valid_for: Duration,
) -> Result<StoredPreview, ServiceError> {
    let result = preview_retry(pool, request, settings, valid_for).await;
    let words = format!("{}/{}: {TO_ORIGINAL_QUEUES}", request.source.cluster, request.source.node);
    audit_preview(pool, request, &words, &result).await;
    result
}

async fn preview_retry(
    pool: &PgPool,
    request: &PreviewRequest,
    settings: &PreviewSettings,
    valid_for: Duration,
) -> Result<StoredPreview, ServiceError> {
    let source = &request.source;
    let cluster = visible_cluster(pool, &request.operator, &source.cluster).await?;
    permissions::require_for_run(pool, &request.operator, Mode::Move, &cluster.name, &cluster.name).await?;
    let node = cluster.node(&source.node)?;
    let credentials = Credentials::from_env(&cluster.credentials_ref)?;
    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::new(pool.clone()));
    let (mgmt, core_url) = node_management(node, &credentials, &permits).await;
    let core = crate::registry::discover::core_host_port(&core_url);
    let found = match filter_refusal(&request.selection) {
        // Nothing is asked of the broker with a filter that cannot be read; the preview says where and why.
        Some(refusal) => OriginalQueues::refused(refusal),
        None => match OriginalQueues::find(&mgmt, source, &request.selection).await {
            Ok(found) => found,
            Err(e) => OriginalQueues::unreadable(e),
        },
    };
    let t0_millis = mgmt
        .broker_state()
        .await
        .ok()
        .and_then(|s| s.current_time_millis)
        .unwrap_or_else(|| Utc::now().timestamp_millis());
    let plan = match Plan::retry(source.clone(), &request.selection, found.existing.clone(), t0_millis) {
        Ok(plan) => plan,
        // A filter that cannot be read is stored as the user wrote it, beside its refusal: it never runs.
        Err(_) => Plan {
            selection: request.selection.clone(),
            ..Plan::retry(source.clone(), &Selection::All, Vec::new(), t0_millis).expect("the whole queue is read")
        },
    };
    let mut each = Vec::new();
    for queue in &found.existing {
        let into = one_queue(&plan, queue);
        let access = || EndAccess { management: &mgmt, core_addr: Some(&core) };
        let facts = gather(&into, access(), access(), run_facts(pool, source, queue).await).await;
        each.push(preview(&into, &facts, settings));
    }
    let shown = found.judge(merge(each, settings));
    store_preview(pool, &request.operator, plan, shown, valid_for).await
}

/// The one-node move of the retry's messages from `queue`: what the preview judges for that original queue.
fn one_queue(retry: &Plan, queue: &QueueRef) -> Plan {
    let selection = match &retry.selection {
        // The retry's own filter, built from trees (`Plan::retry`): it reads back.
        Selection::Filter(f) => match parse_filter(f) {
            Ok(selector) => Selection::Filter(from_original_queue(selector, &queue.queue).to_string()),
            Err(_) => retry.selection.clone(),
        },
        _ => unreachable!("a retry's selection is a filter (Plan::retry)"),
    };
    Plan {
        mode: Mode::Move,
        source: retry.source.clone(),
        target: queue.clone(),
        selection,
        t0_millis: retry.t0_millis,
        destination: Default::default(),
    }
}

/// What the preview found of the selected messages' original queues.
#[derive(Debug, Default)]
struct OriginalQueues {
    /// Original queues that exist on the node, in the order the dead-letter queue holds their first message.
    existing: Vec<QueueRef>,
    /// Original queues that no longer exist, each with how many of its messages are there (at least).
    gone: Vec<(String, Option<i64>)>,
    /// Original queues that are a multicast address's (a topic's subscription): a run moves only to anycast
    /// queues, so their messages stay; each with how many there are (at least).
    multicast: Vec<(String, Option<i64>)>,
    /// How many selected messages name no original queue (at least); `None` when unread.
    without: Option<i64>,
    /// What refuses the retry before any queue is judged: an id selection, too many queues, the broker's words.
    refusal: Option<Finding>,
}

impl OriginalQueues {
    /// Reads the original queues of `selection`'s messages on `dlq`, and which of them exist on its node.
    async fn find(
        mgmt: &BrokerManagement,
        dlq: &QueueRef,
        selection: &Selection,
    ) -> Result<OriginalQueues, JolokiaError> {
        let user = match selection {
            Selection::Ids(_) => return Ok(OriginalQueues::refused(by_ids())),
            // The caller refused a filter that cannot be read (`filter_refusal`).
            Selection::Filter(f) => parse_filter(f).ok(),
            Selection::All => None,
        };
        // A missing source is the merged previews' to say (`source-queue-missing`); here it has no messages.
        if mgmt.queue_state(dlq.address(), RoutingType::Anycast, &dlq.queue).await?.is_none() {
            return Ok(OriginalQueues::default());
        }
        let mbean = mgmt.queue_mbean(dlq.address(), RoutingType::Anycast, &dlq.queue);
        let names = original_queue_names(mgmt, &mbean, user.as_ref()).await?;
        if names.len() > MAX_ORIGINAL_QUEUES {
            return Ok(OriginalQueues::refused(too_many(names.len())));
        }
        let on_node = mgmt.queues().await?;
        let mut found = OriginalQueues::default();
        for name in names.into_iter().filter(|n| n != &dlq.queue) {
            let from_it = and(user.as_ref(), original_queue_is(&name));
            match on_node.iter().find(|(_, _, q)| q == &name) {
                Some((address, RoutingType::Anycast, _)) => found.existing.push(QueueRef {
                    cluster: dlq.cluster.clone(),
                    node: dlq.node.clone(),
                    address: (address != &name).then(|| address.clone()),
                    queue: name,
                }),
                Some(_) => found.multicast.push((name, mgmt.count_messages(&mbean, Some(&from_it)).await.ok())),
                None => found.gone.push((name, mgmt.count_messages(&mbean, Some(&from_it)).await.ok())),
            }
        }
        let without = and(user.as_ref(), Expr::is_null(original()));
        found.without = match mgmt.first_message(&mbean, &without).await? {
            None => Some(0),
            // There is one at least, whatever a count over one browse page says.
            Some(_) => mgmt.count_messages(&mbean, Some(&without)).await.ok().map(|n| n.max(1)),
        };
        Ok(found)
    }

    fn refused(finding: Finding) -> OriginalQueues {
        OriginalQueues { refusal: Some(finding), ..OriginalQueues::default() }
    }

    /// The broker refused or did not answer: nothing can be retried on unread facts.
    fn unreadable(e: JolokiaError) -> OriginalQueues {
        let words = match &e {
            JolokiaError::Agent { error, .. } if error.message.contains("AMQ229020") => {
                format!("The source broker refused the selection's filter: {}", error.message)
            }
            _ => "The dead-letter queue's messages could not be read, so their original queues are unknown.".into(),
        };
        tracing::warn!(error = %e, "a retry's preview could not read the original queues");
        OriginalQueues::refused(Finding { kind: Kind::Unknown, code: "original-queues-unknown", words, snippet: None })
    }

    /// The merged preview of the original queues, with what the retry leaves where it is.
    fn judge(self, mut shown: Preview) -> Preview {
        let mut findings = Vec::new();
        findings.extend(self.refusal);
        if self.existing.is_empty() {
            findings.push(Finding {
                kind: Kind::Refused,
                code: "nothing-to-retry",
                words: "No selected message names an original queue (_AMQ_ORIG_QUEUE) that exists on this node: \
                        there is nothing to retry."
                    .into(),
                snippet: None,
            });
        }
        if !self.gone.is_empty() {
            let each: Vec<String> = self.gone.iter().map(|(q, n)| format!("{} from {q}", at_least(*n))).collect();
            findings.push(Finding {
                kind: Kind::NeedsAck,
                code: "original-queue-gone",
                words: format!(
                    "Some messages came from queues that no longer exist on this node ({}); they are not selected \
                     and stay where they are. To retry them, create the queue and preview again.",
                    each.join(", ")
                ),
                snippet: None,
            });
        }
        if !self.multicast.is_empty() {
            let each: Vec<String> = self.multicast.iter().map(|(q, n)| format!("{} from {q}", at_least(*n))).collect();
            findings.push(Finding {
                kind: Kind::NeedsAck,
                code: "original-queue-multicast",
                words: format!(
                    "Some messages came from a topic's subscription queue ({}); a run moves only to anycast queues, \
                     so they are not selected and stay where they are.",
                    each.join(", ")
                ),
                snippet: None,
            });
        }
        if self.without != Some(0) {
            shown.notes.push(format!(
                "{} selected messages name no original queue (_AMQ_ORIG_QUEUE): they were not dead-lettered or \
                 expired by the broker, so a retry leaves them where they are.",
                at_least(self.without)
            ));
        }
        if !self.existing.is_empty() {
            let to: Vec<String> = self.existing.iter().map(|q| q.queue.clone()).collect();
            shown.notes.push(format!("Each message goes back to its original queue: {}.", to.join(", ")));
        }
        findings.append(&mut shown.findings);
        findings.sort_by_key(|f| f.kind);
        shown.findings = findings;
        shown
    }
}

/// The original queues named by the messages `user` selects on `dlq`, in the order the queue holds their first
/// message: one browse per queue, each excluding the queues already found, and one more that finds none; at most
/// one more than [`MAX_ORIGINAL_QUEUES`].
async fn original_queue_names(
    mgmt: &BrokerManagement,
    dlq: &ObjectName,
    user: Option<&Selector>,
) -> Result<Vec<String>, JolokiaError> {
    let mut names: Vec<String> = Vec::new();
    while names.len() <= MAX_ORIGINAL_QUEUES {
        let mut named = Expr::IsNull { operand: Box::new(original()), negated: true };
        if !names.is_empty() {
            named = Expr::and(named, Expr::not_in(original(), names.iter().cloned()));
        }
        let Some(message) = mgmt.first_message(dlq, &and(user, named)).await? else {
            break;
        };
        match message["StringProperties"][ORIGINAL_QUEUE].as_str() {
            Some(name) if !names.iter().any(|n| n == name) => names.push(name.to_string()),
            // The filter excludes every name found: the broker answered a message it should not have.
            _ => {
                return Err(JolokiaError::BadAnswer {
                    node: mgmt.client().node().into(),
                    reason: format!("browse answered a message without a new {ORIGINAL_QUEUE}: {message}"),
                })
            }
        }
    }
    Ok(names)
}

/// The broker's property naming a message's original queue, as an expression.
fn original() -> Expr {
    Expr::property(ORIGINAL_QUEUE)
}

/// `user AND term` built from their trees and serialised, or `term` alone.
fn and(user: Option<&Selector>, term: Expr) -> String {
    match user {
        Some(u) => u.clone().and(term).to_string(),
        None => Selector::new(term).to_string(),
    }
}

/// How many messages there are at least, in words, of a count the broker takes over one browse page only
/// (`count_messages`): "12 (or more)", or "some" when the count is unknown or found none of what is there.
fn at_least(n: Option<i64>) -> String {
    match n {
        Some(n) if n > 0 => format!("{n} (or more)"),
        _ => "some".into(),
    }
}

fn by_ids() -> Finding {
    Finding {
        kind: Kind::Refused,
        code: "retry-by-ids",
        words: "A retry selects by a filter or the whole queue, not by ids: to retry some messages, select them by \
                a filter (for example on _AMQ_ORIG_QUEUE or a property of theirs)."
            .into(),
        snippet: None,
    }
}

fn too_many(n: usize) -> Finding {
    Finding {
        kind: Kind::Refused,
        code: "too-many-original-queues",
        words: format!(
            "The selected messages come from more than {MAX_ORIGINAL_QUEUES} queues ({n} found so far); narrow the \
             selection, for example with a filter on _AMQ_ORIG_QUEUE."
        ),
        snippet: None,
    }
}

/// One preview of the previews of each original queue: every finding once, the sizes summed (unknown when one is
/// unknown), the source's counters at t0 (the same source for all), the notes once each, and the confirmations
/// any of them needs — or the sum needs: over the safety cap, or of unknown size.
fn merge(each: Vec<Preview>, settings: &PreviewSettings) -> Preview {
    let sum = |f: fn(&Preview) -> Option<i64>| each.iter().map(f).sum::<Option<i64>>();
    let selection_size = sum(|p| p.selection_size);
    let mut merged = Preview {
        findings: Vec::new(),
        selection_size,
        // A retry's queues are counted by the broker (one browse page each), never by a browse of the source.
        selection_at_least: None,
        projected_bytes: sum(|p| p.projected_bytes),
        source_count_at_t0: each.first().and_then(|p| p.source_count_at_t0),
        notes: Vec::new(),
        needs_typed_confirmation: true,
        needs_cap_override: selection_size.is_none_or(|n| n > settings.safety_cap)
            || each.iter().any(|p| p.needs_cap_override),
    };
    for p in each {
        for f in p.findings {
            if !merged.findings.iter().any(|m| m.code == f.code && m.words == f.words) {
                merged.findings.push(f);
            }
        }
        for n in p.notes {
            if !merged.notes.contains(&n) {
                merged.notes.push(n);
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(code: &'static str, words: &str) -> Finding {
        Finding { kind: Kind::NeedsAck, code, words: words.into(), snippet: None }
    }

    fn shown(size: Option<i64>, findings: Vec<Finding>) -> Preview {
        Preview {
            findings,
            selection_size: size,
            selection_at_least: None,
            projected_bytes: size.map(|n| n * 10),
            source_count_at_t0: None,
            notes: vec!["same".into()],
            needs_typed_confirmation: true,
            needs_cap_override: false,
        }
    }

    #[test]
    fn the_previews_of_the_original_queues_merge_into_one() {
        let settings = PreviewSettings { safety_cap: 100, ..PreviewSettings::default() };
        let a = shown(Some(30), vec![finding("x", "into a"), finding("y", "the source")]);
        let b = shown(Some(20), vec![finding("x", "into b"), finding("y", "the source")]);
        let m = merge(vec![a.clone(), b.clone()], &settings);
        assert_eq!(m.selection_size, Some(50));
        assert_eq!(m.projected_bytes, Some(500));
        let codes: Vec<(&str, &str)> = m.findings.iter().map(|f| (f.code, f.words.as_str())).collect();
        assert_eq!(codes, [("x", "into a"), ("y", "the source"), ("x", "into b")]);
        assert_eq!(m.notes, ["same"]);
        assert!(!m.needs_cap_override);
        let over = merge(vec![shown(Some(60), vec![]), shown(Some(60), vec![])], &settings);
        assert!(over.needs_cap_override, "each is under the cap, the sum is over it");
        let unknown = merge(vec![shown(Some(1), vec![]), shown(None, vec![])], &settings);
        assert_eq!(unknown.selection_size, None);
        assert!(unknown.needs_cap_override, "a size unknown needs the override");
    }

    #[test]
    fn nothing_to_retry_is_refused_and_what_stays_is_said() {
        let found = OriginalQueues {
            gone: vec![("old".into(), Some(3))],
            multicast: vec![("sub".into(), None)],
            without: None,
            ..OriginalQueues::default()
        };
        let p = found.judge(merge(vec![], &PreviewSettings::default()));
        let codes: Vec<(&str, Kind)> = p.findings.iter().map(|f| (f.code, f.kind)).collect();
        assert_eq!(
            codes,
            [
                ("nothing-to-retry", Kind::Refused),
                ("original-queue-gone", Kind::NeedsAck),
                ("original-queue-multicast", Kind::NeedsAck)
            ]
        );
        assert!(p.findings[2].words.contains("some from sub"), "{}", p.findings[2].words);
        assert!(p.findings[1].words.contains("3 (or more) from old"), "{}", p.findings[1].words);
        assert!(p.notes.iter().any(|n| n.contains("some selected messages name no original queue")));
        assert!(!p.can_start());
    }

    #[test]
    fn original_queues_that_could_not_be_read_refuse_the_retry() {
        let unread = OriginalQueues::unreadable(JolokiaError::BadAnswer { node: "east-1".into(), reason: "x".into() });
        let p = unread.judge(merge(vec![], &PreviewSettings::default()));
        let codes: Vec<(&str, Kind)> = p.findings.iter().map(|f| (f.code, f.kind)).collect();
        assert_eq!(codes, [("nothing-to-retry", Kind::Refused), ("original-queues-unknown", Kind::Unknown)]);
        assert!(!p.findings[1].words.contains("east-1"), "no internals in the words: {}", p.findings[1].words);
        let empty = Plan::retry(
            QueueRef { cluster: "c".into(), node: "n".into(), queue: "DLQ".into(), address: None },
            &Selection::All,
            vec![],
            1,
        )
        .unwrap();
        assert_eq!(
            empty.selection,
            Selection::Filter("((_AMQ_ORIG_QUEUE IS NULL) AND (_AMQ_ORIG_QUEUE IS NOT NULL))".into())
        );
    }

    #[test]
    fn a_filter_that_cannot_be_read_refuses_the_retry_at_its_position() {
        let selection = Selection::Filter("x = 1 /* ( */) OR (1=1".into());
        let refusal = filter_refusal(&selection).expect("refused");
        assert!(refusal.words.starts_with("The filter cannot be read at position 14: "), "{}", refusal.words);
        let p = OriginalQueues::refused(refusal).judge(merge(vec![], &PreviewSettings::default()));
        let codes: Vec<(&str, Kind)> = p.findings.iter().map(|f| (f.code, f.kind)).collect();
        assert_eq!(codes, [("invalid-filter", Kind::Refused), ("nothing-to-retry", Kind::Refused)]);
    }

    #[test]
    fn a_retry_of_each_queue_is_a_one_node_move_of_its_messages() {
        let q = |n: &str| QueueRef { cluster: "east".into(), node: "east-1".into(), queue: n.into(), address: None };
        let retry = Plan::retry(q("DLQ"), &Selection::All, vec![q("a"), q("b")], 7).unwrap();
        let into_b = one_queue(&retry, &q("b"));
        assert!(into_b.same_node() && !into_b.target_is_source());
        assert_eq!(into_b.target, q("b"));
        let selected = Selection::Filter("((_AMQ_ORIG_QUEUE IN ('a', 'b')) AND (_AMQ_ORIG_QUEUE = 'b'))".into());
        assert_eq!(into_b.selection, selected);
    }
}
