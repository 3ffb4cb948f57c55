//! What a run holds in doubt: one mark per batch (ADR 0011, "Two batches in flight").
//!
//! A batch's ids are marked in doubt, fenced, before anything of it is sent, and stay marked until the source's
//! acknowledgement of them is known to have committed (a move) or the ledger holds them (a copy). Each mark keeps
//! where its batch began in the target address's duplicate-id window ([`WindowMark`], ADR 0010), because that is
//! what decides whether the batch may be sent again: every batch has its own start. Today a run has at most one
//! batch in flight, so at most two marks — the one a crash left and the batch that sends it again with new ids;
//! with two batches in flight each appends its own and the record removes its own.
//!
//! Invariant: no mark is empty. The SQL reads "something is in doubt" as a non-empty list
//! (`sql/functions/runs.sql`, `run_unsettled.sql`, `window_holders.sql`), so every change here drops the marks
//! it empties.

use serde::{Deserialize, Serialize};

/// One batch's ids in doubt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Staging message ids (a move) or source message ids (a copy), never empty.
    pub ids: Vec<i64>,
    /// Where the batch began in its target address's count of sent ids; `None` when the address keeps no
    /// duplicate ids (or the run predates the window).
    #[serde(default)]
    pub window: Option<WindowMark>,
}

/// Every batch a run holds in doubt, oldest first (the `relay.in_doubt` list).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Marks(Vec<Mark>);

impl Marks {
    /// One batch's mark alone (nothing when `ids` is empty).
    pub fn of(ids: Vec<i64>, window: Option<WindowMark>) -> Marks {
        let mut marks = Marks::default();
        marks.push(ids, window);
        marks
    }

    /// Whether nothing is in doubt.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many ids are in doubt, over every mark.
    pub fn len(&self) -> usize {
        self.0.iter().map(|m| m.ids.len()).sum()
    }

    /// Every id in doubt, oldest batch first.
    pub fn ids(&self) -> Vec<i64> {
        self.0.iter().flat_map(|m| m.ids.iter().copied()).collect()
    }

    /// Whether `id` is in doubt.
    pub fn contains(&self, id: i64) -> bool {
        self.0.iter().any(|m| m.ids.contains(&id))
    }

    /// The marks, oldest first.
    pub fn marks(&self) -> &[Mark] {
        &self.0
    }

    /// A batch's ids marked in doubt, after those already marked; nothing when `ids` is empty.
    pub fn push(&mut self, ids: Vec<i64>, window: Option<WindowMark>) {
        if !ids.is_empty() {
            self.0.push(Mark { ids, window });
        }
    }

    /// Keeps the ids `keep` says are still in doubt; a mark left with none goes.
    pub fn retain(&mut self, mut keep: impl FnMut(i64) -> bool) {
        for mark in &mut self.0 {
            mark.ids.retain(|id| keep(*id));
        }
        self.0.retain(|m| !m.ids.is_empty());
    }

    /// These marks with only the ids `keep` says are still in doubt.
    pub fn kept(&self, keep: impl FnMut(i64) -> bool) -> Marks {
        let mut kept = self.clone();
        kept.retain(keep);
        kept
    }

    /// Nothing in doubt any more.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Every mark's window takes the target broker's start as read now: the operator's resume after a lost cache
    /// says the target does not hold the batches, so they are sent again from here.
    pub fn restart_windows(&mut self, target_started: Option<i64>) {
        for window in self.0.iter_mut().filter_map(|m| m.window.as_mut()) {
            window.target_started = target_started;
        }
    }
}

/// Where a batch in doubt began in its target address's count of sent ids (ADR 0010): kept with the batch's mark
/// while it holds ids, so other runs into the address leave those ids in the target's cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowMark {
    /// `cluster/node/address` ([`key`](super::window::key)).
    pub target: String,
    /// The address's count of sent ids before the batch's own.
    pub start: i64,
    /// When the target broker had started ([`BrokerState::started_millis`](crate::broker::jolokia::BrokerState::started_millis)) as the batch was recorded in doubt:
    /// a later start means a restart or failover, which a cache that is not persisted does not survive.
    #[serde(default)]
    pub target_started: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(start: i64) -> Option<WindowMark> {
        Some(WindowMark { target: "west/west-1/q".into(), start, target_started: Some(1) })
    }

    #[test]
    fn each_batch_keeps_its_own_mark_and_an_empty_batch_marks_nothing() {
        let mut marks = Marks::of(vec![1, 2], window(0));
        marks.push(vec![], window(2));
        marks.push(vec![3], window(2));
        assert_eq!(marks.marks().len(), 2);
        assert_eq!((marks.len(), marks.ids()), (3, vec![1, 2, 3]));
        assert_eq!(marks.marks()[1].window.as_ref().map(|w| w.start), Some(2));
        assert!(marks.contains(3) && !marks.contains(4));
    }

    #[test]
    fn a_mark_whose_ids_are_all_settled_goes() {
        let mut marks = Marks::of(vec![1, 2], window(0));
        marks.push(vec![3, 4], window(2));
        assert_eq!(marks.kept(|id| id != 2).ids(), vec![1, 3, 4]);
        marks.retain(|id| id > 2);
        assert_eq!(marks.marks(), &[Mark { ids: vec![3, 4], window: window(2) }]);
        marks.retain(|_| false);
        assert!(marks.is_empty());
        assert_eq!(serde_json::to_value(&marks).unwrap(), serde_json::json!([]), "the SQL reads [] as nothing");
    }

    #[test]
    fn a_resume_after_a_lost_cache_moves_every_window_to_the_new_start() {
        let mut marks = Marks::of(vec![1], window(0));
        marks.push(vec![2], None);
        marks.restart_windows(Some(9));
        assert_eq!(marks.marks()[0].window.as_ref().and_then(|w| w.target_started), Some(9));
        assert_eq!(marks.marks()[1].window, None);
    }

    #[test]
    fn marks_are_stored_as_a_list_of_ids_and_windows() {
        let marks = Marks::of(vec![7, 8], window(40));
        let stored = serde_json::to_value(&marks).unwrap();
        assert_eq!(
            stored,
            serde_json::json!([{ "ids": [7, 8], "window": { "target": "west/west-1/q", "start": 40, "target_started": 1 } }])
        );
        assert_eq!(serde_json::from_value::<Marks>(stored).unwrap(), marks);
    }
}
