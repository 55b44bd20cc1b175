//! What a bag holds: the configuration, every input, every output of a run checked against
//! its `SHA256SUMS`, and `provenance.json` (tool version, Cargo.lock and configuration hashes,
//! each input's source, revision and sha256).

use crate::bag::{Content, PayloadFile};
use crate::ReportError;
use protospread_core::{Config, InputSource, Manifest, MANIFEST_NAME};
use std::path::{Path, PathBuf};

/// The tool that writes the bag, recorded in `provenance.json` and `bag-info.txt`.
#[derive(Debug, Clone)]
pub struct Tool<'a> {
    /// Crate version of the binary.
    pub version: &'a str,
    /// The Cargo.lock the binary was built with.
    pub cargo_lock: &'a [u8],
}

/// A bag's payload and `bag-info.txt` entries (before `Payload-Oxum`).
#[derive(Debug, Clone)]
pub struct BagContents {
    /// Files under `data/`.
    pub payload: Vec<PayloadFile>,
    /// `bag-info.txt` entries, in order.
    pub info: Vec<(String, String)>,
}

fn usage(m: impl Into<String>) -> ReportError {
    ReportError::Usage(m.into())
}

/// The output files of `out` that go into a bag, after checking them against the manifests:
/// `out/SHA256SUMS` (written by `run`) and each stage folder's `SHA256SUMS` (written by every
/// stage). Every listed file must exist and match, and every other file (except the download
/// cache `cache_top`, manifests and protospread's hidden files) must be listed, in the top
/// manifest too: a stage folder it leaves out is stale (made from outputs that have changed
/// since, see docs/reliability.md). No symlink is followed: a symlink anywhere below `out` is
/// refused.
pub(crate) fn checked_outputs(
    out: &Path,
    cache_top: Option<&str>,
) -> Result<Vec<PathBuf>, ReportError> {
    let top = out.join(MANIFEST_NAME);
    let mut expected = Manifest::default();
    let mut origin: std::collections::BTreeMap<String, PathBuf> = Default::default();
    let in_top: std::collections::BTreeSet<String> = match top.is_file() && !top.is_symlink() {
        true => Manifest::read(&top)?.entries.into_keys().collect(),
        false => Default::default(),
    };
    let mut manifests = vec![(top.clone(), String::new())];
    for s in protospread_core::STAGE_DIRS {
        manifests.push((out.join(s).join(MANIFEST_NAME), format!("{s}/")));
    }
    for (m, prefix) in manifests {
        if m.is_symlink() || !m.is_file() {
            continue;
        }
        for (k, h) in Manifest::read(&m)?.entries {
            let rel = format!("{prefix}{k}");
            if let Some(prev) = expected.entries.insert(rel.clone(), h.clone()) {
                if prev != h {
                    return Err(usage(format!(
                        "{}: lists {k} with another sha256 than {}; the outputs come from different runs: rerun `protospread run`",
                        m.display(),
                        origin[&rel].display()
                    )));
                }
            }
            origin.entry(rel).or_insert(m.clone());
        }
    }
    if expected.entries.is_empty() {
        return Err(usage(format!(
            "{} has no {MANIFEST_NAME}; run `protospread run --out {}` first",
            out.display(),
            out.display()
        )));
    }
    let mut files = Vec::new();
    let mut stack = vec![out.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = fs_err::read_dir(&d).map_err(protospread_core::CoreError::Fs)?;
        for e in rd {
            let e = e.map_err(protospread_core::CoreError::Fs)?;
            let name = e.file_name().to_string_lossy().into_owned();
            let p = e.path();
            if name.starts_with('.') || (d == out && Some(name.as_str()) == cache_top) {
                continue;
            }
            let ft = e.file_type().map_err(protospread_core::CoreError::Fs)?;
            if ft.is_symlink() {
                return Err(usage(format!(
                    "{}: a symlink; a bag holds only files protospread wrote, never what a link points to",
                    p.display()
                )));
            }
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                files.push(p);
            } else {
                return Err(usage(format!("{}: not a regular file", p.display())));
            }
        }
    }
    files.sort();
    let mut seen = std::collections::BTreeSet::new();
    let mut bagged = Vec::new();
    for p in files {
        let rel = protospread_core::rel_path(out, &p);
        if rel == MANIFEST_NAME {
            bagged.push(p);
            continue;
        }
        match expected.entries.get(&rel) {
            Some(h) => {
                let actual = protospread_core::sha256_file(&p)?;
                if &actual != h {
                    return Err(usage(format!(
                        "{}: does not match {} (sha256 {actual}, listed {h}); the outputs changed after the run: rerun `protospread run` before bagging",
                        p.display(),
                        origin[&rel].display()
                    )));
                }
                if !in_top.contains(&rel) {
                    return Err(usage(format!(
                        "{}: not listed in {}: its stage folder is stale (made from outputs that changed since) or was never part of a run; run `protospread run` (or the stale stages) before bagging",
                        p.display(),
                        top.display()
                    )));
                }
                seen.insert(rel);
                bagged.push(p);
            }
            None if p.file_name().is_some_and(|n| n == MANIFEST_NAME) => bagged.push(p),
            None => {
                return Err(usage(format!(
                    "{}: not listed in any {MANIFEST_NAME} of {}; a bag holds only outputs protospread wrote",
                    p.display(),
                    out.display()
                )))
            }
        }
    }
    if let Some(missing) = expected.entries.keys().find(|k| !seen.contains(*k)) {
        return Err(usage(format!(
            "{}: lists {missing}, which is missing from {}",
            origin[missing].display(),
            out.display()
        )));
    }
    Ok(bagged)
}

