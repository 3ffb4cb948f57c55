//! `execute`, `stop`, `resume`, `return`, `runs list|show` and `watch`: what an operator does to a run and how
//! they follow it. The checks and the audit are in [`crate::transfer::actions`]; this module parses and prints.

use std::io::Write;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use uuid::Uuid;

use super::{CliError, Exit};
use crate::jobs::runs;
use crate::jobs::{RunId, RunState};
use crate::transfer::actions::{self, ActionError, Confirmation, Remedy};
use crate::transfer::relay::state::Counters;
use crate::transfer::view::{self, RunRecord};

/// `execute` options.
#[derive(Debug, clap::Args)]
pub struct ExecuteArgs {
    /// The Previewed run (its id, as `preview` printed it).
    pub run: Uuid,
    /// The plan hash `preview` printed.
    #[arg(long)]
    pub plan_hash: String,
    /// The source queue's name, typed to arm a move (or a run over the safety cap, or of unknown size).
    #[arg(long)]
    pub confirm: Option<String>,
    /// A needs-acknowledgement code of the preview (repeat for each).
    #[arg(long = "ack", value_name = "CODE")]
    pub acks: Vec<String>,
    /// Run although the selection is over the safety cap or of unknown size.
    #[arg(long)]
    pub override_cap: bool,
    /// Follow the run with the progress bar until it ends.
    #[arg(long)]
    pub watch: bool,
}

/// `stop` options.
#[derive(Debug, clap::Args)]
pub struct StopArgs {
    /// The run.
    pub run: Uuid,
    /// Why (recorded on the run and in the audit trail).
    #[arg(long, default_value = "operator request")]
    pub reason: String,
}

/// `resume` options.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The run (stopped, interrupted or failed).
    pub run: Uuid,
}

/// `return` options.
#[derive(Debug, clap::Args)]
pub struct ReturnArgs {
    /// The run (a stopped, interrupted or failed move).
    pub run: Uuid,
    /// The source queue's name, typed to confirm the return (without it, `return` says first what a return does).
    #[arg(long)]
    pub confirm: Option<String>,
}

