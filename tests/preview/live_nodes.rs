//! Findings that need a node in a particular state, created for real and previewed through the command line:
//! a target node that does not answer (a private broker, frozen with SIGSTOP), a target disk over its
//! `max-disk-usage` (a private broker started with a limit under the disk's usage: the setting has no runtime
//! setter), a paging source, and queues named with quotes, backslashes and `*`.

use std::time::{Duration, Instant};

use artemis_transfer::broker::jolokia::QueueConfig;
use testbed::fidelity::{self, Produce};
use testbed::jolokia::Jolokia;
use testbed::scratch::{ScratchBroker, ScratchOptions};
use testbed::{unique_name, Node, NodeRole, TestBed, TestQueues};

use super::cli::{codes, has, Cli};

/// The scratch broker as a test-bed node, for the independent test client and the fidelity helper.
fn scratch_node(broker: &ScratchBroker) -> Node {
    Node {
        name: "scratch".into(),
        cluster: "lab".into(),
        role: NodeRole::Primary,
        core_port: broker.core_port,
        http_port: broker.http_port.expect("started with the web console"),
        user: broker.user.clone(),
        password: broker.password.clone(),
        tls: None,
    }
}

/// Registers the scratch broker as cluster `lab` (one node, `scratch`) with the credentials reference `lab`.
async fn register_scratch(cli: &Cli, broker: &ScratchBroker) {
    let url = broker.jolokia_url().expect("started with the web console");
    let ran = cli
        .run_with(
            &["cluster", "add", "lab", "--core-url", &broker.core_url(), "--jolokia-url", &url, "--credentials", "lab"],
            &[
                ("ARTEMIS_TRANSFER_CREDENTIALS__LAB__USER", &broker.user),
                ("ARTEMIS_TRANSFER_CREDENTIALS__LAB__PASSWORD", &broker.password),
            ],
        )
        .await;
    ran.expect_code(0);
    assert!(ran.stdout.contains("node scratch"), "{}", ran.stdout);
}

/// `preview --json` of `selection` with the `lab` credentials exported too; the exit code, the stored preview, and how long
/// the command took.
async fn preview_lab(
    cli: &Cli,
    broker: &ScratchBroker,
    from: &str,
    to: &str,
    selection: &[&str],
) -> (Option<i32>, serde_json::Value, Duration) {
    let started = Instant::now();
    let mut args = vec!["preview", "--from", from, "--to", to, "--json"];
    args.extend_from_slice(selection);
    let ran = cli
        .run_with(
            &args,
            &[
                ("ARTEMIS_TRANSFER_CREDENTIALS__LAB__USER", &broker.user),
                ("ARTEMIS_TRANSFER_CREDENTIALS__LAB__PASSWORD", &broker.password),
            ],
        )
        .await;
    let took = started.elapsed();
    assert!(matches!(ran.code, Some(0 | 3 | 4)), "preview failed\nstdout:\n{}\nstderr:\n{}", ran.stdout, ran.stderr);
    (ran.code, ran.json(), took)
}

/// Resumes a paused broker when the test ends, whatever happened.
struct Resume<'a>(&'a ScratchBroker);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}

