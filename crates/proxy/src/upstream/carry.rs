//! What a host keeps across plans. A reload or a discovery round compiles
//! new upstreams; a host that stays (same upstream name, same address,
//! same protocol and TLS settings) keeps its pooled connections and its
//! health, a host that arrives ramps up (`slow_start`), and a host that
//! goes is retired: its idle connections close, and the ones in use close
//! when their request ends. What `sticky.app_cookie` learned follows its
//! hosts.

use std::sync::Arc;

use super::Upstream;
use crate::{
    ids::{HostId, UpstreamId},
    telemetry::Shard,
};

impl Upstream {
    /// Takes over `old`'s pools and health for the hosts both have, and
    /// what its sticky persistence learned; a host `old` did not have is
    /// new at `now` (the plans' clock) and ramps up (`slow_start`).
    pub(crate) fn carry_over(&mut self, old: &Upstream, now: u64) {
        // By old host: its index here. The address names a host; a host
        // listed twice matches twice, in order.
        let mut moved = vec![None; old.hosts.len()];
        for (host, addr) in self.hosts.iter().enumerate() {
            let from = (0..old.hosts.len()).find(|&o| moved[o].is_none() && old.hosts[o] == *addr);
            if let Some(from) = from {
                moved[from] = Some(host);
            } else {
                self.balancer.arrived(HostId::new(host), now);
            }
        }
        self.balancer.carry_persistence(&old.balancer, &moved);
        // Other protocol or TLS settings: the same hosts, but their
        // connections and health start afresh.
        if self.connection_settings != old.connection_settings {
            return;
        }
        for (from, host) in moved.iter().enumerate() {
            if let &Some(host) = host {
                self.conns[host] = Arc::clone(&old.conns[from]);
                self.balancer
                    .carry_host(HostId::new(host), &old.balancer, HostId::new(from));
            }
        }
    }

    /// Retires the hosts of `self` (upstream `id` of the plan going out)
    /// that `next` (the same upstream in the new plan, if it has one) did
    /// not take over; returns how many.
    pub(crate) fn retire_dropped<'a>(
        &self,
        id: UpstreamId,
        next: Option<&Upstream>,
        shard: impl Fn(usize) -> &'a Shard + Copy,
    ) -> usize {
        let mut retired = 0;
        for conns in &self.conns {
            let kept = next.is_some_and(|next| next.conns.iter().any(|c| Arc::ptr_eq(c, conns)));
            if !kept {
                conns.retire(id, shard);
                retired += 1;
            }
        }
        retired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        config::UpstreamSettings,
        upstream::{balance::HostHealth, discovery::Answers},
    };

    const SECOND: u64 = 1_000_000_000;

    fn upstream(hosts: &str) -> Upstream {
        let yaml = format!("hosts: [{hosts}]\nslow_start: 10s\n");
        let settings: UpstreamSettings = serde_saphyr::from_str(&yaml).unwrap();
        Upstream::new("svc", &settings, &Answers::new(), 1).unwrap()
    }

    #[test]
    fn a_host_a_reload_adds_ramps_up_and_a_kept_one_does_not() {
        let old = upstream("\"http://10.0.0.1:80\"");
        let mut new = upstream("\"http://10.0.0.2:80\", \"http://10.0.0.1:80\"");
        new.carry_over(&old, 100 * SECOND);
        let health = |host: usize, at: u64| new.balancer.view(HostId::new(host), at).health;
        assert_eq!(health(0, 101 * SECOND), HostHealth::Ramping, "added");
        assert_eq!(health(1, 101 * SECOND), HostHealth::Healthy, "kept");
        assert_eq!(health(0, 110 * SECOND), HostHealth::Healthy, "ramped");
        assert!(Arc::ptr_eq(&new.conns[1], &old.conns[0]), "pool kept");
    }
}
