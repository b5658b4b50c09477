//! A handler's own per-request state, declared in its file rather than as
//! a field of [`super::Exchange`]: any `Default` type is a slot, found by
//! its type, made the first time a session's exchange asks for it, and
//! reset to its default at each request (and after the done phase), so
//! that a session reuses its slots and a request allocates nothing for
//! them after its session's first.
//!
//! The slot belongs to the type, not to the instance: two instances of
//! one handler type in a chain share it, as they shared the exchange's
//! fields before (a handler whose instances must not share keys its state
//! by what it needs, as `concurrency_limit` keeps a list).

use std::{any::Any, fmt};

/// What a slot can be: any `Default` value that may cross threads.
trait Slot: Any + Send + Sync {
    fn reset(&mut self);
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Default + Send + Sync + 'static> Slot for T {
    fn reset(&mut self) {
        *self = T::default();
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The handlers' slots of one exchange.
#[derive(Default)]
pub(crate) struct PerRequest {
    slots: Vec<Box<dyn Slot>>,
}

impl PerRequest {
    /// The slot of type `T`, made (as its default) if this exchange has none.
    pub(crate) fn get_mut<T: Default + Send + Sync + 'static>(&mut self) -> &mut T {
        let at = match self.slots.iter().position(|s| s.as_any().is::<T>()) {
            Some(at) => at,
            None => {
                self.slots.push(Box::new(T::default()));
                self.slots.len() - 1
            }
        };
        self.slots[at]
            .as_any_mut()
            .downcast_mut()
            .expect("the slot found by its type has that type")
    }

    /// The slot of type `T`, if this exchange has one.
    pub(crate) fn get<T: 'static>(&self) -> Option<&T> {
        self.slots.iter().find_map(|s| s.as_any().downcast_ref())
    }

    /// Every slot back to its default (a new request).
    pub(crate) fn reset(&mut self) {
        for slot in &mut self.slots {
            slot.reset();
        }
    }
}

impl fmt::Debug for PerRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PerRequest({} slots)", self.slots.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct Origin(Option<&'static str>);

    #[derive(Default, Debug, PartialEq)]
    struct Count(u32);

    #[test]
    fn slots_are_found_by_type_and_reset_in_place() {
        let mut state = PerRequest::default();
        assert_eq!(state.get::<Origin>(), None, "no slot until asked for");
        state.get_mut::<Origin>().0 = Some("https://a.test");
        state.get_mut::<Count>().0 += 2;
        state.get_mut::<Count>().0 += 1;
        assert_eq!(state.get::<Origin>(), Some(&Origin(Some("https://a.test"))));
        assert_eq!(state.get::<Count>(), Some(&Count(3)));
        state.reset();
        assert_eq!(state.get::<Origin>(), Some(&Origin(None)));
        assert_eq!(state.get::<Count>(), Some(&Count(0)));
        assert_eq!(state.slots.len(), 2, "the slots are kept for reuse");
    }
}
