//! The fetch stage of protospread: bring every input of `pipeline.toml` in, verify its
//! sha256 before anything reads it, and import it.
//!
//! - Sources ([`resolve`]): a local path (relative to the configuration's folder), an
//!   http(s) URL, or a Hugging Face dataset file at a pinned commit,
//!   `{endpoint}/datasets/{repo}/resolve/{commit}/{file}`.
//! - Downloads go to a temporary file in the cache folder, are checked for length and
//!   sha256, and only then renamed to `<cache>/<sha256>/<file name>` ([`obtain`]). A valid cached file is
//!   used without any network access.
//! - `role = "human"` inputs become `out/fetch/human/<instrument>.parquet` with the explicit
//!   schema of [`protospread_core::instrument_schema`] ([`import_human_csv`]);
//!   `role = "answers"` inputs are imported by [`import_into`] (validated,
//!   normalized, sorted) and become `out/fetch/answers/<name>.parquet` (a Parquet file
//!   already in that form is checked, then its column chunks are copied, not encoded again);
//!   `role = "other"` inputs are copied verbatim to `out/fetch/other/<name>`.
//! - All outputs of a run are committed together ([`protospread_core::Staged`]); on
//!   any error nothing under `out/fetch` changes. Then `out/fetch/SHA256SUMS` is written.
//!
//! Everything is described for users in `docs/fetch.md`.

mod cells;
mod http;
mod human;
mod import;

pub use http::UrlError;
pub use human::{
    import_human_csv, import_human_csv_reporting, import_human_csv_stream, CsvError, CsvPlace,
    ExcludedRow, HumanImport, HumanStream, HumanStreamError, HUMAN_BATCH_ROWS,
};
pub use import::{
    already_imported, import_file, import_into, read_records, ImportError, RecordSink,
};

