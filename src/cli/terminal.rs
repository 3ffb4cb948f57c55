//! What the command line prints reaches an operator's terminal, and much of it was written by someone else: a stop
//! reason typed through the API, a queue's name, a broker's error words, a message property. A terminal obeys the
//! control characters in it — ESC sequences can rewrite the screen, set the window title, or hide a line — and
//! bidirectional overrides can make a name read as another. So every control character but a line break and a
//! tab, and every bidirectional override or isolate, is printed as its escape (`\u001b`, `\u202e`): visible,
//! and never obeyed. The escapes are JSON's, so `--json` output passed through stays valid JSON that means the same
//! (serde_json escapes C0 controls itself, but leaves C1 controls and the bidirectional marks raw).

use std::borrow::Cow;
use std::io::{self, Write};

/// Whether `c` would be obeyed by a terminal rather than shown: C0 controls but `\n` and `\t`, DEL, C1 controls,
/// and the bidirectional embeddings, overrides and isolates.
fn is_obeyed(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character a terminal would obey written as its escape.
pub fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_obeyed) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_obeyed(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A writer that passes everything through [`shown`]. Formatting writes whole `str` pieces, so a buffer is UTF-8
/// unless the program wrote raw bytes; those pass with their ASCII controls escaped (a byte below 0x20 is never
/// part of a longer UTF-8 sequence).
pub struct Safe<W: Write>(pub W);

impl<W: Write> Write for Safe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(shown(text).as_bytes()),
            Err(_) => {
                for &b in buf {
                    if b < 0x20 && b != b'\n' && b != b'\t' || b == 0x7f {
                        write!(self.0, "\\u{:04x}", b)?;
                    } else {
                        self.0.write_all(&[b])?;
                    }
                }
                Ok(())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Whether `stream` may be written in colour and cursor moves: it is a terminal, and `NO_COLOR` is not set to
/// anything (no-color.org). Logs and output piped to a file or another program stay plain.
pub fn colour(stream: &impl io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Whether `error` failed only because the reader of standard output went away (`| head`): not a failure of the
/// command, so it ends quietly.
pub fn is_broken_pipe(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe) {
            return true;
        }
        cause = e.source();
    }
    false
}

/// `--json` of a single thing (docs/cli.md, "JSON"): one compact object on one line.
pub fn json_one(out: &mut impl Write, value: &impl serde::Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
}

/// `--json` of a list (docs/cli.md, "JSON"): JSON lines, one compact object a line, no enclosing array; nothing for
/// an empty list.
pub fn json_lines<T: serde::Serialize>(out: &mut impl Write, items: impl IntoIterator<Item = T>) -> io::Result<()> {
    for item in items {
        json_one(out, &item)?;
    }
    Ok(())
}

/// Standard output, locked, through [`Safe`].
pub fn stdout() -> Safe<io::StdoutLock<'static>> {
    Safe(io::stdout().lock())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_told_through_the_chain_of_causes() {
        let pipe = crate::cli::CliError::Output(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(is_broken_pipe(&pipe));
        let other = crate::cli::CliError::Output(io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(!is_broken_pipe(&other));
    }

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        assert_eq!(shown("stop\u{1b}]0;pwned\u{7}now\u{1b}[2J"), "stop\\u001b]0;pwned\\u0007now\\u001b[2J");
        assert_eq!(shown("a\rb\u{0}c\u{7f}"), "a\\u000db\\u0000c\\u007f");
        assert_eq!(shown("csi \u{9b}31m"), "csi \\u009b31m");
    }

    #[test]
    fn a_bidirectional_override_is_shown() {
        assert_eq!(shown("orders\u{202e}fdp.exe"), "orders\\u202efdp.exe");
        assert_eq!(shown("x\u{2066}y"), "x\\u2066y");
    }

    #[test]
    fn line_breaks_tabs_and_words_of_any_script_pass() {
        let words = "run 1 stopped\n\treason: Überlauf — 満杯 (100%)\n";
        assert!(matches!(shown(words), Cow::Borrowed(_)));
    }

    #[test]
    fn the_writer_escapes_what_is_formatted_through_it() {
        let mut safe = Safe(Vec::new());
        let reason = "ok\u{1b}[31m red";
        writeln!(safe, "reason: {reason}").unwrap();
        safe.write_all(&[b'a', 0x1b, 0xff, b'\n']).unwrap();
        assert_eq!(safe.0, b"reason: ok\\u001b[31m red\na\\u001b\xff\n");
    }

    #[test]
    fn a_list_is_json_lines_and_a_single_thing_one_line() {
        let mut out = Vec::new();
        json_lines(&mut out, [serde_json::json!({"a": [1, 2]}), serde_json::json!({"b": "x\ny"})]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\"a\":[1,2]}\n{\"b\":\"x\\ny\"}\n");
        let mut none = Vec::new();
        json_lines(&mut none, Vec::<u8>::new()).unwrap();
        assert!(none.is_empty(), "an empty list prints nothing");
        let mut one = Vec::new();
        json_one(&mut one, &serde_json::json!({"run": {"id": 1}})).unwrap();
        assert_eq!(one, b"{\"run\":{\"id\":1}}\n");
    }

    #[test]
    fn json_passed_through_stays_json_that_means_the_same() {
        let value = serde_json::json!({ "reason": "a\u{1b}[2J\u{9b}\u{202e}b" });
        let mut safe = Safe(Vec::new());
        serde_json::to_writer(&mut safe, &value).unwrap();
        let text = String::from_utf8(safe.0).unwrap();
        assert!(!text.chars().any(is_obeyed), "{text}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
    }
}
