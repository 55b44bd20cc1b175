//! Downloading one URL to a temporary file, with bounded retries, a per-read timeout, a
//! length check and a redirect policy. Verification (sha256) and the rename into the cache
//! are done by the caller, so this module never touches a cache entry.

use crate::FetchError;
use fs_err as fs;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

/// Redirect hops followed within one attempt before giving up.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// The waits before the `retries` retries: 250 ms, 500 ms, 1 s, 2 s, then 4 s each (no jitter:
/// the schedule is the same on every run).
pub(crate) fn backoff(retries: u32) -> backon::ExponentialBuilder {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_factor(2.0)
        .with_max_delay(Duration::from_secs(4))
        .with_max_times(retries as usize)
}

/// How downloads behave; built from `[fetch]`.
#[derive(Debug, Clone)]
pub(crate) struct HttpSettings {
    /// Connect timeout, time to the response headers, and the longest pause between two
    /// reads of the body.
    pub(crate) timeout: Duration,
    /// Attempts after the first for retryable failures.
    pub(crate) retries: u32,
    /// Hosts (lower case) a redirect may lead to besides the URL's own host.
    pub(crate) allowed_redirect_hosts: Vec<String>,
    /// Draw a progress bar on stderr.
    pub(crate) progress: bool,
}

/// The parts of an absolute http(s) URL that the redirect policy needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlParts {
    /// `http` or `https`.
    pub(crate) scheme: String,
    /// Lower-cased host, without port.
    pub(crate) host: String,
}

/// Why a URL, or a redirect's `Location`, is not one the fetch stage downloads from.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// The text does not parse as a URL.
    #[error("`{url}` is not a valid URL: {source}")]
    Invalid {
        /// The text given as a URL.
        url: String,
        /// The URI parser's error.
        #[source]
        source: ureq::http::uri::InvalidUri,
    },
    /// A scheme other than `http` and `https` (or none: a relative reference).
    #[error("`{url}`: only http:// and https:// URLs are fetched")]
    Scheme {
        /// The URL or `Location`.
        url: String,
    },
    /// An http(s) URL without a host.
    #[error("`{url}` has no host")]
    NoHost {
        /// The URL.
        url: String,
    },
    /// A URL the URL parser refuses: a redirect's base, or its `Location` resolved against it.
    #[error("`{url}`: {source}")]
    Unresolved {
        /// The base URL or the `Location`.
        url: String,
        /// The URL parser's error.
        #[source]
        source: url::ParseError,
    },
}

/// Split an absolute `http://` or `https://` URL.
pub(crate) fn url_parts(url: &str) -> Result<UrlParts, UrlError> {
    let uri: ureq::http::Uri = url.parse().map_err(|source| UrlError::Invalid {
        url: url.to_string(),
        source,
    })?;
    let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(UrlError::Scheme {
            url: url.to_string(),
        });
    }
    let no_host = || UrlError::NoHost {
        url: url.to_string(),
    };
    let host = uri
        .authority()
        .ok_or_else(no_host)?
        .host()
        .trim_matches(['[', ']'])
        .to_ascii_lowercase();
    if host.is_empty() {
        return Err(no_host());
    }
    Ok(UrlParts { scheme, host })
}

/// Resolve a `Location` header against the URL that answered with it.
pub(crate) fn resolve_location(base: &str, location: &str) -> Result<String, UrlError> {
    let lower = location.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(location.to_string());
    }
    // Another scheme (`ftp://`, `file:`) is not a relative path to append to the base.
    let head = location.split(['/', '?', '#']).next().unwrap_or_default();
    if let Some((scheme, _)) = head.split_once(':') {
        let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if is_scheme {
            return Err(UrlError::Scheme {
                url: location.to_string(),
            });
        }
    }
    url_parts(base)?;
    let unresolved = |url: &str| {
        let url = url.to_string();
        move |source| UrlError::Unresolved { url, source }
    };
    // RFC 3986 section 5.2 (merge and remove_dot_segments) by the url crate.
    let base = url::Url::parse(base).map_err(unresolved(base))?;
    base.join(location)
        .map(String::from)
        .map_err(unresolved(location))
}

/// Why one attempt failed, and whether another attempt may help.
enum Failure {
    Retry(FetchError),
    Fatal(FetchError),
}