use fs_err as fs;
use protospread_core::Progress;
use protospread_core::{
    Config, CoreError, HfSource, Input, InputRole, InputSource, Staged, MANIFEST_NAME,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Errors of the fetch stage. Each renders as one line naming the input.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// A problem with how the input is declared or can be located.
    #[error("input '{input}': {message}")]
    Input {
        /// Input name.
        input: String,
        /// What is wrong, for the user.
        message: String,
    },
    /// A file could not be read or written (`error` comes from `fs_err` and names the file).
    #[error("input '{input}': {error}")]
    Io {
        /// Input name.
        input: String,
        /// The underlying I/O error.
        #[source]
        error: std::io::Error,
    },
    /// The bytes do not have the sha256 that pipeline.toml pins.
    #[error("input '{input}': sha256 mismatch for {location}: expected {expected}, got {actual}")]
    HashMismatch {
        /// Input name.
        input: String,
        /// Path or URL of the bytes.
        location: String,
        /// sha256 pinned in pipeline.toml.
        expected: String,
        /// sha256 of the bytes.
        actual: String,
    },
    /// The server answered with an error status (after retries for 408, 429 and 5xx).
    #[error("input '{input}': GET {url}: HTTP {status} {reason}{}", attempts_note(.attempts))]
    HttpStatus {
        /// Input name.
        input: String,
        /// The URL requested.
        url: String,
        /// HTTP status.
        status: u16,
        /// Reason phrase.
        reason: String,
        /// Attempts made.
        attempts: u32,
    },
    /// Fewer (or more) bytes arrived than Content-Length announced.
    #[error("input '{input}': GET {url}: truncated body: received {received} of {expected} bytes ({why}){}", attempts_note(.attempts))]
    Truncated {
        /// Input name.
        input: String,
        /// The URL requested.
        url: String,
        /// Bytes received.
        received: u64,
        /// Bytes announced by Content-Length.
        expected: u64,
        /// How the body ended.
        why: String,
        /// Attempts made.
        attempts: u32,
    },
    /// Connection failures and timeouts.
    #[error("input '{input}': GET {url}: {message}{}", attempts_note(.attempts))]
    Network {
        /// Input name.
        input: String,
        /// The URL requested.
        url: String,
        /// The transport error.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// A URL the fetch stage does not download from (the input's, or the one a Hugging Face
    /// source makes).
    #[error("input '{input}': {source}")]
    Url {
        /// Input name.
        input: String,
        /// What is wrong with the URL.
        #[source]
        source: UrlError,
    },
    /// A redirect whose `Location` is not a URL the fetch stage downloads from.
    #[error("input '{input}': GET {url}: redirect: {source}{}", attempts_note(.attempts))]
    RedirectUrl {
        /// Input name.
        input: String,
        /// The URL that answered with the redirect.
        url: String,
        /// What is wrong with its `Location`.
        #[source]
        source: UrlError,
        /// Attempts made.
        attempts: u32,
    },
    /// A redirect the policy refuses (another host, or https to http).
    #[error("input '{input}': GET {url}: refusing redirect {reason}: {location}")]
    Redirect {
        /// Input name.
        input: String,
        /// The URL requested.
        url: String,
        /// Where the redirect points.
        location: String,
        /// Why it is refused.
        reason: String,
    },
    /// A human-response CSV that does not import; names file, row, line and column.
    #[error("input '{input}': {error}")]
    Csv {
        /// Input name.
        input: String,
        /// Where and why the import failed (boxed: the error is large, and rare).
        #[source]
        error: Box<CsvError>,
    },
    /// The stored-answer importer refused the file (names file, row and column).
    #[error("input '{input}': {error}")]
    Answers {
        /// Input name.
        input: String,
        /// The importer's error.
        #[source]
        error: Box<ImportError>,
    },
    /// A step of an import that failed in the engine (setting up, reading, sorting), not for
    /// a fault of the input's content.
    #[error("input '{input}': {what}: {source}")]
    Step {
        /// Input name.
        input: String,
        /// The step, for the user.
        what: &'static str,
        /// The engine's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Writing outputs or the manifest.
    #[error("{0}")]
    Core(#[from] CoreError),
    /// A `[sweep]` run that cannot be ingested, or runs that do not form a sweep.
    #[error("[sweep] runs")]
    Sweep(#[source] protospread_sweep::SweepError),
}

fn attempts_note(n: &u32) -> String {
    if *n > 1 {
        format!(" (after {n} attempts)")
    } else {
        String::new()
    }
}

/// Run-time options that are not part of pipeline.toml.
#[derive(Debug, Clone)]
pub struct Options {
    /// The value of the `HF_ENDPOINT` environment variable, if set; it overrides
    /// `[fetch] hf_endpoint` (see [`hf_endpoint`]).
    pub hf_endpoint_env: Option<String>,
    /// Draw progress bars for downloads on stderr (the CLI sets this only on a terminal and
    /// without `--quiet`).
    pub progress: bool,
    /// `--memory-limit` in bytes: overrides `[engine] memory_limit` for the stored-answer
    /// import's checks and sort.
    pub memory_limit: Option<u64>,
    /// The run's provenance: each imported file's key-value metadata names its own input.
    pub provenance: protospread_core::Provenance,
    /// Where the import of each stored-answer file reports the records it reads (a phase per
    /// input).
    pub observer: Arc<dyn Progress>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            hf_endpoint_env: None,
            progress: false,
            memory_limit: None,
            provenance: protospread_core::Provenance::default(),
            observer: Arc::new(protospread_core::NoProgress),
        }
    }
}

impl Options {
    /// Options with `HF_ENDPOINT` read from the environment and no progress bars.
    pub fn from_env() -> Self {
        Options {
            hf_endpoint_env: std::env::var("HF_ENDPOINT").ok(),
            ..Options::default()
        }
    }
}

/// The Hugging Face endpoint in force: `HF_ENDPOINT` when set, else `[fetch] hf_endpoint`,
/// with trailing `/` removed (as huggingface_hub does: `os.getenv("HF_ENDPOINT",
/// default).rstrip("/")`). An empty value is refused rather than producing a relative URL.
pub fn hf_endpoint(cfg: &Config, opts: &Options) -> Result<String, String> {
    let (raw, from) = match &opts.hf_endpoint_env {
        Some(v) => (v.as_str(), "HF_ENDPOINT"),
        None => (cfg.fetch.hf_endpoint.as_str(), "[fetch] hf_endpoint"),
    };
    let e = raw.trim_end_matches('/');
    if e.is_empty() {
        return Err(format!("{from} is empty"));
    }
    Ok(e.to_string())
}

/// `{endpoint}/datasets/{repo}/resolve/{commit}/{file}`, with each path segment of `repo`
/// and `file` percent-encoded where needed (`/` separates segments).
pub fn hf_url(endpoint: &str, hf: &HfSource) -> String {
    format!(
        "{endpoint}/datasets/{}/resolve/{}/{}",
        encode_path(&hf.repo),
        hf.commit,
        encode_path(&hf.file)
    )
}

/// Every byte but the unreserved characters of RFC 3986 and the segment separator `/`.
const PATH_ENCODED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

fn encode_path(p: &str) -> String {
    percent_encoding::utf8_percent_encode(p, PATH_ENCODED).to_string()
}

/// Where an input's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// A local file (already resolved against the configuration's folder).
    Local(PathBuf),
    /// An http(s) URL (for `hf` sources, the resolve URL).
    Remote(String),
}

/// Locate an input without reading it.
pub fn resolve(cfg: &Config, input: &Input, opts: &Options) -> Result<Resolved, FetchError> {
    let bad = |message: String| FetchError::Input {
        input: input.name.clone(),
        message,
    };
    let bad_url = |source| FetchError::Url {
        input: input.name.clone(),
        source,
    };
    match input.source().map_err(bad)? {
        InputSource::Local(p) => Ok(Resolved::Local(cfg.resolve(&p))),
        InputSource::Http(u) => {
            http::url_parts(&u).map_err(bad_url)?;
            Ok(Resolved::Remote(u))
        }
        InputSource::HuggingFace(h) => {
            // Config::parse already refuses this; checked again for configs built in code.
            if !protospread_core::is_commit_id(&h.commit) {
                return Err(bad(format!(
                    "hf.commit '{}' is not a 40-hex commit id",
                    h.commit
                )));
            }
            let url = hf_url(&hf_endpoint(cfg, opts).map_err(bad)?, &h);
            http::url_parts(&url).map_err(bad_url)?;
            Ok(Resolved::Remote(url))
        }
    }
}

/// How a verified input was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A local file, verified in place.
    Local,
    /// A download found in the cache with the right sha256: no network access.
    Cache,
    /// Downloaded in this run, verified, and stored in the cache.
    Download,
}

