//! People and tokens as an admin searches them, a bounded page at a time (the console's lists),
//! and a person's display name changed by an admin. Scope `admin`; every change audited.

use super::admin::clean_display_name;
use super::{Caller, Result, Service, ServiceError};
use crate::domain::{PersonId, PersonKind, Scope};
use crate::store::{PersonRecord, PersonSearch, TokenRecord, TokenSearch, TokenState};

/// Most rows one page of a search holds.
pub const MAX_LIST_PAGE: i64 = 200;
/// The last page a search reaches (past it, narrow the search instead).
pub const MAX_LIST_PAGES: i64 = 1000;

/// What an admin's list asks for: a text to look for, a kind or state, and a page (from 1).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub text: Option<String>,
    /// People: `member`, `external` or `remote`. Tokens: `live`, `expired` or `revoked`.
    pub filter: Option<String>,
    pub page: i64,
    pub per_page: i64,
}

/// One page of a list, and whether another follows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listed<T> {
    pub items: Vec<T>,
    pub more: bool,
}

/// `q`'s text, checked: one line of at most 200 characters; none when blank.
fn search_text(q: &ListQuery) -> Result<Option<String>> {
    match q.text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) if t.chars().count() > 200 || t.chars().any(char::is_control) => Err(
            ServiceError::invalid("the search must be one line of at most 200 characters"),
        ),
        Some(t) => Ok(Some(t.to_owned())),
    }
}

/// `q`'s page as (offset, rows to read: one more than a page, to know whether another follows).
fn window(q: &ListQuery) -> Result<(i64, i64)> {
    if !(1..=MAX_LIST_PAGE).contains(&q.per_page) {
        return Err(ServiceError::invalid(format!(
            "a page holds 1-{MAX_LIST_PAGE} rows, not {}",
            q.per_page
        )));
    }
    if !(1..=MAX_LIST_PAGES).contains(&q.page) {
        return Err(ServiceError::invalid(format!(
            "page must be 1-{MAX_LIST_PAGES} (narrow the search to reach further), not {}",
            q.page
        )));
    }
    Ok(((q.page - 1) * q.per_page, q.per_page + 1))
}

fn page<T>(mut items: Vec<T>, per_page: i64) -> Listed<T> {
    let per_page = usize::try_from(per_page).unwrap_or(0);
    let more = items.len() > per_page;
    items.truncate(per_page);
    Listed { items, more }
}

impl Service {
    /// A page of the people an admin manages (never the server's own person), by id.
    pub async fn search_persons(
        &self,
        caller: &Caller,
        q: &ListQuery,
    ) -> Result<Listed<PersonRecord>> {
        caller.require(Scope::Admin)?;
        let text = search_text(q)?;
        let kind = match q.filter.as_deref().filter(|k| !k.is_empty()) {
            None => None,
            Some(k) => Some(
                k.parse::<PersonKind>()
                    .map_err(|_| {
                        ServiceError::invalid(format!(
                            "kind must be member, external or remote, not {}",
                            crate::domain::text::quote(k)
                        ))
                    })?
                    .as_str()
                    .to_owned(),
            ),
        };
        let (offset, limit) = window(q)?;
        let found = self
            .inner
            .store
            .search_persons(PersonSearch {
                text,
                kind,
                offset,
                limit,
            })
            .await?;
        Ok(page(found, q.per_page))
    }

    /// A page of every token (whatever its state), newest first.
    pub async fn search_tokens(
        &self,
        caller: &Caller,
        q: &ListQuery,
    ) -> Result<Listed<TokenRecord>> {
        caller.require(Scope::Admin)?;
        let text = search_text(q)?;
        let state = match q.filter.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some("live") => Some(TokenState::Live),
            Some("expired") => Some(TokenState::Expired),
            Some("revoked") => Some(TokenState::Revoked),
            Some(s) => {
                return Err(ServiceError::invalid(format!(
                    "state must be live, expired or revoked, not {}",
                    crate::domain::text::quote(s)
                )));
            }
        };
        let (offset, limit) = window(q)?;
        let found = self
            .inner
            .store
            .search_tokens(TokenSearch {
                text,
                state,
                now: self.now(),
                offset,
                limit,
            })
            .await?;
        Ok(page(found, q.per_page))
    }

    /// Gives a person (a member or a party) another display name, shown from now on.
    pub async fn rename_person(
        &self,
        caller: &Caller,
        id: &PersonId,
        display_name: &str,
    ) -> Result<PersonRecord> {
        caller.require(Scope::Admin)?;
        let display_name = clean_display_name(display_name)?;
        let before = self
            .inner
            .store
            .person(id)
            .await?
            .filter(|p| p.id.as_str() != crate::domain::SERVER_PERSON)
            .ok_or_else(|| ServiceError::not_found("person", id))?;
        if before.kind == PersonKind::Remote {
            return Err(ServiceError::invalid(
                "a remote agent is named by its Agent Card: refresh the card instead",
            ));
        }
        let after = PersonRecord {
            display_name,
            ..before.clone()
        };
        let audit = self.change(
            caller,
            "person.renamed",
            id,
            super::audit::shown(&before),
            super::audit::shown(&after),
        );
        if !self
            .inner
            .store
            .rename_person(id.clone(), after.display_name.clone(), audit)
            .await?
        {
            return Err(ServiceError::not_found("person", id));
        }
        self.directory_changed();
        tracing::info!(person = %id, "Person renamed.");
        Ok(after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_bounded_and_says_whether_another_follows() {
        let q = |page, per_page| ListQuery {
            page,
            per_page,
            ..ListQuery::default()
        };
        assert_eq!(window(&q(1, 50)).unwrap(), (0, 51));
        assert_eq!(window(&q(3, 50)).unwrap(), (100, 51));
        assert!(window(&q(0, 50)).is_err());
        assert!(window(&q(MAX_LIST_PAGES + 1, 50)).is_err());
        assert!(window(&q(1, MAX_LIST_PAGE + 1)).is_err());
        let listed = page(vec![1, 2, 3], 2);
        assert_eq!((listed.items, listed.more), (vec![1, 2], true));
        let listed = page(vec![1, 2], 2);
        assert_eq!((listed.items, listed.more), (vec![1, 2], false));
    }

    #[test]
    fn a_search_is_one_short_line() {
        let q = |t: &str| ListQuery {
            text: Some(t.into()),
            ..ListQuery::default()
        };
        assert_eq!(search_text(&q("  ")).unwrap(), None);
        assert_eq!(search_text(&q(" ali ")).unwrap().as_deref(), Some("ali"));
        assert!(search_text(&q("a\nb")).is_err());
        assert!(search_text(&q(&"x".repeat(201))).is_err());
    }
}
