//! Instrument files: the item texts, answer options and instructions a prompt is built from.
//!
//! Format (TOML, see docs/administer.md and data/instruments/ipip50.toml):
//!
//! ```toml
//! format_version = 1
//! test = "big_five"            # a test of the study (protospread_core::study_instruments)
//! name = "..."                 # free text
//! options = ["...", ...]       # exactly five, in human order (stored 0..4)
//! [instructions]               # single-item requests; P1 required, P2 for SP
//! P1 = "..."
//! P2 = "..."
//! [whole_instructions]         # whole-test requests; P1 required
//! P1 = "..."
//! [[items]]                    # numbered 1..N, N = the test's item count
//! number = 1
//! text = "..."
//! ```

use crate::AdministerError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Tests of the study whose item texts are not public: administering them needs a user file.
pub(crate) const NO_PUBLIC_TEXTS: [&str; 3] = ["riasec", "dark_triad", "multiple_intelligences"];

/// Number of answer options every instrument of the study has.
pub(crate) const OPTION_COUNT: usize = 5;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInstrument {
    format_version: u32,
    test: String,
    #[serde(default)]
    name: String,
    options: Vec<String>,
    instructions: BTreeMap<String, String>,
    whole_instructions: BTreeMap<String, String>,
    items: Vec<RawItem>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawItem {
    number: u32,
    text: String,
}

/// A validated instrument file.
#[derive(Debug, Clone, PartialEq)]
pub struct Instrument {
    /// File it was read from (for messages).
    pub path: PathBuf,
    /// Test name as in the stored-answer format (e.g. `big_five`).
    pub test: String,
    /// Human-readable name.
    pub name: String,
    /// The five options in human order; index = stored value.
    pub options: Vec<String>,
    /// Single-item instructions by id (`P1`, `P2`, ...).
    pub instructions: BTreeMap<String, String>,
    /// Whole-test instructions by id.
    pub whole_instructions: BTreeMap<String, String>,
    /// Item texts; `items[k]` is human item `k + 1`.
    pub items: Vec<String>,
}

impl Instrument {
    /// Read and validate an instrument file.
    pub fn load(path: &Path) -> Result<Self, AdministerError> {
        let text = fs_err::read_to_string(path).map_err(|e| AdministerError::InstrumentFile {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        Self::parse(&text, path)
    }

    /// Parse instrument text; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, AdministerError> {
        let bad = |message: String| AdministerError::Instrument {
            path: path.to_path_buf(),
            message,
        };
        let raw: RawInstrument =
            toml::from_str(text).map_err(|e| AdministerError::InstrumentFile {
                path: path.to_path_buf(),
                source: Box::new(e),
            })?;
        if raw.format_version != 1 {
            return Err(bad(format!(
                "format_version {} is not supported (this build reads 1)",
                raw.format_version
            )));
        }
        let inst = protospread_core::instrument_by_name(&raw.test)
            .filter(|i| i.in_study)
            .ok_or_else(|| {
                bad(format!(
                    "test '{}' is not a test of the study (big_five, riasec, dark_triad, multiple_intelligences)",
                    raw.test
                ))
            })?;
        if raw.options.len() != OPTION_COUNT {
            return Err(bad(format!(
                "options: {} given, the study's scales have exactly {OPTION_COUNT}",
                raw.options.len()
            )));
        }
        if let Some(k) = raw.options.iter().position(|o| o.trim().is_empty()) {
            return Err(bad(format!("options: option {} is empty", k + 1)));
        }
        for (table, map) in [
            ("instructions", &raw.instructions),
            ("whole_instructions", &raw.whole_instructions),
        ] {
            if !map.contains_key("P1") {
                return Err(bad(format!("[{table}] needs P1")));
            }
            if let Some((id, _)) = map.iter().find(|(_, t)| t.trim().is_empty()) {
                return Err(bad(format!("[{table}] {id} is empty")));
            }
        }
        if raw.items.len() != inst.items {
            return Err(bad(format!(
                "{} items given, test '{}' has {}",
                raw.items.len(),
                raw.test,
                inst.items
            )));
        }
        let mut items = vec![None; inst.items];
        for (row, it) in raw.items.iter().enumerate() {
            let n = it.number as usize;
            if n == 0 || n > inst.items {
                return Err(bad(format!(
                    "items[{row}]: number {} is outside 1..={}",
                    it.number, inst.items
                )));
            }
            if it.text.trim().is_empty() {
                return Err(bad(format!("items[{row}]: item {n} has an empty text")));
            }
            if items[n - 1].is_some() {
                return Err(bad(format!("items[{row}]: item {n} is given twice")));
            }
            items[n - 1] = Some(it.text.clone());
        }
        Ok(Instrument {
            path: path.to_path_buf(),
            test: raw.test,
            name: raw.name,
            options: raw.options,
            instructions: raw.instructions,
            whole_instructions: raw.whole_instructions,
            // Every slot is filled: the count matches and no number repeats.
            items: items.into_iter().flatten().collect(),
        })
    }
}

/// The error for a test that has no instrument file among those given.
pub fn missing_instrument(test: &str) -> AdministerError {
    let why = if NO_PUBLIC_TEXTS.contains(&test) {
        format!(
            "the item texts of '{test}' as worded by the product are not public, so protospread ships no instrument file for it"
        )
    } else {
        format!("no instrument file given declares test '{test}'")
    };
    AdministerError::NoInstrument {
        test: test.to_string(),
        message: format!(
            "{why}; supply one with --instrument FILE (format: docs/administer.md, example: data/instruments/ipip50.toml)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(items: usize, extra: &str) -> String {
        let mut s = String::from(
            "format_version = 1\ntest = \"dark_triad\"\noptions = [\"a\",\"b\",\"c\",\"d\",\"e\"]\n",
        );
        s.push_str(extra);
        s.push_str("[instructions]\nP1 = \"x\"\n[whole_instructions]\nP1 = \"y\"\n");
        for i in 1..=items {
            s.push_str(&format!("[[items]]\nnumber = {i}\ntext = \"t{i}\"\n"));
        }
        s
    }

    #[test]
    fn good_file_parses() {
        let i = Instrument::parse(&file(18, ""), Path::new("f.toml")).unwrap();
        assert_eq!(i.items.len(), 18);
        assert_eq!(i.items[17], "t18");
    }

    #[test]
    fn wrong_item_count_is_refused() {
        let e = Instrument::parse(&file(17, ""), Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.toml") && e.contains("17 items"), "{e}");
    }

    #[test]
    fn duplicate_item_is_refused() {
        let text = file(18, "").replace("number = 18", "number = 3");
        let e = Instrument::parse(&text, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("item 3 is given twice"), "{e}");
    }

    #[test]
    fn unknown_key_is_refused() {
        let e = Instrument::parse(&file(18, "colour = 1\n"), Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
    }

    #[test]
    fn shipped_ipip50_file_matches_the_item_csv() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/instruments");
        let inst = Instrument::load(&data.join("ipip50.toml")).unwrap();
        assert_eq!(inst.test, "big_five");
        let csv = fs_err::read_to_string(data.join("ipip50_items.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(lines.next(), Some("item,text"));
        let mut n = 0;
        for (k, line) in lines.enumerate() {
            // Item texts hold no commas or quotes, so a plain split is exact here.
            let (num, text) = line.split_once(',').unwrap();
            assert_eq!(num.parse::<usize>().unwrap(), k + 1);
            assert_eq!(inst.items[k], text, "item {}", k + 1);
            n += 1;
        }
        assert_eq!(n, 50);
        assert!(inst.instructions.contains_key("P2"));
        assert_ne!(inst.instructions["P1"], inst.instructions["P2"]);
    }

    #[test]
    fn missing_texts_error_says_to_supply_a_file() {
        let e = missing_instrument("riasec").to_string();
        assert!(
            e.contains("not public") && e.contains("--instrument"),
            "{e}"
        );
    }
}