/// An input whose bytes have the pinned sha256.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The verified file (a local path or a cache entry).
    pub path: PathBuf,
    /// What errors and summaries call the file: the path as configured, or the URL.
    pub display: String,
    /// Size in bytes.
    pub size: u64,
    /// Where the bytes came from.
    pub origin: Origin,
}

/// The cache folder: `[fetch] cache_dir`, relative to `out` when relative.
pub fn cache_dir(cfg: &Config, out: &Path) -> PathBuf {
    if cfg.fetch.cache_dir.is_absolute() {
        cfg.fetch.cache_dir.clone()
    } else {
        out.join(&cfg.fetch.cache_dir)
    }
}

fn http_settings(cfg: &Config, opts: &Options) -> http::HttpSettings {
    http::HttpSettings {
        timeout: Duration::from_secs(cfg.fetch.timeout_seconds),
        retries: cfg.fetch.retries,
        allowed_redirect_hosts: cfg
            .fetch
            .allowed_redirect_hosts
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        progress: opts.progress,
    }
}

/// Bring one input in and verify its sha256. A download is written to
/// `<cache>/.<sha256>.<pid>.part`, checked, and renamed to `<cache>/<sha256>/<file name>`
/// ([`cache_file_name`]); on any error
/// the temporary file is removed and the cache is left as it was.
pub fn obtain(
    cfg: &Config,
    input: &Input,
    out: &Path,
    opts: &Options,
) -> Result<Verified, FetchError> {
    let name = &input.name;
    let io = |error: std::io::Error| FetchError::Io {
        input: name.clone(),
        error,
    };
    let hash_of = |path: &Path| -> Result<String, FetchError> {
        protospread_core::sha256_file(path).map_err(|e| match e {
            CoreError::Fs(source) => io(source),
            other => FetchError::Core(other),
        })
    };
    let mismatch = |location: String, actual: String| FetchError::HashMismatch {
        input: name.clone(),
        location,
        expected: input.sha256.clone(),
        actual,
    };
    match resolve(cfg, input, opts)? {
        Resolved::Local(path) => {
            let display = display_path(&path);
            // A FIFO or a device (a link to /dev/zero) would be read until killed.
            let meta = fs::metadata(&path).map_err(io)?;
            if !meta.is_file() {
                return Err(FetchError::Input {
                    input: name.clone(),
                    message: format!(
                        "{display} is not a regular file (a folder, FIFO, socket or device, perhaps behind a link); inputs must be regular files"
                    ),
                });
            }
            let actual = hash_of(&path)?;
            if actual != input.sha256 {
                return Err(mismatch(display, actual));
            }
            let size = fs::metadata(&path).map_err(io)?.len();
            Ok(Verified {
                path,
                display,
                size,
                origin: Origin::Local,
            })
        }
        Resolved::Remote(url) => {
            if cfg.fetch.timeout_seconds == 0 {
                return Err(FetchError::Input {
                    input: name.clone(),
                    message: "[fetch] timeout_seconds must be at least 1".to_string(),
                });
            }
            let cache = cache_dir(cfg, out);
            let entry = cache.join(&input.sha256);
            let dest = entry.join(cache_file_name(&url, name));
            if dest.is_file() && hash_of(&dest)? == input.sha256 {
                let size = fs::metadata(&dest).map_err(io)?.len();
                return Ok(Verified {
                    path: dest,
                    display: url,
                    size,
                    origin: Origin::Cache,
                });
            }
            // Folders this call creates (deepest first), removed again if the download fails.
            let mut created = Vec::new();
            let mut missing = cache.clone();
            while !missing.as_os_str().is_empty() && !missing.exists() {
                created.push(missing.clone());
                if !missing.pop() {
                    break;
                }
            }
            fs::create_dir_all(&cache).map_err(io)?;
            // Partial downloads of killed runs (a cache outside --out is not cleaned on claim).
            protospread_core::remove_dead_temporaries(&cache)?;
            let tmp = cache.join(format!(".{}.{}.part", input.sha256, std::process::id()));
            let result = (|| -> Result<u64, FetchError> {
                let size = http::download(name, &url, &tmp, &http_settings(cfg, opts))?;
                let actual = hash_of(&tmp)?;
                if actual != input.sha256 {
                    return Err(mismatch(url.clone(), actual));
                }
                fs::create_dir_all(&entry).map_err(io)?;
                fs::rename(&tmp, &dest).map_err(io)?;
                Ok(size)
            })();
            match result {
                Ok(size) => Ok(Verified {
                    path: dest,
                    display: url,
                    size,
                    origin: Origin::Download,
                }),
                Err(e) => {
                    let _ = fs::remove_file(&tmp);
                    for dir in &created {
                        // remove_dir only removes empty folders: nothing else is touched.
                        let _ = fs::remove_dir(dir);
                    }
                    Err(e)
                }
            }
        }
    }
}

