//! One relay batch, whatever its take: [`batch`] drives the steps in their order, and a [`Take`] — the move's
//! ([`super::batch`]: received from staging, acknowledged there) or the copy's ([`super::copy`]: browsed past the
//! ledger, the source never touched) — says what each step does for it. A return's batch in doubt is a third take
//! (`super::returning`: the run's ids in doubt received from staging again; its table is that module's).
//!
//! | step | the move | the copy |
//! |---|---|---|
//! | [`Take::prepare`] | ends re-resolved and the target guarded; staging ours, the previous attempt reconciled, a resend checked safe, a stop settled, staging topped up | the target guarded |
//! | [`Take::take`] | received from staging | browsed past the ledger |
//! | [`Take::nothing_taken`] | the finish, the next batch, or a wait for what staging holds | the slice ends |
//! | [`Take::open_target`] | the target's connection | the slice's target connection, kept across its batches |
//! | [`Take::mark_in_doubt`] | the batch's staging ids, fenced, into the duplicate-id window | the batch's source ids, likewise (a resend checked safe first) |
//! | [`Take::send`] | the target commit (a refusal gives the batch back to staging) | the target commit |
//! | [`Take::settle_source`] | the dead-letter intent, then the batch acknowledged from staging | nothing: a copy never touches the source |
//! | [`Take::dead_letter`] | proven poison to a DMQ, out of staging | proven poison to a DMQ |
//! | [`Take::record`] | counters, out of doubt, the job completed and the next enqueued | the ledger and counters, out of doubt |
//!
//! What a crash after each step leaves, and how the next attempt settles it, is the table of each take's module.
//! Each step is given what the steps before it produced (`Ready`, [`Taken`], [`Landed`], [`Dealt`]) and nothing
//! else: a step cannot use what an earlier one has not made. Why this shape, and how two batches in flight fit it:
//! docs/adr/0011.

use super::dmq;
use super::poison::Poison;
use super::receive::Taken;
use super::run::Step;
use super::send::Landed;
use super::state::BatchCount;
use super::RelayError;
use std::collections::HashSet;

/// What a batch's source side does at each step (the module doc's table).
pub(super) trait Take {
    /// What the batch works with from its guard to its record (its ends, its sessions, what a reconcile found).
    type Ready;
    /// What a recorded batch gives its caller.
    type Done;

    /// Both ends guarded and the source side made ready for a take.
    async fn prepare(&mut self) -> Step<Self::Ready>;
    /// Up to a batch taken from the source side (none: [`Take::nothing_taken`]).
    async fn take(&mut self, ready: &mut Self::Ready) -> Result<Taken, RelayError>;
    /// What follows a take that found nothing.
    async fn nothing_taken(&mut self, ready: Self::Ready) -> Step<Self::Done>;
    /// The target's connection for a batch that has something to send.
    async fn open_target(&mut self, ready: &mut Self::Ready) -> Result<(), RelayError>;
    /// The batch recorded in doubt, fenced, and counted into the target's duplicate-id window, before anything
    /// is sent.
    async fn mark_in_doubt(&mut self, ready: &mut Self::Ready, taken: &Taken) -> Step;
    /// The batch sent to the target in one transaction and committed, its poison proven.
    async fn send(&mut self, ready: &mut Self::Ready, taken: &Taken) -> Step<Landed>;
    /// What the target's commit lets the source side do before the poison is dead-lettered.
    async fn settle_source(
        &mut self,
        ready: &mut Self::Ready,
        taken: &Taken,
        landed: &Landed,
    ) -> Result<(), RelayError>;
    /// The proven poison to a dead message queue.
    async fn dead_letter(
        &mut self,
        ready: &mut Self::Ready,
        taken: Taken,
        poison: Vec<Poison>,
    ) -> Result<dmq::Outcome, RelayError>;
    /// What the batch did, recorded in one fenced transaction.
    async fn record(&mut self, ready: Self::Ready, dealt: Dealt) -> Step<Self::Done>;
}

/// What a batch did, as its record writes it.
pub(super) struct Dealt {
    /// The batch's ids on the source side (staging ids for a move, source ids for a copy), in batch order.
    pub ids: Vec<i64>,
    /// The places in the batch of its proven poison.
    pub poisoned: HashSet<usize>,
    /// What it adds to the counters.
    pub count: BatchCount,
    /// What the dead message queue took.
    pub dead: dmq::Outcome,
}

/// One batch through the steps of `take`, in order (the module doc's table).
pub(super) async fn batch<T: Take>(take: &mut T) -> Step<T::Done> {
    let mut ready = go_on_step!(take.prepare().await);
    let taken = take.take(&mut ready).await?;
    if taken.received.is_empty() {
        return take.nothing_taken(ready).await;
    }
    take.open_target(&mut ready).await?;
    go_on_step!(take.mark_in_doubt(&mut ready, &taken).await);
    let landed = go_on_step!(take.send(&mut ready, &taken).await);
    take.settle_source(&mut ready, &taken, &landed).await?;
    let (mut count, poisoned, ids) = (landed.count(&taken), landed.poisoned(), taken.ids.clone());
    let dead = take.dead_letter(&mut ready, taken, landed.sent.poison).await?;
    count.dead_lettered = dead.dead.len() as i64;
    take.record(ready, Dealt { ids, poisoned, count, dead }).await
}
