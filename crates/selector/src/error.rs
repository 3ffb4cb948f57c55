//! Why a filter cannot be read, and where.

/// A filter that cannot be read: where (a character offset, and its line and column) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the filter cannot be read at {}: {kind}", self.place())]
#[non_exhaustive]
pub struct ParseError {
    /// Characters (not bytes) before the trouble: 0 is the first character; the input's length is its end.
    pub offset: usize,
    /// The line of the trouble, from 1.
    pub line: usize,
    /// The column of the trouble in its line, in characters, from 1.
    pub column: usize,
    /// Why.
    pub kind: ErrorKind,
}

impl ParseError {
    /// `position 7`, or `line 2, column 3` in a filter of several lines.
    pub fn place(&self) -> String {
        if self.line == 1 {
            format!("position {}", self.column)
        } else {
            format!("line {}, column {}", self.line, self.column)
        }
    }

    /// The error of `kind` at byte `at` of `input`.
    pub(crate) fn at(input: &str, at: usize, kind: ErrorKind) -> ParseError {
        let before = &input[..at];
        let offset = before.chars().count();
        let line_start = before.rfind(['\n', '\r']).map_or(0, |i| i + 1);
        let line = 1 + before.matches('\n').count() + before.matches('\r').count() - before.matches("\r\n").count();
        let column = before[line_start..].chars().count() + 1;
        ParseError { offset, line, column, kind }
    }
}

/// Why a filter cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The filter is empty, or only blanks and comments (the broker selects every message for an empty one).
    #[error("the filter is empty; to select every message, select the whole queue instead of a filter")]
    Empty,
    /// Something else was expected here.
    #[error("expected {}, found {found}", one_of(expected))]
    Expected {
        /// What would have been read here, in words.
        expected: Vec<&'static str>,
        /// What was found, in words.
        found: String,
    },
    /// A character no token of the grammar starts with.
    #[error("the character {found} is not part of the selector grammar{}", hint(*character))]
    Character {
        /// The character.
        character: char,
        /// The character in words (`'é' (U+00E9)`).
        found: String,
    },
    /// A string literal without its closing quote.
    #[error("the string literal that starts here never ends (a quote inside one is written twice: 'it''s')")]
    UnendedString,
    /// A `/*` comment without its `*/`.
    #[error("the comment that starts here never ends (a /* comment ends with */)")]
    UnendedComment,
    /// A `--` comment that no line break ends: the broker reads it as two minus signs.
    #[error(
        "a -- comment must end with a line break: without one the broker reads -- as two minus signs and the text \
         after it as part of the selector (end the comment with a line break, or write a minus sign before a \
         negative value as - -x)"
    )]
    LineCommentWithoutLineBreak,
    /// `XPATH` or `XQUERY`: they select by the message body as XML, which a run's filter does not.
    #[error(
        "{0} selects by the message body read as XML; a run's filter selects by headers and properties only \
         (the broker evaluates XPATH on every message body it scans, and its XQUERY matches nothing)"
    )]
    BodySelector(&'static str),
    /// Nested deeper, or with more terms, than a filter needs.
    #[error(
        "the filter nests deeper than {nesting} levels or has more than {nodes} terms",
        nesting = crate::parse::MAX_NESTING,
        nodes = crate::parse::MAX_NODES
    )]
    TooLarge,
}

fn one_of(expected: &[&'static str]) -> String {
    match expected {
        [] => "something else".into(),
        [one] => (*one).into(),
        [first @ .., last] => format!("{} or {last}", first.join(", ")),
    }
}

fn hint(c: char) -> &'static str {
    match c {
        '"' => " (a string literal is in single quotes: 'text')",
        '!' => " (not equal is written <>)",
        c if !c.is_ascii() && c.is_alphabetic() => {
            " (a property name is ASCII letters, digits, _ and $ in the broker's grammar; a string literal may hold \
             any character)"
        }
        c if c.is_whitespace() => " (blanks are spaces, tabs, line breaks and form feeds)",
        _ => "",
    }
}
