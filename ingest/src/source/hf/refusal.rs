//! The Hub's refusals as its own client reads them (`huggingface_hub`'s
//! `hf_raise_for_status`): the `X-Error-Code` header first (`RevisionNotFound`,
//! `EntryNotFound`, `GatedRepo`, `RepoNotFound`), then `X-Error-Message` (a disabled
//! repository; `Invalid credentials in Authorization header` for a refused token), then the
//! status: a 401 without a code is a repository the request may not see (the Hub answers
//! 401, not 404, for a repository that does not exist and for a private one alike).

use crate::options::TokenSource;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

/// What a request to the Hub asked for, to name it in a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubAsked {
    /// The Hub's base URL (the dataset's page is `{endpoint}/datasets/{repo}`).
    pub endpoint: String,
    /// Dataset repository, `owner/name`.
    pub repo: String,
    /// Revision asked for.
    pub revision: String,
    /// File or folder asked for (empty: the repository itself).
    pub path: String,
    /// Where the token sent came from (`None`: no token was sent).
    pub token: Option<TokenSource>,
}

/// Why the Hub refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubRefusalKind {
    /// `GatedRepo`: the dataset is gated and the request's user has not been granted access.
    Gated,
    /// `RepoNotFound` (or a 401 without a code): no such dataset, or a private one the
    /// request may not see.
    RepoNotFound,
    /// `RevisionNotFound`: the dataset has no such branch, tag or commit.
    RevisionNotFound,
    /// `EntryNotFound`: the revision has no such file or folder.
    EntryNotFound,
    /// `Access to this resource is disabled.`
    Disabled,
    /// `Invalid credentials in Authorization header`: the token itself was refused.
    TokenRefused,
    /// 403 without a code: the token lacks a permission.
    Forbidden,
}

/// A refusal of the Hub: what it means, what was asked, and what the Hub said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRefusal {
    /// What the refusal means.
    pub kind: HubRefusalKind,
    /// The HTTP status.
    pub status: u16,
    /// What was asked.
    pub asked: HubAsked,
    /// `X-Error-Message`, when the Hub sent one.
    pub message: Option<String>,
}

/// `X-Error-Message` of a refused token.
const INVALID_CREDENTIALS: &str = "Invalid credentials in Authorization header";
/// `X-Error-Message` of a disabled repository.
const DISABLED: &str = "Access to this resource is disabled.";

impl HubRefusal {
    /// Read a Hub answer's status and headers as `huggingface_hub` does; `None` for an answer
    /// that is no refusal (a success, a redirect, a 429 or 5xx, any other status).
    pub fn from_answer(
        status: StatusCode,
        headers: &HeaderMap,
        asked: &HubAsked,
    ) -> Option<HubRefusal> {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let code = text("x-error-code");
        let message = text("x-error-message");
        if !status.is_client_error() || status == StatusCode::TOO_MANY_REQUESTS {
            return None;
        }
        let kind = match (code.as_deref(), message.as_deref(), status.as_u16()) {
            (Some("RevisionNotFound"), _, _) => HubRefusalKind::RevisionNotFound,
            (Some("EntryNotFound"), _, _) => HubRefusalKind::EntryNotFound,
            (Some("GatedRepo"), _, _) => HubRefusalKind::Gated,
            (_, Some(DISABLED), _) => HubRefusalKind::Disabled,
            (Some("RepoNotFound"), _, _) => HubRefusalKind::RepoNotFound,
            (_, Some(INVALID_CREDENTIALS), 401) => HubRefusalKind::TokenRefused,
            (_, _, 401) => HubRefusalKind::RepoNotFound,
            (_, _, 403) => HubRefusalKind::Forbidden,
            (_, _, 404) => HubRefusalKind::EntryNotFound,
            _ => return None,
        };
        Some(HubRefusal {
            kind,
            status: status.as_u16(),
            asked: asked.clone(),
            message,
        })
    }

    /// The dataset's page on the Hub (where its terms are accepted).
    pub fn dataset_page(&self) -> String {
        format!("{}/datasets/{}", self.asked.endpoint, self.asked.repo)
    }

    fn token_text(&self) -> String {
        match &self.asked.token {
            Some(source) => format!("the token from {source} was sent"),
            None => "no token was sent".to_string(),
        }
    }

    /// What to do about it, naming the command or the place.
    pub fn hint(&self) -> String {
        let a = &self.asked;
        let login = "set HF_TOKEN or run `hf auth login`";
        match self.kind {
            HubRefusalKind::Gated => format!(
                "accept the dataset's terms at {} with the account the token belongs to{}",
                self.dataset_page(),
                if a.token.is_none() {
                    format!(", then {login}")
                } else {
                    String::new()
                }
            ),
            HubRefusalKind::RepoNotFound => match &a.token {
                None => format!(
                    "check the repository name `{}` for a typo; a private dataset needs a token that can read it: {login}",
                    a.repo
                ),
                Some(source) => format!(
                    "check the repository name `{}` for a typo; if it is private, the token from {source} must belong to an account that can read it",
                    a.repo
                ),
            },
            HubRefusalKind::RevisionNotFound => format!(
                "check hf_revision `{}` (pins are exact commits; `pipeline pin` writes them) and that it belongs to dataset `{}`",
                a.revision, a.repo
            ),
            HubRefusalKind::EntryNotFound => format!(
                "check hf_shard `{}` (a path in the repository at revision {})",
                a.path, a.revision
            ),
            HubRefusalKind::Disabled => format!(
                "the dataset `{}` was disabled on the Hub; it cannot be read",
                a.repo
            ),
            HubRefusalKind::TokenRefused => format!(
                "the token is invalid or expired: make a new one at https://huggingface.co/settings/tokens, then {login}"
            ),
            HubRefusalKind::Forbidden => format!(
                "the token lacks a permission for `{}`: give it read access to the dataset, or {login} with another",
                a.repo
            ),
        }
    }
}

