//! Delimiters: file-safe names, English names, and the quoted form shown in the naming line.

use crate::SweepError;
use std::collections::BTreeSet;

/// Single characters with a fixed short name (`slug`, used in task and file names) and an
/// English name (for `{delimiter_name}` in the naming template).
const NAMED: &[(char, &str, &str)] = &[
    (' ', "space", "space"),
    ('!', "exclam", "exclamation mark"),
    ('"', "dquote", "double quotation mark"),
    ('#', "hash", "hash sign"),
    ('$', "dollar", "dollar sign"),
    ('%', "percent", "percent sign"),
    ('&', "amp", "ampersand"),
    ('\'', "squote", "single quotation mark"),
    ('(', "lparen", "opening parenthesis"),
    (')', "rparen", "closing parenthesis"),
    ('*', "star", "asterisk"),
    ('+', "plus", "plus sign"),
    (',', "comma", "comma"),
    ('-', "minus", "hyphen"),
    ('.', "dot", "period"),
    ('/', "slash", "slash"),
    (':', "colon", "colon"),
    (';', "semicolon", "semicolon"),
    ('<', "lt", "less-than sign"),
    ('=', "eq", "equals sign"),
    ('>', "gt", "greater-than sign"),
    ('?', "question", "question mark"),
    ('@', "at", "at sign"),
    ('[', "lbracket", "opening square bracket"),
    ('\\', "backslash", "backslash"),
    (']', "rbracket", "closing square bracket"),
    ('^', "caret", "caret"),
    ('_', "underscore", "underscore"),
    ('`', "backtick", "backtick"),
    ('{', "lbrace", "opening curly brace"),
    ('|', "pipe", "vertical bar"),
    ('}', "rbrace", "closing curly brace"),
    ('~', "tilde", "tilde"),
    ('\n', "nl", "newline"),
    ('\t', "tab", "tab"),
];

/// One delimiter of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delimiter {
    /// The exact text placed between few-shot examples.
    pub text: String,
    /// File- and task-name-safe short name: `[a-z0-9]+`, unique per text (`nl`, `comma`,
    /// or `x` followed by the UTF-8 bytes in hex for anything not in the fixed table).
    pub slug: String,
    /// English name ("newline", "comma"; `the string "..."` for texts not in the table).
    pub english: String,
}

impl Delimiter {
    /// Describe `text`. Empty text is refused: it is not a delimiter.
    pub fn new(text: &str) -> Result<Self, SweepError> {
        if text.is_empty() {
            return Err(SweepError::Config(
                "[sweep] delimiters: the empty string is not a delimiter".into(),
            ));
        }
        let mut chars = text.chars();
        let single = match (chars.next(), chars.next()) {
            (Some(c), None) => NAMED.iter().find(|(n, _, _)| *n == c),
            _ => None,
        };
        Ok(match single {
            Some((_, slug, english)) => Delimiter {
                text: text.to_string(),
                slug: slug.to_string(),
                english: english.to_string(),
            },
            None => Delimiter {
                text: text.to_string(),
                slug: format!(
                    "x{}",
                    text.bytes().map(|b| format!("{b:02x}")).collect::<String>()
                ),
                english: format!("the string {}", quoted(text)),
            },
        })
    }

    /// The delimiter as shown to a model in the naming line: see [`quoted`].
    pub fn quoted(&self) -> String {
        quoted(&self.text)
    }

    /// Inverse of the slug: the delimiter a slug names, if it is a valid slug.
    pub fn from_slug(slug: &str) -> Option<Self> {
        if let Some((c, _, _)) = NAMED.iter().find(|(_, s, _)| *s == slug) {
            return Delimiter::new(&c.to_string()).ok();
        }
        let hex = slug.strip_prefix('x')?;
        if hex.is_empty() || hex.len() % 2 != 0 {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| {
                let h = &hex[i..i + 2];
                if h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                {
                    u8::from_str_radix(h, 16).ok()
                } else {
                    None
                }
            })
            .collect();
        let text = String::from_utf8(bytes?).ok()?;
        let d = Delimiter::new(&text).ok()?;
        // A single named character has its table slug, never an `x` slug.
        (d.slug == slug).then_some(d)
    }
}

/// The delimiter in quotation marks as it appears in the naming line: double quotes, or
/// single quotes when the text contains a double quote; newline, tab and carriage return
/// written as `\n`, `\t`, `\r`, other control characters as `\u{..}`; everything else,
/// the backslash included, as itself.
pub(crate) fn quoted(text: &str) -> String {
    let q = if text.contains('"') { '\'' } else { '"' };
    let mut s = String::new();
    s.push(q);
    for c in text.chars() {
        match c {
            '\n' => s.push_str("\\n"),
            '\t' => s.push_str("\\t"),
            '\r' => s.push_str("\\r"),
            c if c.is_control() => s.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => s.push(c),
        }
    }
    s.push(q);
    s
}

/// Describe every delimiter of a configured list, refusing duplicates.
pub(crate) fn parse_set(texts: &[String]) -> Result<Vec<Delimiter>, SweepError> {
    if texts.is_empty() {
        return Err(SweepError::Config(
            "[sweep] delimiters: the list is empty".into(),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(texts.len());
    for t in texts {
        let d = Delimiter::new(t)?;
        if !seen.insert(d.slug.clone()) {
            return Err(SweepError::Config(format!(
                "[sweep] delimiters: {} is listed twice",
                d.quoted()
            )));
        }
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_set_is_35_with_unique_safe_slugs() {
        let set = parse_set(&protospread_core::default_sweep_delimiters()).unwrap();
        assert_eq!(set.len(), 35);
        for d in &set {
            assert!(
                d.slug
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
                "{}",
                d.slug
            );
            assert!(!d.slug.starts_with('x'), "{} has no table name", d.quoted());
            assert_eq!(Delimiter::from_slug(&d.slug).unwrap(), *d);
        }
        assert_eq!(set[set.len() - 2].slug, "nl");
        assert_eq!(set[set.len() - 1].slug, "tab");
    }

    #[test]
    fn quoted_forms() {
        assert_eq!(quoted("\n"), "\"\\n\"");
        assert_eq!(quoted("\""), "'\"'");
        assert_eq!(quoted("\\"), "\"\\\"");
        assert_eq!(quoted(" "), "\" \"");
    }

    #[test]
    fn duplicates_and_empty_are_refused() {
        assert!(parse_set(&["#".into(), "#".into()]).is_err());
        assert!(parse_set(&["".into()]).is_err());
        assert!(parse_set(&[]).is_err());
    }

    proptest! {
        #[test]
        fn slug_roundtrips_and_is_safe(s in "\\PC{1,4}|[\\x00-\\x7f]{1,3}") {
            let d = Delimiter::new(&s).unwrap();
            prop_assert!(d.slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
            prop_assert_eq!(Delimiter::from_slug(&d.slug).unwrap(), d);
        }
    }
}
