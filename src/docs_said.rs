//! The one check of the words a page says of a rule in the code: tests that keep the docs equal to a constant
//! build the words from it and ask this whether the page says them.

/// Asserts that `page` (its text `text`) says each of `words`, wherever its lines break. `rule` names the code the
/// words are built from, for the failure's message.
pub(crate) fn assert_says(page: &str, text: &str, words: &[String], rule: &str) {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in words {
        assert!(text.contains(said.as_str()), "{page} does not say {said:?} ({rule})");
    }
}
