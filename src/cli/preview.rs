//! `artemis-transfer preview`: what a move, a copy or a retry from a dead-letter queue would find, in words, stored as a Previewed run that
//! `execute` can start (by echoing its plan hash) until it expires. Nothing is changed on any broker.

use std::io::Write;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::cli::{CliError, Exit};
use crate::jobs::settings;
use crate::transfer::retry::preview_retry_and_store;
use crate::transfer::service::{preview_and_store, PreviewRequest, StoredPreview};
use crate::transfer::{Finding, Kind, Mode, PreviewSettings, QueueRef, Selection};

/// How long a preview may be executed (docs/guarantees.md, "Before anything moves").
const VALID_FOR: Duration = Duration::from_secs(600);

/// `preview` options.
#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("selection").required(true).args(["ids", "filter", "all"])),
    group(clap::ArgGroup::new("destination").required(true).args(["to", "to_original_queues"])),
    after_help = "A preview is stored whatever it finds: it exits 0 when nothing refuses the run (it may still \
                  need acknowledgements, and some facts may be unknown), 3 when the source's or the target's node \
                  did not answer, 4 when a finding refuses the run."
)]
pub struct PreviewArgs {
    /// The source queue, as `cluster/node/queue` (the queue on the anycast address of the same name).
    #[arg(long, value_name = "CLUSTER/NODE/QUEUE", value_parser = parse_queue_ref)]
    pub from: QueueRef,
    /// The target queue, as `cluster/node/queue`.
    #[arg(long, value_name = "CLUSTER/NODE/QUEUE", value_parser = parse_queue_ref)]
    pub to: Option<QueueRef>,
    /// Retry from a dead-letter queue: move each selected message back to the queue it was dead-lettered or
    /// expired from (its `_AMQ_ORIG_QUEUE`), on the source's node.
    #[arg(long, conflicts_with = "copy")]
    pub to_original_queues: bool,
    /// Select these broker message ids (comma-separated).
    #[arg(long, value_delimiter = ',', num_args = 1.., value_name = "ID,ID,…")]
    pub ids: Option<Vec<i64>>,
    /// Select the messages matching this Artemis core selector, e.g. "color = 'red'".
    #[arg(long, value_name = "SELECTOR")]
    pub filter: Option<String>,
    /// Select every message of the source queue (as of the preview).
    #[arg(long)]
    pub all: bool,
    /// Copy (the source stays untouched) instead of moving.
    #[arg(long)]
    pub copy: bool,
    /// Print the stored preview as JSON (one object) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cluster/node/queue` → a queue reference. The queue is everything after the second `/` (it may contain
/// more), the cluster and node names may not be empty.
pub fn parse_queue_ref(s: &str) -> Result<QueueRef, String> {
    let mut parts = s.splitn(3, '/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(cluster), Some(node), Some(queue)) if !cluster.is_empty() && !node.is_empty() && !queue.is_empty() => {
            Ok(QueueRef { cluster: cluster.into(), node: node.into(), queue: queue.into(), address: None })
        }
        _ => Err(format!(
            "{s:?} is not CLUSTER/NODE/QUEUE (a registered cluster, one of its nodes, and a queue; see \
             `artemis-transfer cluster list`)"
        )),
    }
}

/// Makes the preview, stores it, and prints it.
pub async fn run(pool: &PgPool, args: PreviewArgs, operator: &str) -> Result<Exit, CliError> {
    let selection = match (args.ids, args.filter, args.all) {
        (Some(ids), _, _) => Selection::Ids(ids),
        (_, Some(filter), _) => Selection::Filter(filter),
        _ => Selection::All,
    };
    let current = settings::load(pool).await?;
    let preview_settings = PreviewSettings::from_settings(&current);
    let request = PreviewRequest {
        mode: if args.copy { Mode::Copy } else { Mode::Move },
        target: args.to.unwrap_or_else(|| args.from.clone()),
        source: args.from,
        selection,
        operator: operator.to_owned(),
    };
    let stored = if args.to_original_queues {
        preview_retry_and_store(pool, &request, &preview_settings, VALID_FOR).await?
    } else {
        preview_and_store(pool, &request, &preview_settings, VALID_FOR).await?
    };
    let mut out = super::terminal::stdout();
    if args.json {
        super::terminal::json_one(&mut out, &stored).map_err(CliError::Output)?;
    } else {
        out.write_all(render(&stored, Utc::now()).as_bytes()).map_err(CliError::Output)?;
    }
    Ok(exit_of(&stored.preview))
}

