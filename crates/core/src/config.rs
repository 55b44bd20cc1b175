//! `pipeline.toml`: what the study reads and how each stage runs.
//!
//! Every table is `deny_unknown_fields`, so a misspelt key is an error that names the key and
//! its line (the TOML parser reports the position). Relative paths are resolved against the
//! folder that holds the configuration file. Every key is documented in `docs/pipeline.md`.

use crate::{CoreError, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

mod bounds;
mod sections;
pub use sections::{
    default_sweep_delimiters, AdministerSection, AggregateSection, AnswersExtraTest,
    AnswersSection, ByteSize, EngineSection, FetchSection, ReportSection, ScoreSection,
    SweepSection, SweepVariant, REPLY_RULES,
};

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What this configuration recomputes.
    pub study: Study,
    /// Every input file, each with its source and expected sha256.
    #[serde(default)]
    pub inputs: Vec<Input>,
    /// `[fetch]`.
    #[serde(default)]
    pub fetch: FetchSection,
    /// `[score]`.
    #[serde(default)]
    pub score: ScoreSection,
    /// `[answers]`.
    #[serde(default)]
    pub answers: AnswersSection,
    /// `[aggregate]`.
    #[serde(default)]
    pub aggregate: AggregateSection,
    /// `[report]`.
    #[serde(default)]
    pub report: ReportSection,
    /// `[engine]`.
    #[serde(default)]
    pub engine: EngineSection,
    /// `[administer]`.
    #[serde(default)]
    pub administer: AdministerSection,
    /// `[sweep]`.
    #[serde(default)]
    pub sweep: SweepSection,
    /// Folder holding the configuration file; relative paths are resolved against it.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// `[study]`: what the run is about.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Study {
    /// Study name, recorded in every output.
    pub name: String,
    /// One-line description of the study.
    #[serde(default)]
    pub description: String,
}

/// What role an input plays downstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputRole {
    /// A JobCannon human-response CSV; `instrument` names which.
    Human,
    /// A stored-answer file (see docs/stored-answers.md).
    Answers,
    /// Any other file carried along verbatim (licence, provenance, key...).
    Other,
}

/// A Hugging Face dataset file at a pinned commit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HfSource {
    /// `owner/name` of the dataset repository.
    pub repo: String,
    /// A full 40-hex commit id; branch and tag names are refused.
    pub commit: String,
    /// Path of the file inside the repository.
    pub file: String,
}

/// Where an input comes from: exactly one of `path`, `url`, `hf` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSource {
    /// A local file.
    Local(PathBuf),
    /// An http(s) URL.
    Http(String),
    /// A file of a Hugging Face dataset repository at a pinned commit.
    HuggingFace(HfSource),
}

/// One `[[inputs]]` entry: a file the pipeline reads, pinned by sha256.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Unique name; also the stem of the fetched file in the cache and output folder.
    pub name: String,
    /// What the file is for.
    pub role: InputRole,
    /// For `role = "human"`: the instrument (see `instruments::ALL`).
    #[serde(default)]
    pub instrument: Option<String>,
    /// Label carried into every table built from this input (e.g. "simulated").
    #[serde(default)]
    pub label: Option<String>,
    /// Local path.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// http(s) URL.
    #[serde(default)]
    pub url: Option<String>,
    /// Hugging Face dataset file.
    #[serde(default)]
    pub hf: Option<HfSource>,
    /// Expected sha256 of the file's bytes, 64 lowercase hex.
    pub sha256: String,
    /// For `role = "answers"`: the arm this source's verdict is about, overriding the rule
    /// "the source's single arm, else `[aggregate] headline_arm`" (docs/statistics.md). The
    /// aggregate stage refuses an arm the source's stored answers do not have.
    #[serde(default)]
    pub headline_arm: Option<String>,
}

impl Input {
    /// The one source this input names.
    pub fn source(&self) -> std::result::Result<InputSource, String> {
        match (&self.path, &self.url, &self.hf) {
            (Some(p), None, None) => Ok(InputSource::Local(p.clone())),
            (None, Some(u), None) => Ok(InputSource::Http(u.clone())),
            (None, None, Some(h)) => Ok(InputSource::HuggingFace(h.clone())),
            _ => Err(format!(
                "input '{}': give exactly one of `path`, `url`, `hf`",
                self.name
            )),
        }
    }
}

/// The `[sweep]` settings a sweep command runs with, and which of them the file declared.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// `[sweep]`, defaults filled in.
    pub sweep: SweepSection,
    /// Folder holding the configuration file; `lm_eval_runs` and `dictionary_runs` are
    /// resolved against it.
    pub base_dir: PathBuf,
    /// Whether `[sweep] delimiters` was given (else the runs say which delimiters were swept).
    pub declared_delimiters: bool,
    /// Whether `[sweep] variants` was given.
    pub declared_variants: bool,
}

