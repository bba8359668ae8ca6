//! Single-use links deciding one tool confirmation (SPEC §5b), the path a chat notification
//! takes: the `approval.pending` webhook about a tool call carries one, for the person whose
//! agent asked (the only one who may decide it), derived as approval links in webhook bodies
//! are (`Service::webhook_decision_link`). Opening the link shows the exact action with "Allow
//! once" and "Reject"; the link is used by the first press, and the decision is hers via
//! `link`, exactly as from the console. A link never outlives its confirmation: it is refused
//! once the confirmation is no longer waiting.

use super::sessions::{LinkFor, LinkIssue};
use super::{Caller, ConfirmationDecision, ErrorCode, IssuedLink, Result, Service, ServiceError};
use crate::domain::tool_check::{ConfirmationId, ConfirmationState};
use crate::domain::{Decision, DecisionPath, Scope};
use crate::store::{ConfirmationRecord, LinkKind, LinkRecord};

/// What a confirmation link's page shows.
#[derive(Debug, Clone)]
pub struct OpenedConfirmationLink {
    pub link: LinkRecord,
    /// The page's CSRF token (its form, and the cookie the page sets).
    pub csrf: String,
    /// The person deciding.
    pub caller: Caller,
    pub confirmation: ConfirmationRecord,
}

impl Service {
    /// A link deciding confirmation `id` as its person, issued `how` (admins; the webhook's
    /// links are issued in the bootstrap admin's name). Only a waiting one gets one; it lives
    /// until the confirmation's own deadline.
    pub(super) async fn confirmation_link(
        &self,
        admin: &Caller,
        id: &ConfirmationId,
        how: LinkIssue,
    ) -> Result<IssuedLink> {
        admin.require(Scope::Admin)?;
        let c = self
            .inner
            .store
            .confirmation(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("confirmation", id))?;
        let now = self.now();
        if c.state != ConfirmationState::Pending || c.expires_at <= now {
            return Err(ServiceError::new(
                ErrorCode::ApprovalDecided,
                format!("confirmation {id} is no longer waiting; no link can decide it"),
            ));
        }
        let ttl = u64::try_from((c.expires_at.0 - now.0) / 1000)
            .unwrap_or(0)
            .max(1);
        self.issue_link(
            admin,
            c.person.clone(),
            LinkFor::Confirmation(id.clone()),
            ttl,
            how,
            false,
        )
        .await
    }

    /// Opens a confirmation link's page: the link must be usable and be the link of `id`.
    /// Uses nothing.
    pub async fn open_confirmation_link(
        &self,
        id: &ConfirmationId,
        secret: &str,
    ) -> Result<OpenedConfirmationLink> {
        let (link, csrf) = self
            .open_link(LinkKind::Confirmation, secret, Some(id.as_str()))
            .await?;
        let caller = self.link_caller(&link).await?;
        let confirmation = self.tool_confirmation(&caller, id).await?;
        Ok(OpenedConfirmationLink {
            link,
            csrf,
            caller,
            confirmation,
        })
    }

    /// Decides confirmation `id` through its single-use link: the link is used (once) and the
    /// decision is its person's, via `link`.
    pub async fn decide_confirmation_by_link(
        &self,
        id: &ConfirmationId,
        secret: &str,
        form_csrf: &str,
        cookie_csrf: Option<&str>,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<ConfirmationRecord> {
        let link = self
            .use_link(
                LinkKind::Confirmation,
                secret,
                Some(id.as_str()),
                form_csrf,
                cookie_csrf,
            )
            .await?;
        let caller = self
            .link_caller(&link)
            .await?
            .arriving_via(DecisionPath::Link);
        self.decide_tool_confirmation(&caller, id, decision, ConfirmationDecision { reason })
            .await
    }
}