/// File name of a download inside its cache entry: the last segment of the URL's path, with
/// characters other than `A-Z a-z 0-9 . _ -` replaced by `_` (the input's name if that leaves
/// nothing). Keeping the name keeps the extension, which the stored-answer importer reads.
pub fn cache_file_name(url: &str, input_name: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let last = path.rsplit('/').next().unwrap_or_default();
    let clean: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() || clean.chars().all(|c| c == '.') {
        input_name.to_string()
    } else {
        clean
    }
}

fn display_path(p: &Path) -> String {
    let s = p.display().to_string();
    s.strip_prefix("./").map(str::to_string).unwrap_or(s)
}

/// Read a verified file and check again that the bytes read are the bytes verified, so that
/// a file replaced between verification and import is never imported.
fn read_verified(input: &Input, v: &Verified) -> Result<Vec<u8>, FetchError> {
    let bytes = fs::read(&v.path).map_err(|error| FetchError::Io {
        input: input.name.clone(),
        error,
    })?;
    check_unchanged(input, v, protospread_core::sha256_hex(&bytes))?;
    Ok(bytes)
}

/// A reader that hashes what passes through it: the bytes a human CSV is parsed from are the
/// bytes whose sha256 is checked, without holding the file.
struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Import one verified human CSV of `inst` into the staged Parquet file `dest`, streaming: the
/// file is parsed in batches of [`HUMAN_BATCH_ROWS`] rows, each written as it is parsed, and
/// hashed as it is read (a file that changed since it was verified is an error). A file whose
/// ids are not strictly ascending is written to a scratch file beside the staged one first,
/// which the engine then sorts by `id` into `dest` under the memory limit (spilling), because
/// the score stage reads human rows in id order. Returns the rows written and the rows left
/// out. The Parquet bytes are those of the whole table written at once: the batches are
/// multiples of the writer's 1024-row mini-batch.
fn import_human_input(
    cfg: &Config,
    input: &Input,
    v: &Verified,
    inst: &'static protospread_core::Instrument,
    dest: &Path,
    staged: &mut Staged,
    opts: &Options,
) -> Result<(usize, Vec<ExcludedRow>), FetchError> {
    let io = |error| FetchError::Io {
        input: input.name.clone(),
        error,
    };
    let perr = parquet_error(dest);
    let tmp = staged.file(dest)?;
    let mut reader = HashingReader {
        inner: fs::File::open(&v.path).map_err(io)?,
        hasher: Sha256::new(),
    };
    let mut w = parquet::arrow::ArrowWriter::try_new(
        fs::File::create(&tmp).map_err(io)?,
        protospread_core::instrument_schema(inst),
        Some(protospread_core::parquet_writer_properties(&human_meta(
            opts, input, inst,
        ))),
    )
    .map_err(perr)?;
    let streamed =
        import_human_csv_stream(Path::new(&v.display), &mut reader, inst, |b| w.write(&b))
            .map_err(|e| match e {
                HumanStreamError::Csv(error) => FetchError::Csv {
                    input: input.name.clone(),
                    error: Box::new(error),
                },
                HumanStreamError::Sink(e) => perr(e),
            })?;
    w.close().map_err(perr)?;
    // The parser stops at the last record; whatever follows still belongs to the file's hash.
    std::io::copy(&mut reader, &mut std::io::sink()).map_err(io)?;
    check_unchanged(input, v, hex::encode(reader.hasher.finalize()))?;
    if !streamed.ascending {
        let unsorted = tmp.with_extension("unsorted.parquet");
        fs::rename(&tmp, &unsorted).map_err(io)?;
        sort_human_by_id(cfg, input, &unsorted, &tmp, inst, opts, dest)?;
        fs::remove_file(&unsorted).map_err(io)?;
    }
    fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    Ok((streamed.rows, streamed.excluded))
}

