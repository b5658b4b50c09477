//! Typed indices into a plan: a route, an upstream, one host of an
//! upstream. Each is a position fixed when the plan is compiled, so a
//! lookup is an index, and the type says which table it indexes.

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

id!(
    /// A route: its position in the configuration file.
    RouteId
);
id!(
    /// An upstream: its position among the plan's upstreams.
    UpstreamId
);
id!(
    /// A host of an upstream: its position in the upstream's `hosts`.
    HostId
);
