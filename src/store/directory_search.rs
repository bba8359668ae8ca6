//! Searching people and tokens a page at a time (the admin console's lists), and renaming a
//! person. An operation file (`impl Store` only): no building block (`tx/`) and no other
//! operation file may depend on it.

use super::Store;
use super::db::query;
use super::error::Result;
use super::model::input::AdminChange;
use super::model::records::directory::{PersonRecord, TOKEN_COLUMNS, TokenRecord, person, token};
use super::tx::audit::append_change;
use crate::domain::{PersonId, Timestamp};

/// Which people a page lists: by text (in the id or the display name, any case), by kind, from
/// `offset`, at most `limit`, by id. The server's own person is never listed.
#[derive(Debug, Clone, Default)]
pub struct PersonSearch {
    pub text: Option<String>,
    /// `member`, `external` or `remote`.
    pub kind: Option<String>,
    pub offset: i64,
    pub limit: i64,
}

/// A token's state, as a list filters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenState {
    Live,
    Expired,
    Revoked,
}

/// Which tokens a page lists: by text (in the id, the person's id or the description, any
/// case), by state at `now`, from `offset`, at most `limit`, newest first.
#[derive(Debug, Clone)]
pub struct TokenSearch {
    pub text: Option<String>,
    pub state: Option<TokenState>,
    pub now: Timestamp,
    pub offset: i64,
    pub limit: i64,
}

/// A `LIKE` pattern finding `text` anywhere, any case (`\` escapes `%`, `_` and itself).
fn contains(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

impl Store {
    /// The people `search` selects (removed ones never).
    pub async fn search_persons(&self, search: PersonSearch) -> Result<Vec<PersonRecord>> {
        let rows = query(
            "SELECT id, kind, display_name, created_at FROM persons WHERE removed_at IS NULL \
             AND id <> $1 AND ($2 IS NULL OR kind = $2) \
             AND ($3 IS NULL OR lower(id) LIKE $3 ESCAPE '\\' OR lower(display_name) LIKE $3 ESCAPE '\\') \
             ORDER BY id LIMIT $4 OFFSET $5",
        )
        .bind(crate::domain::SERVER_PERSON)
        .bind(search.kind)
        .bind(search.text.as_deref().map(contains))
        .bind(search.limit)
        .bind(search.offset)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(person).collect()
    }

    /// The tokens `search` selects.
    pub async fn search_tokens(&self, search: TokenSearch) -> Result<Vec<TokenRecord>> {
        let state = search.state.map(|s| match s {
            TokenState::Live => "live",
            TokenState::Expired => "expired",
            TokenState::Revoked => "revoked",
        });
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE \
             ($1 IS NULL OR lower(id) LIKE $1 ESCAPE '\\' OR lower(person_id) LIKE $1 ESCAPE '\\' \
              OR lower(description) LIKE $1 ESCAPE '\\') \
             AND ($2 IS NULL \
              OR ($2 = 'live' AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $3)) \
              OR ($2 = 'expired' AND revoked_at IS NULL AND expires_at <= $3) \
              OR ($2 = 'revoked' AND revoked_at IS NOT NULL)) \
             ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5"
        );
        let rows = query(sql)
            .bind(search.text.as_deref().map(contains))
            .bind(state)
            .bind(search.now.0)
            .bind(search.limit)
            .bind(search.offset)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(token).collect()
    }

    /// Gives a person another display name. False when there is no such person (or removed).
    pub async fn rename_person(
        &self,
        id: PersonId,
        display_name: String,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE persons SET display_name = $1 WHERE id = $2 AND removed_at IS NULL",
                )
                .bind(display_name)
                .bind(id.as_str().to_owned())
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::contains;

    #[test]
    fn a_search_pattern_matches_its_text_literally() {
        assert_eq!(contains("Ab"), "%ab%");
        assert_eq!(contains("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }
}
