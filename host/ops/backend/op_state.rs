//! What ops keep on a backend between calls (scratch buffers, uploaded tables, settings), each
//! of a type its op's file defines and manages. The backend holds one value per type without
//! naming any, so the ops stay above it (they implement their traits for the backends).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One value per type, made with `Default` on first use.
#[derive(Default)]
pub struct OpState(Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl OpState {
    /// The value of type `T`, made with `T::default()` the first time it is asked for. Values
    /// that change between calls hold their own lock (the map's is released on return, so an
    /// op may ask for another's value while it holds its own).
    pub fn get<T: Any + Default + Send + Sync>(&self) -> Arc<T> {
        let any = self.0.lock().expect("op state poisoned").entry(TypeId::of::<T>()).or_insert_with(|| Arc::new(T::default())).clone();
        any.downcast().unwrap_or_else(|_| unreachable!("the map is keyed by its values' types"))
    }

    /// Replaces the value of type `T` (a setting chosen when the backend is made).
    pub fn set<T: Any + Send + Sync>(&mut self, value: T) {
        self.0.get_mut().expect("op state poisoned").insert(TypeId::of::<T>(), Arc::new(value));
    }
}

#[cfg(test)]
mod tests {
    use super::OpState;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Counter(Mutex<u32>);

    #[derive(Default, Debug, PartialEq)]
    struct Setting(u8);

    #[test]
    fn one_value_per_type_kept_between_calls() {
        let mut s = OpState::default();
        *s.get::<Counter>().0.lock().unwrap() += 2;
        *s.get::<Counter>().0.lock().unwrap() += 3;
        assert_eq!(*s.get::<Counter>().0.lock().unwrap(), 5);
        assert_eq!(*s.get::<Setting>(), Setting(0));
        s.set(Setting(7));
        assert_eq!(*s.get::<Setting>(), Setting(7));
        assert_eq!(*s.get::<Counter>().0.lock().unwrap(), 5, "another type's value is untouched");
    }
}
