#!/usr/bin/env python3
"""Ours and the peer at the same commit interval, side by side (issue 29).

For each cell (mode, message size, batch B), `reps` alternated repetitions: in each, two fresh queues of N messages
on east-1 are produced first (one for each side, so production never sits between the two), then the peer and
ours each move or copy their own queue whole to a fresh queue on west-1, the peer first in odd repetitions and
ours first in even ones:

- the peer: `artemis transfer --commit-interval B` (the command shipped with the broker: a JMS receive/send loop,
  at-least-once; with `--copy` it sends what it receives and rolls the source back at the end). Timed from its
  start to its end less its trailing receive timeout (`--peer-receive-timeout`, 5 s), as scripts/bench_move.py
  does; its JVM start is inside. Its loop also ends early when one receive waits that long on a loaded machine:
  the census catches it.
  That start-up (the peer on an empty queue, measured at the start of each cell) is printed, and a second ratio
  with it taken out of the peer's times; the cell's figure and the last lines keep it in.
- ours: a worker (`--concurrency 2`, rate limits lifted, batch_size B) running a move or copy run of the whole queue
  (preview, execute, wait for the end state). Timed from execute to the run's `ended_at`. Only `succeeded` counts.

Each side's census is checked (the target holds N; a move leaves 0 on the source, a copy N) and a repetition with
a wrong census or an unsuccessful run does not count. The queues are deleted after each repetition (the brokers
have 512 MiB heaps). It prints a line per repetition and per cell (median msg/s of each side, the median of the
repetitions' ratios of our speed to the peer's: higher is better for us, 1.0 is level), the machine and its load
average at the start and end of every cell, and ends with one line per cell, `<mode>_speed_ratio_b<B>[_64k]: x`,
the 1 KiB cells last. Exit 0 when every repetition counted.

Run through `scripts/bench sidebyside [--messages N] [--sizes 1024,65536] [--batches 200,1000] [--modes move,copy]
[--reps 3] [--binary PATH]` (test bed up; without --binary, the release build of this checkout).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402  (shared: test bed env, Jolokia, produce, the peer, our database, a run)

MODES = ("move", "copy")
SOURCE_WORDS = {"peer": "the peer's source", "ours": "our source"}


def csv_ints(text):
    return [int(x) for x in text.split(",") if x.strip()]


def csv_modes(text):
    modes = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown mode {', '.join(unknown)}: the modes are move and copy")
    return modes


def parse_args():
    ap = argparse.ArgumentParser(description="ours and `artemis transfer` side by side at the same commit interval")
    ap.add_argument("--messages", type=int, default=100_000, help="messages per queue (default 100,000)")
    ap.add_argument("--sizes", type=csv_ints, default=[1024, 65536], help="body sizes in bytes (default 1024,65536)")
    ap.add_argument("--batches", type=csv_ints, default=[200, 1000],
                    help="commit intervals: the peer's --commit-interval and our batch_size (default 200,1000)")
    ap.add_argument("--modes", type=csv_modes, default=list(MODES), help="move, copy or both (default move,copy)")
    ap.add_argument("--reps", type=int, default=3, help="alternated repetitions per cell (default 3)")
    ap.add_argument("--binary", default=bl.RELEASE_BINARY,
                    help="our binary under test (default: this checkout's target/release/artemis-transfer)")
    ap.add_argument("--node-calls", type=float, default=1000.0,
                    help="our per-node management calls/s (default 1000, lifted as in scripts/bench_move.py)")
    ap.add_argument("--wait-load", type=float, default=0.0,
                    help="before each cell, wait until the 1-minute load average is below this (0: do not wait)")
    ap.add_argument("--wait-max", type=float, default=600.0, help="the longest wait for --wait-load, in seconds")
    ap.add_argument("--peer-receive-timeout", type=int, default=5000,
                    help="the peer's --receive-timeout in ms, subtracted from its time (default 5000, its own "
                         "default: at 2000 a loaded machine once ended its copy loop after 13,716 of 100,000)")
    ap.add_argument("--run-timeout", type=float, default=1800.0,
                    help="seconds either side may take before its repetition is counted as failed (default 1800)")
    return ap.parse_args()


def size_label(size):
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"


def ratio_key(mode, batch, size):
    """The last lines' keys: 1 KiB cells bare, other sizes suffixed (`_64k` for 64 KiB)."""
    suffix = "" if size == 1024 else (f"_{size // 1024}k" if size % 1024 == 0 else f"_{size}b")
    return f"{mode}_speed_ratio_b{batch}{suffix}"


def wait_for_load(limit, longest):
    if limit <= 0:
        return
    deadline = time.time() + longest
    while os.getbl.loadavg_words()[0] >= limit and time.time() < deadline:
        time.sleep(10)
    if os.getbl.loadavg_words()[0] >= limit:
        print(f"  load still {bl.loadavg_words()} after waiting {longest:.0f} s for < {limit:g}: running anyway", flush=True)


