//! Progress bars on a terminal for the stages' long work: the binary's side of
//! `protospread_core::Progress` (the library crates report, never print).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use protospread_core::Progress;
use std::sync::Mutex;
use std::time::Duration;

/// One bar per phase on standard error: the phase, units done, elapsed time and rate.
#[derive(Debug, Default)]
pub(crate) struct Bars {
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    fn with<T>(&self, f: impl FnOnce(&mut Option<ProgressBar>) -> T) -> T {
        // A panic while the lock is held leaves only a stale bar behind.
        let mut bar = self.bar.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut bar)
    }
}

impl Progress for Bars {
    fn begin(&self, what: &str, unit: &str, total: Option<u64>) {
        let template = match total {
            Some(_) => "{msg} [{bar:30}] {human_pos}/{human_len} {prefix} ({elapsed}, {per_sec})",
            None => "{spinner} {msg}: {human_pos} {prefix} ({elapsed}, {per_sec})",
        };
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        bar.set_prefix(unit.to_string());
        // The elapsed time moves while a plan runs between two batches.
        bar.enable_steady_tick(Duration::from_millis(250));
        if let Some(old) = self.with(|b| b.replace(bar)) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, n: u64) {
        self.with(|b| {
            if let Some(bar) = b {
                bar.inc(n);
            }
        });
    }

    fn end(&self) {
        if let Some(bar) = self.with(Option::take) {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        // A stage that failed between `begin` and `end` leaves no bar on the screen.
        self.end();
    }
}