/// Download `url` into `tmp` (created or truncated). Returns the number of bytes written.
/// `tmp` may hold a partial body on error; the caller removes it.
pub(crate) fn download(
    input: &str,
    url: &str,
    tmp: &Path,
    settings: &HttpSettings,
) -> Result<u64, FetchError> {
    let origin = url_parts(url).map_err(|source| FetchError::Url {
        input: input.to_string(),
        source,
    })?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_resolve(Some(settings.timeout))
        .timeout_connect(Some(settings.timeout))
        .timeout_recv_response(Some(settings.timeout))
        .timeout_per_read(Some(settings.timeout))
        .user_agent(concat!("protospread/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    use backon::BlockingRetryable;
    let mut attempt = 0u32;
    let once = || {
        attempt += 1;
        attempt_once(&agent, input, url, &origin, tmp, settings, attempt)
    };
    once.retry(backoff(settings.retries))
        .sleep(std::thread::sleep)
        .when(|f| matches!(f, Failure::Retry(_)))
        .call()
        .map_err(|(Failure::Retry(e) | Failure::Fatal(e))| e)
}

fn attempt_once(
    agent: &ureq::Agent,
    input: &str,
    url0: &str,
    origin: &UrlParts,
    tmp: &Path,
    settings: &HttpSettings,
    attempt: u32,
) -> Result<u64, Failure> {
    let mut url = url0.to_string();
    let network = |url: &str, message: String| FetchError::Network {
        input: input.to_string(),
        url: url.to_string(),
        message,
        attempts: attempt,
    };
    for _ in 0..=MAX_REDIRECTS {
        let resp = agent
            .get(&url)
            .header("Accept-Encoding", "identity")
            .call()
            .map_err(|e| Failure::Retry(network(&url, describe(&e, settings.timeout))))?;
        let status = resp.status().as_u16();
        if matches!(status, 301 | 302 | 303 | 307 | 308) {
            let location = resp
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    Failure::Fatal(network(&url, format!("HTTP {status} without a Location")))
                })?;
            let bad_location = |source| {
                Failure::Fatal(FetchError::RedirectUrl {
                    input: input.to_string(),
                    url: url.clone(),
                    source,
                    attempts: attempt,
                })
            };
            let next = resolve_location(&url, location).map_err(bad_location)?;
            let to = url_parts(&next).map_err(bad_location)?;
            let same_host = to.host == origin.host;
            let allowed = settings.allowed_redirect_hosts.contains(&to.host);
            let downgrade = origin.scheme == "https" && to.scheme == "http";
            if downgrade || !(same_host || allowed) {
                return Err(Failure::Fatal(FetchError::Redirect {
                    input: input.to_string(),
                    url: url.clone(),
                    location: next,
                    reason: if downgrade {
                        "from https to http".to_string()
                    } else {
                        format!(
                            "to another host ({}); add it to [fetch] allowed_redirect_hosts to allow it",
                            to.host
                        )
                    },
                }));
            }
            url = next;
            continue;
        }
        if status != 200 {
            let e = FetchError::HttpStatus {
                input: input.to_string(),
                url,
                status,
                reason: resp
                    .status()
                    .canonical_reason()
                    .unwrap_or_default()
                    .to_string(),
                attempts: attempt,
            };
            return Err(if status == 408 || status == 429 || status >= 500 {
                Failure::Retry(e)
            } else {
                Failure::Fatal(e)
            });
        }
        if let Some(enc) = resp
            .headers()
            .get("content-encoding")
            .and_then(|v| v.to_str().ok())
        {
            if !enc.eq_ignore_ascii_case("identity") {
                return Err(Failure::Fatal(network(
                    &url,
                    format!("the server sent Content-Encoding `{enc}`; only identity is accepted, since the sha256 covers the file's own bytes"),
                )));
            }
        }
        let content_length = resp
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let reader = resp.into_body().into_with_config().limit(u64::MAX).reader();
        return save_body(input, &url, reader, content_length, tmp, settings, attempt);
    }
    Err(Failure::Fatal(network(
        &url,
        format!("more than {MAX_REDIRECTS} redirects"),
    )))
}

fn save_body(
    input: &str,
    url: &str,
    mut reader: impl Read,
    content_length: Option<u64>,
    tmp: &Path,
    settings: &HttpSettings,
    attempt: u32,
) -> Result<u64, Failure> {
    let io_fatal = |e: std::io::Error| {
        Failure::Fatal(FetchError::Io {
            input: input.to_string(),
            error: e,
        })
    };
    // A fresh file: never written through a link that sits at the temporary's name.
    match fs::remove_file(tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_fatal(e)),
        _ => {}
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(io_fatal)?;
    let bar = if settings.progress {
        let bar = match content_length {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(input.to_string());
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut buf = vec![0u8; 1 << 16];
    let mut received: u64 = 0;
    let truncated = |received: u64, expected: u64, why: String| {
        Failure::Retry(FetchError::Truncated {
            input: input.to_string(),
            url: url.to_string(),
            received,
            expected,
            why,
            attempts: attempt,
        })
    };
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                bar.finish_and_clear();
                let why = describe(&ureq::Error::from(e), settings.timeout);
                return Err(match content_length {
                    Some(cl) if received < cl => truncated(received, cl, why),
                    _ => Failure::Retry(FetchError::Network {
                        input: input.to_string(),
                        url: url.to_string(),
                        message: format!("reading the body after {received} bytes: {why}"),
                        attempts: attempt,
                    }),
                });
            }
        };
        if n == 0 {
            break;
        }
        f.write_all(&buf[..n]).map_err(io_fatal)?;
        received += n as u64;
        bar.set_position(received);
    }
    bar.finish_and_clear();
    if let Some(cl) = content_length {
        if received != cl {
            return Err(truncated(
                received,
                cl,
                "the body length differs from Content-Length".to_string(),
            ));
        }
    }
    f.sync_all().map_err(io_fatal)?;
    Ok(received)
}