def census_ok(mode, n, on_target, left_on_source):
    """A move leaves nothing on the source; a copy leaves all of it; either way the target holds every message."""
    return on_target == n and left_on_source == (0 if mode == "move" else n)


class Bench:
    def __init__(self, args):
        self.args = args
        self.env = bl.testbed_env()
        self.east, self.west = bl.node(self.env, "east-1"), bl.node(self.env, "west-1")
        self.database = f"artemis_transfer_bench_sidebyside_{os.getpid()}"
        self.penv, self.run = bl.ours(self.env, self.east, self.west, args.binary, args.batches[0],
                                      args.node_calls, database=self.database)
        self.worker_log = os.path.join(bl.ROOT, "target", "bench-sidebyside-worker.log")

    def peer_fixed_cost(self, tag):
        """The peer's start-up, connect and close on an empty queue: inside every peer time (not subtracted)."""
        src, dst = f"bench.sbs.{tag}.empty.src", f"bench.sbs.{tag}.empty.dst"
        bl.create_queue(self.east, src)
        bl.create_queue(self.west, dst)
        try:
            return bl.peer_transfer(self.env, self.east, src, self.west, dst,
                                    receive_timeout_ms=self.args.peer_receive_timeout, timeout=self.args.run_timeout)
        finally:
            bl.delete_queue(self.east, src)
            bl.delete_queue(self.west, dst)

    def peer_side(self, mode, batch, src, dst):
        n = self.args.messages
        try:
            secs = bl.peer_transfer(self.env, self.east, src, self.west, dst, commit_interval=batch,
                                    copy=mode == "copy", receive_timeout_ms=self.args.peer_receive_timeout,
                                    timeout=self.args.run_timeout)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            return {"ok": False, "secs": None, "words": f"peer failed: {type(e).__name__}"}
        on_target, left = bl.queue_count(self.west, "west-1", dst), bl.queue_count(self.east, "east-1", src)
        ok = census_ok(mode, n, on_target, left)
        return {"ok": ok, "secs": secs,
                "words": f"peer {secs:.1f} s ({(on_target or 0) / secs:,.0f} msg/s), census {on_target} on the target, "
                         f"{left} left{'' if ok else ' WRONG'}"}

    def ours_side(self, mode, src, dst):
        n = self.args.messages
        previewed = bl.preview(self.run, src, dst, copy=mode == "copy")
        run_id = previewed["run_id"]
        worker = bl.start_worker(self.args.binary, self.penv, self.worker_log)
        try:
            time.sleep(1.0)  # the worker connected and polling before the clock starts, as in bench_move.py
            started = time.time()
            bl.execute(self.run, previewed, src)
            state = bl.wait_run(self.penv, run_id, timeout=self.args.run_timeout)
            ended = bl.run_ended_at(self.penv, run_id)
            if state is None:
                self.run("stop", run_id, "--reason", "benchmark timeout")
                bl.wait_run(self.penv, run_id, timeout=120)
        finally:
            bl.stop_worker(worker)
            try:
                bl.delete_queue(self.east, f"studio.transfer.{run_id}")  # only there if the run did not finish
            except Exception:
                pass
        on_target, left = bl.queue_count(self.west, "west-1", dst), bl.queue_count(self.east, "east-1", src)
        ok = state == "succeeded" and ended is not None and census_ok(mode, n, on_target, left)
        secs = ended - started if ended is not None else None
        timing = f"{secs:.1f} s ({(on_target or 0) / secs:,.0f} msg/s)" if secs else "no end time"
        return {"ok": ok, "secs": secs,
                "words": f"ours {state or 'not ended'} {timing}, census {on_target} on the target, "
                         f"{left} left{'' if ok else ' WRONG'}"}

    def repetition(self, mode, size, batch, rep, stamp):
        """One alternated repetition: both queues produced, then both sides; the queues deleted whatever happened."""
        tag = f"{stamp}.{mode}.{size}.b{batch}.r{rep}"
        queues = {side: (f"bench.sbs.{tag}.{side}.src", f"bench.sbs.{tag}.{side}.dst") for side in ("peer", "ours")}
        order = ("peer", "ours") if rep % 2 == 1 else ("ours", "peer")
        results = {}
        try:
            produced = time.time()
            for side in order:
                src, dst = queues[side]
                bl.create_queue(self.west, dst)
                bl.produce(self.env, self.east, src, self.args.messages, size)
            produced = time.time() - produced
            # Two deep queues may not both fit under the broker's global-max-size: the one produced second
            # then pages, and its side works from page files (alternating the order shares that out).
            paging = ", ".join(f"{SOURCE_WORDS[side]} {paging_words(bl.address_paging(self.east, queues[side][0]))}"
                               for side in order)
            for side in order:
                src, dst = queues[side]
                if side == "peer":
                    results[side] = self.peer_side(mode, batch, src, dst)
                else:
                    results[side] = self.ours_side(mode, src, dst)
        finally:
            for src, dst in queues.values():
                for n, q in ((self.east, src), (self.west, dst)):
                    try:
                        bl.delete_queue(n, q)
                    except Exception as e:  # a queue never created; the next repetition uses new names
                        print(f"  could not delete {q}: {e}", flush=True)
        peer, ours = results["peer"], results["ours"]
        counted = peer["ok"] and ours["ok"]
        ratio = peer["secs"] / ours["secs"] if counted else None
        print(f"  rep {rep}/{self.args.reps} ({order[0]} first; both queues produced in {produced:.1f} s; {paging}): "
              f"{peer['words']}; {ours['words']}; "
              + (f"ours/peer speed {ratio:.2f}" if counted else "NOT COUNTED"), flush=True)
        return {"peer": peer["secs"], "ours": ours["secs"], "ratio": ratio}

    def cell(self, mode, size, batch, stamp):
        n = self.args.messages
        wait_for_load(self.args.wait_load, self.args.wait_max)
        load_start = bl.loadavg_words()
        print(f"cell {mode} {size_label(size)} B={batch}: {n:,} messages east-1 -> west-1; "
              f"load average at start {load_start}", flush=True)
        bl.set_batch(self.penv, batch)
        startup = self.peer_fixed_cost(f"{stamp}.{mode}.{size}.b{batch}")
        print(f"  peer start-up, connect and close on an empty queue: {startup:.1f} s (inside every peer time)",
              flush=True)
        reps = [self.repetition(mode, size, batch, rep, stamp) for rep in range(1, self.args.reps + 1)]
        counted = [r for r in reps if r["ratio"] is not None]
        # A second view, not the cell's figure: the peer's time less its start-up measured just before.
        without_startup = [(r["peer"] - startup) / r["ours"] for r in counted if r["peer"] > startup]
        cell = {"mode": mode, "size": size, "batch": batch, "load": (load_start, bl.loadavg_words()),
                "reps": len(reps), "counted": len(counted), "ratios": [r["ratio"] for r in counted],
                "peer_rate": statistics.median(n / r["peer"] for r in counted) if counted else None,
                "ours_rate": statistics.median(n / r["ours"] for r in counted) if counted else None,
                "ratio": statistics.median(r["ratio"] for r in counted) if counted else None,
                "startup": startup,
                "ratio_without_startup": statistics.median(without_startup) if without_startup else None}
        print(f"cell {mode} {size_label(size)} B={batch}: {cell_words(cell)}; load average at end {cell['load'][1]}",
              flush=True)
        return cell

    def close(self):
        bl.drop_database(self.env, self.database)


