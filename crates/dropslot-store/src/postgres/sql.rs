//! Every statement through its connection's statement cache: the server parses and plans a
//! statement once per pooled connection, and each later use is one round trip of Bind and
//! Execute. Parsing and planning every statement anew cost more of the server's CPU than the
//! writes themselves (docs/performance.md, "Sync on PostgreSQL").
//!
//! The methods mirror `tokio_postgres`'s names, so a unit of work reads the same; the SQL
//! text is the cache key, so only fixed statements go through here (every statement of this
//! backend is one).

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, Row};

type Param<'a> = &'a (dyn ToSql + Sync);

#[async_trait]
pub trait Sql: Sync {
    async fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, Error>;
    async fn query_one(&self, sql: &str, params: &[Param<'_>]) -> Result<Row, Error>;
    async fn query_opt(&self, sql: &str, params: &[Param<'_>]) -> Result<Option<Row>, Error>;
    async fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, Error>;
    /// With the parameters' types given (arrays for `unnest`, values whose type the server
    /// cannot infer).
    async fn query_typed(&self, sql: &str, params: &[(Param<'_>, Type)]) -> Result<Vec<Row>, Error>;
    async fn query_typed_opt(&self, sql: &str, params: &[(Param<'_>, Type)]) -> Result<Option<Row>, Error>;
    async fn execute_typed(&self, sql: &str, params: &[(Param<'_>, Type)]) -> Result<u64, Error>;
}

fn split<'a>(params: &[(Param<'a>, Type)]) -> (Vec<Type>, Vec<Param<'a>>) {
    params.iter().map(|(v, t)| (t.clone(), *v)).unzip()
}

#[async_trait]
impl<C: GenericClient + Sync> Sql for C {
    async fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, Error> {
        let statement = self.prepare_cached(sql).await?;
        GenericClient::query(self, &statement, params).await
    }

    async fn query_one(&self, sql: &str, params: &[Param<'_>]) -> Result<Row, Error> {
        let statement = self.prepare_cached(sql).await?;
        GenericClient::query_one(self, &statement, params).await
    }

    async fn query_opt(&self, sql: &str, params: &[Param<'_>]) -> Result<Option<Row>, Error> {
        let statement = self.prepare_cached(sql).await?;
        GenericClient::query_opt(self, &statement, params).await
    }

    async fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, Error> {
        let statement = self.prepare_cached(sql).await?;
        GenericClient::execute(self, &statement, params).await
    }

    async fn query_typed(&self, sql: &str, params: &[(Param<'_>, Type)]) -> Result<Vec<Row>, Error> {
        let (types, values) = split(params);
        let statement = self.prepare_typed_cached(sql, &types).await?;
        GenericClient::query(self, &statement, &values).await
    }

    async fn query_typed_opt(&self, sql: &str, params: &[(Param<'_>, Type)]) -> Result<Option<Row>, Error> {
        let (types, values) = split(params);
        let statement = self.prepare_typed_cached(sql, &types).await?;
        GenericClient::query_opt(self, &statement, &values).await
    }

    async fn execute_typed(&self, sql: &str, params: &[(Param<'_>, Type)]) -> Result<u64, Error> {
        let (types, values) = split(params);
        let statement = self.prepare_typed_cached(sql, &types).await?;
        GenericClient::execute(self, &statement, &values).await
    }
}