/// How a stored preview ends: refused when a finding refuses the run; not as hoped when a node it needed did not
/// answer (what it would have found there is unknown); else success.
fn exit_of(preview: &crate::transfer::Preview) -> Exit {
    use crate::transfer::target_rules::table::{SOURCE_UNREACHABLE, TARGET_UNREACHABLE};
    let unanswered = [SOURCE_UNREACHABLE.code, TARGET_UNREACHABLE.code];
    if !preview.can_start() {
        Exit::Refused
    } else if preview.findings.iter().any(|f| unanswered.contains(&f.code)) {
        Exit::NotAsHoped
    } else {
        Exit::Success
    }
}

fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn bytes(n: i64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{n} bytes ({v:.1} {unit})")
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

/// The preview as a new user reads it: what, where, how many; the findings by kind with their fixes; notes;
/// and what to do next.
pub fn render(stored: &StoredPreview, now: DateTime<Utc>) -> String {
    let plan = &stored.plan;
    let p = &stored.preview;
    let mut s = String::new();
    let mode = match plan.mode {
        Mode::Move => "MOVE (the messages leave the source queue)",
        Mode::Copy => "COPY (the source queue is left untouched)",
    };
    s += &format!("Preview of a {mode}\n");
    s += &format!("  from         {}\n", plan.source.display());
    s += &format!("  to           {}\n", plan.to_words());
    s += &format!("  run          {}  (stored as Previewed; nothing was changed on any broker)\n", stored.run_id);
    s += &format!("  plan hash    {}\n", stored.plan_hash);
    let minutes = ((stored.expires_at - now).num_seconds().max(0) + 30) / 60;
    s += &format!("  valid until  {} (in {minutes} min); after that, preview again\n", time(stored.expires_at));
    if let Some(t0) = DateTime::<Utc>::from_timestamp_millis(plan.t0_millis) {
        s += &format!(
            "  frozen at    {} (t0, the source broker's clock): messages stamped later are not selected\n",
            t0.format("%Y-%m-%d %H:%M:%S%.3f UTC")
        );
    }
    let what = match &plan.selection {
        Selection::All => "the whole queue".to_string(),
        Selection::Filter(f) => format!("messages matching `{f}`"),
        Selection::Ids(ids) => format!("{} message id(s)", ids.len()),
    };
    let size = match (p.selection_size, p.selection_at_least) {
        (Some(n), _) => format!("{n} message(s)"),
        (None, Some(n)) => format!("more than {n} message(s) — see [selection-size] below"),
        (None, None) => format!("unknown — {}", unknown_size_reason(stored)),
    };
    s += &format!("  selection    {what}: {size}\n");
    s += &format!(
        "  projected    {}\n",
        match p.projected_bytes {
            Some(b) => format!(
                "{} on the target (the selection × the source queue's average persistent size per message, headers \
                 and properties included; a run counts the body bytes it delivers)",
                bytes(b)
            ),
            None => "unknown (it takes the selection's size and the source queue's average message size)".to_string(),
        }
    );

    let of = |kind: Kind| p.findings.iter().filter(|f| f.kind == kind).collect::<Vec<&Finding>>();
    let (refused, acks, unknown) = (of(Kind::Refused), of(Kind::NeedsAck), of(Kind::Unknown));
    s += &format!(
        "\nFindings: {} refused, {} need acknowledgement, {} could not be checked\n",
        refused.len(),
        acks.len(),
        unknown.len()
    );
    for (title, list) in [
        ("Refused — the run will not start", &refused),
        ("Needs acknowledgement — the run starts only if you acknowledge each code", &acks),
        ("Could not be checked — unknown, which is never a pass", &unknown),
    ] {
        if list.is_empty() {
            continue;
        }
        s += &format!("\n{title} ({}):\n", list.len());
        for f in list {
            s += &format!("  [{}]\n", f.code);
            s += &indent(&f.words, "    ");
            if let Some(snippet) = &f.snippet {
                s += "    Fix in broker.xml:\n";
                s += &indent(snippet, "      ");
            }
        }
    }
    if !p.notes.is_empty() {
        s += "\nNotes:\n";
        for n in &p.notes {
            s += &format!("  - {n}\n");
        }
    }
    s += "\nNext step:\n";
    if !p.can_start() {
        let how = if refused.iter().any(|f| f.snippet.is_some()) { " (the broker.xml snippets say how)" } else { "" };
        s += &format!("  This run is refused. Fix what is listed under \"Refused\"{how}, then preview again.\n");
        return s;
    }
    let mut command = format!("artemis-transfer execute {} --plan-hash {}", stored.run_id, stored.plan_hash);
    let codes = p.codes_to_acknowledge();
    for code in &codes {
        command += &format!(" --ack {code}");
    }
    if p.needs_cap_override {
        command += " --override-cap";
    }
    if p.needs_typed_confirmation {
        command += &format!(" --confirm {}", shell_quoted(&plan.source.queue));
    }
    s += &format!("  To start it before {}:\n    {command}\n", time(stored.expires_at));
    if !codes.is_empty() {
        s += "  --ack: one for every code under \"Needs acknowledgement\", to say you accept it.\n";
    }
    if p.needs_cap_override {
        s += "  --override-cap: the selection is over the safety cap, or its size is unknown.\n";
    }
    if p.needs_typed_confirmation {
        s += &format!(
            "  --confirm: type the source queue's name, {}, to arm the run (a move, or a run over the safety cap \
             or of unknown size, needs it).\n",
            plan.source.queue
        );
    }
    if !unknown.is_empty() {
        s += "  What could not be checked stays unknown: starting means accepting that.\n";
    }
    s
}

/// `s` as one POSIX shell word, for a command line the user can paste.
fn shell_quoted(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-/:@%+=,".contains(c)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Why the selection's size is not known, in words.
fn unknown_size_reason(stored: &StoredPreview) -> String {
    let findings = &stored.preview.findings;
    // What is wrong with the source explains an unknown size first.
    if let Some(f) = findings.iter().find(|f| {
        matches!(f.code, "source-unreachable" | "source-queue-unknown" | "source-queue-missing" | "invalid-filter")
    }) {
        return format!("see [{}] below", f.code);
    }
    if findings.iter().any(|f| f.code == "selection-size") {
        return "see [selection-size] below".into();
    }
    "the source queue's depth or the filter's count could not be read".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::{Plan, Preview};
    use uuid::Uuid;

    #[test]
    fn queue_refs_parse_or_say_the_shape() {
        let q = parse_queue_ref("east/east-1/orders/eu").unwrap();
        assert_eq!((q.cluster.as_str(), q.node.as_str(), q.queue.as_str()), ("east", "east-1", "orders/eu"));
        for bad in ["east/east-1", "east//q", "/n/q", "east/n/", "orders"] {
            let e = parse_queue_ref(bad).unwrap_err();
            assert!(e.contains("CLUSTER/NODE/QUEUE"), "{bad}: {e}");
        }
    }

    #[test]
    fn queue_names_are_quoted_for_the_shell() {
        assert_eq!(shell_quoted("orders.eu-1"), "orders.eu-1");
        assert_eq!(shell_quoted("a\"b\\c*"), "'a\"b\\c*'");
        assert_eq!(shell_quoted("it's"), "'it'\\''s'");
        assert_eq!(shell_quoted(""), "''");
    }

    #[test]
    fn bytes_are_readable() {
        assert_eq!(bytes(512), "512 bytes");
        assert_eq!(bytes(2048), "2048 bytes (2.0 KiB)");
        assert_eq!(bytes(3 * 1024 * 1024), "3145728 bytes (3.0 MiB)");
    }

    fn stored(findings: Vec<Finding>, selection_size: Option<i64>) -> StoredPreview {
        let q = |n: &str| QueueRef { cluster: "east".into(), node: n.into(), queue: "orders".into(), address: None };
        let plan = Plan {
            mode: Mode::Move,
            source: q("east-1"),
            target: q("east-2"),
            selection: Selection::Filter("a = 1".into()),
            t0_millis: 1_700_000_000_000,
            destination: Default::default(),
        };
        StoredPreview {
            run_id: Uuid::nil(),
            plan_hash: plan.hash(),
            plan,
            preview: Preview {
                findings,
                selection_size,
                selection_at_least: None,
                projected_bytes: None,
                source_count_at_t0: None,
                notes: vec!["a note".into()],
                needs_typed_confirmation: true,
                needs_cap_override: selection_size.is_none(),
            },
            expires_at: DateTime::<Utc>::from_timestamp(1_700_000_600, 0).unwrap(),
        }
    }

    fn finding(kind: Kind, code: &'static str, snippet: Option<&str>) -> Finding {
        Finding { kind, code, words: format!("words of {code}"), snippet: snippet.map(str::to_string) }
    }

    #[test]
    fn a_refused_preview_says_why_and_how_to_fix_it() {
        let s = stored(
            vec![
                finding(Kind::Refused, "address-full-drop", Some("<a>\n   <b/>\n</a>")),
                finding(Kind::Unknown, "selection-size", None),
            ],
            None,
        );
        let text = render(&s, DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap());
        assert!(text.contains("Findings: 1 refused, 0 need acknowledgement, 1 could not be checked"), "{text}");
        assert!(text.contains("  [address-full-drop]\n    words of address-full-drop\n    Fix in broker.xml:\n"));
        assert!(text.contains("      <a>\n         <b/>\n      </a>\n"), "{text}");
        assert!(text.contains("unknown — see [selection-size] below"), "{text}");
        assert!(text.contains("(the broker.xml snippets say how)"), "{text}");
        assert!(text.contains("valid until  2023-11-14 22:23:20 UTC (in 10 min)"), "{text}");
        assert!(text.contains("This run is refused"), "{text}");
        assert!(!text.contains("artemis-transfer execute"), "{text}");
    }

    #[test]
    fn a_refusal_without_a_snippet_promises_none() {
        let s = stored(vec![finding(Kind::Refused, "source-queue-missing", None)], None);
        let text = render(&s, DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap());
        assert!(text.contains("Fix what is listed under \"Refused\", then preview again."), "{text}");
        assert!(!text.contains("snippet"), "{text}");
    }

    #[test]
    fn a_startable_preview_says_what_execute_needs() {
        let s = stored(
            vec![finding(Kind::NeedsAck, "last-value", None), finding(Kind::NeedsAck, "disk-tight", None)],
            Some(3),
        );
        let text = render(&s, DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap());
        assert!(text.contains("messages matching `a = 1`: 3 message(s)"), "{text}");
        let command = format!("--plan-hash {} --ack last-value --ack disk-tight --confirm orders\n", s.plan_hash);
        assert!(text.contains(&command), "{text}");
        assert!(!text.contains("--override-cap"), "{text}");
        assert!(text.contains("--confirm: type the source queue's name, orders,"), "{text}");
        assert!(!text.contains("Refused —"), "an empty kind is not listed: {text}");
    }
}
