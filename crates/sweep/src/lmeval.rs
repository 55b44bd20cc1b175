//! lm-evaluation-harness task files for a delimiter sweep.
//!
//! Each generated task `include:`s the harness's own task file (by absolute path, because
//! lm-eval resolves `include` as a file path relative to the including file) and overrides
//! only `task`, `tag`, `fewshot_delimiter`, `num_fewshot` and, for the named variant,
//! `description`. Layout of lm-eval 0.4.13 that this relies on (checked by
//! `scripts/lm-eval-check.sh` against the real harness):
//! - `mmlu/default/mmlu_<subject>.yaml` per subject, description "The following are multiple
//!   choice questions (with answers) about <subject with spaces>.\n\n";
//! - `arc/arc_challenge.yaml`, `commonsense_qa/default.yaml`, without a description.
//!
//! With `--apply_chat_template` lm-eval puts the description into a system message and,
//! unless few-shot examples are sent as separate turns, every example and the question into
//! one user message, joined by `fewshot_delimiter`. lm-eval 0.4.13 turns
//! `fewshot_as_multiturn` ON by default when a chat template is applied, and then the
//! delimiter is dropped between turns; the README written next to the tasks therefore passes
//! `--fewshot_as_multiturn false`.

use crate::delimiter::Delimiter;
use crate::yaml::quote;
use crate::{SweepError, SweepSpec};
use protospread_core::SweepVariant;
use std::path::{Path, PathBuf};

/// The 57 MMLU subjects, as in lm-eval's `mmlu/default/mmlu_<subject>.yaml`.
pub(crate) const MMLU_SUBJECTS: [&str; 57] = [
    "abstract_algebra",
    "anatomy",
    "astronomy",
    "business_ethics",
    "clinical_knowledge",
    "college_biology",
    "college_chemistry",
    "college_computer_science",
    "college_mathematics",
    "college_medicine",
    "college_physics",
    "computer_security",
    "conceptual_physics",
    "econometrics",
    "electrical_engineering",
    "elementary_mathematics",
    "formal_logic",
    "global_facts",
    "high_school_biology",
    "high_school_chemistry",
    "high_school_computer_science",
    "high_school_european_history",
    "high_school_geography",
    "high_school_government_and_politics",
    "high_school_macroeconomics",
    "high_school_mathematics",
    "high_school_microeconomics",
    "high_school_physics",
    "high_school_psychology",
    "high_school_statistics",
    "high_school_us_history",
    "high_school_world_history",
    "human_aging",
    "human_sexuality",
    "international_law",
    "jurisprudence",
    "logical_fallacies",
    "machine_learning",
    "management",
    "marketing",
    "medical_genetics",
    "miscellaneous",
    "moral_disputes",
    "moral_scenarios",
    "nutrition",
    "philosophy",
    "prehistory",
    "professional_accounting",
    "professional_law",
    "professional_medicine",
    "professional_psychology",
    "public_relations",
    "security_studies",
    "sociology",
    "us_foreign_policy",
    "virology",
    "world_religions",
];

/// A benchmark the generator knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    /// MMLU.
    Mmlu,
    /// ARC-Challenge.
    ArcChallenge,
    /// CommonsenseQA.
    CommonsenseQa,
}

impl Benchmark {
    /// Every benchmark with lm-eval task files.
    pub const ALL: [Benchmark; 3] = [
        Benchmark::Mmlu,
        Benchmark::ArcChallenge,
        Benchmark::CommonsenseQa,
    ];

    /// Parse a `--task` value.
    pub fn parse(s: &str) -> Result<Self, SweepError> {
        match s {
            "mmlu" => Ok(Benchmark::Mmlu),
            "arc_challenge" => Ok(Benchmark::ArcChallenge),
            "commonsense_qa" => Ok(Benchmark::CommonsenseQa),
            _ => Err(SweepError::Config(format!(
                "unknown task '{s}': choose mmlu, arc_challenge or commonsense_qa"
            ))),
        }
    }

    /// lm-eval's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Mmlu => "mmlu",
            Benchmark::ArcChallenge => "arc_challenge",
            Benchmark::CommonsenseQa => "commonsense_qa",
        }
    }
}

/// Name of the generated task (or, for MMLU, group) for one delimiter and variant:
/// `<base>_delim_<slug>_<variant>`. [`parse_task_name`] inverts it.
pub(crate) fn task_name(base: &str, d: &Delimiter, v: SweepVariant) -> String {
    format!("{base}_delim_{}_{}", d.slug, v.as_str())
}

