//! A page of a queue's messages, read through a Core browser (as [`super::count`] reads): the broker iterates the
//! queue and applies the filter, nothing is consumed and no delivery count rises. A large message's body is read
//! past, never kept; a regular one is at most the broker's large-message threshold (100 KiB by default).
//!
//! **Where a page starts.** A browser cannot be opened at a position, and no filter identifier names the broker's
//! message id (`AMQUserID` is the JMSMessageID, optional and not unique; `FilterConstants` has no id), so a page
//! after message `n` cannot be asked of the broker as `<filter> AND id > n`; nor is the id an order — the queue is
//! iterated by priority first, then by arrival. A page therefore starts by reading past the messages before it
//! up to and including the last message of the previous page ([`Page::after`]), within a budget of messages and of
//! time ([`BrowseBudget`]); when that message has left the queue meanwhile (consumed, moved, expired) the page says
//! so ([`BrowsedPage::position_lost`]) rather than guessing where it would have been.

use std::time::Duration;

use artemis_core::{Connection, ConsumerOptions, CoreMessage, Delivery, MessageType, PropertyValue, SessionOptions};
use tokio::time::Instant;

/// The most of a text body a page shows, in bytes (cut at a character's boundary).
pub const BODY_PREVIEW_BYTES: usize = 1024;

/// The most messages a page holds.
pub const MAX_PAGE: usize = 200;

/// Which page of a queue's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<'a> {
    /// The broker's filter (already parsed and written back by the selector parser); `None`: every message.
    pub filter: Option<&'a str>,
    /// The message id the previous page ended with; `None`: the first page.
    pub after: Option<i64>,
    /// At most this many messages (1 to [`MAX_PAGE`]).
    pub limit: usize,
}

/// How far a page may read past the messages before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrowseBudget {
    /// Messages read past before the page starts.
    pub skip: u64,
    /// Time for the whole page.
    pub time: Duration,
}

/// A page of messages.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowsedPage {
    /// The messages, in the queue's order.
    pub messages: Vec<BrowsedMessage>,
    /// Another message follows the last one.
    pub more: bool,
    /// The message the page was to start after is no longer in the queue: the page is empty.
    pub position_lost: bool,
}

/// One message as a page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowsedMessage {
    /// The broker's message id (its journal id on this broker).
    pub message_id: i64,
    /// The JMSMessageID (`ID:<uuid>`), when the producer set one.
    pub user_id: Option<String>,
    /// When it was made, epoch milliseconds.
    pub timestamp: i64,
    /// 0 to 9.
    pub priority: i8,
    /// Kept on disk by the broker.
    pub durable: bool,
    /// When it expires, epoch milliseconds; `None`: never.
    pub expiration: Option<i64>,
    /// The body's size in bytes (a large message's, as the broker recorded it; `None` when it did not).
    pub body_bytes: Option<i64>,
    /// It is a large message (its body streams; none of it is shown).
    pub large: bool,
    /// The body's type: `text`, `bytes`, `map`, `stream`, `object` or `default`.
    pub body_type: &'static str,
    /// The start of a text body; `None` for any other body.
    pub text: Option<TextPreview>,
    /// Its properties, in the order the broker sent them.
    pub properties: Vec<Property>,
}

/// The start of a text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextPreview {
    /// At most [`BODY_PREVIEW_BYTES`] of it.
    pub text: String,
    /// There is more than `text`.
    pub truncated: bool,
}

/// A message property: its name, its type and its value in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// Its name.
    pub name: String,
    /// `string`, `long`, `int`, `short`, `byte`, `boolean`, `double`, `float`, `char`, `bytes` or `null`.
    pub kind: &'static str,
    /// The value as text (bytes in hexadecimal, at most 64 of them).
    pub value: String,
}

/// Reads one page of `queue` through a browser on `conn` (see the module doc for where it starts).
pub async fn browse_page(
    conn: &Connection,
    queue: &str,
    page: &Page<'_>,
    budget: BrowseBudget,
) -> Result<BrowsedPage, BrowseFailure> {
    let session = conn.create_session(SessionOptions::auto_commit()).await?;
    let mut options = ConsumerOptions::default();
    if let Some(filter) = page.filter {
        options = options.filter(filter);
    }
    let read = match session.create_browser(queue, options).await {
        Ok(mut browser) => {
            let read = read_page(&mut browser, page, budget).await;
            let _ = browser.close().await;
            read
        }
        Err(e) => Err(e.into()),
    };
    let _ = session.close().await;
    read
}

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrowseFailure {
    /// The page starts deeper in the queue than the budget lets a page read past.
    #[error(
        "the page starts more than {skip} messages into the queue, deeper than a page reads past; narrow the filter"
    )]
    TooDeep {
        /// The budget's messages.
        skip: u64,
    },
    /// The broker did not finish the page in time.
    #[error("the broker did not give the page within {0:?}")]
    TooSlow(Duration),
    /// The Core connection or the broker failed.
    #[error(transparent)]
    Core(#[from] artemis_core::Error),
}

impl BrowseFailure {
    /// The broker says the queue does not exist.
    pub fn is_no_such_queue(&self) -> bool {
        matches!(self, BrowseFailure::Core(artemis_core::Error::Broker(b))
            if b.kind == artemis_core::ExceptionType::QueueDoesNotExist)
    }
}