/// `runs` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RunsCommand {
    /// The newest runs.
    List {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        /// JSON lines (one run a line) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One run: plan, state, counters, events.
    Show {
        /// The run.
        run: Uuid,
        /// JSON (one object) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `watch` options.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The run.
    pub run: Uuid,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    pub every: f64,
}

/// An action that was not done: refused, in the command line's words; or a failure of the database.
fn not_done(e: ActionError) -> CliError {
    match e {
        ActionError::Db(_) | ActionError::Jobs(_) | ActionError::Database { .. } => CliError::Action(e),
        refusal => CliError::Refused(refusal_words(&refusal)),
    }
}

/// The words of a refused action on the command line: what is missing, named by the flag that gives it.
pub fn refusal_words(e: &ActionError) -> String {
    e.words_with(|remedy| match remedy {
        Remedy::Acknowledge => "--ack <code>".into(),
        Remedy::Confirm { expected } => format!("--confirm {expected}"),
        Remedy::OverrideCap => "pass --override-cap".into(),
    })
}

/// `execute`.
pub async fn execute(pool: &PgPool, args: ExecuteArgs, operator: &str, max_attempts: i32) -> Result<Exit, CliError> {
    let confirm = Confirmation {
        plan_hash: args.plan_hash,
        acknowledged: args.acks,
        typed_queue: args.confirm,
        override_cap: args.override_cap,
    };
    match actions::execute(pool, args.run, &confirm, operator, max_attempts).await {
        Ok(_) => {
            let holders = runs::slot_holders(pool).await?.len();
            let cap = crate::jobs::settings::load(pool).await?.concurrent_runs as usize;
            match runs::queue_position(pool, RunId(args.run)).await? {
                Some(p) if holders >= cap => say(format_args!(
                    "run {} is queued (place {p}): all {cap} concurrent-runs slots are taken",
                    args.run
                ))?,
                _ => say(format_args!("run {} is queued for the next free worker", args.run))?,
            }
            if args.watch {
                return watch(pool, WatchArgs { run: args.run, every: 1.0 }, operator).await;
            }
            say(format_args!("follow it with: artemis-transfer watch {}", args.run))?;
            Ok(Exit::Success)
        }
        Err(e) => Err(not_done(e)),
    }
}

/// One line of an answer on standard output (a reader gone is told as a broken pipe, which ends quietly).
fn say(words: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    writeln!(super::terminal::stdout(), "{words}").map_err(CliError::Output)
}

/// `stop`.
pub async fn stop(pool: &PgPool, args: StopArgs, operator: &str) -> Result<Exit, CliError> {
    match actions::stop(pool, args.run, &args.reason, operator).await {
        Ok(runs::StopRequest::Stopped) => say(format_args!("run {} stopped", args.run))?,
        Ok(runs::StopRequest::Requested) => {
            say(format_args!("run {}: stop requested; the batch in flight finishes first", args.run))?
        }
        Ok(runs::StopRequest::AlreadyEnded(state)) => say(format_args!("run {} had already ended: {state}", args.run))?,
        Err(e) => return Err(not_done(e)),
    }
    Ok(Exit::Success)
}

/// `resume`.
pub async fn resume(pool: &PgPool, args: ResumeArgs, operator: &str, max_attempts: i32) -> Result<Exit, CliError> {
    match actions::resume(pool, args.run, operator, max_attempts).await {
        Ok(_) => say(format_args!("run {} resumed; follow it with: artemis-transfer watch {}", args.run, args.run))?,
        Err(e) => return Err(not_done(e)),
    }
    Ok(Exit::Success)
}

/// `return`: says what a return does, and needs the source queue's name typed.
pub async fn return_to_source(
    pool: &PgPool,
    args: ReturnArgs,
    operator: &str,
    max_attempts: i32,
) -> Result<Exit, CliError> {
    let record = visible_line(pool, args.run, operator).await?;
    let (state, source) = (record.state, record.source_queue.unwrap_or_default());
    if args.confirm.as_deref() != Some(source.as_str()) {
        eprintln!("{}", actions::RETURN_WARNING);
        return Err(CliError::Refused(format!(
            "run {} is {state}; to return what it holds in staging, type the source queue's name: --confirm {source}",
            args.run,
        )));
    }
    match actions::return_to_source(pool, args.run, operator, max_attempts).await {
        Ok(_) => {
            say(format_args!("run {} is returning; follow it with: artemis-transfer watch {}", args.run, args.run))?
        }
        Err(e) => return Err(not_done(e)),
    }
    Ok(Exit::Success)
}

/// The run's record if `operator` may see it. A run whose clusters they may not see is answered exactly as one that
/// does not exist (docs/permissions.md), in every command: refused, `there is no run <id>`.
async fn visible_line(pool: &PgPool, run: Uuid, operator: &str) -> Result<RunRecord, CliError> {
    let record = match view::visible(pool, run, operator).await.map_err(CliError::Db)? {
        true => view::line(pool, run).await.map_err(CliError::Db)?,
        false => None,
    };
    record.ok_or(CliError::View(view::ViewError::NotFound(run)))
}

/// `runs list|show`.
/// `runs list|show`, of the runs `operator` may see: the API's query (`LinesQuery::visible_to`), so the command line
/// lists what the API lists.
pub async fn runs(pool: &PgPool, command: RunsCommand, operator: &str) -> Result<Exit, CliError> {
    let mut out = super::terminal::stdout();
    match command {
        RunsCommand::List { limit, json } => {
            let query = view::LinesQuery { limit, visible_to: Some(operator.to_owned()), ..Default::default() };
            let lines = view::lines(pool, &query).await.map_err(CliError::Db)?;
            if json {
                super::terminal::json_lines(&mut out, &lines).map_err(CliError::Output)?;
                return Ok(Exit::Success);
            }
            writeln!(out, "{:<36}  {:<19}  {:<4}  {:>15}  FROM → TO", "RUN", "STATE", "MODE", "DELIVERED")
                .map_err(CliError::Output)?;
            for l in lines {
                let c: Counters = serde_json::from_value(l.counters.clone()).unwrap_or_default();
                let of = c.selected.map_or("?".to_string(), |s| s.to_string());
                writeln!(
                    out,
                    "{:<36}  {:<19}  {:<4}  {:>15}  {} → {}",
                    l.id,
                    if l.refused { format!("{}, refused", l.state) } else { l.state.to_string() },
                    l.mode.as_deref().unwrap_or("-"),
                    format!("{}/{of}", c.delivered),
                    view::end(&l.source_cluster, &l.source_node, &l.source_queue),
                    view::end(&l.target_cluster, &l.target_node, &l.target_queue),
                )
                .map_err(CliError::Output)?;
            }
        }
        RunsCommand::Show { run, json } => {
            visible_line(pool, run, operator).await?;
            let view = view::load(pool, run).await?;
            if json {
                super::terminal::json_one(&mut out, &view).map_err(CliError::Output)?;
                return Ok(Exit::Success);
            }
            write!(out, "{}", show(&view)).map_err(CliError::Output)?;
        }
    }
    Ok(Exit::Success)
}

/// A run's state as a list or a view shows it: a Previewed run its preview refused says so.
fn state_words(state: RunState, refused: bool) -> String {
    if refused {
        format!("{state}, refused (it cannot run: fix what its preview lists, then preview again)")
    } else {
        state.to_string()
    }
}

/// A run's view in words (`runs show`, and `watch` once the run ends).
pub fn show(v: &view::RunView) -> String {
    let mut w = String::new();
    let mut line = |k: &str, val: &str| w.push_str(&format!("{k:<11}{val}\n"));
    line("run", &v.id.to_string());
    line("state", &state_words(v.state, v.refused));
    line("mode", v.mode.as_deref().unwrap_or("-"));
    line("from", &v.from);
    line("to", &v.to);
    line("started by", v.started_by.as_deref().unwrap_or("-"));
    if let Some(rate) = v.rate {
        let eta = v.eta_secs.map(|s| format!(", ETA {s:.0} s")).unwrap_or_default();
        line("rate", &format!("{rate:.0} msg/s{eta}"));
    }
    w.push_str(&summary(&v.selected_words, &v.counters));
    w.push('\n');
    if v.pipeline.in_doubt > 0 {
        w.push_str(&format!(
            "in doubt   {} (sent to the target, acknowledgement on the source not yet known: settled at the next batch)\n",
            v.pipeline.in_doubt
        ));
    }
    w.push_str("nodes:\n");
    for n in &v.nodes {
        w.push_str(&format!("  {:<8} {}  {}\n", n.role, n.at, n.outcome));
    }
    for note in &v.notes {
        w.push_str(&format!("note       {note}\n"));
    }
    if let Some(r) = &v.stop_reason {
        w.push_str(&format!("stopped    {r}\n"));
    }
    if let Some(e) = &v.last_error {
        w.push_str(&format!("error      {e}\n"));
    }
    w.push_str("events:\n");
    for e in &v.events {
        w.push_str(&format!("  {}  {:<22} {}\n", e.at.format("%H:%M:%S%.3f"), e.kind, e.detail));
    }
    w
}

/// The counters in words, with what was `selected` in words (`view::selected_words`).
pub fn summary(selected: &str, c: &Counters) -> String {
    let mut words = format!(
        "selected   {selected}\ndelivered  {} ({} body bytes, {} batches)\nnot taken  {} (in delivery {}, scheduled {}, gone {}, left by a return {})\n\
         to a DMQ   {}{}\nreturned   {}",
        c.delivered,
        c.delivered_bytes,
        c.batches,
        c.not_taken(),
        c.not_taken_in_delivery,
        c.not_taken_scheduled,
        c.not_taken_gone,
        c.not_taken_left,
        c.dead_lettered,
        if c.dead_lettered > 0 { " (proven poison: on the source broker's dead message queue)" } else { "" },
        c.returned
    );
    if c.taken_beyond_count > 0 {
        words.push_str(&format!(
            "\nand        {}",
            crate::transfer::proof::taken_beyond_count_words(c.taken_beyond_count)
        ));
    }
    if c.beyond_count > 0 {
        words.push_str(&format!("\nleft       {}", crate::transfer::view::beyond_count_words(c.beyond_count)));
    }
    if c.already_on_target > 0 || c.one_by_one_batches > 0 {
        words.push_str(&format!(
            "\nre-sent    {} batches one by one; {} messages were already on the target",
            c.one_by_one_batches, c.already_on_target
        ));
    }
    if c.original_id_missing > 0 {
        words.push_str(&format!(
            "\nnote       {} delivered messages carry no _studio_orig_message_id: the broker dropped \
             _AMQ_ORIG_MESSAGE_ID from their staging copy (paged large messages)",
            c.original_id_missing
        ));
    }
    words
}

/// One line of progress: `[#####.....] delivered/selected · held in staging · rate · ETA · state`.
fn progress_line(state: &str, c: &Counters, rate: f64) -> String {
    const WIDTH: usize = 30;
    let held = c.held_in_staging();
    let (bar, of, eta) = match c.selected {
        Some(total) if total > 0 => {
            let done = (c.delivered + c.dead_lettered).min(total);
            let filled = (done as usize * WIDTH) / total as usize;
            let eta = if rate > 0.0 { format!("{:.0} s", (total - done) as f64 / rate) } else { "-".into() };
            ("#".repeat(filled) + &".".repeat(WIDTH - filled), total.to_string(), eta)
        }
        _ => (".".repeat(WIDTH), "?".into(), "-".into()),
    };
    format!(
        "[{bar}] {}/{of} delivered · {held} held in staging · {rate:.0} msg/s · ETA {eta} · {state}",
        c.delivered + c.dead_lettered
    )
}

/// `watch`: a progress bar refreshed until the run ends, then the run's summary.
pub async fn watch(pool: &PgPool, args: WatchArgs, operator: &str) -> Result<Exit, CliError> {
    let every = Duration::from_secs_f64(args.every.max(0.1));
    let mut last: Option<(Instant, i64)> = None;
    let mut rate = 0.0f64;
    let live = super::terminal::colour(&std::io::stderr());
    let mut shown_last: Option<String> = None;
    let mut err = std::io::stderr().lock();
    loop {
        let line = visible_line(pool, args.run, operator).await?;
        let c: Counters = serde_json::from_value(line.counters.clone()).unwrap_or_default();
        let now = Instant::now();
        if let Some((at, delivered)) = last {
            let dt = now.duration_since(at).as_secs_f64();
            if dt > 0.0 {
                let instant = (c.delivered - delivered) as f64 / dt;
                rate = if rate == 0.0 { instant } else { 0.7 * rate + 0.3 * instant };
            }
        }
        last = Some((now, c.delivered));
        let mut state = line.state.to_string();
        if line.state == RunState::Queued {
            if let Ok(Some(p)) = runs::queue_position(pool, RunId(args.run)).await {
                state = format!("queued, place {p}");
            }
        }
        let progress = progress_line(&state, &c, rate);
        if live {
            // On a terminal, one line rewritten in place.
            write!(err, "\r{}\x1b[K", super::terminal::shown(&progress)).map_err(CliError::Output)?;
        } else if shown_last.as_deref() != Some(progress.as_str()) {
            // To a log or a pipe, a plain line when the progress changed: no cursor moves.
            writeln!(err, "{}", super::terminal::shown(&progress)).map_err(CliError::Output)?;
            shown_last = Some(progress);
        }
        err.flush().map_err(CliError::Output)?;
        if line.state.is_ended() {
            if live {
                writeln!(err).map_err(CliError::Output)?;
            }
            drop(err);
            runs(pool, RunsCommand::Show { run: args.run, json: false }, operator).await?;
            // An end nothing proved is no success to a script that waits on it.
            let ok = line.state.is_final() && line.state != RunState::Unproven;
            return Ok(if ok { Exit::Success } else { Exit::NotAsHoped });
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each edge names its own way to give what is missing: the API its body's fields, the CLI its flags, and
    /// neither the other's.
    #[test]
    fn the_api_and_the_cli_each_say_how_to_acknowledge_in_their_own_terms() {
        let refusal = || ActionError::NotAcknowledged { codes: vec!["last-value".into(), "disk-tight".into()] };
        let cli = refusal_words(&refusal());
        let api: crate::api::error::ApiError = refusal().into();
        assert_eq!((api.status, api.slug), (axum::http::StatusCode::UNPROCESSABLE_ENTITY, "not-acknowledged"));
        assert!(!api.message.contains("--ack") && api.message.contains("`acknowledged`"), "{}", api.message);
        assert!(cli.contains("(--ack <code>): last-value, disk-tight") && !cli.contains("`acknowledged`"), "{cli}");
        let neutral = refusal().to_string();
        assert_eq!(neutral, "acknowledge these findings to run it: last-value, disk-tight");
    }

    #[test]
    fn the_progress_line_shows_the_pipeline() {
        let c = Counters { selected: Some(1000), staged: 600, delivered: 500, ..Counters::default() };
        let line = progress_line("running", &c, 100.0);
        assert!(line.starts_with("[###############...............] 500/1000 delivered"), "{line}");
        assert!(line.contains("100 held in staging"), "{line}");
        assert!(line.contains("ETA 5 s"), "{line}");
        let unknown = progress_line("running", &Counters::default(), 0.0);
        assert!(unknown.contains("0/? delivered") && unknown.contains("ETA -"), "{unknown}");
    }

    /// The command line names its flags in a refusal, in the words it has always printed.
    #[test]
    fn a_refusal_names_the_flag_that_gives_what_is_missing() {
        let ack = ActionError::NotAcknowledged { codes: vec!["last-value".into()] };
        assert_eq!(refusal_words(&ack), "acknowledge these findings to run it (--ack <code>): last-value");
        let typed = ActionError::Confirmation { expected: "orders".into(), typed: Some("order".into()) };
        assert_eq!(
            refusal_words(&typed),
            "type the source queue's name to arm this run (--confirm orders): `order` is not the source queue's name"
        );
        let cap = ActionError::Cap { cap: 1000 };
        assert_eq!(
            refusal_words(&cap),
            "this run is over the safety cap of 1000 messages or of unknown size: pass --override-cap to run it"
        );
        let other = ActionError::SourceBusy("east/east-1/orders".into());
        assert_eq!(refusal_words(&other), other.to_string());
    }
}
