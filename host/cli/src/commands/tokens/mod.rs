//! `cairn tokens`: the bearer tokens of `cairn serve --http`, each scoped to one tenant (and,
//! for an operator's, also to the node-wide tools: policy reload, plugin list). A
//! token's secret is printed once, when it is created; the home keeps only its hash, so `list`
//! can never show it.

use std::path::PathBuf;

use anyhow::Result;
use cairn::storage::{Home, Tenant, TokenInfo, TokenScope};
use cairn::transcript::formats;

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// Storage home (a directory or a `postgres://` URL) [default: $CAIRN_HOME, else
    /// ~/.local/share/cairn].
    #[arg(long, global = true)]
    home: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Create a token for a tenant; its secret is printed now and never again.
    Create {
        /// The tenant whose conversations the token reaches: 1-64 chars of A-Z a-z 0-9 . _ -
        #[arg(long)]
        tenant: String,
        /// A note to tell tokens apart (who or what uses it).
        #[arg(long, default_value = "")]
        name: String,
        /// tenant: its tenant's conversations only; operator: also the tools that act on the
        /// whole node (`policy_reload`, `plugins_list`), which affect every tenant.
        #[arg(long, value_enum, default_value_t = Scope::Tenant)]
        scope: Scope,
    },
    /// List the tokens (never their secrets).
    List,
    /// Revoke a token by its id: requests carrying it are refused from now on.
    Revoke {
        /// The token's id, as `list` shows it.
        id: String,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Scope {
    Tenant,
    Operator,
}

impl From<Scope> for TokenScope {
    fn from(scope: Scope) -> Self {
        match scope {
            Scope::Tenant => TokenScope::Tenant,
            Scope::Operator => TokenScope::Operator,
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    // Listing is a read: it needs the home to exist and creates nothing in it.
    let location = setup::home_path(args.home);
    let home = if matches!(args.command, Command::List) { Home::open_existing(&location)? } else { Home::open(&location)? };
    let tokens = home.tokens();
    match args.command {
        Command::Create { tenant, name, scope } => {
            let tenant = Tenant::parse(&tenant)?;
            let (info, secret) = tokens.create(&tenant, &name, scope.into())?;
            if args.json {
                let mut out = serde_json::to_value(&info)?;
                out["secret"] = secret.into();
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("{secret}");
                eprintln!("Created {} token {} for tenant {}. Its secret (above) is shown only now: store it.", info.scope, info.id, info.tenant);
            }
        }
        Command::List => {
            let list = tokens.list()?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                print_table(&list);
            }
        }
        Command::Revoke { id } => {
            tokens.revoke(&id)?;
            if args.json {
                println!("{}", serde_json::json!({ "revoked": id }));
            } else {
                println!("revoked {id}");
            }
        }
    }
    Ok(())
}

fn print_table(list: &[TokenInfo]) {
    if list.is_empty() {
        println!("no tokens (create one with `cairn tokens create --tenant NAME`)");
        return;
    }
    let width = |f: fn(&TokenInfo) -> usize, title: &str| list.iter().map(f).max().unwrap_or(0).max(title.len());
    let (id, tenant) = (width(|t| t.id.len(), "ID"), width(|t| t.tenant.len(), "TENANT"));
    println!("{:id$}  {:tenant$}  {:8}  {:7}  {:24}  NAME", "ID", "TENANT", "SCOPE", "STATUS", "CREATED");
    for token in list {
        let status = if token.revoked { "revoked" } else { "active" };
        println!("{:id$}  {:tenant$}  {:8}  {status:7}  {:24}  {}", token.id, token.tenant, token.scope.as_str(), formats::iso8601(token.created_at), token.name);
    }
}
