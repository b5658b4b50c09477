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
        watched.reload_if_changed(path, &mut seen, parse);
    }
}

impl<T> Watched<T> {
    /// One look at the file: parsed again when its stamp is not `seen`;
    /// one that does not parse keeps what was loaded. Whether it was
    /// replaced.
    fn reload_if_changed(
        &self,
        path: &Path,
        seen: &mut Option<(SystemTime, u64)>,
        parse: fn(&str) -> anyhow::Result<T>,
    ) -> bool {
        let now = stamp(path);
        if now == *seen {
            return false;
        }
        *seen = now;
        match std::fs::read_to_string(path)
            .map_err(anyhow::Error::from)
            .and_then(|text| parse(&text))
        {
            Ok(loaded) => {
                self.current.store(Arc::new(loaded));
                info!(file = %path.display(), "credentials reloaded");
                true
            }
            Err(err) => {
                warn!(file = %path.display(), "credentials file not reloaded, keeping the ones loaded: {err:#}");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `name=secret` lines; a line without `=` is refused by
    /// its number, without the line's text.
    fn parse(text: &str) -> anyhow::Result<Vec<String>> {
        text.lines()
            .enumerate()
            .map(|(i, line)| match line.split_once('=') {
                Some((name, _)) => Ok(name.to_string()),
                None => anyhow::bail!("line {}: no `=`", i + 1),
            })
            .collect()
    }

    fn file(name: &str, text: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("sluice-watched-{name}-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_file_that_cannot_be_read_or_parsed_stops_the_start_naming_it() {
        let missing = std::env::temp_dir().join("sluice-watched-no-such-file");
        let err = Watched::start(missing.to_str().unwrap(), Duration::from_secs(60), parse)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot read") && err.contains("sluice-watched-no-such-file"),
            "{err}"
        );
        let bad = file(
            "bad",
            "alice=s3cret
hunter2
",
        );
        let err = Watched::start(bad.to_str().unwrap(), Duration::from_secs(60), parse)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&*bad.to_string_lossy()) && err.contains("line 2"),
            "{err}"
        );
        assert!(!err.contains("hunter2") && !err.contains("s3cret"), "{err}");
        std::fs::remove_file(bad).unwrap();
    }

    #[test]
    fn a_changed_file_is_loaded_again_and_a_broken_one_keeps_the_last() {
        let path = file(
            "reload", "alice=1
",
        );
        let watched =
            Watched::start(path.to_str().unwrap(), Duration::from_secs(3600), parse).unwrap();
        assert_eq!(**watched.load(), ["alice"]);
        let mut seen = stamp(&path);
        assert!(
            !watched.reload_if_changed(&path, &mut seen, parse),
            "unchanged"
        );
        // A different length is a change even within the clock's grain.
        std::fs::write(
            &path,
            "alice=1
bob=2
",
        )
        .unwrap();
        assert!(watched.reload_if_changed(&path, &mut seen, parse));
        assert_eq!(**watched.load(), ["alice", "bob"]);
        std::fs::write(
            &path,
            "alice=1
broken line
",
        )
        .unwrap();
        assert!(!watched.reload_if_changed(&path, &mut seen, parse));
        assert_eq!(**watched.load(), ["alice", "bob"]);
        // A file gone keeps what was loaded, too.
        std::fs::remove_file(&path).unwrap();
        assert!(!watched.reload_if_changed(&path, &mut seen, parse));
        assert_eq!(**watched.load(), ["alice", "bob"]);
    }
}
