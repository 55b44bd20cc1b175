//! BagIt bags (RFC 8493, version 1.0) with sha256 and sha512 manifests.
//!
//! A bag is built in a temporary sibling folder and renamed into place, so a failure leaves no
//! half-written bag. Manifest lines are sorted by path; file contents are copied verbatim.
//! Every byte of the bag is determined by the payload and the `bag-info.txt` entries given,
//! so the only date in it is the one the caller passes (see [`bagging_date`]).

use crate::ReportError;
use protospread_core::CoreError;
use sha2::{Digest, Sha256, Sha512};
use std::path::{Path, PathBuf};

/// Where a payload file's bytes come from.
#[derive(Debug, Clone)]
pub enum Content {
    /// Copy this file.
    File(PathBuf),
    /// Write these bytes.
    Bytes(Vec<u8>),
}

/// One payload file: its path below `data/` (with `/`) and its content.
#[derive(Debug, Clone)]
pub struct PayloadFile {
    /// Path inside `data/`, with `/` separators.
    pub path: String,
    /// What to write there.
    pub content: Content,
}

/// What [`write_bag`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BagSummary {
    /// Payload files written.
    pub files: usize,
    /// Payload size in bytes.
    pub octets: u64,
}

/// RFC 8493 section 2.1.3: in manifests, `%`, CR and LF in a path are percent-encoded.
pub(crate) fn encode_path(p: &str) -> String {
    p.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// `YYYY-MM-DD`, the UTC date of `secs` seconds since 1970-01-01T00:00:00Z (proleptic
/// Gregorian calendar); `None` outside chrono's range of years.
pub(crate) fn utc_date(secs: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0).map(|t| t.format("%Y-%m-%d").to_string())
}

/// The `Bagging-Date`: `explicit` (a `YYYY-MM-DD` given by the user) if set; else the UTC date
/// of `source_date_epoch` (the `SOURCE_DATE_EPOCH` convention of reproducible builds, seconds
/// since 1970) if set; else the UTC date of `now_secs`. Returns the date and the rule used.
pub fn bagging_date(
    explicit: Option<&str>,
    source_date_epoch: Option<&str>,
    now_secs: i64,
) -> Result<(String, &'static str), ReportError> {
    if let Some(d) = explicit {
        let ok = d.len() == 10
            && d.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        if !ok {
            return Err(ReportError::Usage(format!(
                "--date {d:?}: expected YYYY-MM-DD"
            )));
        }
        let num = |r: std::ops::Range<usize>| d[r].parse::<u32>().unwrap_or(0);
        let (y, m, day) = (num(0..4), num(5..7), num(8..10));
        if chrono::NaiveDate::from_ymd_opt(y as i32, m, day).is_none() {
            return Err(ReportError::Usage(format!(
                "--date {d:?}: not a calendar date (month 01..12, day within the month)"
            )));
        }
        return Ok((d.to_string(), "given with --date"));
    }
    if let Some(e) = source_date_epoch {
        let secs: i64 = e.trim().parse().map_err(|_| {
            ReportError::Usage(format!(
                "SOURCE_DATE_EPOCH={e:?} is not a whole number of seconds"
            ))
        })?;
        let date = utc_date(secs).ok_or_else(|| {
            ReportError::Usage(format!(
                "SOURCE_DATE_EPOCH={e:?} is out of the range of dates"
            ))
        })?;
        return Ok((date, "from SOURCE_DATE_EPOCH"));
    }
    let date = utc_date(now_secs).ok_or_else(|| {
        ReportError::Usage(format!("the clock ({now_secs} s since 1970) is not a date"))
    })?;
    Ok((date, "the UTC date of the run"))
}

fn check_payload_path(p: &str) -> Result<(), ReportError> {
    let bad = p.is_empty()
        || p.starts_with('/')
        || p.contains('\\')
        || p.split('/').any(|c| c.is_empty() || c == "." || c == "..");
    if bad {
        return Err(ReportError::Usage(format!(
            "payload path {p:?} is not a plain relative path"
        )));
    }
    Ok(())
}