fn describe(e: &ureq::Error, timeout: Duration) -> String {
    match e {
        ureq::Error::Timeout(t) => format!("timed out ({t}; limit {}s)", timeout.as_secs()),
        ureq::Error::Io(io) => format!("{io}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_resolve() {
        let b = "http://127.0.0.1:8080/a/b/file.csv?x=1";
        assert_eq!(
            resolve_location(b, "/c.csv").unwrap(),
            "http://127.0.0.1:8080/c.csv"
        );
        assert_eq!(
            resolve_location(b, "c.csv").unwrap(),
            "http://127.0.0.1:8080/a/b/c.csv"
        );
        assert_eq!(
            resolve_location(b, "../new/c.csv?v=1").unwrap(),
            "http://127.0.0.1:8080/a/new/c.csv?v=1"
        );
        assert_eq!(
            resolve_location(b, "/x/./y/../../z").unwrap(),
            "http://127.0.0.1:8080/z"
        );
        assert_eq!(
            resolve_location(b, "../../../up").unwrap(),
            "http://127.0.0.1:8080/up"
        );
        assert_eq!(
            resolve_location(b, "./").unwrap(),
            "http://127.0.0.1:8080/a/b/"
        );
        assert_eq!(
            resolve_location(b, "//localhost:9/x").unwrap(),
            "http://localhost:9/x"
        );
        assert_eq!(
            resolve_location(b, "HTTPS://cdn.example/x").unwrap(),
            "HTTPS://cdn.example/x"
        );
    }

    #[test]
    fn url_parts_lowercases_host_and_refuses_other_schemes() {
        let p = url_parts("http://LocalHost:81/x?y").unwrap();
        assert_eq!(p.host, "localhost");
        assert_eq!(p.scheme, "http");
        assert!(matches!(
            url_parts("ftp://h/x"),
            Err(UrlError::Scheme { url }) if url == "ftp://h/x"
        ));
        let e = resolve_location("http://h/a/b", "ftp://h/x").unwrap_err();
        assert!(e.to_string().contains("only http"), "{e}");
        assert_eq!(
            resolve_location("http://h/a/b", "c:d")
                .unwrap_err()
                .to_string(),
            "`c:d`: only http:// and https:// URLs are fetched"
        );
        assert_eq!(
            resolve_location("http://h/a/b", "./c:d").unwrap(),
            "http://h/a/c:d"
        );
        assert_eq!(
            url_parts("/relative").unwrap_err().to_string(),
            "`/relative`: only http:// and https:// URLs are fetched"
        );
    }

    #[test]
    fn bad_urls_name_the_url_and_keep_the_parsers_error() {
        use std::error::Error;
        let e = url_parts("http://exa mple/x").unwrap_err();
        assert!(matches!(e, UrlError::Invalid { .. }), "{e:?}");
        let cause = e.source().expect("the URI parser's error").to_string();
        assert_eq!(
            e.to_string(),
            format!("`http://exa mple/x` is not a valid URL: {cause}")
        );
        let e = url_parts("http://[]/x").unwrap_err();
        assert!(matches!(e, UrlError::NoHost { .. }), "{e:?}");
        assert_eq!(e.to_string(), "`http://[]/x` has no host");
        assert!(e.source().is_none());
        // A relative Location the URL parser refuses (a port out of range).
        let e = resolve_location("http://h/a/b", "//h:99999/x").unwrap_err();
        assert!(matches!(e, UrlError::Unresolved { .. }), "{e:?}");
        let cause = e.source().expect("the URL parser's error");
        assert_eq!(cause.to_string(), "invalid port number");
        assert_eq!(e.to_string(), "`//h:99999/x`: invalid port number");
        // A base that is no http(s) URL is refused before any Location is resolved.
        let e = resolve_location("ftp://h/a", "b").unwrap_err();
        assert!(matches!(e, UrlError::Scheme { url } if url == "ftp://h/a"));
    }

    #[test]
    fn backoff_is_bounded() {
        use backon::BackoffBuilder;
        let ms = |n: u64| Duration::from_millis(n);
        assert_eq!(
            backoff(6).build().collect::<Vec<_>>(),
            [ms(250), ms(500), ms(1000), ms(2000), ms(4000), ms(4000)]
        );
        assert_eq!(backoff(0).build().count(), 0);
    }
}