/// A regular file (not a symlink) to bag, or an error naming it.
fn regular_file(p: &Path) -> Result<(), ReportError> {
    let m = fs_err::symlink_metadata(p).map_err(protospread_core::CoreError::Fs)?;
    if !m.file_type().is_file() {
        return Err(usage(format!(
            "{}: not a regular file (a symlink?); a bag never follows links",
            p.display()
        )));
    }
    Ok(())
}

/// Everything a bag of the run in `out` holds: configuration, inputs, checked outputs and
/// `provenance.json`, plus the `bag-info.txt` entries. `date` and `date_rule` come from
/// [`crate::bag::bagging_date`].
pub fn bag_contents(
    cfg: &Config,
    config_path: &Path,
    out: &Path,
    tool: &Tool<'_>,
    date: &str,
    date_rule: &str,
) -> Result<BagContents, ReportError> {
    let cache_top = protospread_core::cache_top(&cfg.fetch.cache_dir);
    let outputs = checked_outputs(out, cache_top.as_deref())?;
    if !out.join("report").is_dir() {
        return Err(usage(format!(
            "{} holds no report; run `protospread run --out {}` first",
            out.display(),
            out.display()
        )));
    }
    let mut payload = Vec::new();
    let config_name = config_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pipeline.toml".into());
    regular_file(config_path)?;
    payload.push(PayloadFile {
        path: format!("config/{config_name}"),
        content: Content::File(config_path.to_path_buf()),
    });
    for (rel, abs) in crate::verify::input_files(cfg, config_path)? {
        if abs == config_path || rel == config_name {
            continue;
        }
        regular_file(&abs)?;
        let path = if rel.starts_with("..") || rel.starts_with('/') {
            format!(
                "inputs/external/{}",
                abs.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            )
        } else {
            format!("inputs/{rel}")
        };
        payload.push(PayloadFile {
            path,
            content: Content::File(abs),
        });
    }
    for p in outputs {
        let rel = protospread_core::rel_path(out, &p);
        payload.push(PayloadFile {
            path: format!("outputs/{rel}"),
            content: Content::File(p),
        });
    }
    let inputs: Vec<_> = cfg
        .inputs
        .iter()
        .map(|i| {
            let (source, revision) = match i.source() {
                Ok(InputSource::Local(p)) => (format!("path:{}", p.display()), None),
                Ok(InputSource::Http(u)) => (format!("url:{u}"), None),
                Ok(InputSource::HuggingFace(h)) => {
                    (format!("hf:{}/{}", h.repo, h.file), Some(h.commit))
                }
                Err(e) => (format!("invalid: {e}"), None),
            };
            serde_json::json!({
                "name": i.name, "role": format!("{:?}", i.role).to_lowercase(),
                "instrument": i.instrument, "label": i.label,
                "source": source, "revision": revision, "sha256": i.sha256,
            })
        })
        .collect();
    let provenance = serde_json::json!({
        "tool": "protospread",
        "version": tool.version,
        "cargo_lock_sha256": protospread_core::sha256_hex(tool.cargo_lock),
        "config": { "file": config_name, "sha256": protospread_core::sha256_file(config_path)? },
        "study": cfg.study.name,
        "inputs": inputs,
        "bagging_date": date,
        "bagging_date_rule": date_rule,
        "layout": "data/config: configuration; data/inputs: input files by path relative to the configuration's folder; data/outputs: every output of the run except the download cache",
    });
    let mut text = serde_json::to_string_pretty(&provenance)
        .map_err(|e| usage(format!("provenance.json: {e}")))?;
    text.push('\n');
    payload.push(PayloadFile {
        path: "provenance.json".into(),
        content: Content::Bytes(text.into_bytes()),
    });
    let info = vec![
        (
            "Bag-Software-Agent".to_string(),
            format!("protospread {}", tool.version),
        ),
        ("Bagging-Date".to_string(), date.to_string()),
        (
            "External-Description".to_string(),
            format!(
                "{}: configuration, inputs, outputs and provenance of a protospread run",
                cfg.study.name
            ),
        ),
    ];
    Ok(BagContents { payload, info })
}
