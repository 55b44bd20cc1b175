//! What a recording run sends and how: the instruments, conditions and requests chosen by the
//! command line within `[administer]`, and the client settings, each checked against the
//! bounds a configuration file is held to (so a flag cannot do what pipeline.toml may not).

use crate::client::Client;
use crate::instrument::{missing_instrument, Instrument};
use crate::plan::{conditions, plan, Condition, Planned};
use crate::AdministerError;
use protospread_core::{
    check_range, AdministerSection, CONCURRENCY_RANGE, RETRIES_RANGE, TIMEOUT_SECONDS_RANGE,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a recording run of `model` appends its records when no file is named: the file per
/// model `administer/<model>.jsonl` under the output folder `root`, with every character of the
/// model id outside `[A-Za-z0-9._-]` replaced by `_`.
pub fn default_output(root: &Path, model: &str) -> PathBuf {
    let safe: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    root.join("administer").join(format!("{safe}.jsonl"))
}

/// Timeout, retries, pause between attempts and requests in flight of a recording run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// Bound on each attempt, from connect to the last byte.
    pub timeout: Duration,
    /// Attempts after the first.
    pub retries: u32,
    /// Pause before a retry (doubled after each).
    pub backoff: Duration,
    /// Requests in flight at once.
    pub concurrency: usize,
}

impl ClientSettings {
    /// `section`'s settings, each replaced by its command-line value when one is given, and
    /// each checked against its range (the message names the flag).
    pub fn resolve(
        section: &AdministerSection,
        timeout_seconds: Option<u64>,
        retries: Option<u32>,
        concurrency: Option<usize>,
    ) -> Result<Self, AdministerError> {
        let timeout = timeout_seconds.unwrap_or(section.timeout_seconds);
        let retries = retries.unwrap_or(section.retries);
        let concurrency = concurrency.unwrap_or(section.concurrency);
        let checks = [
            ("--timeout", timeout, &TIMEOUT_SECONDS_RANGE),
            ("--retries", u64::from(retries), &RETRIES_RANGE),
            ("--concurrency", concurrency as u64, &CONCURRENCY_RANGE),
        ];
        for (flag, value, range) in checks {
            check_range(flag, value, range)?;
        }
        Ok(ClientSettings {
            timeout: Duration::from_secs(timeout),
            retries,
            backoff: Duration::from_millis(section.retry_backoff_ms),
            concurrency,
        })
    }

    /// A client for `base_url` with these settings.
    pub fn client(
        &self,
        base_url: &str,
        api_key: Option<String>,
    ) -> Result<Client, AdministerError> {
        Client::new(base_url, api_key, self.timeout, self.retries, self.backoff)
    }
}

/// What the command line selects: instrument files, tests, conditions and items; an empty
/// list means all (for instruments and conditions: those of `[administer]`).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Instrument files (TOML).
    pub instruments: Vec<PathBuf>,
    /// Tests to keep, by name.
    pub tests: Vec<String>,
    /// Condition names.
    pub conditions: Vec<String>,
    /// Human item numbers to keep in single-item conditions.
    pub items: Vec<u32>,
}

/// The requests of a recording run.
#[derive(Debug)]
pub struct Plan {
    /// The instruments administered, one per test.
    pub instruments: Vec<Instrument>,
    /// The conditions administered.
    pub conditions: Vec<Condition>,
    /// Every request, in canonical order.
    pub requests: Vec<Planned>,
}

impl Selection {
    /// The requests for `model`: instrument files of the selection (else `[administer]`
    /// instruments, relative to `base`), narrowed to its tests, under its conditions (else
    /// `[administer]` conditions), single-item requests narrowed to its items.
    ///
    /// Refused: an empty model, two files for one test, a test or an item the instruments do
    /// not have (it would silently plan nothing), and nothing to administer.
    pub fn plan(
        &self,
        model: &str,
        section: &AdministerSection,
        base: &std::path::Path,
    ) -> Result<Plan, AdministerError> {
        if model.trim().is_empty() {
            return Err(AdministerError::Config("--model is empty".into()));
        }
        let files: Vec<PathBuf> = if self.instruments.is_empty() {
            section.instruments.iter().map(|p| base.join(p)).collect()
        } else {
            self.instruments.clone()
        };
        let mut instruments: Vec<Instrument> = Vec::new();
        for f in &files {
            let inst = Instrument::load(f)?;
            if instruments.iter().any(|i| i.test == inst.test) {
                return Err(AdministerError::Config(format!(
                    "two instrument files declare test '{}' ({})",
                    inst.test,
                    f.display()
                )));
            }
            instruments.push(inst);
        }
        if let Some(t) = self
            .tests
            .iter()
            .find(|t| !instruments.iter().any(|i| &i.test == *t))
        {
            return Err(missing_instrument(t));
        }
        if !self.tests.is_empty() {
            instruments.retain(|i| self.tests.contains(&i.test));
        }
        if instruments.is_empty() {
            return Err(AdministerError::Config(
                "no instrument file given (--instrument FILE)".into(),
            ));
        }
        let names = if self.conditions.is_empty() {
            &section.conditions
        } else {
            &self.conditions
        };
        let conditions = conditions(names, section)?;
        let mut requests = plan(model, &instruments, &conditions, section)?;
        if let Some(i) = self
            .items
            .iter()
            .find(|i| !requests.iter().any(|p| p.columns.item == Some(**i)))
        {
            let ranges: Vec<String> = instruments
                .iter()
                .map(|inst| format!("{} 1..{}", inst.test, inst.items.len()))
                .collect();
            return Err(AdministerError::Config(format!(
                "--items: {i} is not an item of any administered test in a single-item condition (items: {})",
                ranges.join(", ")
            )));
        }
        if !self.items.is_empty() {
            requests.retain(|p| p.columns.item.is_none_or(|i| self.items.contains(&i)));
        }
        Ok(Plan {
            instruments,
            conditions,
            requests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_is_checked_against_its_range_and_named_by_its_flag() {
        let sec = AdministerSection::default();
        let ok = ClientSettings::resolve(&sec, Some(5), Some(0), Some(1)).unwrap();
        assert_eq!(ok.timeout, Duration::from_secs(5));
        for (t, r, c, flag) in [
            (Some(0), None, None, "--timeout = 0"),
            (None, Some(u32::MAX), None, "--retries"),
            (None, None, Some(0), "--concurrency = 0"),
        ] {
            let e = ClientSettings::resolve(&sec, t, r, c)
                .unwrap_err()
                .to_string();
            assert!(e.contains(flag) && e.contains("out of range"), "{e}");
        }
    }

    #[test]
    fn a_selection_naming_what_the_instruments_lack_is_refused() {
        let sec = AdministerSection::default();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cfg = protospread_core::Config::load(&root.join("pipeline.toml")).unwrap();
        let sel = |s: Selection| {
            s.plan("m", &cfg.administer, &root)
                .map(|p| p.requests.len())
        };
        let all = sel(Selection::default()).unwrap();
        assert!(all > 0);
        let e = sel(Selection {
            tests: vec!["no_such_test".into()],
            ..Selection::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("no_such_test"), "{e}");
        let e = sel(Selection {
            items: vec![9999],
            ..Selection::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("--items: 9999"), "{e}");
        let e = Selection::default().plan(" ", &sec, &root).unwrap_err();
        assert!(e.to_string().contains("--model is empty"), "{e}");
        let one = sel(Selection {
            items: vec![1],
            ..Selection::default()
        })
        .unwrap();
        assert!(one < all);
    }
}
