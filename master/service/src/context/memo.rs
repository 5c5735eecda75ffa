//! What a master built from the site settings (the viewer registry, say), one value per type,
//! kept for its builder to compare with the current settings version before reuse.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The last value of each type a master built from the settings.
#[derive(Default)]
pub struct SettingsMemo(Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl SettingsMemo {
    /// The value of type `T` built last, if any.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        // A panic elsewhere while holding the lock leaves whole values or none: still usable.
        let values = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        values.get(&TypeId::of::<T>()).cloned().and_then(|value| value.downcast::<T>().ok())
    }

    /// Keeps `value` as the last `T` built.
    pub fn put<T: Any + Send + Sync>(&self, value: Arc<T>) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(TypeId::of::<T>(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_has_its_own_slot_and_the_last_put_wins() {
        let memo = SettingsMemo::default();
        assert!(memo.get::<String>().is_none());
        memo.put(Arc::new("first".to_owned()));
        memo.put(Arc::new(7_u32));
        memo.put(Arc::new("second".to_owned()));
        assert_eq!(memo.get::<String>().as_deref().map(String::as_str), Some("second"));
        assert_eq!(memo.get::<u32>().as_deref(), Some(&7));
    }
}
