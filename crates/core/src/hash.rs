//! sha256 of files and manifests in the format `sha256sum -c` reads.
//!
//! A manifest line is `<64 lowercase hex><two spaces><path>`, paths relative to the
//! manifest's folder with `/` separators, lines sorted by path (byte order), one trailing
//! newline. Sorting by path makes the manifest itself deterministic.

use crate::{CoreError, Result};
use fs_err as fs;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Name of the manifest every stage writes into its output folder.
pub const MANIFEST_NAME: &str = "SHA256SUMS";

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Lowercase hex sha256 of the file at `path`, streamed.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = fs::File::open(path).map_err(CoreError::Fs)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(CoreError::Fs)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// True if `s` is 64 lowercase hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A sorted map from relative path (with `/`) to sha256.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// sha256 by relative path.
    pub entries: BTreeMap<String, String>,
}

impl Manifest {
    /// Hash every regular file below `dir`, except any file named [`MANIFEST_NAME`] and
    /// temporaries (names starting with `.`).
    pub fn from_dir(dir: &Path) -> Result<Self> {
        Self::from_dir_excluding(dir, &[])
    }

    /// As [`Manifest::from_dir`], also skipping the top-level entries named in `skip`
    /// (e.g. the download cache, which is not an output).
    pub fn from_dir_excluding(dir: &Path, skip: &[&str]) -> Result<Self> {
        let mut entries = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in fs::read_dir(&d).map_err(CoreError::Fs)? {
                let entry = entry.map_err(CoreError::Fs)?;
                let p = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') || (d == dir && skip.contains(&name.as_str())) {
                    continue;
                }
                let ft = entry.file_type().map_err(CoreError::Fs)?;
                if ft.is_dir() {
                    stack.push(p);
                } else if ft.is_file() && name != MANIFEST_NAME {
                    entries.insert(rel_path(dir, &p), sha256_file(&p)?);
                }
            }
        }
        Ok(Manifest { entries })
    }

    /// Render in `sha256sum` format.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for (path, hash) in &self.entries {
            s.push_str(hash);
            s.push_str("  ");
            s.push_str(path);
            s.push('\n');
        }
        s
    }

    /// Parse `sha256sum` format (text mode `  ` or binary mode ` *`).
    pub fn parse(text: &str, origin: &Path) -> Result<Self> {
        let mut entries = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: &str| CoreError::Manifest {
                path: origin.to_path_buf(),
                line: i + 1,
                message: message.to_string(),
            };
            if line.len() < 67 {
                return Err(err("expected '<sha256>  <path>'"));
            }
            let (hash, rest) = line.split_at(64);
            if !is_sha256_hex(hash) {
                return Err(err("not a lowercase sha256"));
            }
            let path = rest
                .strip_prefix("  ")
                .or_else(|| rest.strip_prefix(" *"))
                .ok_or_else(|| err("expected two spaces after the hash"))?;
            if entries.insert(path.to_string(), hash.to_string()).is_some() {
                return Err(err(&format!("path {path} listed twice")));
            }
        }
        Ok(Manifest { entries })
    }

    /// Read a manifest file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = fs::read_to_string(path).map_err(CoreError::Fs)?;
        Self::parse(&text, path)
    }

    /// Compare with `actual`: every difference, sorted by path.
    pub fn diff(&self, actual: &Manifest) -> Vec<ManifestDiff> {
        let mut out = Vec::new();
        for (p, h) in &self.entries {
            match actual.entries.get(p) {
                None => out.push(ManifestDiff::Missing(p.clone())),
                Some(a) if a != h => out.push(ManifestDiff::Changed {
                    path: p.clone(),
                    expected: h.clone(),
                    actual: a.clone(),
                }),
                _ => {}
            }
        }
        for p in actual.entries.keys() {
            if !self.entries.contains_key(p) {
                out.push(ManifestDiff::Extra(p.clone()));
            }
        }
        out.sort_by(|a, b| a.path().cmp(b.path()));
        out
    }
}

/// One difference between an expected and an actual manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestDiff {
    /// In the manifest, not on disk.
    Missing(String),
    /// On disk, not in the manifest.
    Extra(String),
    /// Present in both with different hashes.
    Changed {
        /// Relative path.
        path: String,
        /// Hash in the manifest.
        expected: String,
        /// Hash of the file on disk.
        actual: String,
    },
}

impl ManifestDiff {
    /// The relative path the difference concerns.
    pub fn path(&self) -> &str {
        match self {
            ManifestDiff::Missing(p) | ManifestDiff::Extra(p) => p,
            ManifestDiff::Changed { path, .. } => path,
        }
    }
}

/// `p` relative to `base`, with `/` separators.
pub fn rel_path(base: &Path, p: &Path) -> String {
    let rel: PathBuf = p.strip_prefix(base).unwrap_or(p).to_path_buf();
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Hash every file below `dir` and write `dir/SHA256SUMS` atomically.
pub fn write_manifest(dir: &Path) -> Result<Manifest> {
    let m = Manifest::from_dir(dir)?;
    crate::atomic_file::write_atomic(&dir.join(MANIFEST_NAME), m.render().as_bytes())?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn roundtrip_and_diff() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("b.txt"), b"b").unwrap();
        fs::write(dir.path().join("sub/a.txt"), b"a").unwrap();
        let m = write_manifest(dir.path()).unwrap();
        let text = fs::read_to_string(dir.path().join(MANIFEST_NAME)).unwrap();
        assert_eq!(Manifest::parse(&text, Path::new("x")).unwrap(), m);
        let keys: Vec<_> = m.entries.keys().cloned().collect();
        assert_eq!(keys, vec!["b.txt", "sub/a.txt"]);
        fs::write(dir.path().join("b.txt"), b"B").unwrap();
        let d = m.diff(&Manifest::from_dir(dir.path()).unwrap());
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path(), "b.txt");
    }

    #[test]
    fn bad_manifest_line_is_named() {
        let e = Manifest::parse("zz  a\n", Path::new("SUMS")).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
    }
}
