//! A blocking OpenAI-compatible chat-completions client with bounded retries.
//!
//! Retry policy (docs/administer.md): HTTP 429, HTTP 5xx, timeouts and connection errors are
//! retried up to `retries` times, waiting `backoff * 2^(attempt-1)` (capped at 60 s) and at
//! least the server's `Retry-After` (seconds or an HTTP-date; also capped). Any other status, a body that is not
//! JSON, and a response without choices fail at once: retrying an identical request would not
//! change them within a run, and a later run retries every failed request anyway.

use crate::record::Outcome;
use crate::redact::{Redactor, REDACTED};
use crate::AdministerError;
use std::time::{Duration, Instant};

/// Longest single wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Largest response body read (a reply plus metadata is far smaller).
const MAX_BODY: u64 = 16 * 1024 * 1024;
/// Of an error body only a snippet is kept: this much of its start is searched for the key (a
/// key spread by escapes over the snippet's end is still whole in it).
const ERROR_BODY_SEARCHED: usize = 64 * 1024;

/// Where and how requests are sent.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    url: String,
    api_key: Option<String>,
    redactor: Redactor,
    retries: u32,
    backoff: Duration,
}

impl std::fmt::Debug for Client {
    // Hand-written so that the API key can never reach a log through `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("retries", &self.retries)
            .finish()
    }
}

/// `base_url` + `/chat/completions`; the base is e.g. `http://127.0.0.1:8088/v1`.
// Not `url::Url::join`: it drops a base's last segment without a trailing `/` (`/v1` joined
// with `chat/completions` is `/chat/completions`); OpenAI clients append to the base.
pub(crate) fn chat_url(base_url: &str) -> Result<String, AdministerError> {
    let b = base_url.trim_end_matches('/');
    if !(b.starts_with("http://") || b.starts_with("https://")) {
        return Err(AdministerError::BaseUrl(base_url.to_string()));
    }
    Ok(format!("{b}/chat/completions"))
}

enum Attempt {
    /// A final outcome (answered or failed for good).
    Done(Outcome),
    /// Worth retrying: the error text and the server's Retry-After, if any.
    Retry(Outcome, Option<Duration>),
}

impl Client {
    /// A client for `base_url` (OpenAI style, ending in `/v1`). `timeout` bounds each attempt
    /// from connect to the last byte. No proxy from the environment and no redirects: requests
    /// go to the configured address only.
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        timeout: Duration,
        retries: u32,
        backoff: Duration,
    ) -> Result<Self, AdministerError> {
        let url = chat_url(base_url)?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .user_agent(concat!("protospread/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Client {
            agent,
            url,
            redactor: Redactor::new(api_key.as_deref()),
            api_key,
            retries,
            backoff,
        })
    }

    /// The URL requests are POSTed to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Send `body` with retries; never panics, every failure becomes `Outcome::error`. The API
    /// key and any `Authorization` / `Bearer` value are redacted from everything returned.
    pub fn send(&self, body: &str) -> Outcome {
        scrub(self.send_with_retries(body), &self.redactor)
    }

    // Not `backon`: each wait is the larger of the exponential step and the server's
    // `Retry-After`, and backon's blocking retry cannot change a wait by the error it follows.
    fn send_with_retries(&self, body: &str) -> Outcome {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match self.once(body) {
                Attempt::Done(mut o) => {
                    o.attempts = attempt;
                    return o;
                }
                Attempt::Retry(mut o, retry_after) => {
                    o.attempts = attempt;
                    if attempt > self.retries {
                        o.error = o.error.map(|e| format!("{e} (after {attempt} attempts)"));
                        return o;
                    }
                    let exp = self
                        .backoff
                        .saturating_mul(1u32 << (attempt - 1).min(16))
                        .min(MAX_BACKOFF);
                    let wait = retry_after.map_or(exp, |r| r.min(MAX_BACKOFF).max(exp));
                    std::thread::sleep(wait);
                }
            }
        }
    }

    fn once(&self, body: &str) -> Attempt {
        let started = Instant::now();
        let mut req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(k) = &self.api_key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let failed = |error: String, status: Option<u16>| Outcome {
            error: Some(error),
            http_status: status,
            elapsed_ms: started.elapsed().as_millis() as u64,
            ..Outcome::default()
        };
        let mut resp = match req.send(body) {
            Ok(r) => r,
            Err(e) => {
                let msg = match &e {
                    ureq::Error::Timeout(t) => format!("timed out ({t})"),
                    other => format!("request failed: {other}"),
                };
                return Attempt::Retry(failed(msg, None), None);
            }
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after(v, std::time::SystemTime::now()));
        let text = match resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
        {
            // Redacted before anything is cut or parsed, so no prefix of the key survives a
            // snippet. Of a failure only a snippet is kept, so only its start is searched.
            Ok(mut t) => {
                if !(200..300).contains(&status) && t.len() > ERROR_BODY_SEARCHED {
                    let mut cut = ERROR_BODY_SEARCHED;
                    while !t.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    t.truncate(cut);
                    t.push_str("...");
                }
                self.redactor.redact(&t)
            }
            Err(e) => {
                let msg = match &e {
                    ureq::Error::Timeout(t) => format!("timed out reading the response ({t})"),
                    other => format!("reading the response failed: {other}"),
                };
                return Attempt::Retry(failed(msg, Some(status)), None);
            }
        };
        if status == 429 || (500..600).contains(&status) {
            return Attempt::Retry(
                failed(format!("HTTP {status}: {}", snippet(&text)), Some(status)),
                retry_after,
            );
        }
        if !(200..300).contains(&status) {
            return Attempt::Done(failed(
                format!("HTTP {status}: {}", snippet(&text)),
                Some(status),
            ));
        }
        let mut o = parse_response(&text);
        o.http_status = Some(status);
        o.elapsed_ms = started.elapsed().as_millis() as u64;
        Attempt::Done(o)
    }
}

