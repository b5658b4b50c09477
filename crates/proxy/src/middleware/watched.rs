//! A file of credentials (an htpasswd file, a keys file) parsed at start
//! (a bad file stops the start) and parsed again when it changes, checked
//! every `every` by a thread of its own that ends with the handler. A file
//! that stops parsing keeps what was loaded, with a warning that names the
//! file and the line, never the secret.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Weak},
    time::{Duration, SystemTime},
};

use arc_swap::ArcSwap;
use tracing::{info, warn};

/// What a file holds, parsed; `parse` says what is wrong without quoting secrets.
pub(super) struct Watched<T> {
    current: ArcSwap<T>,
}

impl<T> std::fmt::Debug for Watched<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watched(..)")
    }
}

/// The file's modification time and length: a change of either reloads it.
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl<T: Send + Sync + 'static> Watched<T> {
    pub(super) fn start(
        path: &str,
        every: Duration,
        parse: fn(&str) -> anyhow::Result<T>,
    ) -> anyhow::Result<Arc<Self>> {
        let path = PathBuf::from(path);
        let text = std::fs::read_to_string(&path)
            .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", path.display()))?;
        let loaded = parse(&text).map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?;
        let watched = Arc::new(Self {
            current: ArcSwap::from_pointee(loaded),
        });
        let weak = Arc::downgrade(&watched);
        let every = every.max(Duration::from_millis(100));
        std::thread::Builder::new()
            .name("proxy-credentials".into())
            .spawn(move || watch(&weak, &path, every, parse))?;
        Ok(watched)
    }

    pub(super) fn load(&self) -> arc_swap::Guard<Arc<T>> {
        self.current.load()
    }
}

fn watch<T>(
    watched: &Weak<Watched<T>>,
    path: &Path,
    every: Duration,
    parse: fn(&str) -> anyhow::Result<T>,
) {
    let mut seen = stamp(path);
    loop {
        std::thread::sleep(every);
        let Some(watched) = watched.upgrade() else {
            return;
        };
        let now = stamp(path);
        if now == seen {
            continue;
        }
        seen = now;
        match std::fs::read_to_string(path)
            .map_err(anyhow::Error::from)
            .and_then(|text| parse(&text))
        {
            Ok(loaded) => {
                watched.current.store(Arc::new(loaded));
                info!(file = %path.display(), "credentials reloaded");
            }
            Err(err) => {
                warn!(file = %path.display(), "credentials file not reloaded, keeping the ones loaded: {err:#}");
            }
        }
    }
}
