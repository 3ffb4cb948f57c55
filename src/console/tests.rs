//! The console's pure rules: which requests count as coming from its own pages.

use axum::http::{HeaderMap, HeaderValue};

use super::cross_origin;

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_static(v));
    }
    h
}

#[test]
fn a_request_comes_from_the_console_only_when_the_browser_says_so() {
    let ours = [
        &[("sec-fetch-site", "same-origin")][..],
        &[("origin", "http://console.test:8080"), ("host", "console.test:8080")][..],
        &[("origin", "https://Console.Test"), ("host", "console.test")][..],
    ];
    for h in ours {
        assert_eq!(cross_origin(&headers(h)), None, "{h:?}");
    }
    let theirs = [
        &[][..],
        &[("sec-fetch-site", "cross-site")][..],
        &[("sec-fetch-site", "same-site")][..],
        &[("sec-fetch-site", "none")][..],
        // Fetch Metadata decides when present, whatever Origin says.
        &[("sec-fetch-site", "cross-site"), ("origin", "http://console.test"), ("host", "console.test")][..],
        &[("origin", "http://evil.test"), ("host", "console.test")][..],
        &[("origin", "http://console.test.evil.test"), ("host", "console.test")][..],
        &[("origin", "null"), ("host", "console.test")][..],
        &[("host", "console.test")][..],
    ];
    for h in theirs {
        assert!(cross_origin(&headers(h)).is_some_and(|why| why.starts_with("refused")), "{h:?}");
    }
}