/// A frozen target node: the preview still returns, in bounded time, saying the node could not be checked;
/// once the node runs again, the same preview reads it.
#[tokio::test]
async fn a_frozen_target_node_could_not_be_checked_and_the_preview_still_returns() {
    let bed = TestBed::require().await;
    let broker = ScratchBroker::start_with("preview_frozen", ScratchOptions { web: true, ..Default::default() }).await;
    let cli = Cli::fresh("preview_frozen").await;
    cli.register("east", bed.node("east-1")).await;
    register_scratch(&cli, &broker).await;
    let queues = TestQueues::new();
    let source = super::source_with(&queues, 2).await;
    let target = unique_name("frozen_target");
    Jolokia::new(&scratch_node(&broker)).create_queue(&target).await.unwrap();
    let (from, to) = (format!("east/east-1/{source}"), format!("lab/scratch/{target}"));

    let (code, answering, _) = preview_lab(&cli, &broker, &from, &to, &["--all"]).await;
    assert_eq!(code, Some(0), "{:?}", codes(&answering));
    assert!(!has(&answering, "unknown", "target-unreachable"), "{:?}", codes(&answering));

    broker.pause();
    let resume = Resume(&broker);
    let (code, frozen, took) = preview_lab(&cli, &broker, &from, &to, &["--all"]).await;
    drop(resume);
    println!("the preview of a frozen target took {:.1} s", took.as_secs_f64());
    let finding = frozen["preview"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "target-unreachable")
        .unwrap_or_else(|| panic!("{:?}", codes(&frozen)));
    assert_eq!(finding["kind"], "unknown");
    assert!(finding["words"].as_str().unwrap().contains("did not answer"), "{finding}");
    // Nothing else about the target is claimed, neither a pass nor a refusal.
    assert!(!codes(&frozen).iter().any(|(k, c)| k == "refused" && c.starts_with("target")), "{:?}", codes(&frozen));
    assert_eq!(
        code,
        Some(3),
        "a node that did not answer is unknown, not a refusal: not as hoped: {:?}",
        codes(&frozen)
    );
    // Two management timeouts of 10 s (the live-endpoint check, then the batch) and a 3 s Core probe at most.
    assert!(took < Duration::from_secs(40), "the preview took {took:?}");

    let (_, thawed, _) = preview_lab(&cli, &broker, &from, &to, &["--all"]).await;
    assert!(!has(&thawed, "unknown", "target-unreachable"), "{:?}", codes(&thawed));
}

/// Artemis' disk usage is `1 − usable ÷ total` of the journal's file store (what `DiskStoreUsage` reports).
fn disk_usage(path: &std::path::Path) -> f64 {
    let out = std::process::Command::new("df").args(["--output=size,avail", "-B1"]).arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let numbers: Vec<f64> =
        text.lines().nth(1).expect("df prints a line").split_whitespace().map(|n| n.parse().unwrap()).collect();
    1.0 - numbers[1] / numbers[0]
}