/// Every text of `o` that came from the server or the network, with the key redacted in any
/// form; errors also lose every `Bearer` token and `Authorization` value.
/// The wait a `Retry-After` value asks for (RFC 9110, section 10.2.3): a number of seconds, or
/// an HTTP-date whose distance from `now` is the wait (none once it has passed). `None` for
/// anything else.
fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn scrub(mut o: Outcome, r: &Redactor) -> Outcome {
    o.error = o.error.map(|e| redact_headers(&r.redact(&e)));
    o.reply = o.reply.map(|t| r.redact(&t));
    for field in [
        &mut o.response_model,
        &mut o.finish_reason,
        &mut o.system_fingerprint,
    ] {
        *field = field.take().map(|t| redact_headers(&r.redact(&t)));
    }
    if let Some(u) = &mut o.usage {
        scrub_json(u, r);
    }
    o
}

/// Redact every string and object key of `v`.
fn scrub_json(v: &mut serde_json::Value, r: &Redactor) {
    match v {
        serde_json::Value::String(s) => *s = redact_headers(&r.redact(s)),
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| scrub_json(x, r)),
        serde_json::Value::Object(m) => {
            let old = std::mem::take(m);
            for (k, mut x) in old {
                scrub_json(&mut x, r);
                m.insert(redact_headers(&r.redact(&k)), x);
            }
        }
        _ => {}
    }
}

/// `text` with the key (any form), every `Bearer` token and every `Authorization` value
/// replaced by `<redacted>` (a server may echo request headers in an error body).
#[cfg(test)]
pub(crate) fn redact(text: &str, key: Option<&str>) -> String {
    redact_headers(&Redactor::new(key).redact(text))
}

/// `text` with every `Bearer` token and every `Authorization` value replaced.
fn redact_headers(text: &str) -> String {
    let s = redact_after(text, "bearer", |b| {
        b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b)
    });
    redact_after(&s, "authorization", |b| !b"\"',;}\r\n".contains(&b))
}

