//! Typed indices into a plan: a route, an upstream, one host of an
//! upstream. Each is a position fixed when the plan is compiled, so a
//! lookup is an index, and the type says which table it indexes.
//!
//! A route and an upstream also carry their metrics slot: the row their
//! counters have, given by name, so that it stays the same across the
//! plans a reload makes while positions may move (`telemetry`).

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub(crate) struct $name(usize);

        impl $name {
            pub(crate) const fn new(index: usize) -> Self {
                Self(index)
            }

            /// The position in its table.
            pub(crate) const fn index(self) -> usize {
                self.0
            }
        }
    };
}

/// An id with a metrics slot as well as a position.
macro_rules! counted_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub(crate) struct $name {
            index: u32,
            metric: u32,
        }

        impl $name {
            /// Position `index`, counted in the slot of the same number.
            #[cfg(test)]
            #[allow(dead_code)] // Tests make either kind.
            pub(crate) const fn new(index: usize) -> Self {
                Self::counted(index, index)
            }

            /// Position `index`, counted in slot `metric`.
            #[allow(clippy::cast_possible_truncation)] // Plans hold far fewer than 2^32 of either.
            pub(crate) const fn counted(index: usize, metric: usize) -> Self {
                Self {
                    index: index as u32,
                    metric: metric as u32,
                }
            }

            /// The position in its table.
            pub(crate) const fn index(self) -> usize {
                self.index as usize
            }

            /// Its metrics slot.
            pub(crate) const fn metric(self) -> usize {
                self.metric as usize
            }
        }
    };
}

counted_id!(
    /// A route: its position in the configuration file.
    RouteId
);
counted_id!(
    /// An upstream: its position among the plan's upstreams.
    UpstreamId
);
id!(
    /// A host of an upstream: its position in the upstream's `hosts`.
    HostId
);
