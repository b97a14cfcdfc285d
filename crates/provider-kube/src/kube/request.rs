//! One API request's error as an operation's failure class, and the delete parameters every
//! delete uses (a UID precondition).

use kube::api::DeleteParams;
use replay::ProviderError;

use crate::kube::limiter::Limiter;

pub(crate) fn api_err(limiter: &Limiter, e: &kube::Error) -> ProviderError {
    match e {
        kube::Error::Api(s) if s.code == 429 => {
            limiter
                .api_429
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            ProviderError::new("throttled", s.message.clone())
        }
        kube::Error::Api(s) if s.code == 404 => ProviderError::new("not_found", s.message.clone()),
        kube::Error::Api(s) if s.code == 409 => {
            ProviderError::new("already_exists", s.message.clone())
        }
        kube::Error::Api(s) if s.code == 403 => ProviderError::new("forbidden", s.message.clone()),
        kube::Error::Api(s) => {
            ProviderError::new("api_error", format!("{}: {}", s.code, s.message))
        }
        other => ProviderError::new("client_error", other.to_string()),
    }
}

/// Deletes `name` with a UID precondition (so an object of the same name that is not ours is
/// never touched) and a propagation policy of Background.
pub(crate) fn delete_params(uid: Option<String>, grace: Option<u32>) -> DeleteParams {
    DeleteParams {
        preconditions: uid.map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        grace_period_seconds: grace,
        ..DeleteParams::background()
    }
}