/// What a generated task name says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskId {
    /// `mmlu`, `arc_challenge`, `commonsense_qa`, or the base task name for other tasks.
    pub(crate) benchmark: String,
    /// The MMLU subject, or "" for single-task benchmarks.
    pub(crate) subset: String,
    /// Delimiter of the task.
    pub(crate) delimiter: Delimiter,
    /// Plain or named delimiter.
    pub(crate) variant: SweepVariant,
}

/// Split `<base>_delim_<slug>_<variant>`; `None` if the name is not of that form.
pub(crate) fn parse_task_name(name: &str) -> Option<TaskId> {
    let (rest, variant) = name.rsplit_once('_')?;
    let variant = match variant {
        "plain" => SweepVariant::Plain,
        "named" => SweepVariant::Named,
        _ => return None,
    };
    let (rest, slug) = rest.rsplit_once('_')?;
    let base = rest.strip_suffix("_delim")?;
    let delimiter = Delimiter::from_slug(slug)?;
    if base.is_empty() {
        return None;
    }
    let (benchmark, subset) = match base.strip_prefix("mmlu_") {
        Some(s) if MMLU_SUBJECTS.contains(&s) => ("mmlu".to_string(), s.to_string()),
        _ => (base.to_string(), String::new()),
    };
    Some(TaskId {
        benchmark,
        subset,
        delimiter,
        variant,
    })
}

/// The naming sentence for one delimiter, from the configured template.
pub(crate) fn naming_line(template: &str, d: &Delimiter) -> String {
    template
        .replace("{delimiter_name}", &d.english)
        .replace("{delimiter}", &d.quoted())
}

/// lm-eval's MMLU description sentence for a subject, without the trailing blank line.
pub(crate) fn mmlu_subject_sentence(subject: &str) -> String {
    format!(
        "The following are multiple choice questions (with answers) about {}.",
        subject.replace('_', " ")
    )
}

/// One file to write, relative to the output folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Path relative to the output folder.
    pub rel_path: String,
    /// File contents.
    pub contents: String,
}

/// Everything `protospread sweep lm-eval` writes.
#[derive(Debug, Clone)]
pub struct Generated {
    /// Every file, in path order.
    pub files: Vec<GeneratedFile>,
    /// Names to pass to `--tasks` (MMLU: one group per delimiter and variant).
    pub run_names: Vec<String>,
}

fn header(d: &Delimiter, v: SweepVariant) -> String {
    format!(
        "# Generated by `protospread sweep lm-eval`; do not edit.\n# Delimiter {} ({}), variant {}.\n",
        d.quoted(),
        d.slug,
        v.as_str()
    )
}

fn task_yaml(
    include: &Path,
    name: &str,
    d: &Delimiter,
    v: SweepVariant,
    num_fewshot: u32,
    description: Option<&str>,
) -> String {
    let mut s = header(d, v);
    s.push_str(&format!("include: {}\n", quote(&include.to_string_lossy())));
    s.push_str(&format!("task: {}\n", quote(name)));
    // The base task's tags would enrol every generated task in the original groups
    // (e.g. mmlu_stem_tasks -> mmlu); an empty list enrols it nowhere.
    s.push_str("tag: []\n");
    s.push_str(&format!("fewshot_delimiter: {}\n", quote(&d.text)));
    s.push_str(&format!("num_fewshot: {num_fewshot}\n"));
    if let Some(desc) = description {
        s.push_str(&format!("description: {}\n", quote(desc)));
    }
    s
}

/// The base task file of a benchmark (or MMLU subject) inside lm-eval's `tasks` folder.
fn base_file(tasks_dir: &Path, b: Benchmark, subject: Option<&str>) -> PathBuf {
    match (b, subject) {
        (Benchmark::Mmlu, Some(s)) => tasks_dir
            .join("mmlu")
            .join("default")
            .join(format!("mmlu_{s}.yaml")),
        (Benchmark::ArcChallenge, _) => tasks_dir.join("arc").join("arc_challenge.yaml"),
        (Benchmark::CommonsenseQa, _) => tasks_dir.join("commonsense_qa").join("default.yaml"),
        (Benchmark::Mmlu, None) => unreachable!("an MMLU task file needs a subject"),
    }
}

