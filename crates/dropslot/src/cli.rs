//! The operator interface of CONTRACT §9: `serve`, `migrate`, `client create`,
//! `token create|list|revoke` (client tokens and operator tokens, §12), `driver create|list`
//! (§12), `copy` (`SQLite` to `PostgreSQL`), `backup` (`SQLite`) and
//! `addresses import` (address points, CONTRACT §11), `solve` (the route solver on a VRPTW
//! benchmark file, §12).
//! Exit codes: 0 success, 2 usage, 1 failure (reason on stderr).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio::net::TcpListener;

use crate::http::API;
use dropslot_core::config::{Overrides, Settings};
use dropslot_core::ids::ClientId;
use dropslot_store::{self, DynStore, StaffKind, TokenKind};

#[derive(Parser, Debug)]
#[command(name = "dropslot", version, about = "Scheduled same-day parcel delivery")]
struct Cli {
    /// `sqlite://PATH` or `postgres://…` (env `DATABASE_URL`; default `sqlite://dropslot.db`).
    #[arg(long, global = true)]
    database: Option<String>,
    /// A TOML file merged over the embedded default configuration (env `DROPSLOT_CONFIG`).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the HTTP server (migrates first; on an empty database creates a demo client).
    Serve {
        /// `ADDR:PORT` to listen on (env `DROPSLOT_LISTEN`; default 127.0.0.1:8080).
        #[arg(long)]
        listen: Option<String>,
        /// Serve `/metrics` on this `ADDR:PORT` only, not beside the API (env
        /// `DROPSLOT_METRICS_LISTEN`).
        #[arg(long)]
        metrics_listen: Option<String>,
    },
    /// Bring the database schema up to date.
    Migrate,
    /// Manage clients.
    Client {
        #[command(subcommand)]
        command: ClientCommand,
    },
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Manage the fleet's drivers (CONTRACT §12).
    Driver {
        #[command(subcommand)]
        command: DriverCommand,
    },
    /// Copy a `SQLite` database into a fresh `PostgreSQL` database, ids and all (stop the
    /// server first); prints the rows copied per table.
    Copy {
        /// The database to copy: `sqlite://PATH` (only read).
        #[arg(long, value_parser = sqlite_url)]
        from: String,
        /// The database to fill: `postgres://…`, migrated first; it must hold no data.
        #[arg(long, value_parser = postgres_url)]
        to: String,
    },
    /// Address points: precise coordinates for street addresses (CONTRACT §11).
    Addresses {
        #[command(subcommand)]
        command: AddressesCommand,
    },
    /// Copy the running `SQLite` database to PATH, consistently, while the server keeps
    /// writing; checks the copy and prints its path, size and pages. (`PostgreSQL`: `pg_dump`.)
    Backup {
        /// Where the copy goes; it must not exist unless `--force`.
        path: PathBuf,
        /// Replace an existing file at PATH.
        #[arg(long)]
        force: bool,
    },
    /// Solve a VRPTW instance (VRPLIB or Solomon format) and print one JSON line:
    /// `{"routes":[[customer numbers]],"cost":N,"seconds":S}`. Exit 1 without a feasible
    /// solution.
    Solve {
        /// The instance file.
        file: PathBuf,
        /// Stop after this many seconds, reading included (default 10).
        #[arg(long, default_value_t = 10.0, value_parser = positive_seconds)]
        time_limit: f64,
        /// The seed of the solver's choices (default 1).
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// `--time-limit`: seconds, more than zero (and at most a day).
fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("expected seconds between 0 and 86400, found {s:?}")),
    }
}

/// `--from`: a `sqlite://` URL (anything else is a usage error).
fn sqlite_url(s: &str) -> Result<String, String> {
    match dropslot_core::config::DatabaseUrl::parse(s)? {
        dropslot_core::config::DatabaseUrl::Sqlite(_) => Ok(s.to_string()),
        dropslot_core::config::DatabaseUrl::Postgres(_) => Err("the source must be a sqlite:// URL".into()),
    }
}

/// `--to`: a `postgres://` URL (anything else is a usage error).
fn postgres_url(s: &str) -> Result<String, String> {
    match dropslot_core::config::DatabaseUrl::parse(s)? {
        dropslot_core::config::DatabaseUrl::Postgres(_) => Ok(s.to_string()),
        dropslot_core::config::DatabaseUrl::Sqlite(_) => Err("the target must be a postgres:// URL".into()),
    }
}

