//! A party's push notification configs for its own tasks (A2A's `CreateTaskPushNotificationConfig`, `GetTaskPushNotificationConfig`,
//! `ListTaskPushNotificationConfigs` and `DeleteTaskPushNotificationConfig`): stored with the
//! task, listed and answered with their credentials left out, deleted idempotently.

use serde::Serialize;

use super::{Caller, Result, Service, ServiceError, input};
use crate::domain::ThreadId;
use crate::store::PushConfigRecord;

/// A push notification config as a party gives it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PushConfigSpec {
    pub id: Option<String>,
    pub url: String,
    pub token: Option<String>,
    pub auth_scheme: Option<String>,
    pub auth_credentials: Option<String>,
}

impl Service {
    /// Stores a push notification config for one of the caller's tasks.
    pub async fn set_push_config(
        &self,
        caller: &Caller,
        task: &ThreadId,
        spec: PushConfigSpec,
    ) -> Result<PushConfigRecord> {
        caller.require_party()?;
        input::storable("push notification config", &spec)?;
        self.own_task(caller, task).await?;
        self.check_outbound_url(&spec.url)
            .map_err(|e| ServiceError::invalid(format!("push notification url: {}", e.message)))?;
        let id = spec
            .id
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if id.len() > 200 {
            return Err(ServiceError::invalid(
                "push notification config id must be at most 200 characters",
            ));
        }
        let record = PushConfigRecord {
            thread: task.clone(),
            id,
            url: spec.url,
            token: spec.token,
            auth_scheme: spec.auth_scheme,
            auth_credentials: spec.auth_credentials,
            created_at: self.now(),
        };
        self.inner.store.put_push_config(record.clone()).await?;
        // A new config replays the task's latest event to it.
        self.outbox_due(true);
        Ok(PushConfigRecord {
            auth_credentials: None,
            ..record
        })
    }

    /// The push configs of one of the caller's tasks, credentials redacted.
    pub async fn push_configs(
        &self,
        caller: &Caller,
        task: &ThreadId,
    ) -> Result<Vec<PushConfigRecord>> {
        caller.require_party()?;
        self.own_task(caller, task).await?;
        let configs = self.inner.store.push_configs(task).await?;
        Ok(configs
            .into_iter()
            .map(|c| PushConfigRecord {
                auth_credentials: None,
                ..c
            })
            .collect())
    }

    pub async fn delete_push_config(
        &self,
        caller: &Caller,
        task: &ThreadId,
        id: &str,
    ) -> Result<()> {
        caller.require_party()?;
        self.own_task(caller, task).await?;
        // Idempotent (A2A §3.1.10, conformance kit PUSH-DEL-002): deleting a config that is
        // already gone succeeds; the task must still be the caller's.
        self.inner
            .store
            .delete_push_config(task.clone(), id.to_owned())
            .await?;
        Ok(())
    }
}