impl std::fmt::Display for HubRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = &self.asked;
        let (lead, code) = match self.kind {
            HubRefusalKind::Gated => (
                format!(
                    "dataset `{}` is gated and its terms have not been accepted for this request ({}; ",
                    a.repo,
                    self.token_text()
                ),
                "GatedRepo, ",
            ),
            HubRefusalKind::RepoNotFound => (
                format!(
                    "the Hub has no dataset `{}` that this request may read: it does not exist or is private ({}; ",
                    a.repo,
                    self.token_text()
                ),
                "RepoNotFound, ",
            ),
            HubRefusalKind::RevisionNotFound => (
                format!("dataset `{}` has no revision `{}` (", a.repo, a.revision),
                "RevisionNotFound, ",
            ),
            HubRefusalKind::EntryNotFound => (
                format!(
                    "dataset `{}` has no `{}` at revision {} (",
                    a.repo, a.path, a.revision
                ),
                "EntryNotFound, ",
            ),
            HubRefusalKind::Disabled => (format!("dataset `{}` is disabled (", a.repo), ""),
            HubRefusalKind::TokenRefused => (
                format!("the Hub refused the token ({}; ", self.token_text()),
                "",
            ),
            HubRefusalKind::Forbidden => (
                format!(
                    "the Hub forbids this request on dataset `{}` ({}; ",
                    a.repo,
                    self.token_text()
                ),
                "",
            ),
        };
        write!(f, "{lead}{code}HTTP {}", self.status)?;
        match &self.message {
            Some(m) if m != DISABLED => {
                let m: String = m.split_whitespace().collect::<Vec<_>>().join(" ");
                write!(f, ": {})", m.chars().take(200).collect::<String>())
            }
            _ => f.write_str(")"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(token: Option<TokenSource>) -> HubAsked {
        HubAsked {
            endpoint: "https://huggingface.co".into(),
            repo: "o/n".into(),
            revision: "main".into(),
            path: "raw/a.tar".into(),
            token,
        }
    }

    fn read(status: u16, code: Option<&str>, message: Option<&str>) -> Option<HubRefusalKind> {
        let mut h = HeaderMap::new();
        if let Some(c) = code {
            h.insert("x-error-code", c.parse().unwrap());
        }
        if let Some(m) = message {
            h.insert("x-error-message", m.parse().unwrap());
        }
        HubRefusal::from_answer(StatusCode::from_u16(status).unwrap(), &h, &asked(None))
            .map(|r| r.kind)
    }

    /// The order of `hf_raise_for_status`: the code first, then the message, then the status.
    #[test]
    fn refusals_are_read_as_the_hub_client_reads_them() {
        use HubRefusalKind::*;
        assert_eq!(
            read(404, Some("RevisionNotFound"), None),
            Some(RevisionNotFound)
        );
        assert_eq!(read(404, Some("EntryNotFound"), None), Some(EntryNotFound));
        assert_eq!(read(403, Some("GatedRepo"), Some("x")), Some(Gated));
        assert_eq!(read(401, Some("GatedRepo"), None), Some(Gated));
        assert_eq!(read(401, Some("RepoNotFound"), None), Some(RepoNotFound));
        assert_eq!(read(404, Some("RepoNotFound"), None), Some(RepoNotFound));
        assert_eq!(read(403, None, Some(DISABLED)), Some(Disabled));
        assert_eq!(
            read(401, None, Some(INVALID_CREDENTIALS)),
            Some(TokenRefused)
        );
        assert_eq!(read(401, None, None), Some(RepoNotFound));
        assert_eq!(read(403, None, Some("no")), Some(Forbidden));
        assert_eq!(read(429, Some("RepoNotFound"), None), None);
        assert_eq!(read(302, None, None), None);
        assert_eq!(read(503, None, None), None);
    }

    #[test]
    fn a_gated_refusal_names_the_page_where_the_terms_are_accepted() {
        let r = HubRefusal {
            kind: HubRefusalKind::Gated,
            status: 403,
            asked: asked(Some(TokenSource::Env("HF_TOKEN"))),
            message: Some("Access to dataset o/n is restricted.\n".into()),
        };
        assert_eq!(
            r.to_string(),
            "dataset `o/n` is gated and its terms have not been accepted for this request (the token from HF_TOKEN was sent; GatedRepo, HTTP 403: Access to dataset o/n is restricted.)"
        );
        assert!(
            r.hint()
                .starts_with("accept the dataset's terms at https://huggingface.co/datasets/o/n"),
            "{}",
            r.hint()
        );
    }
}