/// A target broker whose disk is over its `max-disk-usage` is refused (`disk-full`), with the setting's snippet.
#[tokio::test]
async fn a_target_disk_over_max_disk_usage_is_refused() {
    let bed = TestBed::require().await;
    let usage = disk_usage(&bed.dir);
    let limit = ((usage * 100.0) / 2.0).floor().clamp(1.0, 98.0) as i64;
    assert!(usage * 100.0 > (limit + 1) as f64, "the disk is {usage:.3} used: too empty to be over a limit");
    let options = ScratchOptions {
        web: true,
        broker_xml: vec![(
            "<max-disk-usage>90</max-disk-usage>".into(),
            format!("<max-disk-usage>{limit}</max-disk-usage>"),
        )],
        ..ScratchOptions::default()
    };
    let broker = ScratchBroker::start_with("preview_disk", options).await;
    // The broker says 0.0 until its first disk scan (disk-scan-period, 5 s by default, after the start): wait
    // for a measured value, as a preview right after a restart would not (docs/broker-notes.md).
    let node = scratch_node(&broker);
    let judge = Jolokia::new(&node);
    let started = Instant::now();
    let mut reads = Vec::new();
    let disk = loop {
        let disk = judge.read(&node.broker_mbean(), &["MaxDiskUsage", "DiskStoreUsage"]).await.unwrap();
        reads.push(disk["DiskStoreUsage"].clone());
        if disk["DiskStoreUsage"].as_f64().is_some_and(|u| u > 0.0) || started.elapsed() > Duration::from_secs(30) {
            break disk;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!(
        "df says {usage:.4} used; the scratch broker's DiskStoreUsage read {reads:?} over {:.1} s; now {disk}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(disk["MaxDiskUsage"], limit, "the broker runs with the edited limit: {disk}");
    assert!(disk["DiskStoreUsage"].as_f64().is_some_and(|u| u * 100.0 > limit as f64), "{disk}");

    let cli = Cli::fresh("preview_disk").await;
    cli.register("east", bed.node("east-1")).await;
    register_scratch(&cli, &broker).await;
    let queues = TestQueues::new();
    let source = super::source_with(&queues, 2).await;
    let target = unique_name("disk_target");
    let (code, stored, _) =
        preview_lab(&cli, &broker, &format!("east/east-1/{source}"), &format!("lab/scratch/{target}"), &["--all"])
            .await;
    assert_eq!(code, Some(4), "{:?}", codes(&stored));
    let finding = stored["preview"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "disk-full")
        .unwrap_or_else(|| panic!("{:?}", codes(&stored)));
    assert_eq!(finding["kind"], "refused");
    assert!(finding["words"].as_str().unwrap().contains(&format!("max-disk-usage of {limit}%")), "{finding}");
    assert!(finding["snippet"].as_str().unwrap().starts_with("<max-disk-usage>"), "{finding}");
}

/// A paging source address: a filter or an id selection makes the broker scan the pages (`source-paged`,
/// needs acknowledgement); the whole queue does not.
#[tokio::test]
async fn a_paging_source_needs_acknowledgement_for_filters_and_ids() {
    let bed = TestBed::require().await;
    let (east1, west1) = (bed.node("east-1"), bed.node("west-1"));
    let judge = Jolokia::new(east1);
    let queues = TestQueues::new();
    let source = queues.name(east1, "paged_source");
    // A small address (16 KiB in memory, then pages of 4 KiB) holding 100 messages pages.
    judge.page_beyond(&source, 16384, 4096).await.unwrap();
    judge.create_queue(&source).await.unwrap();
    fidelity::produce(east1, &source, &Produce { count: 100, durable_only: true, ..Produce::default() }).await;
    judge.assert_paging(&source).await;

    let cli = Cli::fresh("preview_paged").await;
    cli.register("east", east1).await;
    cli.register("west", west1).await;
    let (from, to) = (format!("east/east-1/{source}"), format!("west/west-1/{}", unique_name("paged_target")));
    for (selection, says) in [
        // The source broker's heap was read: the words give the estimate against it.
        (&["--filter", "p_int >= 50000"][..], "of the source broker's heap ("),
        (&["--ids", "1,2,3"], "moveMessage does not look in page files"),
    ] {
        let (_, stored) = cli.preview_json(&from, &to, selection).await;
        assert!(has(&stored, "needs_ack", "source-paged"), "{selection:?}: {:?}", codes(&stored));
        let words = finding_words(&stored, "source-paged");
        assert!(words.contains(says), "{selection:?}: {words}");
    }
    let (_, whole) = cli.preview_json(&from, &to, &["--all"]).await;
    assert!(!codes(&whole).iter().any(|(_, c)| c == "source-paged"), "{:?}", codes(&whole));
    assert_eq!(whole["preview"]["selection_size"], 100);

    judge.remove_address_settings(&source).await.unwrap();
}

/// The words of the finding `code` in a stored preview.
fn finding_words(stored: &serde_json::Value, code: &str) -> String {
    stored["preview"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .and_then(|f| f["words"].as_str())
        .unwrap_or_else(|| panic!("no {code}: {:?}", codes(stored)))
        .to_string()
}

/// A move by filter from a paging source whose paged messages cannot fit in the source broker's free heap (the
/// broker's filtered move keeps in memory every paged message its scan passes over) is refused before anything
/// runs, in words that give the estimate and the heap. Moving the whole queue keeps nothing, and a copy by the same
/// filter browses: neither is refused. The source is a private broker with a 96 MiB heap.
#[tokio::test]
async fn a_filtered_move_whose_scan_cannot_fit_in_the_source_heap_is_refused() {
    let bed = TestBed::require().await;
    let options = ScratchOptions { web: true, heap: Some("96M".into()), ..ScratchOptions::default() };
    let broker = ScratchBroker::start_with("preview_paged_heap", options).await;
    let node = scratch_node(&broker);
    let judge = Jolokia::new(&node);
    let source = unique_name("paged_heap");
    judge.page_beyond(&source, 1048576, 1048576).await.unwrap();
    judge.create_queue(&source).await.unwrap();
    // 1,000 messages of 90 KiB (under the Core client's large-message threshold, so each would be read back whole):
    // about 92 MB stored, over 80 % of the whole 96 MiB heap whatever the broker uses itself.
    let produce =
        Produce { count: 1000, kinds: "bytes".into(), body_size: 90 * 1024, durable_only: true, ..Produce::default() };
    fidelity::produce(&node, &source, &produce).await;
    judge.assert_paging(&source).await;

    let cli = Cli::fresh("preview_paged_heap").await;
    cli.register("west", bed.node("west-1")).await;
    register_scratch(&cli, &broker).await;
    let (from, to) = (format!("lab/scratch/{source}"), format!("west/west-1/{}", unique_name("paged_heap_target")));
    let (code, stored, _) = preview_lab(&cli, &broker, &from, &to, &["--filter", "p_int >= 0"]).await;
    assert_eq!(code, Some(4), "{:?}", codes(&stored));
    assert!(has(&stored, "refused", "source-paged-heap"), "{:?}", codes(&stored));
    let words = finding_words(&stored, "source-paged-heap");
    assert!(words.contains("more than the source broker can spare") && words.contains("MiB free of 96 MiB"), "{words}");

    for selection in [&["--all"][..], &["--filter", "p_int >= 0", "--copy"]] {
        let (_, stored, _) = preview_lab(&cli, &broker, &from, &to, selection).await;
        assert!(!has(&stored, "refused", "source-paged-heap"), "{selection:?}: {:?}", codes(&stored));
    }
}

/// Queues named with quotes, backslashes and `*` are previewed end to end: read, counted with a filter, and
/// printed as named.
#[tokio::test]
async fn queues_named_with_quotes_backslashes_and_stars_preview_end_to_end() {
    let bed = TestBed::require().await;
    let (east1, west1) = (bed.node("east-1"), bed.node("west-1"));
    let source = format!("{}.q\"uo\\te*d", unique_name("odd_preview"));
    let target = format!("{}.t\"a\\rg*et", unique_name("odd_preview"));
    let queues = TestQueues::new();
    queues.add(east1, &source).add(west1, &target);
    let (east, west) = (super::management(east1), super::management(west1));
    east.create_queue(&QueueConfig::plain_anycast(&source)).await.unwrap();
    west.create_queue(&QueueConfig::plain_anycast(&target)).await.unwrap();
    fidelity::produce(east1, &source, &Produce { count: 6, durable_only: true, ..Produce::default() }).await;

    let cli = Cli::fresh("preview_odd_names").await;
    cli.register("east", east1).await;
    cli.register("west", west1).await;
    let (from, to) = (format!("east/east-1/{source}"), format!("west/west-1/{target}"));
    let (code, stored) = cli.preview_json(&from, &to, &["--all"]).await;
    assert_eq!(code, Some(0), "{:?}", codes(&stored));
    assert_eq!(stored["plan"]["source"]["queue"], source.as_str());
    assert_eq!(stored["preview"]["selection_size"], 6, "the source queue was read by its quoted name");
    for code in ["source-queue-missing", "source-queue-unknown", "target-queue-created", "target-queue-unknown"] {
        assert!(!codes(&stored).iter().any(|(_, c)| c == code), "{code}: {:?}", codes(&stored));
    }
    let (_, filtered) = cli.preview_json(&from, &to, &["--filter", "p_int >= 3000"]).await;
    assert_eq!(filtered["preview"]["selection_size"], 3, "counted on the odd queue: {:?}", codes(&filtered));
    let text = cli.run(&["preview", "--from", &from, "--to", &to, "--all"]).await;
    text.expect_code(0);
    assert!(text.stdout.contains(&format!("from         {from}\n")), "{}", text.stdout);
}
