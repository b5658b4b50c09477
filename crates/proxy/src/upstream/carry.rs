//! What a host keeps across plans. A reload or a discovery round compiles
//! new upstreams; a host that stays (same upstream name, same address,
//! same protocol and TLS settings) keeps its pooled connections and its
//! health, and a host that goes is retired: its idle connections close,
//! and the ones in use close when their request ends.

use std::sync::Arc;

use super::Upstream;
use crate::{
    ids::{HostId, UpstreamId},
    telemetry::Shard,
};

impl Upstream {
    /// Takes over `old`'s pools and health for the hosts both have.
    pub(crate) fn carry_over(&mut self, old: &Upstream) {
        if self.connection_settings != old.connection_settings {
            return;
        }
        let mut taken = vec![false; old.hosts.len()];
        for (host, addr) in self.hosts.iter().enumerate() {
            let found = (0..old.hosts.len()).find(|&o| !taken[o] && old.hosts[o] == *addr);
            if let Some(from) = found {
                taken[from] = true;
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
