//! Comparing a regeneration with the committed `checksums/` folder.
//!
//! Layout of `checksums/` (see docs/report.md):
//! - `inputs.sha256`: every file under `data/`, the configuration file, and every local input
//!   named in the configuration that lies outside `data/`; paths relative to the folder of the
//!   configuration file.
//! - `outputs.sha256`: every file the pipeline writes under the output folder, paths relative
//!   to it, except the download cache (`cache/`) and the `SHA256SUMS` manifests (they only
//!   repeat these hashes).
//! - `tables/<name>.csv`: a copy of every canonical CSV table (`report/<name>.csv`), so that a
//!   differing table can be shown down to its first differing row and column without any other
//!   reference folder. Each copy must itself match its hash in `outputs.sha256`.
//!
//! All files are in `sha256sum` format, so `sha256sum -c` can check them by hand too.

use crate::render::parse_csv;
use crate::ReportError;
use protospread_core::{Config, InputSource, Manifest, ManifestDiff};
use std::path::{Path, PathBuf};

/// Name of the input manifest in the checksums folder.
pub(crate) const INPUTS: &str = "inputs.sha256";
/// Name of the output manifest in the checksums folder.
pub(crate) const OUTPUTS: &str = "outputs.sha256";
/// Folder of the committed canonical tables in the checksums folder.
pub(crate) const TABLES: &str = "tables";

/// One difference found by [`compare`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// What is compared: `input`, `output` or `checksums`.
    pub kind: &'static str,
    /// The file concerned (input: relative to the configuration's folder; output: relative to
    /// the output folder; checksums: relative to the checksums folder).
    pub path: String,
    /// What differs, in one line.
    pub detail: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.path, self.detail)
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ReportError> {
    let rd = fs_err::read_dir(dir).map_err(protospread_core::CoreError::Fs)?;
    for e in rd {
        let e = e.map_err(protospread_core::CoreError::Fs)?;
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let ft = e.file_type().map_err(protospread_core::CoreError::Fs)?;
        if ft.is_dir() {
            walk(&p, out)?;
        } else if ft.is_file() {
            out.push(p);
        }
    }
    Ok(())
}