#[derive(Subcommand, Debug)]
enum AddressesCommand {
    /// Load address points from FILE (`-`: standard input): CSV with the header
    /// `number,street,unit,city,postal_code,lat,lng`, or `OpenAddresses` GeoJSON lines. Points
    /// already stored are skipped, so a re-run adds nothing; progress goes to stderr after
    /// every batch, the totals to stdout.
    Import {
        file: PathBuf,
        /// Points written per transaction.
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        batch_size: u32,
    },
}

#[derive(Subcommand, Debug)]
enum ClientCommand {
    /// Create a client; prints its id alone.
    Create {
        #[arg(long)]
        name: String,
    },
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Create a token; prints it alone (it is shown only this once). `test`, `live`, `ops` and
    /// `publishable` tokens need `--client`; an `operator` token is bound to no client and takes
    /// none. A `publishable` key (for a checkout page: `GET /slots` only) needs one `--origin`
    /// or more and takes `--mode` (default test).
    Create {
        #[arg(long)]
        client: Option<i64>,
        #[arg(long, value_parser = ["test", "live", "ops", "operator", "publishable"])]
        kind: String,
        /// A page origin allowed to use a publishable key (`https://shop.example`); repeatable.
        #[arg(long = "origin")]
        origins: Vec<String>,
        /// A publishable key's mode.
        #[arg(long, value_parser = ["test", "live"])]
        mode: Option<String>,
    },
    /// List a client's tokens (`--client`), or the staff tokens of a kind (`--kind operator`
    /// or `--kind driver`): prefix and last four characters only.
    List {
        #[arg(long, conflicts_with = "kind", required_unless_present = "kind")]
        client: Option<i64>,
        #[arg(long, value_parser = ["operator", "driver"])]
        kind: Option<String>,
    },
    /// Revoke the token with this prefix (as shown by `token list`), of any kind.
    Revoke { prefix: String },
}

#[derive(Subcommand, Debug)]
enum DriverCommand {
    /// Add a driver; prints its id on the first line and its sign-in link (the driver app's
    /// URL holding the driver's token, shown only this once) on the second.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        phone: String,
        /// A depot (warehouse) code of the service area.
        #[arg(long)]
        depot: String,
        /// The vehicle's name (default "Vehicle").
        #[arg(long, default_value = "Vehicle")]
        vehicle: String,
        #[arg(long)]
        capacity_parcels: i64,
        #[arg(long)]
        capacity_kg: i64,
        /// `HH:MM-HH:MM`, local time of the depot's city.
        #[arg(long, value_parser = shift_range)]
        shift: (String, String),
        /// Comma-separated: `mon,tue,wed,thu,fri`.
        #[arg(long, value_delimiter = ',')]
        weekdays: Vec<String>,
    },
    /// List the drivers, one a line: id, name, depot, vehicle, parcels, kg, shift, weekdays
    /// (tab-separated).
    List {
        /// Only this depot's drivers.
        #[arg(long)]
        depot: Option<String>,
    },
}

/// `--shift`: `HH:MM-HH:MM` split in two (the core checks each time and their order).
fn shift_range(s: &str) -> Result<(String, String), String> {
    s.split_once('-')
        .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
        .ok_or_else(|| format!("expected HH:MM-HH:MM, found {s:?}"))
}