/// Write a bag at `dest` (which must not exist). `info` are `bag-info.txt` entries written in
/// the given order before `Payload-Oxum`, which is computed here.
pub fn write_bag(
    dest: &Path,
    payload: &[PayloadFile],
    info: &[(String, String)],
) -> Result<BagSummary, ReportError> {
    if dest.exists() {
        return Err(ReportError::Usage(format!(
            "{} already exists; give a new folder for the bag",
            dest.display()
        )));
    }
    let mut files: Vec<&PayloadFile> = payload.iter().collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    for w in files.windows(2) {
        if w[0].path == w[1].path {
            return Err(ReportError::Usage(format!(
                "payload path {} given twice",
                w[0].path
            )));
        }
    }
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| ReportError::Usage(format!("{}: not a folder name", dest.display())))?;
    let tmp = dest.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = fs_err::remove_dir_all(&tmp);
    let result = build(&tmp, &files, info);
    match result {
        Ok(summary) => {
            fs_err::rename(&tmp, dest).map_err(CoreError::Fs)?;
            Ok(summary)
        }
        Err(e) => {
            let _ = fs_err::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

fn build(
    root: &Path,
    files: &[&PayloadFile],
    info: &[(String, String)],
) -> Result<BagSummary, ReportError> {
    let mut m256 = String::new();
    let mut m512 = String::new();
    let mut octets = 0u64;
    for f in files {
        check_payload_path(&f.path)?;
        let bytes = match &f.content {
            Content::File(p) => {
                // A bag holds files, never what a symlink points to.
                let m = fs_err::symlink_metadata(p).map_err(CoreError::Fs)?;
                if !m.file_type().is_file() {
                    return Err(ReportError::Usage(format!(
                        "{}: not a regular file (a symlink?); a bag never follows links",
                        p.display()
                    )));
                }
                fs_err::read(p).map_err(CoreError::Fs)?
            }
            Content::Bytes(b) => b.clone(),
        };
        let dest = root.join("data").join(&f.path);
        if let Some(parent) = dest.parent() {
            fs_err::create_dir_all(parent).map_err(CoreError::Fs)?;
        }
        fs_err::write(&dest, &bytes).map_err(CoreError::Fs)?;
        octets += bytes.len() as u64;
        let p = encode_path(&format!("data/{}", f.path));
        m256.push_str(&format!("{}  {p}\n", hex::encode(Sha256::digest(&bytes))));
        m512.push_str(&format!("{}  {p}\n", hex::encode(Sha512::digest(&bytes))));
    }
    let bagit = "BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n";
    let mut bag_info = String::new();
    for (k, v) in info {
        if k.contains(':') || k.contains('\n') || v.contains('\n') {
            return Err(ReportError::Usage(format!(
                "bag-info entry {k:?} must be one line without ':' in its label"
            )));
        }
        bag_info.push_str(&format!("{k}: {v}\n"));
    }
    bag_info.push_str(&format!("Payload-Oxum: {octets}.{}\n", files.len()));
    let tags: [(&str, &str); 4] = [
        ("bag-info.txt", &bag_info),
        ("bagit.txt", bagit),
        ("manifest-sha256.txt", &m256),
        ("manifest-sha512.txt", &m512),
    ];
    let mut t256 = String::new();
    let mut t512 = String::new();
    for (n, content) in tags {
        let p = root.join(n);
        fs_err::write(&p, content).map_err(CoreError::Fs)?;
        t256.push_str(&format!(
            "{}  {n}\n",
            hex::encode(Sha256::digest(content.as_bytes()))
        ));
        t512.push_str(&format!(
            "{}  {n}\n",
            hex::encode(Sha512::digest(content.as_bytes()))
        ));
    }
    for (n, content) in [
        ("tagmanifest-sha256.txt", t256),
        ("tagmanifest-sha512.txt", t512),
    ] {
        let p = root.join(n);
        fs_err::write(&p, content).map_err(CoreError::Fs)?;
    }
    Ok(BagSummary {
        files: files.len(),
        octets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc_date(0).unwrap(), "1970-01-01");
        assert_eq!(utc_date(19_723 * 86_400 + 86_399).unwrap(), "2024-01-01");
        assert_eq!(utc_date(11_016 * 86_400).unwrap(), "2000-02-29");
        assert_eq!(utc_date(-1).unwrap(), "1969-12-31");
        assert!(bagging_date(None, Some("99999999999999"), 0).is_err());
        assert_eq!(
            bagging_date(Some("2025-01-02"), Some("0"), 5).unwrap().0,
            "2025-01-02"
        );
        assert_eq!(
            bagging_date(None, Some("86400"), 5).unwrap().0,
            "1970-01-02"
        );
        assert!(bagging_date(Some("2025-1-2"), None, 0).is_err());
        for bad in [
            "2025-13-45",
            "2025-02-29",
            "2025-04-31",
            "2025-00-10",
            "2025-01-00",
        ] {
            assert!(bagging_date(Some(bad), None, 0).is_err(), "{bad}");
        }
        assert!(bagging_date(Some("2024-02-29"), None, 0).is_ok());
        assert!(bagging_date(None, Some("x"), 0).is_err());
    }

    #[test]
    fn bag_layout_and_manifests() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("bag");
        let payload = vec![
            PayloadFile {
                path: "b/x.txt".into(),
                content: Content::Bytes(b"hello".to_vec()),
            },
            PayloadFile {
                path: "a.txt".into(),
                content: Content::Bytes(b"abc".to_vec()),
            },
        ];
        let s = write_bag(
            &dest,
            &payload,
            &[("Bagging-Date".into(), "2025-01-02".into())],
        )
        .unwrap();
        assert_eq!(
            s,
            BagSummary {
                files: 2,
                octets: 8
            }
        );
        let m = fs_err::read_to_string(dest.join("manifest-sha256.txt")).unwrap();
        assert_eq!(
            m,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  data/a.txt\n\
             2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824  data/b/x.txt\n"
        );
        let info = fs_err::read_to_string(dest.join("bag-info.txt")).unwrap();
        assert_eq!(info, "Bagging-Date: 2025-01-02\nPayload-Oxum: 8.2\n");
        assert!(
            write_bag(&dest, &payload, &[]).is_err(),
            "existing destination"
        );
        let bad = vec![PayloadFile {
            path: "../x".into(),
            content: Content::Bytes(vec![]),
        }];
        assert!(write_bag(&dir.path().join("bag2"), &bad, &[]).is_err());
        assert!(!dir.path().join("bag2").exists());
        assert_eq!(encode_path("a%b\nc"), "a%25b%0Ac");
    }
}
