//! Pooled connections that keep their prepared statements.
//!
//! Each statement is prepared once per connection (named, with its parameters' types given) and
//! then only bound and executed: the server parses, analyses and rewrites it once, and after a few
//! executions plans it once too. On this project's fleet bench that parsing and planning was a
//! sixth of the server's CPU per compaction. Every statement Cairn runs is a literal, so the SQL
//! text itself is the cache's key; a connection holds at most one statement per literal.

use std::collections::HashMap;

use postgres::types::{ToSql, Type};
use postgres::{Client, Config, Error, GenericClient, NoTls, Row, Statement, Transaction};

/// A statement's parameters, each with its type (the statement is prepared with those types).
pub type Params<'a> = [(&'a (dyn ToSql + Sync), Type)];

/// Makes the pool's connections (in place of `r2d2_postgres`, whose connections are bare clients).
pub struct Manager(pub Config);

impl r2d2::ManageConnection for Manager {
    type Connection = PgConnection;
    type Error = Error;

    fn connect(&self) -> Result<PgConnection, Error> {
        Ok(PgConnection { client: self.0.connect(NoTls)?, prepared: Prepared::default() })
    }

    fn is_valid(&self, connection: &mut PgConnection) -> Result<(), Error> {
        connection.client.simple_query("").map(drop)
    }

    fn has_broken(&self, connection: &mut PgConnection) -> bool {
        connection.client.is_closed()
    }
}

pub struct PgConnection {
    client: Client,
    prepared: Prepared,
}

#[derive(Default)]
struct Prepared(HashMap<&'static str, Statement>);

impl Prepared {
    /// Runs `sql` on `client` as this connection's prepared statement, preparing it the first time.
    fn run<C: GenericClient, T>(
        &mut self,
        client: &mut C,
        sql: &'static str,
        params: &Params<'_>,
        run: impl FnOnce(&mut C, &Statement, &[&(dyn ToSql + Sync)]) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let statement = match self.0.get(sql) {
            Some(statement) => statement.clone(),
            None => {
                let types: Vec<Type> = params.iter().map(|(_, ty)| ty.clone()).collect();
                let statement = client.prepare_typed(sql, &types)?;
                self.0.insert(sql, statement.clone());
                statement
            }
        };
        let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(value, _)| *value).collect();
        run(client, &statement, &values)
    }
}

impl PgConnection {
    pub fn query(&mut self, sql: &'static str, params: &Params<'_>) -> Result<Vec<Row>, Error> {
        self.prepared.run(&mut self.client, sql, params, |c, s, v| c.query(s, v))
    }

    pub fn query_opt(&mut self, sql: &'static str, params: &Params<'_>) -> Result<Option<Row>, Error> {
        self.prepared.run(&mut self.client, sql, params, |c, s, v| c.query_opt(s, v))
    }

    pub fn query_one(&mut self, sql: &'static str, params: &Params<'_>) -> Result<Row, Error> {
        self.prepared.run(&mut self.client, sql, params, |c, s, v| c.query_one(s, v))
    }

    pub fn execute(&mut self, sql: &'static str, params: &Params<'_>) -> Result<u64, Error> {
        self.prepared.run(&mut self.client, sql, params, |c, s, v| c.execute(s, v))
    }

    /// Statements without parameters or results, sent as they are (the simple protocol).
    pub fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        self.client.batch_execute(sql)
    }

    pub fn transaction(&mut self) -> Result<Tx<'_>, Error> {
        Ok(Tx { tx: self.client.transaction()?, prepared: &mut self.prepared })
    }
}

/// A transaction on a pooled connection, using (and adding to) its prepared statements.
pub struct Tx<'a> {
    tx: Transaction<'a>,
    prepared: &'a mut Prepared,
}

impl Tx<'_> {
    pub fn query_opt(&mut self, sql: &'static str, params: &Params<'_>) -> Result<Option<Row>, Error> {
        self.prepared.run(&mut self.tx, sql, params, |c, s, v| c.query_opt(s, v))
    }

    pub fn execute(&mut self, sql: &'static str, params: &Params<'_>) -> Result<u64, Error> {
        self.prepared.run(&mut self.tx, sql, params, |c, s, v| c.execute(s, v))
    }

    pub fn commit(self) -> Result<(), Error> {
        self.tx.commit()
    }
}
