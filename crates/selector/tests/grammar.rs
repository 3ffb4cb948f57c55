//! The parser against facts of the broker's grammar (artemis-selector 2.40), each checked with the broker's own
//! parser (`SelectorParser.parse` of artemis-selector-2.40.0.jar): what it reads, we read the same tree; what it
//! refuses, we refuse; what we refuse although it reads it, with the reason.

use artemis_selector::{ArithOp, CompareOp, ErrorKind, Expr, Literal, NumberKind, Selector};

fn parse(s: &str) -> Selector {
    Selector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn written(s: &str) -> String {
    parse(s).to_string()
}

fn refused(s: &str) -> artemis_selector::ParseError {
    match Selector::parse(s) {
        Ok(t) => panic!("{s:?} was read as {t}"),
        Err(e) => e,
    }
}

#[test]
fn precedence_is_the_brokers() {
    assert_eq!(written("x = 1 OR y = 2 AND z = 3"), "((x = 1) OR ((y = 2) AND (z = 3)))");
    // NOT binds as tightly as unary minus (the broker: `((NOT x) = 1)`).
    assert_eq!(written("NOT x = 1"), "((NOT x) = 1)");
    assert_eq!(written("-a * -b + +c % 3 / 2 - - 1 > 0"), "(((((-a) * (-b)) + (((+c) % 3) / 2)) - (-1)) > 0)");
    assert_eq!(written("a BETWEEN 1 AND 2 AND b"), "((a BETWEEN 1 AND 2) AND b)");
    assert_eq!(written("x IS NULL IS NULL"), "((x IS NULL) IS NULL)");
    assert_eq!(written("a = b = c"), "((a = b) = c)");
    assert_eq!(written("((((x))))"), "x");
}

#[test]
fn keywords_are_whole_words_in_any_case() {
    assert_eq!(written("x is not null"), "(x IS NOT NULL)");
    assert_eq!(written("x Between 1 and 2"), "(x BETWEEN 1 AND 2)");
    assert_eq!(written("androids = 1 AND ORx = 2"), "((androids = 1) AND (ORx = 2))");
    // A number ends where a keyword starts: `1AND` is `1 AND`.
    assert_eq!(written("x=1AND y=2"), "((x = 1) AND (y = 2))");
    assert_eq!(written("x = 5LOR y"), "((x = 5L) OR y)");
    assert!(matches!(refused("ESCAPE = 1").kind, ErrorKind::Expected { .. }));
}

#[test]
fn literals_keep_their_text_and_strings_are_re_escaped() {
    assert_eq!(written("x = 'it''s'"), "(x = 'it''s')");
    assert_eq!(parse("x = 'it''s'").expr, Expr::compare(Expr::property("x"), CompareOp::Eq, Expr::string("it's")));
    assert_eq!(written("x = 'é\n('"), "(x = 'é\n(')");
    for (text, kind) in [
        ("017", NumberKind::Octal),
        ("0", NumberKind::Octal),
        ("0X1f", NumberKind::Hex),
        ("12L", NumberKind::Decimal),
        ("00.5", NumberKind::Float),
        ("5.", NumberKind::Float),
        (".5e3", NumberKind::Float),
        ("1E-5", NumberKind::Float),
        ("99999999999999999999999", NumberKind::Decimal),
    ] {
        match parse(&format!("x = {text}")).expr {
            Expr::Compare(_, _, b) => {
                assert_eq!(*b, Expr::Literal(Literal::Number(artemis_selector::Number { kind, text: text.into() })))
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(written("x = -9223372036854775808"), "(x = (-9223372036854775808))");
    assert_eq!(written("TRUE"), "TRUE");
    assert_eq!(written("$a_1 = NULL"), "($a_1 = NULL)");
}

#[test]
fn numbers_end_where_the_brokers_lexer_ends_them() {
    // `08` is `0` then `8`; `1E` is `1` then a name; `1.5F` is `1.5` then a name: all refused by the broker too.
    for (s, column) in [("x = 08", 6), ("x = 1E", 6), ("x = 1.5F", 8), ("x = 0x1FL", 9), ("x = 1abc", 6)] {
        let e = refused(s);
        assert_eq!(e.column, column, "{s}: {e}");
        assert!(matches!(e.kind, ErrorKind::Expected { .. }), "{s}: {e}");
    }
}

#[test]
fn comments_are_skipped_as_the_broker_skips_them() {
    assert_eq!(written("/* */ x = 1 /* ** / */"), "(x = 1)");
    assert_eq!(written("x = 1 OR -- c ( \n y = 2"), "((x = 1) OR (y = 2))");
    assert_eq!(written("x\r\n= 1 --c\r\n"), "(x = 1)");
    assert_eq!(written("x = 4 /*2*/ / 2"), "(x = (4 / 2))");
    assert_eq!(written("x = 1 ---\n"), "(x = 1)");
    assert_eq!(refused("x = 1 /* unended").kind, ErrorKind::UnendedComment);
    // The broker reads `x = 1 -- note` as `x = (1 - (-note))`: refused, with the reason.
    let e = refused("x = 1 -- note");
    assert_eq!((e.kind.clone(), e.column), (ErrorKind::LineCommentWithoutLineBreak, 7));
    assert_eq!(written("x = 1 - -1"), "(x = (1 - (-1)))");
}

#[test]
fn in_like_between_and_their_negations() {
    let s = "a NOT LIKE 'x%' ESCAPE '!' AND b NOT BETWEEN 1 AND 2 OR c NOT IN ('a', 'b''c') OR d IN ('z')";
    assert_eq!(
        written(s),
        "((((a NOT LIKE 'x%' ESCAPE '!') AND (b NOT BETWEEN 1 AND 2)) OR (c NOT IN ('a', 'b''c'))) OR (d IN ('z')))"
    );
    assert!(matches!(refused("x IN ()").kind, ErrorKind::Expected { .. }));
    assert!(matches!(refused("x IN (1)").kind, ErrorKind::Expected { .. }));
    assert!(matches!(refused("a IN ('x',)").kind, ErrorKind::Expected { .. }));
}

#[test]
fn prefixes_switch_the_lexer_as_the_brokers_do() {
    assert_eq!(written("hyphenated_props:a-b = 1"), "hyphenated_props:(a-b = 1)");
    assert_eq!(written("a-b = 1"), "((a - b) = 1)");
    assert_eq!(written("no_hyphenated_props:hyphenated_props:a-b = 1"), "hyphenated_props:(a-b = 1)");
    assert_eq!(written("hyphenated_props:no_hyphenated_props:a-b = 1"), "((a - b) = 1)");
    assert_eq!(written("convert_string_expressions:x = '1'"), "convert_string_expressions:(x = '1')");
    // Only at the very start.
    assert!(matches!(refused(" hyphenated_props:a-b = 1").kind, ErrorKind::Character { character: ':', .. }));
    let p = parse("hyphenated_props:x = a -1");
    assert_eq!(
        p.expr,
        Expr::compare(
            Expr::property("x"),
            CompareOp::Eq,
            Expr::Arith(Box::new(Expr::property("a")), ArithOp::Sub, Box::new(Expr::integer(1)))
        )
    );
}

#[test]
fn what_cannot_be_read_is_refused_at_its_position_in_words() {
    let e = refused("x = 1) OR (1=1");
    assert_eq!((e.offset, e.line, e.column), (5, 1, 6));
    assert_eq!(
        e.to_string(),
        "the filter cannot be read at position 6: expected an operator, AND, OR or the end of the filter, found ')'"
    );
    let e = refused("x = 1 AND\n  (y = 2");
    assert_eq!((e.line, e.column), (2, 9));
    assert_eq!(
        e.to_string(),
        "the filter cannot be read at line 2, column 9: expected ')', found the end of the filter"
    );
    assert_eq!(refused("x = 'a").kind, ErrorKind::UnendedString);
    assert_eq!(refused("x = 'a").column, 5);
    assert!(matches!(refused("é = 1").kind, ErrorKind::Character { character: 'é', .. }));
    assert!(refused("x != 1").to_string().contains("not equal is written <>"));
    assert!(matches!(refused("x\u{a0}= 1").kind, ErrorKind::Character { .. }));
    assert_eq!(refused("").kind, ErrorKind::Empty);
    assert_eq!(refused(" /* */ ").kind, ErrorKind::Empty);
    assert_eq!(refused("XPATH '//a'").kind, ErrorKind::BodySelector("XPATH"));
    assert_eq!(refused("x = 1 OR XQUERY '//a'").kind, ErrorKind::BodySelector("XQUERY"));
    assert_eq!(refused(&"(".repeat(33)).kind, ErrorKind::TooLarge);
    assert_eq!(written(&format!("{}x{}", "(".repeat(31), ")".repeat(31))), "x");
    assert_eq!(refused(&"x = 1 AND ".repeat(600)).kind, ErrorKind::TooLarge);
    assert!(Selector::parse(&("x = 1 AND ".repeat(400) + "x = 1")).is_ok());
}
