//! The parser: the broker's grammar (artemis-selector 2.40, `StrictParser.jj` and `HyphenatedParser.jj`), read
//! scannerless with winnow. Each token is read as the broker's lexer reads it — the longest match, a keyword only
//! when the whole word is one — and followed by the blanks and comments the lexer skips.
//!
//! Precedence, loosest first: `OR`; `AND`; `=`, `<>`, `IS [NOT] NULL`; `>`, `>=`, `<`, `<=`, `[NOT] LIKE`,
//! `[NOT] BETWEEN`, `[NOT] IN`; `+`, `-`; `*`, `/`, `%`; unary `+`, `-`, `NOT`; a literal, a name or `( … )`.
//! Every binary level is left-associative, as the grammar's loops are.

use winnow::combinator::{alt, cut_err, opt};
use winnow::error::{ErrMode, ModalResult, ParserError};
use winnow::prelude::*;
use winnow::stream::{Stateful, Stream};
use winnow::token::{none_of, one_of, take_while};

use crate::error::{ErrorKind, ParseError};
use crate::tree::{ArithOp, CompareOp, Expr, Literal, Number, NumberKind, Options, Selector};

/// Deeper nesting (parentheses, unary operators) than this is refused: the parser recurses once a level.
pub(crate) const MAX_NESTING: usize = 32;
/// More nodes than this is refused: serialising and dropping a tree recurse once a level of it.
pub(crate) const MAX_NODES: usize = 2_000;

/// What the lexer needs to know (the prefixes' option), and how big the tree has grown.
#[derive(Debug, Clone, Copy)]
struct State {
    hyphenated: bool,
    nesting: usize,
    nodes: usize,
}

type Input<'i> = Stateful<&'i str, State>;
type PResult<T> = ModalResult<T, Trouble>;

/// What went wrong, and where: `left` is how many bytes of the input were still unread there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trouble {
    left: usize,
    kind: Option<ErrorKind>,
    expected: Vec<&'static str>,
}

impl<'i> ParserError<Input<'i>> for Trouble {
    type Inner = Self;

    fn from_input(input: &Input<'i>) -> Self {
        Trouble { left: input.eof_offset(), kind: None, expected: Vec::new() }
    }

    fn into_inner(self) -> Result<Self, Self> {
        Ok(self)
    }

    /// Of two alternatives that failed, the one that read further; at the same place, everything either expected.
    fn or(self, other: Self) -> Self {
        match self.left.cmp(&other.left) {
            std::cmp::Ordering::Less => self,
            std::cmp::Ordering::Greater => other,
            std::cmp::Ordering::Equal => {
                let mut expected = self.expected;
                expected.extend(other.expected.into_iter().filter(|e| !expected.contains(e)).collect::<Vec<_>>());
                Trouble { left: self.left, kind: self.kind.or(other.kind), expected }
            }
        }
    }
}

/// Something else was expected here (other alternatives may still match).
fn expected<T>(i: &Input<'_>, what: &[&'static str]) -> PResult<T> {
    Err(ErrMode::Backtrack(Trouble { left: i.eof_offset(), kind: None, expected: what.to_vec() }))
}

/// A trouble no alternative cures, `left` bytes before the end.
fn fatal<T>(left: usize, kind: ErrorKind) -> PResult<T> {
    Err(ErrMode::Cut(Trouble { left, kind: Some(kind), expected: Vec::new() }))
}

/// Parses `text` as the broker does (`SelectorParser.parse`): its prefixes, then one expression up to the end.
pub(crate) fn parse(text: &str) -> Result<Selector, ParseError> {
    let (options, start) = prefixes(text);
    let state = State { hyphenated: options.hyphenated_props, nesting: 0, nodes: 0 };
    let mut input = Input { input: &text[start..], state };
    match whole.parse_next(&mut input) {
        Ok(expr) => Ok(Selector { options, expr }),
        Err(e) => {
            let trouble = match e {
                ErrMode::Backtrack(t) | ErrMode::Cut(t) => t,
                ErrMode::Incomplete(_) => Trouble { left: input.eof_offset(), kind: None, expected: Vec::new() },
            };
            Err(explain(text, trouble))
        }
    }
}

