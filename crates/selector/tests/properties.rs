//! Properties of the parser and the serialiser, over generated trees and over strings made of the tokens that
//! trip filters up (quotes, parentheses, comments, `--`, line breaks, keywords, unicode).

use artemis_selector::{ArithOp, CompareOp, Expr, Literal, Number, NumberKind, Options, Selector};
use proptest::prelude::*;

const KEYWORDS: [&str; 13] =
    ["NOT", "AND", "OR", "BETWEEN", "LIKE", "ESCAPE", "IN", "IS", "TRUE", "FALSE", "NULL", "XPATH", "XQUERY"];

fn name(hyphenated: bool) -> impl Strategy<Value = String> {
    let pattern = if hyphenated { "[a-zA-Z_$][a-zA-Z0-9_$-]{0,6}" } else { "[a-zA-Z_$][a-zA-Z0-9_$]{0,6}" };
    pattern.prop_filter("not a keyword", |n| !KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(n)))
}

fn number() -> impl Strategy<Value = Number> {
    prop_oneof![
        "[1-9][0-9]{0,19}[lL]?".prop_map(|text| Number { kind: NumberKind::Decimal, text }),
        "0[xX][0-9a-fA-F]{1,8}".prop_map(|text| Number { kind: NumberKind::Hex, text }),
        "0[0-7]{0,6}".prop_map(|text| Number { kind: NumberKind::Octal, text }),
        "([0-9]{1,4}\\.[0-9]{0,4}|\\.[0-9]{1,4}|[0-9]{1,4}[eE][+-]?[0-9]{1,3})"
            .prop_map(|text| Number { kind: NumberKind::Float, text }),
    ]
}

fn leaf(hyphenated: bool) -> impl Strategy<Value = Expr> {
    prop_oneof![
        name(hyphenated).prop_map(Expr::Property),
        any::<String>().prop_map(|s| Expr::Literal(Literal::String(s))),
        number().prop_map(|n| Expr::Literal(Literal::Number(n))),
        prop_oneof![Just(Literal::True), Just(Literal::False), Just(Literal::Null)].prop_map(Expr::Literal),
    ]
}

fn compare_op() -> impl Strategy<Value = CompareOp> {
    prop_oneof![
        Just(CompareOp::Eq),
        Just(CompareOp::Ne),
        Just(CompareOp::Gt),
        Just(CompareOp::Ge),
        Just(CompareOp::Lt),
        Just(CompareOp::Le)
    ]
}

fn arith_op() -> impl Strategy<Value = ArithOp> {
    prop_oneof![Just(ArithOp::Add), Just(ArithOp::Sub), Just(ArithOp::Mul), Just(ArithOp::Div), Just(ArithOp::Mod)]
}

fn expr(hyphenated: bool) -> impl Strategy<Value = Expr> {
    leaf(hyphenated).prop_recursive(6, 48, 3, |inner| {
        let b = |e: Expr| Box::new(e);
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, c)| Expr::or(a, c)),
            (inner.clone(), inner.clone()).prop_map(|(a, c)| Expr::and(a, c)),
            (inner.clone(), compare_op(), inner.clone()).prop_map(|(a, op, c)| Expr::compare(a, op, c)),
            (inner.clone(), arith_op(), inner.clone()).prop_map(move |(a, op, c)| Expr::Arith(b(a), op, b(c))),
            (inner.clone(), any::<bool>()).prop_map(move |(a, negated)| Expr::IsNull { operand: b(a), negated }),
            (inner.clone(), any::<String>(), proptest::option::of(any::<String>()), any::<bool>())
                .prop_map(move |(a, pattern, escape, negated)| Expr::Like { operand: b(a), pattern, escape, negated }),
            (inner.clone(), inner.clone(), inner.clone(), any::<bool>()).prop_map(move |(a, low, high, negated)| {
                Expr::Between { operand: b(a), low: b(low), high: b(high), negated }
            }),
            (inner.clone(), proptest::collection::vec(any::<String>(), 1..4), any::<bool>())
                .prop_map(move |(a, values, negated)| Expr::In { operand: b(a), values, negated }),
            inner.clone().prop_map(move |a| Expr::Not(b(a))),
            inner.clone().prop_map(move |a| Expr::Negate(b(a))),
            inner.prop_map(move |a| Expr::Plus(b(a))),
        ]
    })
}

