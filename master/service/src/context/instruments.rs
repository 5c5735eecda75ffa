//! What a master counts while metrics are on (the scrape's use case is `ops::metrics`).

use std::sync::Arc;

use nubo_common::metrics::{Classifier, HttpMetrics, Registry};
use nubo_common::secret::Secret;

/// What a master counts while metrics are on, and the token that guards reading it.
pub struct Instruments {
    pub registry: Arc<Registry>,
    pub http: Arc<HttpMetrics>,
    pub token: Secret,
}

impl Instruments {
    /// `classify` names the routes whose bodies are file bytes (the front end knows them).
    pub fn new(token: Secret, classify: Classifier) -> Self {
        let registry = Arc::new(Registry::new());
        let http = Arc::new(HttpMetrics::new(registry.clone(), classify));
        Self { registry, http, token }
    }
}