/// The broker's prefixes (each only at the very start, in any order, case-sensitive), as the options they leave
/// on, and where the selector after them starts.
fn prefixes(text: &str) -> (Options, usize) {
    let mut options = Options::default();
    let mut at = 0;
    loop {
        let rest = &text[at..];
        let (prefix, hyphenated, convert) = if rest.starts_with(Options::HYPHENATED) {
            (Options::HYPHENATED, Some(true), None)
        } else if rest.starts_with(Options::NO_HYPHENATED) {
            (Options::NO_HYPHENATED, Some(false), None)
        } else if rest.starts_with(Options::CONVERT) {
            (Options::CONVERT, None, Some(true))
        } else if rest.starts_with(Options::NO_CONVERT) {
            (Options::NO_CONVERT, None, Some(false))
        } else {
            return (options, at);
        };
        options.hyphenated_props = hyphenated.unwrap_or(options.hyphenated_props);
        options.convert_string_expressions = convert.unwrap_or(options.convert_string_expressions);
        at += prefix.len();
    }
}

/// The selector: blanks and comments, one expression, the end.
fn whole(i: &mut Input<'_>) -> PResult<Expr> {
    skip(i)?;
    if i.is_empty() {
        return fatal(i.eof_offset(), ErrorKind::Empty);
    }
    let expr = or_expr(i)?;
    if !i.is_empty() {
        return expected(i, &["an operator", "AND", "OR", "the end of the filter"]);
    }
    Ok(expr)
}

// ---------------------------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------------------------

/// The blanks the broker's lexer skips (`SPECIAL_TOKEN`): no other white space.
const BLANKS: [char; 5] = [' ', '\t', '\n', '\r', '\x0c'];

/// Blanks and comments, skipped. `/* … */` ends at the first `*/`; `--` at the first line break, and only there:
/// the broker's line comment needs one, and without it reads `--` as two minus signs, which we refuse.
fn skip(i: &mut Input<'_>) -> PResult<()> {
    loop {
        take_while(0.., BLANKS).void().parse_next(i)?;
        let left = i.eof_offset();
        if i.starts_with("/*") {
            let Some(end) = i[2..].find("*/") else {
                return fatal(left, ErrorKind::UnendedComment);
            };
            i.next_slice(2 + end + 2);
        } else if i.starts_with("--") {
            let Some(end) = i.find(['\n', '\r']) else {
                return fatal(left, ErrorKind::LineCommentWithoutLineBreak);
            };
            i.next_slice(end + 1);
        } else {
            return Ok(());
        }
    }
}

/// Counts a node of the tree, refusing a tree too big to serialise safely.
fn grow(i: &mut Input<'_>) -> PResult<()> {
    i.state.nodes += 1;
    if i.state.nodes > MAX_NODES {
        return fatal(i.eof_offset(), ErrorKind::TooLarge);
    }
    Ok(())
}

/// A word as the broker's `ID` token reads it: an ASCII letter, `_` or `$`, then those and digits (and `-` after
/// `hyphenated_props:`). A keyword is a whole word (`ANDROID` is a name).
fn word<'i>(i: &mut Input<'i>) -> PResult<&'i str> {
    let hyphenated = i.state.hyphenated;
    let start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == '$';
    let part = move |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$' || (hyphenated && c == '-');
    (one_of(start), take_while(0.., part)).take().parse_next(i)
}

/// The grammar's reserved words, matched in any case.
const KEYWORDS: [&str; 13] =
    ["NOT", "AND", "OR", "BETWEEN", "LIKE", "ESCAPE", "IN", "IS", "TRUE", "FALSE", "NULL", "XPATH", "XQUERY"];

fn is_keyword(word: &str) -> bool {
    KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word))
}

/// The keyword `kw` (any case) and what follows it is skipped; otherwise nothing is read.
fn keyword<'i>(kw: &'static str) -> impl Parser<Input<'i>, (), ErrMode<Trouble>> {
    move |i: &mut Input<'i>| {
        let start = i.checkpoint();
        match word.parse_next(i) {
            Ok(w) if w.eq_ignore_ascii_case(kw) => skip(i),
            _ => {
                i.reset(&start);
                expected(i, &[kw])
            }
        }
    }
}

/// Whether the keyword `kw` is next (read and skipped when it is).
fn eat_keyword(i: &mut Input<'_>, kw: &'static str) -> PResult<bool> {
    Ok(opt(keyword(kw)).parse_next(i)?.is_some())
}

/// The grammar's operators and punctuation, two-character ones first: the lexer takes the longest (`<>` is one
/// token, never `<` and `>`).
const SYMBOLS: [&str; 14] = ["<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ","];

/// The symbol token at the start of `s`, if any.
fn symbol_at(s: &str) -> Option<&'static str> {
    SYMBOLS.iter().copied().find(|sym| s.starts_with(sym))
}

