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

#[test]
fn the_dialog_reads_ticked_ids_as_repeated_or_joined_fields_and_says_what_it_takes() {
    use super::transfer::Asked;
    use crate::transfer::Selection;

    let asked =
        Asked::from_pairs(b"cluster=east&node=east-1&queue=q%3Cx%3E&take=ids&id=7&id=3&ids=3,9&filter=").unwrap();
    assert_eq!((asked.queue.as_str(), asked.ids.clone()), ("q<x>", vec![3, 7, 9]), "decoded, sorted, each once");
    assert_eq!(asked.selection(), Ok(Selection::Ids(vec![3, 7, 9])));
    for bad in [&b"id=0"[..], b"id=x", b"ids=4,-1"] {
        assert_eq!(Asked::from_pairs(bad).unwrap_err().status, axum::http::StatusCode::BAD_REQUEST);
    }
    let none = Asked::from_pairs(b"take=ids").unwrap();
    assert!(none.selection().unwrap_err().starts_with("Tick at least one message"));
    let filter = Asked::from_pairs(b"take=filter&filter=color%20%3D").unwrap();
    assert!(filter.selection().unwrap_err().starts_with("the filter cannot be read at position 8"));
    assert_eq!(Asked::from_pairs(b"take=all").unwrap().selection(), Ok(Selection::All));
}

#[test]
fn a_brokers_console_is_linked_only_from_an_artemis_console_jolokia_url() {
    use super::pages::broker_console_url;
    assert_eq!(broker_console_url("http://b1:8161/console/jolokia").as_deref(), Some("http://b1:8161/console/"));
    assert_eq!(broker_console_url("https://b1:8443/console/jolokia/").as_deref(), Some("https://b1:8443/console/"));
    for other in ["http://b1:8161/jolokia", "javascript:alert(1)//console/jolokia", "ftp://b1/console/jolokia"] {
        assert_eq!(broker_console_url(other), None, "{other}");
    }
}