/// Replace the value after each case-insensitive `word` (past separators `"':=` and spaces)
/// while `value_byte` holds.
fn redact_after(text: &str, word: &str, value_byte: impl Fn(u8) -> bool) -> String {
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(found) = lower[pos..].find(word) {
        let mut i = pos + found + word.len();
        while i < bytes.len() && b"\"':= \t\\".contains(&bytes[i]) {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && value_byte(bytes[i]) {
            i += 1;
        }
        // Only ASCII bytes were consumed, so both cuts fall on char boundaries.
        out.push_str(&text[pos..start]);
        if i > start && &text[start..i] != REDACTED {
            out.push_str(REDACTED);
        } else {
            out.push_str(&text[start..i]);
        }
        pos = i;
    }
    out.push_str(&text[pos..]);
    out
}

/// The first 200 characters of a body, on one line, for error messages.
fn snippet(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    if text.chars().count() > 200 {
        format!("{one_line}...")
    } else {
        one_line
    }
}

/// Read a 2xx chat-completions body: the reply is `choices[0].message.content`.
pub(crate) fn parse_response(text: &str) -> Outcome {
    let v: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Outcome {
                error: Some(format!(
                    "response body is not JSON ({e}): {}",
                    snippet(text)
                )),
                ..Outcome::default()
            }
        }
    };
    let mut o = Outcome {
        response_model: v.get("model").and_then(|m| m.as_str()).map(String::from),
        usage: v.get("usage").filter(|u| !u.is_null()).cloned(),
        system_fingerprint: v
            .get("system_fingerprint")
            .and_then(|m| m.as_str())
            .map(String::from),
        ..Outcome::default()
    };
    let choice = match v.get("choices").and_then(|c| c.as_array()) {
        Some(a) if !a.is_empty() => &a[0],
        _ => {
            let detail = v
                .get("error")
                .map(|e| format!(": error {}", snippet(&e.to_string())))
                .unwrap_or_default();
            o.error = Some(format!("response has no choices{detail}"));
            return o;
        }
    };
    o.finish_reason = choice
        .get("finish_reason")
        .and_then(|f| f.as_str())
        .map(String::from);
    match choice
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(|c| c.as_str())
    {
        Some(c) => o.reply = Some(c.to_string()),
        None => o.error = Some("choices[0].message.content is missing or not a string".into()),
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_as_an_http_date() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        assert_eq!(retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        // RFC 9110's example date, 10 s after `now`; all three date forms it allows.
        for date in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Wednesday, 21-Oct-15 07:28:00 GMT",
            "Wed Oct 21 07:28:00 2015",
        ] {
            assert_eq!(
                retry_after(date, now),
                Some(Duration::from_secs(10)),
                "{date}"
            );
        }
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-5", now), None);
    }

    #[test]
    fn reply_is_first_choice_content() {
        let o = parse_response(
            r#"{"model":"m","choices":[{"message":{"role":"assistant","content":"3"},"finish_reason":"stop"}],"usage":{"total_tokens":5}}"#,
        );
        assert_eq!(o.reply.as_deref(), Some("3"));
        assert_eq!(o.response_model.as_deref(), Some("m"));
        assert_eq!(o.finish_reason.as_deref(), Some("stop"));
        assert!(o.error.is_none());
    }

    #[test]
    fn keys_and_authorization_values_are_redacted() {
        let body =
            r#"{"error":"bad request","headers":{"authorization":"Bearer sk-secret123","x":"y"}}"#;
        let r = redact(body, Some("sk-secret123"));
        assert!(!r.contains("sk-secret"), "{r}");
        let r = redact(body, None);
        assert!(!r.contains("sk-secret"), "{r}");
        assert!(r.contains(r#""x":"y""#), "{r}");
        let r = redact("Authorization: Bearer abc.def\nnext", None);
        assert_eq!(r, "Authorization: <redacted>\nnext");
        assert_eq!(redact("plain text é", Some("k-1")), "plain text é");
    }

    #[test]
    fn bad_bodies_are_errors() {
        assert!(parse_response("not json")
            .error
            .unwrap()
            .contains("not JSON"));
        assert!(parse_response(r#"{"choices":[]}"#)
            .error
            .unwrap()
            .contains("no choices"));
        assert!(
            parse_response(r#"{"choices":[{"message":{"content":null}}]}"#)
                .error
                .unwrap()
                .contains("content")
        );
    }

    #[test]
    fn base_url_needs_a_scheme() {
        assert!(chat_url("127.0.0.1:8088/v1").is_err());
        assert_eq!(
            chat_url("http://h:1/v1/").unwrap(),
            "http://h:1/v1/chat/completions"
        );
    }
}