/// Sort the human rows of the Parquet file `unsorted` by `id` into `out` (a file of `inst`),
/// in the engine's bounded, spilling session. Ids are unique (checked on import), so the
/// order, and with it the file's bytes, is fixed.
fn sort_human_by_id(
    cfg: &Config,
    input: &Input,
    unsorted: &Path,
    out: &Path,
    inst: &'static protospread_core::Instrument,
    opts: &Options,
    dest: &Path,
) -> Result<(), FetchError> {
    let schema = protospread_core::instrument_schema(inst);
    let fail = |source: datafusion::error::DataFusionError| FetchError::Step {
        input: input.name.clone(),
        what: "sorting the human rows by id",
        source: source.into(),
    };
    let perr = parquet_error(dest);
    let engine = protospread_engine::Engine::new(&engine_options(cfg, opts)).map_err(|e| {
        FetchError::Step {
            input: input.name.clone(),
            what: "sorting the human rows by id",
            source: e.into(),
        }
    })?;
    let path = unsorted.to_str().ok_or_else(|| FetchError::Input {
        input: input.name.clone(),
        message: format!(
            "sorting the human rows by id: {}: not a UTF-8 path",
            unsorted.display()
        ),
    })?;
    engine.register_parquet("human", path).map_err(fail)?;
    let df = engine
        .sql("SELECT * FROM human ORDER BY id")
        .map_err(fail)?;
    let file = fs::File::create(out).map_err(|error| FetchError::Io {
        input: input.name.clone(),
        error,
    })?;
    let mut w = parquet::arrow::ArrowWriter::try_new(
        file,
        schema.clone(),
        Some(protospread_core::parquet_writer_properties(&human_meta(
            opts, input, inst,
        ))),
    )
    .map_err(perr)?;
    for b in engine.stream_for_writing(df, schema).map_err(fail)? {
        w.write(&b.map_err(fail)?).map_err(perr)?;
    }
    w.close().map_err(perr)?;
    Ok(())
}

/// The key-value metadata of the human rows of `inst` imported from `input`.
fn human_meta(
    opts: &Options,
    input: &Input,
    inst: &protospread_core::Instrument,
) -> protospread_core::FileMeta {
    opts.provenance.input_file(
        "fetch",
        &format!("human.{}", inst.name),
        protospread_core::UNDECLARED_VERSION,
        &input.name,
    )
}

/// The error of a Parquet writer of the output `dest`.
fn parquet_error(dest: &Path) -> impl Fn(parquet::errors::ParquetError) -> FetchError + Copy + '_ {
    move |e| FetchError::Core(CoreError::parquet(dest, e))
}

/// The sha256 `actual` of the bytes read for import must still be the verified one: a file
/// that changed after verification is refused.
fn check_unchanged(input: &Input, v: &Verified, actual: String) -> Result<(), FetchError> {
    if actual == input.sha256 {
        return Ok(());
    }
    Err(FetchError::HashMismatch {
        input: input.name.clone(),
        location: format!("{} (changed while fetching)", v.display),
        expected: input.sha256.clone(),
        actual,
    })
}

/// The engine of the fetch stage's imports, from `--memory-limit`, else `[engine]
/// memory_limit`: two thirds of it, so that the engine's pool (three quarters of that) is half
/// the limit. While it sorts, an import holds more outside the pool than the other stages do:
/// the reader of its staged file, the decoded records, the encoder's row group and the sort's
/// own copies of the batches it buffers. With a pool of three quarters the stage peaked above
/// the 1 GiB default at 10^9 answers; with half, and the staged file in small row groups, the
/// whole `run` stays below it there (916 MB at its peak, docs/performance.md).
fn engine_options(cfg: &Config, opts: &Options) -> protospread_engine::EngineOptions {
    let limit = opts.memory_limit.unwrap_or(cfg.engine.memory_limit.0);
    let min = protospread_engine::MIN_MEMORY_LIMIT;
    protospread_engine::EngineOptions {
        // A limit below the minimum is passed on, for the engine to refuse with its number.
        memory_limit: if limit < min {
            limit
        } else {
            (limit / 3 * 2).max(min)
        },
        ..Default::default()
    }
}

/// Import one verified stored-answer file with the `[answers]` declarations of `cfg`: the
/// validated, sorted records stream in batches into the Parquet file `file` (pinned writer
/// settings; `dest`, the output it becomes, names it in errors), or, for a Parquet file
/// already in that form ([`already_imported`]), its column chunks are copied under a footer
/// with the pinned settings ([`protospread_core::copy_parquet_chunks`]). Returns the number of
/// records.
pub fn import_answers_input(
    cfg: &Config,
    input: &Input,
    verified: &Verified,
    dest: &Path,
    file: &Path,
    opts: &Options,
) -> Result<usize, FetchError> {
    let wrap = |error| FetchError::Answers {
        input: input.name.clone(),
        error: Box::new(error),
    };
    let engine = engine_options(cfg, opts);
    let vocab = protospread_format::Vocabulary::from_section(&cfg.answers);
    let answers = &protospread_core::STORED_ANSWERS;
    let meta =
        opts.provenance
            .input_file(answers.stage, answers.name, answers.version, &input.name);
    // A file already in the output form (typically one written by `protospread simulate` or
    // by an earlier fetch) is checked like any other, then its column chunks are copied
    // under a footer of our own instead of being encoded again: the same table. The chunks
    // are copied from bytes read and hashed again, so a file changed since it was verified
    // is refused, never copied.
    if let Some(rows) = already_imported(&verified.path, &vocab) {
        let src = read_verified(input, verified)?;
        let bytes =
            protospread_core::copy_parquet_chunks(&verified.path, src, answers.schema(), &meta)
                .map_err(|e| wrap(e.into()))?;
        (|| {
            let mut out = fs_err::File::create(file)?;
            std::io::Write::write_all(&mut out, &bytes)?;
            out.sync_all()
        })()
        .map_err(CoreError::Fs)?;
        return Ok(rows);
    }
    std::thread::scope(|scope| {
        let mut sink = FileSink::spawn(scope, dest, file, meta, opts.observer.clone());
        let rows = import_into(&verified.path, &vocab, &engine, &mut sink)?;
        sink.finish()?;
        Ok(rows)
    })
    .map_err(wrap)
}

