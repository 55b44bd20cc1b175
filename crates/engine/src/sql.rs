//! Statements with bound values: every name that comes from a configuration or from data enters
//! a statement as the value of a placeholder, never as quoted SQL text, so no name can change
//! what a statement does. Column names and numbers that the code writes itself stay in the
//! text.

use std::cell::RefCell;

/// The values of one statement's placeholders, collected while its text is built.
#[derive(Debug, Default)]
pub struct Binds(RefCell<Vec<String>>);

impl Binds {
    /// The SQL that stands for the text `value`: its placeholder (`$1`, `$2`, ...; a value
    /// bound twice has one), cast to plain UTF-8. The cast gives the placeholder its type when
    /// the statement is planned, where nothing else may (a `SELECT $1 AS rule` in a `UNION ALL`,
    /// an argument of a function); once the value is bound, the planner folds it into a
    /// literal, so the plan is the one of the literal: an `IN` list or a `CASE x WHEN` of
    /// placeholders is the lookup table of one of literals. (`CAST(.. AS VARCHAR)` would be
    /// `Utf8View`, not the `Utf8` of a literal.)
    pub fn bind(&self, value: &str) -> String {
        let mut values = self.0.borrow_mut();
        let i = values.iter().position(|v| v == value).unwrap_or_else(|| {
            values.push(value.to_string());
            values.len() - 1
        });
        format!("arrow_cast(${}, 'Utf8')", i + 1)
    }

    /// `col IN (...)` over the bound `items`, or FALSE for an empty set.
    pub fn in_list(&self, col: &str, items: &[String]) -> String {
        if items.is_empty() {
            "FALSE".to_string()
        } else {
            let v: Vec<String> = items.iter().map(|s| self.bind(s)).collect();
            format!("{col} IN ({})", v.join(", "))
        }
    }

    /// The statement of `text`, whose placeholders are the ones bound here.
    pub fn sql(self, text: String) -> Sql {
        Sql {
            text,
            params: self.0.into_inner(),
        }
    }
}

/// A statement: its text and the values of its placeholders (`params[0]` is `$1`); run it with
/// [`crate::Engine::bound`].
#[derive(Debug, Clone)]
pub struct Sql {
    /// The SQL text, with placeholders `$1`, `$2`, ...
    pub text: String,
    /// The placeholders' values, all text.
    pub params: Vec<String>,
}

impl From<String> for Sql {
    fn from(text: String) -> Sql {
        Sql {
            text,
            params: Vec::new(),
        }
    }
}

impl From<&str> for Sql {
    fn from(text: &str) -> Sql {
        Sql::from(text.to_string())
    }
}
