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

    /// Keeps `value` as the last `T` built, unless the kept one is `same` as it (built from the
    /// same settings by a caller that raced this one): answers the kept value either way, so the
    /// callers of one settings version share one value.
    pub fn put<T: Any + Send + Sync>(&self, value: Arc<T>, same: impl FnOnce(&T, &T) -> bool) -> Arc<T> {
        let mut values = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = values.get(&TypeId::of::<T>()).cloned().and_then(|kept| kept.downcast::<T>().ok());
        if let Some(kept) = kept.filter(|kept| same(kept, &value)) {
            return kept;
        }
        values.insert(TypeId::of::<T>(), value.clone());
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_has_its_own_slot_and_the_last_put_wins() {
        let memo = SettingsMemo::default();
        assert!(memo.get::<String>().is_none());
        memo.put(Arc::new("first".to_owned()), |_, _| false);
        memo.put(Arc::new(7_u32), |_, _| false);
        memo.put(Arc::new("second".to_owned()), |_, _| false);
        assert_eq!(memo.get::<String>().as_deref().map(String::as_str), Some("second"));
        assert_eq!(memo.get::<u32>().as_deref(), Some(&7));
    }

    #[test]
    fn a_value_built_for_the_same_version_keeps_the_first() {
        let memo = SettingsMemo::default();
        let same_version = |kept: &(u32, &str), new: &(u32, &str)| kept.0 == new.0;
        let first = memo.put(Arc::new((1, "first")), same_version);
        let raced = memo.put(Arc::new((1, "raced")), same_version);
        assert!(Arc::ptr_eq(&first, &raced), "the kept value is answered");
        let newer = memo.put(Arc::new((2, "newer")), same_version);
        assert_eq!(*newer, (2, "newer"));
        assert_eq!(memo.get::<(u32, &str)>().as_deref(), Some(&(2, "newer")));
    }
}
