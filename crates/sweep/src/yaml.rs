//! A YAML double-quoted string writer.
//!
//! Every generated task file writes its strings through [`quote`], so a delimiter such as `#`
//! (a comment elsewhere), `:`, `'`, `"`, `\` or a bare newline can never change the meaning
//! of the file. The output is pure printable ASCII: anything else is a YAML escape, which
//! also keeps YAML 1.1 parsers (PyYAML, which lm-eval uses) from seeing U+0085, U+2028 or
//! U+2029 as line breaks.

/// `s` as a YAML double-quoted scalar.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02X}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(doc: &str) -> String {
        serde_norway::from_str::<std::collections::BTreeMap<String, String>>(doc).unwrap()["k"]
            .clone()
    }

    #[test]
    fn awkward_delimiters_roundtrip() {
        for s in [
            "\n",
            "\t",
            "#",
            ":",
            "\"",
            "'",
            "\\",
            " ",
            "- ",
            "? ",
            "|",
            ">",
            "&a",
            "*a",
            "!x",
            "%",
            "@",
            "`",
            "{",
            "}",
            "[",
            "]",
            ",",
            "\u{85}",
            "\u{2028}",
            "\u{feff}",
            "é",
            "\u{1F600}",
            "\r\n",
            "\0",
        ] {
            let doc = format!("k: {}\n", quote(s));
            assert_eq!(parse(&doc), s, "{doc:?}");
        }
    }

    #[test]
    fn output_is_printable_ascii() {
        let q = quote("a\u{2028}b\u{85}\u{1F600}");
        assert!(q.bytes().all(|b| (0x20..0x7f).contains(&b)), "{q}");
    }

    proptest! {
        #[test]
        fn any_string_roundtrips(s in "\\PC*|[\\x00-\\x7f]{0,12}|.{0,12}") {
            let doc = format!("k: {}\n", quote(&s));
            prop_assert_eq!(parse(&doc), s);
        }
    }
}