/// The rules clap's attributes cannot state: `--client` goes with a client token's kind and
/// never with `operator`. Broken, they are usage errors (exit 2) like clap's own.
fn check_usage(cli: &Cli) -> Result<(), clap::Error> {
    use clap::CommandFactory;
    use clap::error::ErrorKind;
    if let Command::Token { command: TokenCommand::Create { client, kind, origins, mode } } = &cli.command {
        if kind == "publishable" && origins.is_empty() {
            return Err(Cli::command().error(
                ErrorKind::MissingRequiredArgument,
                "a publishable key needs --origin (the checkout page's origin, e.g. https://shop.example)",
            ));
        }
        if kind != "publishable" && (!origins.is_empty() || mode.is_some()) {
            return Err(Cli::command()
                .error(ErrorKind::ArgumentConflict, "--origin and --mode go with --kind publishable only"));
        }
        match (kind.as_str(), client) {
            ("operator", Some(_)) => {
                return Err(Cli::command().error(
                    ErrorKind::ArgumentConflict,
                    "an operator token is bound to no client: leave out --client",
                ));
            }
            ("operator", None) | (_, Some(_)) => {}
            (_, None) => {
                return Err(Cli::command()
                    .error(ErrorKind::MissingRequiredArgument, format!("a {kind} token needs --client ID")));
            }
        }
    }
    Ok(())
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse().and_then(|cli| check_usage(&cli).map(|()| cli)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    // The solver needs neither the configuration, a database nor the runtime.
    if let Command::Solve { file, time_limit, seed } = &cli.command {
        return match crate::solve::run(file, *time_limit, *seed) {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(reason) => fail(&reason),
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    match runtime.block_on(execute(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(reason) => fail(&reason),
    }
}

/// One line on stderr, whatever the error's own formatting.
fn fail(reason: &str) -> ExitCode {
    let line: Vec<&str> = reason.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    eprintln!("dropslot: {}", line.join("; "));
    ExitCode::from(1)
}

async fn execute(cli: Cli) -> Result<(), String> {
    let mut overrides = Overrides::from_env();
    overrides.database = cli.database.or(overrides.database);
    overrides.config_file = cli.config.or(overrides.config_file);
    if let Command::Serve { listen, metrics_listen } = &cli.command {
        overrides.listen = listen.clone().or(overrides.listen);
        overrides.metrics_listen = metrics_listen.clone().or(overrides.metrics_listen);
    }
    let settings = Settings::load(&overrides).map_err(|e| e.to_string())?;
    // The commands that change what the server serves work on settled settings (the install's
    // capacity mode: a driver created here re-plans a fleet depot's tentative plans as the
    // server would). `serve` settles at its start; `migrate` prints only what it applied.
    let settings = if matches!(cli.command, Command::Client { .. } | Command::Token { .. } | Command::Driver { .. }) {
        crate::root::settled(settings).await.map_err(|e| e.to_string())?
    } else {
        settings
    };
    match cli.command {
        Command::Serve { .. } => serve(settings).await,
        Command::Migrate => {
            let store = open(&settings).await?;
            let applied = store.migrate().await.map_err(|e| e.to_string())?;
            eprintln!("migrations applied: {applied:?}");
            Ok(())
        }
        Command::Client { command: ClientCommand::Create { name } } => {
            let name = name.trim();
            if name.is_empty() {
                return Err("--name must not be empty".into());
            }
            let store = migrated(&settings).await?;
            let id = store.create_client(name, jiff::Timestamp::now()).await.map_err(|e| e.to_string())?;
            println!("{id}");
            Ok(())
        }
        Command::Token { command } => token(&settings, command).await,
        Command::Driver { command } => driver(&settings, command).await,
        Command::Copy { from, to } => {
            let copied = dropslot_store::copy::run(&from, &to, &settings.postgres, outbox(&settings)).await?;
            for c in copied {
                println!("{:<20} {}", c.table, c.rows);
            }
            Ok(())
        }
        Command::Backup { path, force } => backup(&settings, path, force).await,
        Command::Addresses { command: AddressesCommand::Import { file, batch_size } } => {
            let store = migrated(&settings).await?;
            let started = std::time::Instant::now();
            let show = |p: &crate::addresses::import::Progress, f| {
                eprintln!("{}", crate::addresses::import::progress_line(p, f, started));
            };
            let done = crate::addresses::import::run(&store, &file, batch_size as usize, show).await?;
            println!("{} points read, {} new, {} skipped", done.read, done.added, done.skipped);
            Ok(())
        }
        Command::Solve { .. } => Err("solve runs before the runtime starts".into()),
    }
}

/// `SQLite` only: the store's online backup, off the runtime's threads. `PostgreSQL` is refused
/// before anything is opened or written.
async fn backup(settings: &Settings, path: PathBuf, force: bool) -> Result<(), String> {
    let source = match dropslot_core::config::DatabaseUrl::parse(&settings.database)? {
        dropslot_core::config::DatabaseUrl::Sqlite(source) => source,
        dropslot_core::config::DatabaseUrl::Postgres(_) => {
            return Err("backup copies a SQLite database; on PostgreSQL use pg_dump -Fc (or WAL archiving), \
                        see docs/operations.md, \"Backups\""
                .into());
        }
    };
    let taken = tokio::task::spawn_blocking({
        let path = path.clone();
        move || dropslot_store::sqlite::backup::run(&source, &path, force)
    })
    .await
    .map_err(|e| format!("the backup stopped: {e}"))??;
    println!("{}: {} bytes, {} pages", path.display(), taken.bytes, taken.pages);
    Ok(())
}

async fn token(settings: &Settings, command: TokenCommand) -> Result<(), String> {
    let store = migrated(settings).await?;
    let now = jiff::Timestamp::now();
    match command {
        TokenCommand::Create { client: None, kind, .. } if kind == "operator" => {
            let minted = crate::auth::staff::mint(StaffKind::Operator);
            store.insert_operator_token(minted.stored, now).await.map_err(|e| e.to_string())?;
            println!("{}", minted.secret);
        }
        TokenCommand::Create { client, kind, origins, mode } if kind == "publishable" => {
            let (mode, origins) =
                crate::auth::admin::publishable_terms(mode.as_deref(), &origins).map_err(|e| match e {
                    crate::error::Error::Validation(errors) => {
                        errors.iter().map(|(path, m)| format!("--{path}: {m}")).collect::<Vec<_>>().join("; ")
                    }
                    other => other.to_string(),
                })?;
            let client = ClientId(client.ok_or("--client is required for this kind")?);
            if !store.client_exists(client).await.map_err(|e| e.to_string())? {
                return Err(format!("no client with id {client}"));
            }
            let minted = crate::auth::publishable::mint(client, mode, origins);
            store.insert_publishable_key(minted.stored, now).await.map_err(|e| e.to_string())?;
            println!("{}", minted.key);
        }
        TokenCommand::Create { client, kind, .. } => {
            let kind = TokenKind::parse(&kind).ok_or("--kind must be test, live, ops or operator")?;
            let client = ClientId(client.ok_or("--client is required for this kind")?);
            if !store.client_exists(client).await.map_err(|e| e.to_string())? {
                return Err(format!("no client with id {client}"));
            }
            let minted = crate::auth::mint(client, kind);
            store.insert_token(minted.stored, now).await.map_err(|e| e.to_string())?;
            println!("{}", minted.secret);
        }
        TokenCommand::List { client: Some(client), .. } => {
            for t in store.list_tokens(ClientId(client)).await.map_err(|e| e.to_string())? {
                println!("{}…{}\t{}\t{}\t{}", t.prefix, t.last4, t.kind.as_str(), t.created_at, state(t.revoked_at));
            }
            for k in store.list_publishable_keys(ClientId(client)).await.map_err(|e| e.to_string())? {
                println!(
                    "{}…{}\tpublishable {}\t{}\t{}\t{}",
                    k.prefix,
                    k.last4,
                    k.mode.as_str(),
                    k.created_at,
                    state(k.revoked_at),
                    k.origins.join(" ")
                );
            }
        }
        TokenCommand::List { client: None, kind } => {
            let kind = kind.as_deref().and_then(StaffKind::parse).ok_or("--kind must be operator or driver")?;
            for t in store.list_staff_tokens(kind).await.map_err(|e| e.to_string())? {
                let driver = t.driver_id.map(|d| format!("\t{d}")).unwrap_or_default();
                println!(
                    "{}…{}\t{}\t{}\t{}{driver}",
                    t.prefix,
                    t.last4,
                    t.kind.as_str(),
                    t.created_at,
                    state(t.revoked_at)
                );
            }
        }
        TokenCommand::Revoke { prefix } => {
            let prefix = prefix.trim_end_matches('…');
            let revoked = if crate::auth::staff::is_staff(prefix) {
                store.revoke_staff_token(prefix, now).await
            } else if crate::auth::publishable::is_publishable(prefix) {
                store.revoke_publishable_key(prefix, now).await
            } else {
                store.revoke_token(prefix, now).await
            };
            if !revoked.map_err(|e| e.to_string())? {
                return Err(format!("no active token with prefix {prefix}"));
            }
            eprintln!("revoked {prefix}");
        }
    }
    Ok(())
}

/// `active`, or `revoked <when>`.
fn state(revoked_at: Option<String>) -> String {
    revoked_at.map_or_else(|| "active".to_string(), |at| format!("revoked {at}"))
}

async fn driver(settings: &Settings, command: DriverCommand) -> Result<(), String> {
    let store = migrated(settings).await?;
    match command {
        DriverCommand::Create { name, phone, depot, vehicle, capacity_parcels, capacity_kg, shift, weekdays } => {
            let fields = dropslot_core::fleet::DriverFields {
                name: Some(name),
                phone: Some(phone),
                depot: Some(depot),
                vehicle_name: Some(vehicle),
                capacity_parcels: Some(capacity_parcels),
                capacity_kg: Some(capacity_kg),
                shift_start: Some(shift.0),
                shift_end: Some(shift.1),
                weekdays: Some(weekdays),
            };
            let (driver, url) = crate::fleet::create_driver(&store, settings, fields, jiff::Timestamp::now())
                .await
                .map_err(|e| match e {
                    crate::error::Error::Validation(errors) => {
                        errors.iter().map(|(path, m)| format!("{path}: {m}")).collect::<Vec<_>>().join("; ")
                    }
                    crate::error::Error::Store(e) => e.to_string(),
                    other => other.to_string(),
                })?;
            println!("{}\n{url}", driver.id);
        }
        DriverCommand::List { depot } => {
            for d in store.drivers(depot.as_deref()).await.map_err(|e| e.to_string())? {
                let (v, s) = (&d.driver.vehicle, d.driver.shift);
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}-{}\t{}",
                    d.id,
                    d.driver.name,
                    d.driver.depot,
                    v.name,
                    v.capacity_parcels,
                    v.capacity_kg,
                    dropslot_core::fleet::hhmm(s.start),
                    dropslot_core::fleet::hhmm(s.end),
                    d.driver.weekdays.list()
                );
            }
        }
    }
    Ok(())
}

async fn open(settings: &Settings) -> Result<DynStore, String> {
    dropslot_store::open(&settings.database, &settings.postgres, outbox(settings)).await.map_err(|e| e.to_string())
}

/// The CLI changes no shipment, but every store is opened with the outbox that renders the
/// events its writes could cause.
fn outbox(settings: &Settings) -> std::sync::Arc<dyn dropslot_store::Outbox> {
    std::sync::Arc::new(crate::webhooks::Renderer::new(settings, std::sync::Arc::default()))
}

async fn migrated(settings: &Settings) -> Result<DynStore, String> {
    let store = open(settings).await?;
    store.migrate().await.map_err(|e| e.to_string())?;
    Ok(store)
}

fn init_tracing() {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;
    let filter: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    let _ = tracing_subscriber::registry()
        // Colours only on a terminal: a log file or collector gets plain `key=value` text.
        .with(
            tracing_subscriber::fmt::layer()
                .with_target(false)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout())),
        )
        .with(filter)
        .try_init();
}