/// Whether the symbol `sym` is the next token (read and skipped when it is).
fn eat(i: &mut Input<'_>, sym: &'static str) -> PResult<bool> {
    if symbol_at(i.input) != Some(sym) {
        return Ok(false);
    }
    i.next_slice(sym.len());
    skip(i)?;
    Ok(true)
}

/// The symbol `sym`, which must come next.
fn require(i: &mut Input<'_>, sym: &'static str, words: &'static str) -> PResult<()> {
    if eat(i, sym)? {
        Ok(())
    } else {
        Err(ErrMode::Cut(Trouble { left: i.eof_offset(), kind: None, expected: vec![words] }))
    }
}

/// A string literal: `'`, any characters with `''` for a quote, `'`. Its value, unescaped.
fn string_literal(i: &mut Input<'_>) -> PResult<String> {
    let left = i.eof_offset();
    if !i.starts_with('\'') {
        return expected(i, &["a string literal ('…')"]);
    }
    i.next_slice(1);
    let value: String = winnow::combinator::repeat(0.., alt(("''".value('\''), none_of('\'')))).parse_next(i)?;
    if !i.starts_with('\'') {
        return fatal(left, ErrorKind::UnendedString);
    }
    i.next_slice(1);
    skip(i)?;
    Ok(value)
}

/// The number token at the start of `s` as the broker's lexer takes it: the longest of its number tokens, the
/// first declared on a tie (decimal, hex, octal, floating). `09` is `0` and then `9`; `1e` is `1` and a name.
fn number_at(s: &str) -> Option<(usize, NumberKind)> {
    type Token = fn(&mut &str) -> winnow::Result<()>;
    let tokens: [(NumberKind, Token); 4] = [
        (NumberKind::Decimal, decimal),
        (NumberKind::Hex, hex),
        (NumberKind::Octal, octal),
        (NumberKind::Float, float),
    ];
    let mut longest: Option<(usize, NumberKind)> = None;
    for (kind, token) in tokens {
        let mut rest = s;
        if token(&mut rest).is_ok() {
            let len = s.len() - rest.len();
            if longest.is_none_or(|(l, _)| len > l) {
                longest = Some((len, kind));
            }
        }
    }
    longest
}

fn digits(i: &mut &str) -> winnow::Result<()> {
    take_while(1.., '0'..='9').void().parse_next(i)
}

/// `[1-9][0-9]*[lL]?`
fn decimal(i: &mut &str) -> winnow::Result<()> {
    (one_of('1'..='9'), take_while(0.., '0'..='9'), opt(one_of(['l', 'L']))).void().parse_next(i)
}

/// `0[xX][0-9a-fA-F]+`
fn hex(i: &mut &str) -> winnow::Result<()> {
    ('0', one_of(['x', 'X']), take_while(1.., |c: char| c.is_ascii_hexdigit())).void().parse_next(i)
}

/// `0[0-7]*`
fn octal(i: &mut &str) -> winnow::Result<()> {
    ('0', take_while(0.., '0'..='7')).void().parse_next(i)
}

/// `[eE][+-]?[0-9]+`
fn exponent(i: &mut &str) -> winnow::Result<()> {
    (one_of(['e', 'E']), opt(one_of(['+', '-'])), digits).void().parse_next(i)
}

/// `5.5`, `5.`, `5.5E10`, `5.E10`, `.5`, `.5E10`, `5E10` — no `F` or `D` suffix in the broker's grammar.
fn float(i: &mut &str) -> winnow::Result<()> {
    alt((
        (digits, '.', take_while(0.., '0'..='9'), opt(exponent)).void(),
        ('.', digits, opt(exponent)).void(),
        (digits, exponent).void(),
    ))
    .parse_next(i)
}

// ---------------------------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------------------------

/// `a OR b OR …`
fn or_expr(i: &mut Input<'_>) -> PResult<Expr> {
    logical(i, "OR", and_expr, Expr::or)
}

/// `a AND b AND …`
fn and_expr(i: &mut Input<'_>) -> PResult<Expr> {
    logical(i, "AND", equality, Expr::and)
}

