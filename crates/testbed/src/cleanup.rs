//! Tests clean up their queues: a broker filled by earlier tests blocks later ones (the test bed's brokers have
//! 512 MiB heaps, and what one test leaves behind every later test of the run pays for).

use std::sync::Mutex;

use crate::config::Node;
use crate::jolokia::Jolokia;

/// Destroys each queue with its messages, and its address when no other queue is bound to it. A queue already
/// gone, or never made, is fine.
pub async fn remove_queues(queues: &[(&Node, &str)]) {
    for (node, queue) in queues {
        let _ = Jolokia::new(node).destroy_queue(queue).await;
    }
}

/// The queues a test made, or had made (a run's target, its staging queue): removed, with their messages, when
/// this is dropped — at the end of the test, and as a failed assertion unwinds it. Make it before the worker or
/// `serve` of the test, so that they are stopped before it removes the queues they could fill again.
#[derive(Debug, Default)]
pub struct TestQueues {
    queues: Mutex<Vec<(Node, String)>>,
}

impl TestQueues {
    /// Nothing to remove yet.
    pub fn new() -> TestQueues {
        TestQueues::default()
    }

    /// Removes `queue` on `node` at the end (whether or not it exists by then).
    pub fn add(&self, node: &Node, queue: &str) -> &TestQueues {
        self.queues.lock().unwrap_or_else(|e| e.into_inner()).push((node.clone(), queue.to_string()));
        self
    }

    /// A new unique queue name ([`crate::unique_name`]) for a queue on `node`, removed at the end.
    pub fn name(&self, node: &Node, label: &str) -> String {
        let name = crate::unique_name(label);
        self.add(node, &name);
        name
    }
}

impl Drop for TestQueues {
    fn drop(&mut self) {
        let queues = std::mem::take(self.queues.get_mut().unwrap_or_else(|e| e.into_inner()));
        if queues.is_empty() {
            return;
        }
        // Drop cannot await, and it runs on the test's runtime, which must not be blocked on: the removal gets a
        // thread and a runtime of its own, and is waited for.
        let removal = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            let queues: Vec<(&Node, &str)> = queues.iter().map(|(node, queue)| (node, queue.as_str())).collect();
            runtime.block_on(remove_queues(&queues));
        });
        let _ = removal.join();
    }
}