/// Every input file of a configuration: files under `<base>/data/`, the configuration file,
/// and local inputs outside `data/`. Returned as (path relative to base, absolute path),
/// sorted by relative path.
pub(crate) fn input_files(
    cfg: &Config,
    config_path: &Path,
) -> Result<Vec<(String, PathBuf)>, ReportError> {
    let base = &cfg.base_dir;
    let mut files = Vec::new();
    let data = base.join("data");
    if data.is_dir() {
        walk(&data, &mut files)?;
    }
    files.push(config_path.to_path_buf());
    for i in &cfg.inputs {
        if let Ok(InputSource::Local(p)) = i.source() {
            let abs = cfg.resolve(&p);
            if !files.iter().any(|f| same_file(f, &abs)) {
                files.push(abs);
            }
        }
    }
    let mut out: Vec<(String, PathBuf)> =
        files.into_iter().map(|p| (rel_to(base, &p), p)).collect();
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs_err::canonicalize(a), fs_err::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn rel_to(base: &Path, p: &Path) -> String {
    if let (Ok(b), Ok(q)) = (fs_err::canonicalize(base), fs_err::canonicalize(p)) {
        if let Ok(r) = q.strip_prefix(&b) {
            return protospread_core::rel_path(Path::new(""), r);
        }
    }
    protospread_core::rel_path(base, p)
}

/// The manifest of the inputs (see [`input_files`]). A missing input file is an error.
pub fn input_manifest(cfg: &Config, config_path: &Path) -> Result<Manifest, ReportError> {
    let mut m = Manifest::default();
    for (rel, abs) in input_files(cfg, config_path)? {
        m.entries.insert(rel, protospread_core::sha256_file(&abs)?);
    }
    Ok(m)
}

/// The manifest of the outputs: every file under `out` except `cache/` and `SHA256SUMS`.
pub(crate) fn output_manifest(out: &Path) -> Result<Manifest, ReportError> {
    Ok(Manifest::from_dir_excluding(out, &["cache"])?)
}

/// Where a CSV table first differs: `None` if equal.
///
/// Rows are numbered as lines of the file (line 1 is the header); the column is named by the
/// expected header. Extra or missing rows and columns are differences too.
pub fn first_csv_difference(expected: &[u8], actual: &[u8]) -> Option<String> {
    let (e, a) = match (parse_csv(expected), parse_csv(actual)) {
        (Ok(e), Ok(a)) => (e, a),
        (Err(x), _) => return Some(format!("expected table is not valid CSV: {x}")),
        (_, Err(x)) => return Some(format!("regenerated table is not valid CSV: {x}")),
    };
    let header: Vec<String> = e.first().cloned().unwrap_or_default();
    for i in 0..e.len().max(a.len()) {
        match (e.get(i), a.get(i)) {
            (Some(er), Some(ar)) => {
                for j in 0..er.len().max(ar.len()) {
                    let ev = er.get(j).map(String::as_str);
                    let av = ar.get(j).map(String::as_str);
                    if ev != av {
                        let col = header
                            .get(j)
                            .map(|h| format!("column {} `{h}`", j + 1))
                            .unwrap_or_else(|| format!("column {}", j + 1));
                        return Some(format!(
                            "first difference at line {} ({}), {col}: expected {}, regenerated {}",
                            i + 1,
                            if i == 0 {
                                "header".to_string()
                            } else {
                                format!("row {i}")
                            },
                            ev.map(|v| format!("{v:?}"))
                                .unwrap_or_else(|| "no value".into()),
                            av.map(|v| format!("{v:?}"))
                                .unwrap_or_else(|| "no value".into()),
                        ));
                    }
                }
            }
            (Some(_), None) => {
                return Some(format!(
                    "regenerated table ends at line {}; expected {} lines",
                    i,
                    e.len()
                ))
            }
            (None, Some(_)) => {
                return Some(format!(
                    "regenerated table has extra lines from line {} ({} lines, expected {})",
                    i + 1,
                    a.len(),
                    e.len()
                ))
            }
            (None, None) => unreachable!(),
        }
    }
    if expected != actual {
        return Some("same cells, different bytes (quoting or line ends)".to_string());
    }
    None
}

/// Read the committed manifests; a missing file is an error that says how to create it.
pub fn read_expected(checksums: &Path) -> Result<(Manifest, Manifest), ReportError> {
    let read = |n: &str| {
        let p = checksums.join(n);
        if !p.is_file() {
            return Err(ReportError::Usage(format!(
                "{} does not exist; create it with `protospread verify --update`",
                p.display()
            )));
        }
        Ok(Manifest::read(&p)?)
    };
    Ok((read(INPUTS)?, read(OUTPUTS)?))
}

/// Compare the inputs with the committed `inputs.sha256`.
pub fn compare_inputs(expected: &Manifest, actual: &Manifest) -> Vec<Difference> {
    expected
        .diff(actual)
        .into_iter()
        .map(|d| Difference {
            kind: "input",
            path: d.path().to_string(),
            detail: match d {
                ManifestDiff::Missing(_) => "listed in inputs.sha256 but missing".into(),
                ManifestDiff::Extra(_) => "present but not listed in inputs.sha256".into(),
                ManifestDiff::Changed {
                    expected, actual, ..
                } => {
                    format!("sha256 {actual}, expected {expected}")
                }
            },
        })
        .collect()
}

/// Compare regenerated outputs in `out` with the committed `outputs.sha256` and tables.
pub fn compare_outputs(
    checksums: &Path,
    expected: &Manifest,
    out: &Path,
) -> Result<Vec<Difference>, ReportError> {
    let actual = output_manifest(out)?;
    let mut diffs = Vec::new();
    for d in expected.diff(&actual) {
        let path = d.path().to_string();
        let detail = match &d {
            ManifestDiff::Missing(_) => "expected but not regenerated".to_string(),
            ManifestDiff::Extra(_) => "regenerated but not in outputs.sha256".to_string(),
            ManifestDiff::Changed {
                expected: eh,
                actual: ah,
                ..
            } => {
                let mut s = format!("sha256 {ah}, expected {eh}");
                if let Some(name) = path
                    .strip_prefix("report/")
                    .filter(|n| n.ends_with(".csv") && !n.contains('/'))
                {
                    let copy = checksums.join(TABLES).join(name);
                    match fs_err::read(&copy) {
                        Ok(exp) if protospread_core::sha256_hex(&exp) == *eh => {
                            let act = fs_err::read(out.join(&path)).map_err(protospread_core::CoreError::Fs)?;
                            if let Some(w) = first_csv_difference(&exp, &act) {
                                s.push_str("; ");
                                s.push_str(&w);
                            }
                        }
                        Ok(_) => s.push_str("; the committed copy in checksums/tables differs from its hash, so no row can be named"),
                        Err(_) => s.push_str("; no committed copy in checksums/tables to name the row"),
                    }
                }
                s
            }
        };
        diffs.push(Difference {
            kind: "output",
            path,
            detail,
        });
    }
    // The committed table copies must match the committed hashes, or they mislead.
    let tdir = checksums.join(TABLES);
    if tdir.is_dir() {
        let mut copies = Vec::new();
        walk(&tdir, &mut copies)?;
        copies.sort();
        for c in copies {
            let name = protospread_core::rel_path(&tdir, &c);
            let key = format!("report/{name}");
            let h = protospread_core::sha256_file(&c)?;
            match expected.entries.get(&key) {
                Some(eh) if *eh == h => {}
                Some(_) => diffs.push(Difference {
                    kind: "checksums",
                    path: format!("{TABLES}/{name}"),
                    detail: format!("does not match the hash of {key} in outputs.sha256"),
                }),
                None => diffs.push(Difference {
                    kind: "checksums",
                    path: format!("{TABLES}/{name}"),
                    detail: format!("{key} is not listed in outputs.sha256"),
                }),
            }
        }
    }
    Ok(diffs)
}

/// Rewrite the checksums folder from a regeneration in `out`: both manifests and the table
/// copies (stale copies are removed). Returns (inputs, outputs, tables) counts.
pub fn update(
    checksums: &Path,
    inputs: &Manifest,
    out: &Path,
) -> Result<(usize, usize, usize), ReportError> {
    let outputs = output_manifest(out)?;
    let tdir = checksums.join(TABLES);
    let mut staged = protospread_core::Staged::new();
    staged.put(&checksums.join(INPUTS), inputs.render().as_bytes())?;
    staged.put(&checksums.join(OUTPUTS), outputs.render().as_bytes())?;
    let mut names = Vec::new();
    for p in outputs.entries.keys() {
        if let Some(name) = p
            .strip_prefix("report/")
            .filter(|n| n.ends_with(".csv") && !n.contains('/'))
        {
            let bytes = fs_err::read(out.join(p)).map_err(protospread_core::CoreError::Fs)?;
            staged.put(&tdir.join(name), &bytes)?;
            names.push(name.to_string());
        }
    }
    staged.commit()?;
    if let Ok(rd) = fs_err::read_dir(&tdir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if !names.contains(&n) && !n.starts_with('.') {
                fs_err::remove_file(e.path()).map_err(protospread_core::CoreError::Fs)?;
            }
        }
    }
    Ok((inputs.entries.len(), outputs.entries.len(), names.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_difference_names_row_and_column() {
        let e = b"a,b\n1,2\n3,4\n";
        assert_eq!(first_csv_difference(e, e), None);
        let d = first_csv_difference(e, b"a,b\n1,2\n3,5\n").unwrap();
        assert!(
            d.contains("line 3 (row 2), column 2 `b`: expected \"4\", regenerated \"5\""),
            "{d}"
        );
        let d = first_csv_difference(e, b"a,b\n1,2\n").unwrap();
        assert!(d.contains("ends at line 2"), "{d}");
        let d = first_csv_difference(e, b"a,c\n1,2\n3,4\n").unwrap();
        assert!(d.contains("header"), "{d}");
        let d = first_csv_difference(e, b"a,b\n1,2\n3,4\n5,6\n").unwrap();
        assert!(d.contains("extra lines from line 4"), "{d}");
    }

    #[test]
    fn outputs_compare_and_update() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let ck = dir.path().join("checksums");
        fs_err::create_dir_all(out.join("report")).unwrap();
        fs_err::create_dir_all(out.join("cache")).unwrap();
        fs_err::write(out.join("report/t.csv"), "a,b\n1,2\n").unwrap();
        fs_err::write(out.join("cache/x"), "ignored").unwrap();
        fs_err::write(out.join("report/SHA256SUMS"), "ignored").unwrap();
        update(&ck, &Manifest::default(), &out).unwrap();
        let (_, exp) = read_expected(&ck).unwrap();
        assert_eq!(exp.entries.keys().collect::<Vec<_>>(), vec!["report/t.csv"]);
        assert!(compare_outputs(&ck, &exp, &out).unwrap().is_empty());
        fs_err::write(out.join("report/t.csv"), "a,b\n1,3\n").unwrap();
        fs_err::write(out.join("report/new.md"), "x").unwrap();
        let d = compare_outputs(&ck, &exp, &out).unwrap();
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].path, "report/new.md");
        assert!(
            d[1].detail.contains("line 2 (row 1), column 2 `b`"),
            "{}",
            d[1]
        );
        fs_err::write(ck.join("tables/t.csv"), "a,b\n9,9\n").unwrap();
        let d = compare_outputs(&ck, &exp, &out).unwrap();
        assert!(
            d.iter()
                .any(|x| x.kind == "checksums" && x.path == "tables/t.csv"),
            "{d:?}"
        );
    }
}