/// `operand kw operand kw …`, left-associative (the grammar's loop).
fn logical(
    i: &mut Input<'_>,
    kw: &'static str,
    operand: fn(&mut Input<'_>) -> PResult<Expr>,
    node: fn(Expr, Expr) -> Expr,
) -> PResult<Expr> {
    let mut left = operand(i)?;
    while eat_keyword(i, kw)? {
        let right = cut_err(operand).parse_next(i)?;
        grow(i)?;
        left = node(left, right);
    }
    Ok(left)
}

/// `a = b`, `a <> b`, `a IS [NOT] NULL`, repeated.
fn equality(i: &mut Input<'_>) -> PResult<Expr> {
    let mut left = comparison(i)?;
    loop {
        left = if let Some(op) = next_op(i, &[("=", CompareOp::Eq), ("<>", CompareOp::Ne)])? {
            Expr::compare(left, op, cut_err(comparison).parse_next(i)?)
        } else if eat_keyword(i, "IS")? {
            let negated = eat_keyword(i, "NOT")?;
            cut_err(keyword("NULL")).parse_next(i)?;
            Expr::IsNull { operand: Box::new(left), negated }
        } else {
            return Ok(left);
        };
        grow(i)?;
    }
}

/// The operator of `ops` that comes next, read.
fn next_op<T: Copy>(i: &mut Input<'_>, ops: &[(&'static str, T)]) -> PResult<Option<T>> {
    for (sym, op) in ops {
        if eat(i, sym)? {
            return Ok(Some(*op));
        }
    }
    Ok(None)
}

/// `a > b`, `>=`, `<`, `<=`, `[NOT] LIKE`, `[NOT] BETWEEN`, `[NOT] IN`, repeated.
fn comparison(i: &mut Input<'_>) -> PResult<Expr> {
    let ops = [("<=", CompareOp::Le), (">=", CompareOp::Ge), ("<", CompareOp::Lt), (">", CompareOp::Gt)];
    let mut left = additive(i)?;
    loop {
        if let Some(op) = next_op(i, &ops)? {
            left = Expr::compare(left, op, cut_err(additive).parse_next(i)?);
        } else {
            // `NOT` here only before LIKE, BETWEEN or IN (the grammar looks two tokens ahead).
            let before_not = i.checkpoint();
            let negated = eat_keyword(i, "NOT")?;
            match special(i, left, negated)? {
                Ok(expr) => left = expr,
                Err(operand) => {
                    i.reset(&before_not);
                    return Ok(operand);
                }
            }
        }
        grow(i)?;
    }
}

/// `LIKE`, `BETWEEN` or `IN` after `operand` (`negated` when `NOT` came before), or the operand back when none
/// of them comes next.
fn special(i: &mut Input<'_>, operand: Expr, negated: bool) -> PResult<Result<Expr, Expr>> {
    let operand = Box::new(operand);
    if eat_keyword(i, "LIKE")? {
        let pattern = cut_err(string_literal).parse_next(i)?;
        let escape = if eat_keyword(i, "ESCAPE")? { Some(cut_err(string_literal).parse_next(i)?) } else { None };
        Ok(Ok(Expr::Like { operand, pattern, escape, negated }))
    } else if eat_keyword(i, "BETWEEN")? {
        let low = Box::new(cut_err(additive).parse_next(i)?);
        cut_err(keyword("AND")).parse_next(i)?;
        let high = Box::new(cut_err(additive).parse_next(i)?);
        Ok(Ok(Expr::Between { operand, low, high, negated }))
    } else if eat_keyword(i, "IN")? {
        require(i, "(", "'(' and a list of string literals")?;
        let mut values = vec![cut_err(string_literal).parse_next(i)?];
        while eat(i, ",")? {
            values.push(cut_err(string_literal).parse_next(i)?);
        }
        require(i, ")", "',' or ')'")?;
        Ok(Ok(Expr::In { operand, values, negated }))
    } else {
        Ok(Err(*operand))
    }
}

/// `a + b`, `a - b`, repeated.
fn additive(i: &mut Input<'_>) -> PResult<Expr> {
    arithmetic(i, &[("+", ArithOp::Add), ("-", ArithOp::Sub)], multiplicative)
}

/// `a * b`, `a / b`, `a % b`, repeated.
fn multiplicative(i: &mut Input<'_>) -> PResult<Expr> {
    arithmetic(i, &[("*", ArithOp::Mul), ("/", ArithOp::Div), ("%", ArithOp::Mod)], unary)
}

