//! Waiting for a state instead of sleeping for a guess: a test polls what
//! it waits for, with a deadline, so it is as fast as the machine allows
//! and fails (instead of passing early) when the state never comes.

use std::time::{Duration, Instant};

/// Polls `check` every 10 ms until it holds (true) or `limit` passes (false).
pub async fn until<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn holds_as_soon_as_the_state_comes_and_fails_when_it_never_does() {
        let mut calls = 0;
        assert!(
            until(Duration::from_secs(5), || {
                calls += 1;
                let n = calls;
                async move { n == 3 }
            })
            .await
        );
        assert_eq!(calls, 3);
        let started = Instant::now();
        assert!(!until(Duration::from_millis(50), || async { false }).await);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }
}
