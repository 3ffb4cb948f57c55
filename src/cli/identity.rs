//! Who a command acts for: one operator, named one way for every command (docs/cli.md, "Who acts"). Every action is
//! checked against that operator's grants and audited under their name, and every listing shows only what they
//! may see, so the name is never made up: with none given, the command is refused as a malformed command line.

use super::CliError;

/// The environment variable that names the operator when `--as` does not.
pub const OPERATOR_VARIABLE: &str = "ARTEMIS_TRANSFER_OPERATOR";

/// `admin`'s and `settings`' old variable, read after [`OPERATOR_VARIABLE`] for one release.
pub const DEPRECATED_VARIABLE: &str = "ARTEMIS_TRANSFER_ACTOR";

/// The operator as the command line named them: `--as`, and the deprecated `--actor` of `admin` and `settings`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    /// `--as` (or its hidden alias `--operator`).
    pub as_flag: Option<String>,
    /// `--actor`, deprecated: read as `--as` for one release.
    pub actor_flag: Option<String>,
}

/// Who acts, and the deprecation lines of what named them (for standard error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The operator.
    pub operator: String,
    /// One line per deprecated way used.
    pub deprecated: Vec<String>,
}

impl Named {
    /// The operator: `--as`, else `--actor`, else `ARTEMIS_TRANSFER_OPERATOR`, else `ARTEMIS_TRANSFER_ACTOR`,
    /// else `$USER`, as `variable` reads the environment; a blank name is no name.
    pub fn resolve(&self, variable: impl Fn(&str) -> Option<String>) -> Result<Resolved, CliError> {
        let given = |name: Option<String>| name.filter(|n| !n.trim().is_empty());
        let mut deprecated = Vec::new();
        let mut old = |what: &str| {
            deprecated.push(format!(
                "artemis-transfer: {what} is deprecated and goes in the next release: name the operator with --as \
                 (or {OPERATOR_VARIABLE})"
            ))
        };
        let operator = if let Some(named) = given(self.as_flag.clone()) {
            named
        } else if let Some(named) = given(self.actor_flag.clone()) {
            old("--actor");
            named
        } else if let Some(named) = given(variable(OPERATOR_VARIABLE)) {
            named
        } else if let Some(named) = given(variable(DEPRECATED_VARIABLE)) {
            old(DEPRECATED_VARIABLE);
            named
        } else {
            given(variable("USER")).ok_or_else(|| {
                CliError::NoOperator(format!(
                    "name the operator you act for with --as <operator> or {OPERATOR_VARIABLE} ($USER is not set)"
                ))
            })?
        };
        Ok(Resolved { operator, deprecated })
    }

    /// The operator from this process's environment, each deprecation said once on standard error.
    pub fn operator(&self) -> Result<String, CliError> {
        let resolved = self.resolve(|name| std::env::var(name).ok())?;
        for line in &resolved.deprecated {
            eprintln!("{line}");
        }
        Ok(resolved.operator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    fn named(as_flag: Option<&str>, actor_flag: Option<&str>) -> Named {
        Named { as_flag: as_flag.map(Into::into), actor_flag: actor_flag.map(Into::into) }
    }

    #[test]
    fn the_flag_beats_the_variables_and_the_variables_beat_user() {
        let all = [(OPERATOR_VARIABLE, "olga"), (DEPRECATED_VARIABLE, "adam"), ("USER", "ulla")];
        let who = |n: Named, vars| n.resolve(env(vars)).unwrap().operator;
        assert_eq!(who(named(Some("bob"), Some("carl")), &all), "bob");
        assert_eq!(who(named(None, Some("carl")), &all), "carl", "--actor is read as --as");
        assert_eq!(who(named(None, None), &all), "olga");
        assert_eq!(who(named(None, None), &all[1..]), "adam");
        assert_eq!(who(named(None, None), &all[2..]), "ulla", "$USER, never $USER@host");
        assert_eq!(who(named(Some(" "), None), &all[2..]), "ulla", "a blank name is no name");
    }

    #[test]
    fn the_deprecated_ways_say_so_and_the_others_do_not() {
        let resolved = named(None, Some("carl")).resolve(env(&[])).unwrap();
        assert_eq!(resolved.deprecated.len(), 1);
        assert!(resolved.deprecated[0].contains("--actor is deprecated") && resolved.deprecated[0].contains("--as"));
        let resolved = named(None, None).resolve(env(&[(DEPRECATED_VARIABLE, "adam")])).unwrap();
        assert!(resolved.deprecated[0].contains("ARTEMIS_TRANSFER_ACTOR is deprecated"), "{resolved:?}");
        let current = named(Some("bob"), None).resolve(env(&[(DEPRECATED_VARIABLE, "adam")])).unwrap();
        assert!(current.deprecated.is_empty(), "{current:?}");
    }

    #[test]
    fn nobody_named_is_a_usage_error_that_says_how_to_name_one() {
        let e = named(None, None).resolve(env(&[("USER", "")])).unwrap_err();
        assert_eq!(e.exit(), super::super::Exit::Usage);
        assert!(e.to_string().contains("--as <operator>"), "{e}");
    }
}