/// Build every task file for `benchmark`. `tasks_dir` is lm-eval's installed `lm_eval/tasks`
/// folder; it must be absolute, and each base file must exist there.
pub fn generate(
    spec: &SweepSpec,
    benchmark: Benchmark,
    tasks_dir: &Path,
) -> Result<Generated, SweepError> {
    if !tasks_dir.is_absolute() {
        return Err(SweepError::Config(format!(
            "--lm-eval-tasks {}: give an absolute path (lm-eval resolves `include:` as a file path)",
            tasks_dir.display()
        )));
    }
    let subjects: Vec<Option<&str>> = match benchmark {
        Benchmark::Mmlu => MMLU_SUBJECTS.iter().map(|s| Some(*s)).collect(),
        _ => vec![None],
    };
    for s in &subjects {
        let f = base_file(tasks_dir, benchmark, *s);
        if !f.is_file() {
            return Err(SweepError::Config(format!(
                "{}: base task file not found; is --lm-eval-tasks the `lm_eval/tasks` folder of lm-eval 0.4.13?",
                f.display()
            )));
        }
    }
    let mut files = Vec::new();
    let mut run_names = Vec::new();
    for d in &spec.delimiters {
        for &v in &spec.variants {
            let naming = naming_line(&spec.naming_template, d);
            match benchmark {
                Benchmark::Mmlu => {
                    let group = task_name("mmlu", d, v);
                    let mut members = Vec::new();
                    for s in &subjects {
                        let subject = s.expect("mmlu subjects");
                        let name = task_name(&format!("mmlu_{subject}"), d, v);
                        let desc = match v {
                            SweepVariant::Plain => None,
                            SweepVariant::Named => {
                                Some(format!("{} {naming}\n\n", mmlu_subject_sentence(subject)))
                            }
                        };
                        files.push(GeneratedFile {
                            rel_path: format!("{group}/{name}.yaml"),
                            contents: task_yaml(
                                &base_file(tasks_dir, benchmark, *s),
                                &name,
                                d,
                                v,
                                spec.num_fewshot,
                                desc.as_deref(),
                            ),
                        });
                        members.push(name);
                    }
                    let mut g = header(d, v);
                    g.push_str(&format!("group: {}\ntask:\n", quote(&group)));
                    for m in &members {
                        g.push_str(&format!("  - {}\n", quote(m)));
                    }
                    // As lm-eval's own mmlu group: accuracy over all questions (weighted by
                    // subject size), not the mean of subject accuracies.
                    g.push_str(&format!(
                        "aggregate_metric_list:\n  - metric: {}\n    weight_by_size: true\nmetadata:\n  version: 1\n",
                        quote(&spec.metric)
                    ));
                    files.push(GeneratedFile {
                        rel_path: format!("{group}/_{group}.yaml"),
                        contents: g,
                    });
                    run_names.push(group);
                }
                _ => {
                    let name = task_name(benchmark.name(), d, v);
                    let desc = match v {
                        SweepVariant::Plain => None,
                        SweepVariant::Named => Some(format!("{naming}\n\n")),
                    };
                    files.push(GeneratedFile {
                        rel_path: format!("{name}.yaml"),
                        contents: task_yaml(
                            &base_file(tasks_dir, benchmark, None),
                            &name,
                            d,
                            v,
                            spec.num_fewshot,
                            desc.as_deref(),
                        ),
                    });
                    run_names.push(name);
                }
            }
        }
    }
    files.push(GeneratedFile {
        rel_path: "README.md".into(),
        contents: readme(spec, benchmark, &run_names),
    });
    files.push(GeneratedFile {
        rel_path: "tasks.txt".into(),
        contents: run_names.iter().map(|n| format!("{n}\n")).collect(),
    });
    Ok(Generated { files, run_names })
}

fn readme(spec: &SweepSpec, b: Benchmark, run_names: &[String]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "# Delimiter sweep: {} ({} delimiters x {} variants = {} runs)\n\n",
        b.name(),
        spec.delimiters.len(),
        spec.variants.len(),
        run_names.len()
    ));
    s.push_str(
        "Generated by `protospread sweep lm-eval`. Every task includes lm-eval's own task file and\n\
         changes only `fewshot_delimiter` (and, for the `named` variant, `description`).\n\n\
         Run with lm-evaluation-harness 0.4.13 (replace MODEL; any `--model` works):\n\n```sh\n",
    );
    s.push_str(
        "lm_eval --model hf --model_args pretrained=MODEL \\\n  --include_path \"$PWD\" \\\n  --tasks \"$(paste -sd, tasks.txt)\" \\\n  --apply_chat_template --fewshot_as_multiturn false \\\n  --log_samples --output_path results\n```\n\n",
    );
    s.push_str(&format!(
        "Run it from this folder. `num_fewshot` ({}) is set in every task file; do not pass\n\
         `--num_fewshot`. Why each flag:\n\n\
         - `--apply_chat_template`: the study places the examples inside the user message of the\n\
           model's chat template.\n\
         - `--fewshot_as_multiturn false`: lm-eval 0.4.13 turns multi-turn few-shot ON by default\n\
           when a chat template is applied; each example then becomes its own user/assistant turn\n\
           and the delimiter disappears from the prompt. `false` keeps all examples and the\n\
           question in one user message, joined by the delimiter. (The `named` variant's\n\
           description becomes the system message.)\n\
         - `--log_samples --output_path results`: per-document results (`samples_<task>_*.jsonl`),\n\
           which `protospread sweep ingest results` reads.\n\n\
         The `include:` lines hold the absolute path of the harness's task folder given to\n\
         `--lm-eval-tasks`; regenerate after moving or upgrading the harness.\n",
        spec.num_fewshot
    ));
    s
}

