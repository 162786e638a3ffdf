//! Asynchronous order requests (CONTRACT §3.5): the states a request passes through, from
//! accepted to finished. The one list of their stored names.

/// Where a request is: accepted, claimed by a worker, or finished one way or the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStatus {
    Queued,
    Processing,
    Completed,
    Failed,
}

impl RequestStatus {
    pub const ALL: [RequestStatus; 4] =
        [RequestStatus::Queued, RequestStatus::Processing, RequestStatus::Completed, RequestStatus::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Queued => "queued",
            RequestStatus::Processing => "processing",
            RequestStatus::Completed => "completed",
            RequestStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<RequestStatus> {
        RequestStatus::ALL.into_iter().find(|r| r.as_str() == s)
    }
}
