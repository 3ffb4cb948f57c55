//! The syntax tree of a selector, and its serialiser: every compound node in parentheses, string literals
//! re-escaped, numbers and property names as they were written.

use std::fmt::{self, Display, Formatter};

/// A whole selector: the broker's prefixes and the expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// What the prefixes (`hyphenated_props:` …) switched on.
    pub options: Options,
    /// The expression.
    pub expr: Expr,
}

/// The broker's selector prefixes (`SelectorParser`), as the state they leave: each `no_…` prefix switches its
/// option off again, so only the final state is kept and written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// `hyphenated_props:`: a property name may hold `-` after its first character (`a-b` is one name).
    pub hyphenated_props: bool,
    /// `convert_string_expressions:`: the broker compares a string with a number by converting it.
    pub convert_string_expressions: bool,
}

impl Options {
    /// The prefixes that switch these options on, as the broker spells them.
    pub(crate) const HYPHENATED: &'static str = "hyphenated_props:";
    pub(crate) const NO_HYPHENATED: &'static str = "no_hyphenated_props:";
    pub(crate) const CONVERT: &'static str = "convert_string_expressions:";
    pub(crate) const NO_CONVERT: &'static str = "no_convert_string_expressions:";
}

/// An expression of the grammar. Precedence is the tree's shape; the serialiser parenthesises every compound node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `a OR b`.
    Or(Box<Expr>, Box<Expr>),
    /// `a AND b`.
    And(Box<Expr>, Box<Expr>),
    /// `a = b`, `a <> b`, `a < b` …
    Compare(Box<Expr>, CompareOp, Box<Expr>),
    /// `a + b`, `a * b` …
    Arith(Box<Expr>, ArithOp, Box<Expr>),
    /// `a IS NULL`, `a IS NOT NULL`.
    IsNull {
        /// What is tested.
        operand: Box<Expr>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `a LIKE 'p%' ESCAPE '\'`, `a NOT LIKE …`.
    Like {
        /// What is matched.
        operand: Box<Expr>,
        /// The pattern (unescaped: `''` read as one quote).
        pattern: String,
        /// The escape character's literal, when given (the broker checks it is one character).
        escape: Option<String>,
        /// `NOT LIKE`.
        negated: bool,
    },
    /// `a BETWEEN low AND high`, `a NOT BETWEEN …`.
    Between {
        /// What is compared.
        operand: Box<Expr>,
        /// The lower bound.
        low: Box<Expr>,
        /// The upper bound.
        high: Box<Expr>,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `a IN ('x', 'y')`, `a NOT IN …`: string literals only, at least one.
    In {
        /// What is looked up.
        operand: Box<Expr>,
        /// The strings (unescaped).
        values: Vec<String>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `NOT a` (as tight as unary minus: `NOT a = 1` is `(NOT a) = 1`).
    Not(Box<Expr>),
    /// `-a`.
    Negate(Box<Expr>),
    /// `+a`.
    Plus(Box<Expr>),
    /// A property or header name, as written (never a keyword).
    Property(String),
    /// A literal.
    Literal(Literal),
}

/// The comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `=`
    Eq,
    /// `<>`
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

/// The arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
}

/// A literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    /// `'it''s'`, held unescaped (`it's`).
    String(String),
    /// A number, as written.
    Number(Number),
    /// `TRUE`
    True,
    /// `FALSE`
    False,
    /// `NULL`
    Null,
}

/// A number literal, its text kept verbatim: re-writing it (`0x1F` as `31`, `1.50` as `1.5`) could change how the
/// broker types it (int, long, BigDecimal, double).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number {
    /// Which of the grammar's number tokens.
    pub kind: NumberKind,
    /// The token's text, e.g. `0x1F`, `017`, `12L`, `1.5e3`.
    pub text: String,
}

/// The grammar's number tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberKind {
    /// `[1-9][0-9]*`, optionally `L`.
    Decimal,
    /// `0x` and hex digits.
    Hex,
    /// `0` and octal digits (`0` itself).
    Octal,
    /// Digits with a `.` or an exponent.
    Float,
}

impl Number {
    /// The literal of a non-negative integer.
    pub fn integer(n: u64) -> Number {
        let kind = if n == 0 { NumberKind::Octal } else { NumberKind::Decimal };
        Number { kind, text: n.to_string() }
    }
}

impl Expr {
    /// `a AND b`.
    pub fn and(a: Expr, b: Expr) -> Expr {
        Expr::And(Box::new(a), Box::new(b))
    }

    /// `a OR b`.
    pub fn or(a: Expr, b: Expr) -> Expr {
        Expr::Or(Box::new(a), Box::new(b))
    }