/// lm-eval's installed task folder, asked of `python` (`import lm_eval.tasks`). An error
/// when the interpreter cannot be run or lm-eval is not installed for it.
pub fn installed_tasks_dir(python: &str) -> Result<std::path::PathBuf, SweepError> {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import lm_eval.tasks, os; print(os.path.dirname(os.path.abspath(lm_eval.tasks.__file__)))",
        ])
        .output()
        .map_err(|e| {
            SweepError::Config(format!(
                "cannot run {python} to find lm-eval's task folder ({e}); give --lm-eval-tasks DIR or --python PATH"
            ))
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").trim();
        return Err(SweepError::Config(format!(
            "lm-eval is not installed for {python} ({last}); install it (`{python} -m pip install lm-eval==0.4.13`), or give --lm-eval-tasks DIR or --python PATH"
        )));
    }
    let dir = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !dir.is_dir() {
        return Err(SweepError::Config(format!(
            "{python} names lm-eval's task folder {}, which is not a folder",
            dir.display()
        )));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tasks_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        fs_err::create_dir_all(t.join("mmlu/default")).unwrap();
        for s in MMLU_SUBJECTS {
            fs_err::write(t.join(format!("mmlu/default/mmlu_{s}.yaml")), "x").unwrap();
        }
        fs_err::create_dir_all(t.join("arc")).unwrap();
        fs_err::write(t.join("arc/arc_challenge.yaml"), "x").unwrap();
        fs_err::create_dir_all(t.join("commonsense_qa")).unwrap();
        fs_err::write(t.join("commonsense_qa/default.yaml"), "x").unwrap();
        dir
    }

    fn spec() -> SweepSpec {
        SweepSpec::from_section(&Default::default()).unwrap()
    }

    #[test]
    fn names_roundtrip_for_every_default_delimiter() {
        let spec = spec();
        for d in &spec.delimiters {
            for &v in &spec.variants {
                for base in ["arc_challenge", "mmlu_us_foreign_policy", "my_task_x"] {
                    let id = parse_task_name(&task_name(base, d, v)).unwrap();
                    assert_eq!(id.delimiter, *d);
                    assert_eq!(id.variant, v);
                }
            }
        }
        let id = parse_task_name("mmlu_us_foreign_policy_delim_nl_named").unwrap();
        assert_eq!(
            (id.benchmark.as_str(), id.subset.as_str()),
            ("mmlu", "us_foreign_policy")
        );
        assert!(parse_task_name("arc_challenge").is_none());
        assert!(parse_task_name("arc_delim_zz_plain").is_none());
        assert!(parse_task_name("_delim_nl_plain").is_none());
    }

    #[test]
    fn yaml_files_parse_and_carry_the_delimiter() {
        let dir = fake_tasks_dir();
        let spec = spec();
        for b in [Benchmark::ArcChallenge, Benchmark::Mmlu] {
            let g = generate(&spec, b, dir.path()).unwrap();
            let n_yaml = g
                .files
                .iter()
                .filter(|f| f.rel_path.ends_with(".yaml"))
                .count();
            let per = if b == Benchmark::Mmlu { 58 } else { 1 };
            assert_eq!(n_yaml, 35 * 2 * per);
            for f in g.files.iter().filter(|f| f.rel_path.ends_with(".yaml")) {
                assert!(f
                    .rel_path
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"_./".contains(&c)));
                let v: serde_norway::Value = serde_norway::from_str(&f.contents).unwrap();
                if let Some(task) = v.get("task").and_then(|t| t.as_str()) {
                    let id = parse_task_name(task).unwrap();
                    assert_eq!(
                        v["fewshot_delimiter"].as_str().unwrap(),
                        id.delimiter.text,
                        "{}",
                        f.rel_path
                    );
                    let desc = v.get("description").and_then(|d| d.as_str());
                    match id.variant {
                        SweepVariant::Plain => assert!(desc.is_none()),
                        SweepVariant::Named => {
                            let desc = desc.unwrap();
                            assert!(desc.contains(&id.delimiter.quoted()), "{desc:?}");
                            assert!(desc.ends_with("\n\n"));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn missing_base_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = generate(&spec(), Benchmark::CommonsenseQa, dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("commonsense_qa/default.yaml"), "{e}");
        let e = generate(&spec(), Benchmark::CommonsenseQa, Path::new("rel"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("absolute"), "{e}");
    }
}
