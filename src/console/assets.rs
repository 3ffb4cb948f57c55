//! The console's stylesheet, script and icon, embedded in the binary and served under names that carry a hash of their
//! content (`console.<hash>.css`), so a browser may keep them for a year: a new build's files have new names.
//! Nothing is read from disk at run time and nothing is fetched from elsewhere.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// One embedded file: its served name and its bytes.
pub struct Asset {
    /// `console.<hash>.<ext>`.
    pub name: String,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its content.
    pub body: &'static str,
}

impl Asset {
    fn new(stem: &str, ext: &str, content_type: &'static str, body: &'static str) -> Asset {
        let hash = Sha256::digest(body.as_bytes());
        let short: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
        Asset { name: format!("{stem}.{short}.{ext}"), content_type, body }
    }

    /// Where a page links it.
    pub fn href(&self) -> String {
        format!("/console/assets/{}", self.name)
    }
}

/// The stylesheet: light and dark from `prefers-color-scheme`, no web fonts.
pub static CSS: LazyLock<Asset> =
    LazyLock::new(|| Asset::new("console", "css", "text/css; charset=utf-8", include_str!("assets/console.css")));

/// The script: refreshes a page's live parts while its tab is visible.
pub static JS: LazyLock<Asset> =
    LazyLock::new(|| Asset::new("console", "js", "text/javascript; charset=utf-8", include_str!("assets/console.js")));

/// The icon a browser shows in its tab (without one it asks for `/favicon.ico`).
pub static ICON: LazyLock<Asset> =
    LazyLock::new(|| Asset::new("icon", "svg", "image/svg+xml", include_str!("assets/icon.svg")));

/// `GET /console/assets/{name}`: an embedded file by its hashed name, cached for a year; any other name is 404.
pub async fn serve(Path(name): Path<String>) -> Response {
    let Some(asset) = [&*CSS, &*JS, &*ICON].into_iter().find(|a| a.name == name) else {
        return super::ConsoleError::not_found(format!("there is no console file {name}")).into_response();
    };
    let mut response = asset.body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable"));
    (StatusCode::OK, response).into_response()
}