async fn serve(mut settings: Settings) -> Result<(), String> {
    init_tracing();
    let listener =
        TcpListener::bind(settings.listen).await.map_err(|e| format!("cannot listen on {}: {e}", settings.listen))?;
    // A base URL derived from `--listen 127.0.0.1:0` names the port actually bound.
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    if settings.base_url == format!("http://{}", settings.listen) {
        settings.base_url = format!("http://{bound}");
    }
    let running = crate::root::start(settings, listener, shutdown_signal()).await.map_err(|e| e.to_string())?;
    let base = running.app.settings.base_url.clone();
    if let Some((client, token)) = &running.demo {
        println!("Demo client created (id {client}). Its test token, shown only now:\n\n  {token}\n");
        println!(
            "Try a preview:\n\n  curl -s {base}{API}/requests/preview \\\n    -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' \\\n    -d '{{\"pick_up_address\":{{\"text\":\"100 King St W, Toronto, ON M5X 1A9\"}},\"drop_offs\":[{{\"address\":{{\"text\":\"290 Bremner Blvd, Toronto, ON M5V 3L9\"}},\"parcels\":[{{\"unit\":\"g\",\"values\":500}}]}}]}}'\n"
        );
    }
    if let Some(fleet) = &running.demo_fleet {
        println!("Its live token, for orders the demo drivers deliver (shown only now):\n\n  {}\n", fleet.live_token);
        println!(
            "The courier's side. The dispatcher signs in at (an operator token, shown only now):\n\n  {}\n",
            fleet.operator_link
        );
        println!("Demo drivers, each with its driver-app link (open it at phone size; shown only now):\n");
        for (name, depot, link) in &fleet.drivers {
            println!("  {name}, depot {depot}:\n    {link}");
        }
        println!(
            "\nA tour: README.md, \"A tour\". None of this is created again, nor on a database that holds data;\n\
             to start a new database without the operator token and the drivers, set [demo] fleet = false.\n"
        );
    }
    tracing::info!(%bound, database = %dropslot_core::config::redact_url(&running.app.settings.database), "dropslot listening");
    println!("dropslot listening on http://{bound} (base URL {base})");
    // `start` returned: the store is migrated and took a write, the routes are in place, so
    // `/readyz` answers 200 from here on. Only now may systemd order dependants after us.
    notify_service_manager(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&format!("listening on http://{bound}")),
    ]);
    running.finished().await;
    Ok(())
}

/// Tells systemd how the service stands (`Type=notify`, docs/operations.md, "Debian package
/// and systemd"). Without `NOTIFY_SOCKET` in the environment it does nothing; a failure to
/// send only logs, since the service itself is fine.
fn notify_service_manager(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify the service manager (NOTIFY_SOCKET)");
    }
}

/// SIGINT or SIGTERM; then systemd is told `STOPPING=1` (nothing without `NOTIFY_SOCKET`).
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = term => {} }
    notify_service_manager(&[sd_notify::NotifyState::Stopping]);
}