/// Stored answers written to a Parquet file (pinned writer settings) as they come, encoded on
/// a thread of their own while the import reads and checks the next batches (the Parquet
/// encoder is about half of the work of a sorted file). The file grows on disk, not in
/// memory: at 10^9 answers it is 1.4 GB. A restart of the import starts the file over.
struct FileSink<'a> {
    dest: &'a Path,
    /// Batches to encode, in order; `None` restarts the file.
    tx: Option<std::sync::mpsc::SyncSender<Option<arrow::array::RecordBatch>>>,
    encoder: Option<std::thread::ScopedJoinHandle<'a, Result<(), ImportError>>>,
    /// Where the import counts the records it reads.
    progress: Arc<dyn Progress>,
}

impl<'a> FileSink<'a> {
    fn spawn<'env>(
        scope: &'a std::thread::Scope<'a, 'env>,
        dest: &'a Path,
        file: &'a Path,
        meta: protospread_core::FileMeta,
        progress: Arc<dyn Progress>,
    ) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Option<arrow::array::RecordBatch>>(2);
        let encoder = scope.spawn(move || -> Result<(), ImportError> {
            let perr = |e| ImportError::Core(CoreError::parquet(dest, e));
            let writer = || -> Result<_, ImportError> {
                // Created afresh (truncated) on a restart.
                let out = fs_err::File::create(file).map_err(ImportError::Fs)?;
                // A row per request: statistics only where they can prune a read, on the
                // sort key (docs/fetch.md, "Parquet writer settings").
                parquet::arrow::ArrowWriter::try_new(
                    out,
                    protospread_core::STORED_ANSWERS.schema(),
                    Some(protospread_core::parquet_writer_properties_with_statistics(
                        &meta,
                        protospread_core::STORED_ANSWERS.sort_key,
                    )),
                )
                .map_err(perr)
            };
            let mut w = writer()?;
            for msg in rx {
                match msg {
                    Some(batch) => w.write(&batch).map_err(perr)?,
                    None => w = writer()?,
                }
            }
            let out = w.into_inner().map_err(perr)?;
            out.sync_all().map_err(ImportError::Fs)
        });
        FileSink {
            dest,
            tx: Some(tx),
            encoder: Some(encoder),
            progress,
        }
    }

    fn send(&mut self, msg: Option<arrow::array::RecordBatch>) -> Result<(), ImportError> {
        let sent = self.tx.as_ref().map(|tx| tx.send(msg).is_ok());
        if sent == Some(true) {
            return Ok(());
        }
        // The encoder stopped: its error says why.
        Err(match self.finish() {
            Err(e) => e,
            Ok(()) => self.error("the encoder stopped".into()),
        })
    }

    /// Wait until every batch sent is encoded and the file is closed and synced.
    fn finish(&mut self) -> Result<(), ImportError> {
        self.tx = None;
        let encoder = self
            .encoder
            .take()
            .ok_or_else(|| self.error("the encoder already stopped".into()))?;
        match encoder.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    fn error(&self, message: String) -> ImportError {
        ImportError::Format(protospread_format::FormatError::File {
            file: self.dest.to_path_buf(),
            message: format!("writing Parquet: {message}"),
        })
    }
}

impl RecordSink for FileSink<'_> {
    fn write(&mut self, batch: arrow::array::RecordBatch) -> Result<(), ImportError> {
        self.send(Some(batch))
    }

    fn restart(&mut self) -> Result<(), ImportError> {
        self.send(None)
    }

    fn progress(&self) -> Arc<dyn Progress> {
        self.progress.clone()
    }
}

/// What one input became.
#[derive(Debug, Clone, Serialize)]
pub struct InputSummary {
    /// Input name.
    pub name: String,
    /// `human`, `answers` or `other`.
    pub role: String,
    /// For human inputs, the instrument.
    pub instrument: Option<String>,
    /// Path as configured, or URL.
    pub source: String,
    /// sha256 of the bytes.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Where the bytes came from.
    pub origin: Origin,
    /// Rows written (human and answers inputs).
    pub rows: Option<usize>,
    /// Output file, relative to the fetch folder.
    pub output: String,
    /// Human rows left out of the output, with the reason (docs/fetch.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<ExcludedRow>,
}

