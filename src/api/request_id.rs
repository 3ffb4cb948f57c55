//! The id of the request a task is serving, set by [`super::request`] around every request and read wherever an
//! answer or a log line names it (a problem document's `request_id`, the words pointing at the log). Kept apart so
//! the error type can read it without depending on the middleware that sets it.

tokio::task_local! {
    /// The id of the request this task is serving.
    pub(super) static REQUEST_ID: String;
}

/// The id of the request being served ("none" outside one: a test calling a handler's helper directly).
pub fn current_id() -> String {
    REQUEST_ID.try_with(String::clone).unwrap_or_else(|_| "none".into())
}
