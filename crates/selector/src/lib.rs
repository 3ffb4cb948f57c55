//! The Apache ActiveMQ Artemis selector grammar (the broker's `artemis-selector`, 2.40): a parser into a syntax
//! tree ([`Selector::parse`]) and a serialiser that writes a tree back fully parenthesised (`Display`).
//!
//! A run's effective filter is the user's tree and the freezing terms under one `AND`
//! ([`Selector::and`]), serialised: the user's text is never wrapped, so nothing in it (a comment, a
//! parenthesis, a quote) can move the freezing terms out from under the `AND` (ADR 0012).
//!
//! What the parser reads is what the broker reads, token for token: keywords in any case, string literals with
//! `''`, decimal, hex and octal integers (a decimal one with `L`), floating literals with an exponent, ASCII
//! identifiers (`-` inside them after the `hyphenated_props:` prefix), `/* … */` and `--` comments, and the
//! broker's precedence (`NOT` binds tighter than `=`: `NOT a = 1` is `(NOT a) = 1`). Some selectors the broker
//! accepts are refused, each with its reason ([`ErrorKind`]): a `--` comment that no line break ends (the broker
//! reads two minus signs), `XPATH` and `XQUERY`. Type rules (`5 AND x`, `'a' < 1`) are the broker's to judge.
//! Pure: no I/O.

mod error;
mod parse;
mod tree;

pub use error::{ErrorKind, ParseError};
pub use tree::{ArithOp, CompareOp, Expr, Literal, Number, NumberKind, Options, Selector};