impl SweepConfig {
    /// Read the `[sweep]` of a configuration file. A file holding only `[sweep]` is enough;
    /// any other file is loaded and checked whole, as [`Config::load`] does.
    pub fn load(path: &Path) -> Result<Self> {
        let text = fs_err::read_to_string(path).map_err(CoreError::Fs)?;
        let bad = |e| toml_error(path, e);
        let table: toml::Table = toml::from_str(&text).map_err(bad)?;
        let base_dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let sweep = if table.keys().all(|k| k == "sweep") {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct OnlySweep {
                #[serde(default)]
                sweep: SweepSection,
            }
            toml::from_str::<OnlySweep>(&text).map_err(bad)?.sweep
        } else {
            Config::parse(&text, path, &base_dir)?.sweep
        };
        let declared = |key: &str| {
            table
                .get("sweep")
                .and_then(|s| s.as_table())
                .is_some_and(|s| s.contains_key(key))
        };
        Ok(SweepConfig {
            declared_delimiters: declared("delimiters"),
            declared_variants: declared("variants"),
            sweep,
            base_dir,
        })
    }

    /// Resolve a path from the configuration against its folder.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}

impl Config {
    /// Parse configuration text. `origin` names the file in errors; `base_dir` resolves paths.
    pub fn parse(text: &str, origin: &Path, base_dir: &Path) -> Result<Self> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| toml_error(origin, e))?;
        cfg.base_dir = base_dir.to_path_buf();
        cfg.validate().map_err(|message| CoreError::Config {
            path: origin.to_path_buf(),
            message,
            source: None,
        })?;
        bounds::check_config(&cfg).map_err(|e| CoreError::Config {
            path: origin.to_path_buf(),
            message: e.to_string(),
            source: Some(Box::new(e)),
        })?;
        Ok(cfg)
    }

    /// Read and parse a configuration file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = fs_err::read_to_string(path).map_err(CoreError::Fs)?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Self::parse(&text, path, base)
    }

    /// Resolve a path from the configuration against its folder.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    /// Inputs with a given role, in file order.
    pub fn inputs_with_role(&self, role: InputRole) -> impl Iterator<Item = &Input> {
        self.inputs.iter().filter(move |i| i.role == role)
    }

    fn validate(&self) -> std::result::Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for i in &self.inputs {
            if !seen.insert(i.name.as_str()) {
                return Err(format!("input '{}' is declared twice", i.name));
            }
            if i.name.is_empty()
                || !i
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
            {
                return Err(format!(
                    "input name '{}' may only use letters, digits, '_', '-', '.'",
                    i.name
                ));
            }
            i.source()?;
            if !crate::hash::is_sha256_hex(&i.sha256) {
                return Err(format!(
                    "input '{}': sha256 must be 64 lowercase hex digits",
                    i.name
                ));
            }
            if let Some(h) = &i.hf {
                if !is_commit_id(&h.commit) {
                    return Err(format!(
                        "input '{}': hf.commit '{}' is not a 40-hex commit id; pin a commit, not a branch or tag",
                        i.name, h.commit
                    ));
                }
            }
            if let Some(a) = &i.headline_arm {
                if i.role != InputRole::Answers {
                    return Err(format!(
                        "input '{}': `headline_arm` is only for role \"answers\"",
                        i.name
                    ));
                }
                if a.is_empty() {
                    return Err(format!("input '{}': `headline_arm` is empty", i.name));
                }
            }
            if i.role == InputRole::Human {
                match &i.instrument {
                    Some(n) if crate::instruments::instrument_by_name(n).is_some() => {}
                    Some(n) => return Err(format!("input '{}': unknown instrument '{n}'", i.name)),
                    None => {
                        return Err(format!(
                            "input '{}': role \"human\" needs `instrument`",
                            i.name
                        ))
                    }
                }
            }
        }
        // Not a bounded integer of `bounds`: a float, whose range is the API's.
        let a = &self.administer;
        if !(a.sampled_temperature.is_finite() && (0.0..=2.0).contains(&a.sampled_temperature)) {
            return Err(format!(
                "[administer] sampled_temperature = {} is out of range: it must be between 0 and 2",
                a.sampled_temperature
            ));
        }
        self.score.validate()
    }
}

/// A configuration file that is not TOML of the expected shape.
fn toml_error(path: &Path, e: toml::de::Error) -> CoreError {
    CoreError::Config {
        path: path.to_path_buf(),
        // The parser ends its message with a newline.
        message: e.to_string().trim_end().to_string(),
        source: Some(Box::new(e)),
    }
}