    /// `a op b`.
    pub fn compare(a: Expr, op: CompareOp, b: Expr) -> Expr {
        Expr::Compare(Box::new(a), op, Box::new(b))
    }

    /// A property or header by name. The name must be one the grammar reads as a name (not a keyword).
    pub fn property(name: &str) -> Expr {
        Expr::Property(name.to_string())
    }

    /// A string literal (escaped when written).
    pub fn string(value: &str) -> Expr {
        Expr::Literal(Literal::String(value.to_string()))
    }

    /// An integer literal; a negative one is a negated literal, as the grammar has no signed literals.
    pub fn integer(n: i64) -> Expr {
        let literal = Expr::Literal(Literal::Number(Number::integer(n.unsigned_abs())));
        if n < 0 {
            Expr::Negate(Box::new(literal))
        } else {
            literal
        }
    }

    /// `a IS NULL`.
    pub fn is_null(a: Expr) -> Expr {
        Expr::IsNull { operand: Box::new(a), negated: false }
    }

    /// `a IN ('x', …)`.
    pub fn is_in(a: Expr, values: impl IntoIterator<Item = String>) -> Expr {
        Expr::In { operand: Box::new(a), values: values.into_iter().collect(), negated: false }
    }

    /// `a NOT IN ('x', …)`.
    pub fn not_in(a: Expr, values: impl IntoIterator<Item = String>) -> Expr {
        Expr::In { operand: Box::new(a), values: values.into_iter().collect(), negated: true }
    }
}

impl Selector {
    /// A selector of `expr` with no prefix.
    pub fn new(expr: Expr) -> Selector {
        Selector { options: Options::default(), expr }
    }

    /// `self AND term`, with this selector's prefixes: `self` stays one operand of the `AND` whatever its text
    /// was, so whatever matches the result matches `term`.
    pub fn and(self, term: Expr) -> Selector {
        Selector { options: self.options, expr: Expr::and(self.expr, term) }
    }
}

impl Display for Selector {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.options.hyphenated_props {
            f.write_str(Options::HYPHENATED)?;
        }
        if self.options.convert_string_expressions {
            f.write_str(Options::CONVERT)?;
        }
        self.expr.fmt(f)
    }
}

/// `'it''s'`: a string literal of the grammar.
pub(crate) fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

impl Display for Expr {
    /// Fully parenthesised, one space around every operator: so no `-` is ever followed by `-` (a comment) and no
    /// `/` by `*`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let not = |negated: bool| if negated { "NOT " } else { "" };
        match self {
            Expr::Or(a, b) => write!(f, "({a} OR {b})"),
            Expr::And(a, b) => write!(f, "({a} AND {b})"),
            Expr::Compare(a, op, b) => write!(f, "({a} {op} {b})"),
            Expr::Arith(a, op, b) => write!(f, "({a} {op} {b})"),
            Expr::IsNull { operand, negated } => write!(f, "({operand} IS {}NULL)", not(*negated)),
            Expr::Like { operand, pattern, escape, negated } => {
                write!(f, "({operand} {}LIKE {}", not(*negated), quoted(pattern))?;
                if let Some(escape) = escape {
                    write!(f, " ESCAPE {}", quoted(escape))?;
                }
                f.write_str(")")
            }
            Expr::Between { operand, low, high, negated } => {
                write!(f, "({operand} {}BETWEEN {low} AND {high})", not(*negated))
            }
            Expr::In { operand, values, negated } => {
                let values: Vec<String> = values.iter().map(|v| quoted(v)).collect();
                write!(f, "({operand} {}IN ({}))", not(*negated), values.join(", "))
            }
            Expr::Not(a) => write!(f, "(NOT {a})"),
            Expr::Negate(a) => write!(f, "(-{a})"),
            Expr::Plus(a) => write!(f, "(+{a})"),
            Expr::Property(name) => f.write_str(name),
            Expr::Literal(literal) => literal.fmt(f),
        }
    }
}

impl Display for Literal {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Literal::String(s) => f.write_str(&quoted(s)),
            Literal::Number(n) => f.write_str(&n.text),
            Literal::True => f.write_str("TRUE"),
            Literal::False => f.write_str("FALSE"),
            Literal::Null => f.write_str("NULL"),
        }
    }
}

impl Display for CompareOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompareOp::Eq => "=",
            CompareOp::Ne => "<>",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
        })
    }
}

impl Display for ArithOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Mod => "%",
        })
    }
}

impl Selector {
    /// Reads `text` as the broker reads a selector, or says where and why it cannot.
    pub fn parse(text: &str) -> Result<Selector, crate::ParseError> {
        crate::parse::parse(text)
    }
}
