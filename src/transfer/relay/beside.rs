//! Work a batch spawns to run beside its later steps: the refill that goes on beside the acknowledgement, the
//! target's facts read ahead for the next batch (ADR 0011, "The second step").

use std::time::Instant;

/// Work spawned to run beside a batch's later steps, from `since`; aborted when the batch ends without joining it
/// (its job failed or was dropped), as it would have been had it run inside the job's own future.
pub(super) struct Beside<T> {
    handle: tokio::task::JoinHandle<T>,
    /// When it began.
    pub(super) since: Instant,
}

impl<T: Send + 'static> Beside<T> {
    pub(super) fn spawn(work: impl std::future::Future<Output = T> + Send + 'static) -> Beside<T> {
        Beside { handle: tokio::spawn(work), since: Instant::now() }
    }

    /// Its result; a panic in it is the job's.
    pub(super) async fn join(mut self) -> T {
        match (&mut self.handle).await {
            Ok(done) => done,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

impl<T> Drop for Beside<T> {
    fn drop(&mut self) {
        self.handle.abort();
    }
}