def paging_words(paging):
    return {True: "paging", False: "in memory"}.get(paging, "paging unknown")


def cell_words(cell):
    if cell["ratio"] is None:
        return f"no repetition counted of {cell['reps']}: ratio unknown"
    ratios = ", ".join(f"{r:.2f}" for r in cell["ratios"])
    unstarted = cell["ratio_without_startup"]
    return (f"median peer {cell['peer_rate']:,.0f} msg/s, ours {cell['ours_rate']:,.0f} msg/s, "
            f"ours/peer speed {cell['ratio']:.2f} ({ratios}; {cell['counted']} of {cell['reps']} counted); "
            f"{'unknown' if unstarted is None else f'{unstarted:.2f}'} with the peer's start-up "
            f"({cell['startup']:.1f} s) taken out")


def main():
    args = parse_args()
    args.binary = os.path.abspath(args.binary)
    if not os.access(args.binary, os.X_OK):
        print(f"no executable binary at {args.binary}: build it (cargo build --release --bin artemis-transfer) "
              "or name one with --binary", file=sys.stderr)
        return 2
    stamp = int(time.time())
    print(bl.header_words("sidebyside"), flush=True)
    print(f"ours: {bl.binary_words(args.binary)}; worker --concurrency 2, messages/s and node calls/s lifted "
          f"({args.node_calls:g}), batch_bytes left at its default", flush=True)
    bench = Bench(args)
    print(f"peer: {os.path.basename(bench.env['ARTEMIS_HOME'])} `artemis transfer --commit-interval B "
          f"--receive-timeout {args.peer_receive_timeout}` (its loop commits after B + 1 messages; --copy for the "
          "copy; the trailing receive timeout subtracted)", flush=True)
    cells = []
    try:
        for size in args.sizes:
            for mode in args.modes:
                for batch in args.batches:
                    cells.append(bench.cell(mode, size, batch, stamp))
    finally:
        bench.close()
    print("summary:", flush=True)
    for c in cells:
        print(f"  {c['mode']} {size_label(c['size'])} B={c['batch']} (load {c['load'][0]} -> {c['load'][1]}): "
              f"{cell_words(c)}", flush=True)
    for c in sorted(cells, key=lambda c: c["size"] == 1024):  # stable: the 1 KiB cells last, in run order
        value = f"{c['ratio']:.2f}" if c["ratio"] is not None else "unknown"
        print(f"{ratio_key(c['mode'], c['batch'], c['size'])}: {value}", flush=True)
    return 0 if all(c["counted"] == c["reps"] for c in cells) else 1


if __name__ == "__main__":
    sys.exit(main())