/// What a fetch run did.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The stage's output folder (`<out>/fetch`).
    pub out_dir: String,
    /// Every input, in configuration order; all of them verified.
    pub inputs: Vec<InputSummary>,
    /// Rows per instrument of the human inputs.
    pub human_rows: BTreeMap<String, usize>,
    /// Files listed in the manifest.
    pub files: usize,
    /// Path of the `SHA256SUMS` written.
    pub manifest: String,
    /// Stale files of an earlier run removed from the fetch folder.
    pub removed: Vec<String>,
    /// Documents of the `[sweep]` runs staged in `sweep_samples.parquet`, when it names any.
    pub sweep_documents: Option<usize>,
}

fn role_name(r: InputRole) -> &'static str {
    match r {
        InputRole::Human => "human",
        InputRole::Answers => "answers",
        InputRole::Other => "other",
    }
}

/// Run the fetch stage: verify and import every input, commit `out/fetch` all at once, and
/// write `out/fetch/SHA256SUMS`. On error nothing under `out/fetch` is changed.
pub fn run(cfg: &Config, out: &Path, opts: &Options) -> Result<Summary, FetchError> {
    let fetch_dir = out.join("fetch");
    let mut seen_instruments = BTreeMap::new();
    for i in cfg.inputs_with_role(InputRole::Human) {
        let inst = i.instrument.clone().unwrap_or_default();
        if let Some(first) = seen_instruments.insert(inst.clone(), i.name.clone()) {
            return Err(FetchError::Input {
                input: i.name.clone(),
                message: format!(
                    "instrument '{inst}' is already imported from input '{first}'; one human input per instrument"
                ),
            });
        }
    }

    // The whole folder is replaced in one step at the end (only if it is protospread's).
    let mut staged = Staged::in_dir(&fetch_dir)?;
    let mut summaries = Vec::new();
    let mut human_rows = BTreeMap::new();
    for input in &cfg.inputs {
        let v = obtain(cfg, input, out, opts)?;
        let mut excluded = Vec::new();
        let (rel, rows) = match input.role {
            InputRole::Human => {
                let inst_name = input.instrument.as_deref().unwrap_or_default();
                let inst = protospread_core::instrument_by_name(inst_name).ok_or_else(|| {
                    FetchError::Input {
                        input: input.name.clone(),
                        message: format!("unknown instrument '{inst_name}'"),
                    }
                })?;
                let rel = format!("human/{}.parquet", inst.name);
                let dest = fetch_dir.join(&rel);
                let (rows, left_out) =
                    import_human_input(cfg, input, &v, inst, &dest, &mut staged, opts)?;
                excluded = left_out;
                human_rows.insert(inst.name.to_string(), rows);
                (rel, Some(rows))
            }
            InputRole::Answers => {
                let rel = format!("answers/{}.parquet", input.name);
                let dest = fetch_dir.join(&rel);
                opts.observer
                    .begin(&format!("fetch {}", input.name), "records", None);
                let file = staged.file(&dest)?;
                let imported = import_answers_input(cfg, input, &v, &dest, &file, opts);
                opts.observer.end();
                (rel, Some(imported?))
            }
            InputRole::Other => {
                let bytes = read_verified(input, &v)?;
                let rel = format!("other/{}", input.name);
                staged.put(&fetch_dir.join(&rel), &bytes)?;
                (rel, None)
            }
        };
        summaries.push(InputSummary {
            name: input.name.clone(),
            role: role_name(input.role).to_string(),
            instrument: input.instrument.clone(),
            source: v.display.clone(),
            sha256: input.sha256.clone(),
            bytes: v.size,
            origin: v.origin,
            rows,
            output: rel,
            excluded,
        });
    }

    let sweep_documents = stage_sweep(cfg, &fetch_dir, &mut staged, opts)?;

    let produced: BTreeSet<String> = staged
        .paths()
        .map(|p| protospread_core::rel_path(&fetch_dir, p))
        .collect();
    let removed = stale_outputs(&fetch_dir, &produced)?;
    staged.commit()?;
    let manifest = protospread_core::Manifest::read(&fetch_dir.join(MANIFEST_NAME))?;
    Ok(Summary {
        out_dir: display_path(&fetch_dir),
        inputs: summaries,
        human_rows,
        files: manifest.entries.len(),
        manifest: display_path(&fetch_dir.join(MANIFEST_NAME)),
        removed,
        sweep_documents,
    })
}

/// Ingest and check the `[sweep]` runs and stage their documents as
/// `sweep_samples.parquet`; the number of documents, or `None` when `[sweep]` names no run.
fn stage_sweep(
    cfg: &Config,
    fetch_dir: &Path,
    staged: &mut Staged,
    opts: &Options,
) -> Result<Option<usize>, FetchError> {
    if !protospread_sweep::configured(cfg) {
        return Ok(None);
    }
    let sweep_err = FetchError::Sweep;
    let spec = protospread_sweep::SweepSpec::from_section(&cfg.sweep).map_err(sweep_err)?;
    let samples = protospread_sweep::ingest(cfg, &spec).map_err(sweep_err)?;
    let batch = protospread_sweep::samples_batch(&samples, &cfg.base_dir).map_err(sweep_err)?;
    let contract = &protospread_core::SWEEP_SAMPLES;
    let dest = fetch_dir.join(contract.file_name());
    let meta = opts
        .provenance
        .stage_table("fetch", contract.name, contract.version);
    let bytes = protospread_core::encode_parquet(
        &dest,
        batch.schema(),
        std::slice::from_ref(&batch),
        &meta,
    )?;
    staged.put(&dest, &bytes)?;
    Ok(Some(batch.num_rows()))
}