/// `operand op operand op …` for the operators `ops`, left-associative.
fn arithmetic(
    i: &mut Input<'_>,
    ops: &[(&'static str, ArithOp)],
    operand: fn(&mut Input<'_>) -> PResult<Expr>,
) -> PResult<Expr> {
    let mut left = operand(i)?;
    while let Some(op) = next_op(i, ops)? {
        let right = cut_err(operand).parse_next(i)?;
        grow(i)?;
        left = Expr::Arith(Box::new(left), op, Box::new(right));
    }
    Ok(left)
}

/// `+a`, `-a`, `NOT a`, or a primary; one level of nesting deeper.
fn unary(i: &mut Input<'_>) -> PResult<Expr> {
    i.state.nesting += 1;
    let result = if i.state.nesting > MAX_NESTING { fatal(i.eof_offset(), ErrorKind::TooLarge) } else { unary_at(i) };
    i.state.nesting -= 1;
    result
}

fn unary_at(i: &mut Input<'_>) -> PResult<Expr> {
    let expr = if eat(i, "+")? {
        Expr::Plus(Box::new(cut_err(unary).parse_next(i)?))
    } else if eat(i, "-")? {
        Expr::Negate(Box::new(cut_err(unary).parse_next(i)?))
    } else if eat_keyword(i, "NOT")? {
        Expr::Not(Box::new(cut_err(unary).parse_next(i)?))
    } else {
        primary(i)?
    };
    grow(i)?;
    Ok(expr)
}

/// A literal, a property name, or `( expression )`.
fn primary(i: &mut Input<'_>) -> PResult<Expr> {
    if i.starts_with('\'') {
        return Ok(Expr::Literal(Literal::String(string_literal(i)?)));
    }
    if let Some((len, kind)) = number_at(i.input) {
        let text = i.next_slice(len).to_string();
        skip(i)?;
        return Ok(Expr::Literal(Literal::Number(Number { kind, text })));
    }
    if eat(i, "(")? {
        let inner = cut_err(or_expr).parse_next(i)?;
        require(i, ")", "')'")?;
        return Ok(inner);
    }
    let left = i.eof_offset();
    let start = i.checkpoint();
    if let Ok(w) = word.parse_next(i) {
        let literal = match w.to_ascii_uppercase().as_str() {
            "TRUE" => Some(Literal::True),
            "FALSE" => Some(Literal::False),
            "NULL" => Some(Literal::Null),
            "XPATH" => return fatal(left, ErrorKind::BodySelector("XPATH")),
            "XQUERY" => return fatal(left, ErrorKind::BodySelector("XQUERY")),
            _ => None,
        };
        if let Some(literal) = literal {
            skip(i)?;
            return Ok(Expr::Literal(literal));
        }
        if !is_keyword(w) {
            skip(i)?;
            return Ok(Expr::Property(w.to_string()));
        }
        i.reset(&start);
    }
    expected(i, &["a property name", "a value", "'('"])
}

// ---------------------------------------------------------------------------------------------------------------
// Words
// ---------------------------------------------------------------------------------------------------------------

/// The error for `trouble` in `text`, in words: what was expected and what was found there.
fn explain(text: &str, trouble: Trouble) -> ParseError {
    let at = text.len() - trouble.left.min(text.len());
    let rest = &text[at..];
    let kind = match trouble.kind {
        Some(kind) => kind,
        None => match rest.chars().next() {
            Some(c) if !can_start_token(c) => ErrorKind::Character { character: c, found: character_words(c) },
            _ => ErrorKind::Expected { expected: trouble.expected, found: found_words(rest) },
        },
    };
    ParseError::at(text, at, kind)
}

/// Whether the broker's lexer has a token (or a blank, or a comment) that starts with `c`.
fn can_start_token(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_$'.<>=+-*/%(),".contains(c) || BLANKS.contains(&c)
}

/// `'é' (U+00E9)`
fn character_words(c: char) -> String {
    if c.is_ascii_graphic() {
        format!("'{c}'")
    } else {
        format!("'{}' (U+{:04X})", c.escape_debug(), c as u32)
    }
}

/// The token at the start of `rest`, in words: `'OR'`, or "the end of the filter".
fn found_words(rest: &str) -> String {
    if rest.is_empty() {
        return "the end of the filter".into();
    }
    let probe = Input { input: rest, state: State { hyphenated: false, nesting: 0, nodes: 0 } };
    let len = symbol_at(rest)
        .map(str::len)
        .or_else(|| number_at(rest).map(|(len, _)| len))
        .or_else(|| word.parse_next(&mut probe.clone()).ok().map(str::len))
        .unwrap_or_else(|| rest.chars().next().map_or(0, char::len_utf8));
    let token: String = rest[..len].chars().take(40).collect();
    format!("'{token}'")
}
