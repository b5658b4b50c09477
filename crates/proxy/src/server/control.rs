//! The control thread: what changes the configuration while the proxy
//! serves. SIGHUP reloads the file (and the TLS listeners' files, as it
//! always did); `--watch` reloads it when its directory changes (a
//! Kubernetes ConfigMap is a symlink swapped atomically, so the directory
//! is watched, not the file), once the changes have settled; discovery
//! re-resolves host names when their answers expire.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use notify::{RecursiveMode, Watcher};
use tokio::{
    signal::unix::Signal,
    sync::{mpsc, watch},
    time::Instant,
};
use tracing::{debug, info, warn};

use super::reload::Reloader;
use crate::upstream::discovery::Resolver;

/// A burst of file events is one change once this long passes without one
/// (an editor's save or a ConfigMap swap is several events).
const SETTLE: Duration = Duration::from_millis(200);

/// Runs the triggers until shutdown; `watch_file`: the file to watch, with `--watch`.
pub(crate) async fn run(
    reloader: Arc<Reloader>,
    hangups: Signal,
    watch_file: Option<PathBuf>,
    mut shutdown: watch::Receiver<bool>,
) {
    let hangups = Box::pin(on_hangup(Arc::clone(&reloader), hangups));
    let watching = Box::pin(watch_file_changes(Arc::clone(&reloader), watch_file));
    let discovery = Box::pin(discover(reloader));
    tokio::select! {
        _ = shutdown.changed() => {}
        () = hangups => {}
        () = watching => {}
        () = discovery => {}
    }
}

/// Reloads on every SIGHUP.
async fn on_hangup(reloader: Arc<Reloader>, mut hangups: Signal) {
    while hangups.recv().await.is_some() {
        let _ = reloader.reload("SIGHUP").await;
    }
}

/// With `file`, reloads when its directory changes and its content did.
async fn watch_file_changes(reloader: Arc<Reloader>, file: Option<PathBuf>) {
    let Some(file) = file else {
        return std::future::pending().await;
    };
    let (events, mut changed) = mpsc::unbounded_channel();
    let mut watcher =
        match notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok() {
                let _ = events.send(());
            }
        }) {
            Ok(watcher) => watcher,
            Err(err) => return warn!(%err, "cannot watch the configuration; reload with SIGHUP"),
        };
    let directory = watched_directory(&file);
    if let Err(err) = watcher.watch(&directory, RecursiveMode::NonRecursive) {
        return warn!(%err, directory = %directory.display(), "cannot watch the configuration's directory; reload with SIGHUP");
    }
    info!(directory = %directory.display(), "watching the configuration");
    while changed.recv().await.is_some() {
        // Let the burst settle.
        while let Ok(Some(())) = tokio::time::timeout(SETTLE, changed.recv()).await {}
        if reloader.file_changed().await {
            let _ = reloader.reload("watch").await;
        } else {
            debug!("the configuration's directory changed, not the file");
        }
    }
}

/// The directory whose entries change when the file does.
fn watched_directory(file: &Path) -> PathBuf {
    match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Re-resolves host names as their answers expire. The resolver is made
/// when a name is first due (a configuration without names pays nothing).
async fn discover(reloader: Arc<Reloader>) {
    let mut settings = reloader.discovery().await;
    let mut resolver: Option<Resolver> = None;
    loop {
        let current = reloader.discovery().await;
        if format!("{current:?}") != format!("{settings:?}") {
            resolver = None;
            settings = current;
        }
        let next = reloader
            .rediscover(|| resolver.get_or_insert_with(|| Resolver::new(&settings)))
            .await;
        tokio::select! {
            () = tokio::time::sleep_until(Instant::from_std(next)) => {}
            () = reloader.rescheduled.notified() => {}
        }
    }
}