/// Outputs of the previous run (listed in the folder's manifest) that this run does not write
/// (an input removed from pipeline.toml); they go with the previous folder.
fn stale_outputs(dir: &Path, keep: &BTreeSet<String>) -> Result<Vec<String>, FetchError> {
    let m = dir.join(MANIFEST_NAME);
    if !m.is_file() {
        return Ok(Vec::new());
    }
    Ok(protospread_core::Manifest::read(&m)?
        .entries
        .into_keys()
        .filter(|k| !keep.contains(k))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> Config {
        let text = format!("[study]\nname = \"t\"\n{extra}");
        Config::parse(&text, Path::new("p.toml"), Path::new("/base")).unwrap()
    }

    #[test]
    fn hf_endpoint_env_overrides_and_strips_slashes() {
        let c = cfg("[fetch]\nhf_endpoint = \"https://hub.example/\"\n");
        let mut o = Options::default();
        assert_eq!(hf_endpoint(&c, &o).unwrap(), "https://hub.example");
        o.hf_endpoint_env = Some("http://127.0.0.1:9//".into());
        assert_eq!(hf_endpoint(&c, &o).unwrap(), "http://127.0.0.1:9");
        o.hf_endpoint_env = Some("/".into());
        assert!(hf_endpoint(&c, &o)
            .unwrap_err()
            .contains("HF_ENDPOINT is empty"));
    }

    #[test]
    fn hf_url_layout() {
        let h = HfSource {
            repo: "PeterKol/jobcannon-psychometric-responses".into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            file: "data/big five.csv".into(),
        };
        assert_eq!(
            hf_url("https://huggingface.co", &h),
            "https://huggingface.co/datasets/PeterKol/jobcannon-psychometric-responses/resolve/0123456789abcdef0123456789abcdef01234567/data/big%20five.csv"
        );
    }

    #[test]
    fn cache_file_names_keep_the_extension() {
        assert_eq!(
            cache_file_name(
                "https://h/datasets/o/n/resolve/c/data/big_five.csv?download=1",
                "x"
            ),
            "big_five.csv"
        );
        assert_eq!(
            cache_file_name("http://h/a b%20c.jsonl", "x"),
            "a_b_20c.jsonl"
        );
        assert_eq!(cache_file_name("http://h/", "input"), "input");
        assert_eq!(cache_file_name("http://h/..", "input"), "input");
    }

    #[test]
    fn local_paths_resolve_against_config_folder() {
        let c = cfg(&format!(
            "[[inputs]]\nname = \"a\"\nrole = \"other\"\npath = \"data/a.txt\"\nsha256 = \"{}\"\n",
            "0".repeat(64)
        ));
        assert_eq!(
            resolve(&c, &c.inputs[0], &Options::default()).unwrap(),
            Resolved::Local(PathBuf::from("/base/data/a.txt"))
        );
    }

    #[test]
    fn local_mismatch_and_missing_file_name_the_input() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), b"hello").unwrap();
        let text = format!(
            "[study]\nname = \"t\"\n[[inputs]]\nname = \"a\"\nrole = \"other\"\npath = \"a.txt\"\nsha256 = \"{}\"\n[[inputs]]\nname = \"b\"\nrole = \"other\"\npath = \"nope.txt\"\nsha256 = \"{}\"\n",
            "0".repeat(64),
            "0".repeat(64)
        );
        let c = Config::parse(&text, Path::new("p.toml"), dir.path()).unwrap();
        let out = dir.path().join("out");
        let e = obtain(&c, &c.inputs[0], &out, &Options::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("input 'a': sha256 mismatch"), "{e}");
        assert!(e.contains(&protospread_core::sha256_hex(b"hello")), "{e}");
        let e = obtain(&c, &c.inputs[1], &out, &Options::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("input 'b': ") && e.contains("nope.txt"),
            "{e}"
        );
        assert!(!out.exists());
    }

    #[test]
    fn refused_answers_name_the_input_and_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.csv"), b"x").unwrap();
        let text = format!(
            "[study]\nname = \"t\"\n[[inputs]]\nname = \"a\"\nrole = \"answers\"\npath = \"a.csv\"\nsha256 = \"{}\"\n",
            protospread_core::sha256_hex(b"x")
        );
        let c = Config::parse(&text, Path::new("p.toml"), dir.path()).unwrap();
        let e = run(&c, &dir.path().join("out"), &Options::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("input 'a': ") && e.contains("a.csv") && e.contains("unknown column"),
            "{e}"
        );
        assert!(!dir.path().join("out/fetch/answers").exists());
    }
}
