//! Road times for day plans (CONTRACT §12): the embedded model, or an OSRM server's `table`
//! service asked in blocks, each request bounded in time. The matrix rules (blocks, reading
//! answers) are in `dropslot_core::routing::roads`; this is only the I/O.

use std::sync::Arc;

use dropslot_core::config::{OsrmSettings, RoutingSettings};
use dropslot_core::geo::distance::LatLng;
use dropslot_core::routing::roads::{Matrix, OsrmError, OsrmTable, RoadModel, block_request, blocks};
use tokio::sync::Semaphore;

/// Where road times come from, built once from `[routing]`.
#[derive(Clone)]
pub struct Roads {
    osrm: Option<Arc<Osrm>>,
}

struct Osrm {
    client: reqwest::Client,
    settings: OsrmSettings,
}

/// Why no matrix could be had. Said to a dispatcher: what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RoadError {
    #[error(
        "The routing engine (OSRM at {host}) did not answer: {why}. Day plans need its road times: retry when it is back, or unset [routing] osrm_url to plan on the embedded road model."
    )]
    Down { host: String, why: String },
    #[error("The routing engine (OSRM at {host}) answered with an error: {source}.")]
    Answer { host: String, source: OsrmError },
    #[error("The road times could not be computed: {0}.")]
    Internal(String),
}

impl Roads {
    pub fn new(settings: &RoutingSettings) -> Self {
        let osrm = settings.osrm.clone().map(|settings| {
            let client = reqwest::Client::builder()
                .timeout(settings.timeout)
                .connect_timeout(settings.timeout)
                // The engine is ours: never follow it elsewhere.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default();
            Arc::new(Osrm { client, settings })
        });
        Self { osrm }
    }

    /// Whether the road times come from OSRM (otherwise from the embedded model).
    pub fn source(&self) -> &'static str {
        if self.osrm.is_some() { "osrm" } else { "embedded" }
    }

    /// Travel times and distances between `points` (row = from): from OSRM when configured,
    /// otherwise `model`'s. The embedded model runs off the async runtime (2,000 points are
    /// four million legs).
    pub async fn matrix(&self, model: RoadModel, points: Vec<LatLng>) -> Result<Matrix, RoadError> {
        match &self.osrm {
            None => tokio::task::spawn_blocking(move || model.matrix(&points))
                .await
                .map_err(|e| RoadError::Internal(e.to_string())),
            Some(osrm) => osrm.matrix(points).await,
        }
    }
}

impl Osrm {
    /// Asks every block, at most `concurrency` at a time; the first failure fails the whole
    /// matrix (a plan on partial road times would be wrong, not approximate).
    async fn matrix(self: &Arc<Self>, points: Vec<LatLng>) -> Result<Matrix, RoadError> {
        let points = Arc::new(points);
        let mut matrix = Matrix::zero(points.len());
        let permits = Arc::new(Semaphore::new(self.settings.concurrency));
        let mut tasks = tokio::task::JoinSet::new();
        for (sources, destinations) in blocks(points.len(), self.settings.table_size) {
            let (this, points, permits) = (self.clone(), points.clone(), permits.clone());
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await.map_err(|e| RoadError::Internal(e.to_string()))?;
                let table = this.block(&points, &sources, &destinations).await?;
                Ok::<_, RoadError>((sources, destinations, table))
            });
        }
        while let Some(done) = tasks.join_next().await {
            let (sources, destinations, table) = done.map_err(|e| RoadError::Internal(e.to_string()))??;
            matrix.fill(sources, destinations, &table);
        }
        Ok(matrix)
    }

    async fn block(
        &self,
        points: &[LatLng],
        sources: &std::ops::Range<usize>,
        destinations: &std::ops::Range<usize>,
    ) -> Result<OsrmTable, RoadError> {
        let request = block_request(points, sources, destinations);
        let url = format!(
            "{}/table/v1/driving/{}?sources={}&destinations={}&annotations=duration,distance&skip_waypoints=true",
            self.settings.url, request.path, request.sources, request.destinations
        );
        let down = |why: String| RoadError::Down { host: self.host(), why };
        let response = self.client.get(&url).send().await.map_err(|e| down(describe(&e)))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| down(describe(&e)))?;
        // OSRM answers its own errors (TooBig, NoTable, InvalidQuery) as 400 with a JSON
        // body: read those; anything else that is not a 200 is a server that is not OSRM.
        let osrm_refusal = status.is_client_error() && body.starts_with(b"{");
        if !(status.is_success() || osrm_refusal) {
            return Err(down(format!("HTTP {status}")));
        }
        OsrmTable::parse(&body, sources.len(), destinations.len())
            .map_err(|source| RoadError::Answer { host: self.host(), source })
    }

    /// The server's host and port: never its path or credentials.
    fn host(&self) -> String {
        url::Url::parse(&self.settings.url)
            .ok()
            .and_then(|u| u.host_str().map(|h| format!("{h}{}", u.port().map(|p| format!(":{p}")).unwrap_or_default())))
            .unwrap_or_else(|| "the configured URL".into())
    }
}

/// A transport failure in an operator's words.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "no answer within routing.osrm_timeout_seconds".into()
    } else if e.is_connect() {
        "the connection was refused or could not be made".into()
    } else {
        "the connection failed".into()
    }
}

/// A road-time failure as the API answers it: the routing engine down or wrong is a 503.
pub(crate) fn error(e: RoadError) -> crate::error::Error {
    match e {
        RoadError::Internal(m) => crate::error::Error::Internal(m),
        other => crate::error::Error::Upstream(other.to_string()),
    }
}