async fn read_page(
    browser: &mut artemis_core::Browser,
    page: &Page<'_>,
    budget: BrowseBudget,
) -> Result<BrowsedPage, BrowseFailure> {
    let deadline = Instant::now() + budget.time;
    if let Some(after) = page.after {
        let mut skipped = 0u64;
        loop {
            match next_before(browser, deadline, budget.time).await? {
                None => return Ok(BrowsedPage { messages: Vec::new(), more: false, position_lost: true }),
                Some(d) if d.message_id() == after => break,
                Some(_) if skipped >= budget.skip => return Err(BrowseFailure::TooDeep { skip: budget.skip }),
                Some(_) => skipped += 1,
            }
        }
    }
    let mut messages = Vec::new();
    while messages.len() < page.limit.clamp(1, MAX_PAGE) {
        match next_before(browser, deadline, budget.time).await? {
            Some(d) => messages.push(BrowsedMessage::of(&d)),
            None => return Ok(BrowsedPage { messages, more: false, position_lost: false }),
        }
    }
    let more = next_before(browser, deadline, budget.time).await?.is_some();
    Ok(BrowsedPage { messages, more, position_lost: false })
}

/// The browser's next message before `deadline`; a large body is read past.
async fn next_before(
    browser: &mut artemis_core::Browser,
    deadline: Instant,
    time: Duration,
) -> Result<Option<Delivery>, BrowseFailure> {
    let mut discard = tokio::io::sink();
    match tokio::time::timeout_at(deadline, browser.next_streaming(&mut discard)).await {
        Err(_) => Err(BrowseFailure::TooSlow(time)),
        Ok(read) => Ok(read?),
    }
}

impl BrowsedMessage {
    fn of(delivery: &Delivery) -> BrowsedMessage {
        let m = delivery.message();
        let h = &m.headers;
        let large = delivery.was_large();
        BrowsedMessage {
            message_id: h.message_id,
            user_id: h.jms_message_id(),
            timestamp: h.timestamp,
            priority: h.priority,
            durable: h.durable,
            expiration: (h.expiration != 0).then_some(h.expiration),
            body_bytes: if large { h.large_body_size() } else { Some(m.body.len() as i64) },
            large,
            body_type: body_type(h.message_type),
            text: if large { None } else { text_preview(m) },
            properties: h.properties.iter().map(|(k, v)| property(k.to_string_lossy(), v)).collect(),
        }
    }
}

/// The body type's name.
fn body_type(t: MessageType) -> &'static str {
    match t {
        MessageType::TEXT => "text",
        MessageType::BYTES => "bytes",
        MessageType::MAP => "map",
        MessageType::STREAM => "stream",
        MessageType::OBJECT => "object",
        _ => "default",
    }
}

/// The start of a text message's body; `None` when it is not text or its text cannot be read.
fn text_preview(m: &CoreMessage) -> Option<TextPreview> {
    if m.headers.message_type != MessageType::TEXT {
        return None;
    }
    let text = m.text().ok()??.to_string_lossy();
    Some(cut(&text, BODY_PREVIEW_BYTES))
}

/// `text` cut to at most `max` bytes at a character's boundary.
fn cut(text: &str, max: usize) -> TextPreview {
    if text.len() <= max {
        return TextPreview { text: text.to_string(), truncated: false };
    }
    let end = (0..=max).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    TextPreview { text: text[..end].to_string(), truncated: true }
}

/// How many bytes of a BYTES property a page shows.
const PROPERTY_BYTES_SHOWN: usize = 64;

/// A property in words.
fn property(name: String, value: &PropertyValue) -> Property {
    let (kind, value) = match value {
        PropertyValue::Null => ("null", String::new()),
        PropertyValue::Boolean(b) => ("boolean", b.to_string()),
        PropertyValue::Byte(n) => ("byte", n.to_string()),
        PropertyValue::Short(n) => ("short", n.to_string()),
        PropertyValue::Int(n) => ("int", n.to_string()),
        PropertyValue::Long(n) => ("long", n.to_string()),
        // Debug, not Display: Display writes 1e-300 out as 300 zeros.
        PropertyValue::Float(n) => ("float", format!("{n:?}")),
        PropertyValue::Double(n) => ("double", format!("{n:?}")),
        PropertyValue::Char(u) => ("char", char::decode_utf16([*u]).map(|c| c.unwrap_or('\u{FFFD}')).collect()),
        PropertyValue::String(s) => ("string", s.to_string_lossy()),
        PropertyValue::Bytes(b) => {
            let mut hex: String = b.iter().take(PROPERTY_BYTES_SHOWN).map(|x| format!("{x:02x}")).collect();
            if b.len() > PROPERTY_BYTES_SHOWN {
                hex.push_str(&format!("… ({} bytes)", b.len()));
            }
            ("bytes", hex)
        }
    };
    Property { name, kind, value }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_preview_is_cut_at_a_character_boundary() {
        assert_eq!(cut("short", 8), TextPreview { text: "short".into(), truncated: false });
        let cut_text = cut("ééééé", 5);
        assert_eq!(cut_text, TextPreview { text: "éé".into(), truncated: true });
        assert_eq!(cut(&"x".repeat(2000), BODY_PREVIEW_BYTES).text.len(), BODY_PREVIEW_BYTES);
    }

    #[test]
    fn properties_are_named_with_their_type_and_value_in_words() {
        let p = property("n".into(), &PropertyValue::Long(-3));
        assert_eq!((p.kind, p.value.as_str()), ("long", "-3"));
        let p = property("b".into(), &PropertyValue::Bytes(vec![0xab; 70].into()));
        assert_eq!(p.kind, "bytes");
        assert!(p.value.starts_with("abab") && p.value.ends_with("… (70 bytes)"), "{}", p.value);
        assert_eq!(property("c".into(), &PropertyValue::Char(0x41)).value, "A");
        assert_eq!(property("d".into(), &PropertyValue::Double(3e-300)).value, "3e-300");
        assert_eq!(property("f".into(), &PropertyValue::Float(1.5)).value, "1.5");
    }
}