fn selector() -> impl Strategy<Value = Selector> {
    (any::<bool>(), any::<bool>()).prop_flat_map(|(hyphenated_props, convert_string_expressions)| {
        expr(hyphenated_props)
            .prop_map(move |expr| Selector { options: Options { hyphenated_props, convert_string_expressions }, expr })
    })
}

/// The tokens that trip filters up, to be strung together.
const TRICKY: [&str; 58] = [
    "(",
    ")",
    "'",
    "''",
    "'a'",
    "')'",
    "'('",
    "'--'",
    "'/*'",
    "/*",
    "*/",
    "/* ( */",
    "/* ) */",
    "--",
    "-- (\n",
    "-- )\n",
    "\n",
    "\r",
    "\r\n",
    " ",
    "\t",
    "AND",
    "and",
    "OR",
    "NOT",
    "IN",
    "LIKE",
    "ESCAPE",
    "'!'",
    "BETWEEN",
    "IS",
    "NULL",
    "TRUE",
    "x",
    "AMQTimestamp",
    "a-b",
    "1",
    "0x1F",
    "017",
    "08",
    "1.5e3",
    ".5",
    "1L",
    "=",
    "<>",
    "<",
    ">=",
    "-",
    "+",
    "*",
    "/",
    "%",
    ",",
    "é",
    "ſ",
    "\u{a0}",
    "hyphenated_props:",
    "XPATH",
];

fn tricky_string() -> impl Strategy<Value = String> {
    proptest::collection::vec((0..TRICKY.len(), any::<bool>()), 0..14).prop_map(|tokens| {
        tokens
            .into_iter()
            .map(|(t, spaced)| if spaced { format!("{} ", TRICKY[t]) } else { TRICKY[t].into() })
            .collect()
    })
}

/// Filters a user might write, each then cut into pieces and strung with tricky tokens.
fn near_valid_string() -> impl Strategy<Value = String> {
    (selector(), proptest::collection::vec((any::<prop::sample::Index>(), 0..TRICKY.len()), 0..3)).prop_map(
        |(s, inserts)| {
            let mut text: Vec<char> = s.to_string().chars().collect();
            for (at, t) in inserts {
                let at = at.index(text.len() + 1);
                text.splice(at..at, TRICKY[t].chars());
            }
            text.into_iter().collect()
        },
    )
}

/// The freezing terms' shape, as the plan adds them.
fn frozen_terms() -> Expr {
    Expr::and(
        Expr::compare(Expr::property("AMQTimestamp"), CompareOp::Le, Expr::integer(1_700_000_000_000)),
        Expr::or(
            Expr::is_null(Expr::property("_AMQ_SCHED_DELIVERY")),
            Expr::compare(Expr::property("_AMQ_SCHED_DELIVERY"), CompareOp::Le, Expr::integer(1_700_000_000_000)),
        ),
    )
}

/// Whatever `input` is: read, and then its effective filter reads back as `And(its tree, frozen terms)` at the
/// top (so it implies the freezing terms) and its serialisation as itself; or refused at a position inside it.
fn holds_for(input: &str) -> Result<(), TestCaseError> {
    match Selector::parse(input) {
        Ok(tree) => {
            let effective = tree.clone().and(frozen_terms());
            let back = Selector::parse(&effective.to_string());
            prop_assert_eq!(back, Ok(effective.clone()), "{:?} → {}", input, effective);
            prop_assert_eq!(Selector::parse(&tree.to_string()), Ok(tree));
        }
        Err(e) => {
            prop_assert!(e.offset <= input.chars().count(), "{:?}: {} at offset {}", input, e, e.offset);
            prop_assert!(e.line >= 1 && e.column >= 1);
            prop_assert!(e.to_string().starts_with("the filter cannot be read at "));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_tree_serialised_reads_back_as_itself(s in selector()) {
        prop_assert_eq!(Selector::parse(&s.to_string()), Ok(s.clone()), "{}", s);
    }

    #[test]
    fn a_tree_under_the_freezing_terms_reads_back_with_them_at_the_top(s in selector()) {
        let effective = s.clone().and(frozen_terms());
        prop_assert_eq!(Selector::parse(&effective.to_string()), Ok(effective));
    }

    #[test]
    fn tricky_strings_are_read_or_refused_inside_themselves(input in tricky_string()) {
        holds_for(&input)?;
    }

    #[test]
    fn near_valid_strings_are_read_or_refused_inside_themselves(input in near_valid_string()) {
        holds_for(&input)?;
    }

    #[test]
    fn arbitrary_strings_never_panic_the_parser(input in any::<String>()) {
        holds_for(&input)?;
    }
}
