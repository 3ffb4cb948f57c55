//! Replays the fuzz corpus (`fuzz/corpus/decode/`, minimised seeds from the golden frames and what the fuzzer
//! found) through the same harness the `cargo fuzz` target runs (`fuzz/harness.rs`), on the stable toolchain:
//! every input the fuzzer ever flagged stays fixed, and CI checks the harness's invariants on every seed.

#[path = "../../fuzz/harness.rs"]
mod harness;

use std::path::PathBuf;

fn corpus_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_input_keeps_the_decoder_invariants() {
    let files = corpus_files();
    assert!(files.len() >= 50, "the corpus has only {} files", files.len());
    for file in files {
        let data = std::fs::read(&file).unwrap();
        // A panic names the input, so it can be run again with `cargo fuzz run decode <file>`.
        let outcome = std::panic::catch_unwind(|| harness::check(&data));
        assert!(outcome.is_ok(), "fuzz input {} breaks an invariant", file.display());
    }
}

#[test]
fn every_golden_frame_is_in_the_corpus() {
    // The corpus was seeded from the golden frames; minimising must not have dropped any of them, since each
    // is a real packet of its type and the cheapest way in for the fuzzer.
    let corpus: Vec<Vec<u8>> = corpus_files().iter().map(|f| std::fs::read(f).unwrap()).collect();
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    for entry in std::fs::read_dir(golden).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "bin") {
            let frame = std::fs::read(&path).unwrap();
            assert!(corpus.contains(&frame), "{} is not in fuzz/corpus/decode", path.display());
        }
    }
}