/// True for a full 40-hex-digit git commit id.
pub fn is_commit_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = "[study]\nname = \"t\"\n";

    /// A file that does not parse or check keeps the parser's or the bound's error as its
    /// cause, and says what it says.
    #[test]
    fn config_errors_keep_their_cause() {
        use std::error::Error;
        let e = Config::parse("[study\n", Path::new("p.toml"), Path::new(".")).unwrap_err();
        assert!(e.source().is_some_and(|s| s.is::<toml::de::Error>()), "{e}");
        let text = format!("{MIN}[fetch]\nretries = 1000\n");
        let e = Config::parse(&text, Path::new("p.toml"), Path::new(".")).unwrap_err();
        let range = e
            .source()
            .and_then(|s| s.downcast_ref::<crate::limits::OutOfRange>());
        assert_eq!(range.map(|r| r.value), Some(1000), "{e}");
        assert!(
            e.to_string()
                .starts_with("p.toml: [fetch] retries = 1000 is out of range"),
            "{e}"
        );
    }

    #[test]
    fn minimal_parses() {
        Config::parse(MIN, Path::new("p.toml"), Path::new(".")).unwrap();
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let text = format!("{MIN}\n[fetch]\nbogus_key = 1\n");
        let e = Config::parse(&text, Path::new("p.toml"), Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus_key"), "{e}");
        assert!(e.contains("line 5"), "{e}");
    }

    #[test]
    fn branch_revision_is_refused() {
        let text = format!(
            "{MIN}[[inputs]]\nname = \"a\"\nrole = \"other\"\nsha256 = \"{}\"\nhf = {{ repo = \"o/n\", commit = \"main\", file = \"x.csv\" }}\n",
            "0".repeat(64)
        );
        let e = Config::parse(&text, Path::new("p.toml"), Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains("40-hex"), "{e}");
    }

    #[test]
    fn huge_item_count_is_refused_before_anything_is_allocated() {
        let text =
            format!("{MIN}[answers]\nextra_tests = [{{ name = \"x\", items = 4000000000 }}]\n");
        let e = Config::parse(&text, Path::new("p.toml"), Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("p.toml") && e.contains("items = 4000000000 is out of range"),
            "{e}"
        );
    }

    #[test]
    fn headline_arm_only_on_answers_inputs() {
        let input = |role: &str, arm: &str| {
            format!(
                "{MIN}[[inputs]]\nname = \"a\"\nrole = \"{role}\"\nsha256 = \"{}\"\npath = \"x\"\nheadline_arm = \"{arm}\"\n",
                "0".repeat(64)
            )
        };
        let c = Config::parse(
            &input("answers", "local"),
            Path::new("p.toml"),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(c.inputs[0].headline_arm.as_deref(), Some("local"));
        let e = Config::parse(
            &input("other", "local"),
            Path::new("p.toml"),
            Path::new("."),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("input 'a'") && e.contains("only for role \"answers\""),
            "{e}"
        );
        let e = Config::parse(&input("answers", ""), Path::new("p.toml"), Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains("input 'a': `headline_arm` is empty"), "{e}");
    }

    #[test]
    fn reply_rules_default_strict_and_are_checked() {
        let parse = |rules: &str| {
            Config::parse(
                &format!("{MIN}[score]\nreply_rules = {rules}\n"),
                Path::new("p.toml"),
                Path::new("."),
            )
        };
        let c = Config::parse(MIN, Path::new("p.toml"), Path::new(".")).unwrap();
        assert_eq!(c.score.reply_rules, ["strict"]);
        let c = parse("[\"strict\", \"lenient\"]").unwrap();
        assert_eq!(c.score.reply_rules, ["strict", "lenient"]);
        for (rules, want) in [
            ("[\"strict\", \"fuzzy\"]", "unknown rule \"fuzzy\""),
            ("[\"lenient\", \"strict\"]", "must be listed first"),
            ("[\"lenient\"]", "must be listed first"),
            ("[]", "must be listed first"),
            ("[\"strict\", \"strict\"]", "listed twice"),
        ] {
            let e = parse(rules).unwrap_err().to_string();
            assert!(
                e.contains("p.toml") && e.contains("[score] reply_rules") && e.contains(want),
                "{rules}: {e}"
            );
        }
    }

    #[test]
    fn two_sources_are_refused() {
        let text = format!(
            "{MIN}[[inputs]]\nname = \"a\"\nrole = \"other\"\nsha256 = \"{}\"\npath = \"x\"\nurl = \"http://h/x\"\n",
            "0".repeat(64)
        );
        assert!(Config::parse(&text, Path::new("p.toml"), Path::new(".")).is_err());
    }
}
