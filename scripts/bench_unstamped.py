#!/usr/bin/env python3
"""A whole-queue move of a deep paging queue whose producer sends no timestamp, beside the same queue stamped
(issue 29: "Unstamped whole-queue move of a paging queue of 1,000,000: time <= 1.2x the same queue stamped").

Each repetition makes two source queues on east-1, each on an address that pages beyond --max-size-bytes (its own
address settings, PAGE policy, removed at the end; `#` is never touched), and fills both with N persistent messages
of --size bytes by the official JMS client (scripts/java/BenchStream.java, transactions of 1,000): one with
`setDisableMessageTimestamp(true)` (the Core timestamp is 0), one stamped as usual. Before any run it checks that
both addresses page and reads the first message of each back with the Fidelity judge (its timestamp 0 or not).
Then ours moves each queue whole to a fresh queue on west-1 (a worker, `--concurrency 2`, rate limits lifted,
batch_size B), the --first kind first in odd repetitions, the other first in even ones; each timed from execute to
the run's `ended_at`, east-1's heap in use sampled every second (Jolokia). A run that passes --run-timeout is stopped
and its time reported as at least that; one during which east-1's management stays silent for --silent-limit seconds
is stopped and not counted (a broker that stopped answering bounds nothing). Each kind's queues are deleted after its
census.

Census: N on the target and none left on the source, and the run `succeeded`. The last line is
`unstamped_vs_stamped_time: x`, the median over counted repetitions of unstamped seconds / stamped seconds (lower is
better; the issue's goal is <= 1.2). Exit 0 when every repetition counted.

Run through `scripts/bench unstamped [--messages 1000000] [--batch 200] [--reps 1]` (release build, test bed up).
A million messages of 1 KiB take about 1.2 GB of page files per queue while it waits.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402  (shared: test bed env, Jolokia, Java helpers, our database, a run)

KINDS = ("unstamped", "stamped")
TIMEOUT = "--run-timeout passed"


def parse_args():
    ap = argparse.ArgumentParser(description="a whole-queue move of an unstamped paging queue beside a stamped one")
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages per queue (default 1,000,000)")
    ap.add_argument("--size", type=int, default=1024, help="body size in bytes (default 1024)")
    ap.add_argument("--batch", type=int, default=200, help="our batch_size (default 200)")
    ap.add_argument("--reps", type=int, default=1, help="alternated repetitions (default 1: a million is long)")
    ap.add_argument("--first", choices=KINDS, default="unstamped",
                    help="which queue the first repetition moves first (default unstamped); the next alternate")
    ap.add_argument("--max-size-bytes", type=int, default=1 << 20,
                    help="the source addresses page beyond this (default 1 MiB)")
    ap.add_argument("--page-size-bytes", type=int, default=256 << 10,
                    help="the source addresses' page file size, below --max-size-bytes (the broker refuses it "
                         "otherwise; default 256 KiB, as scripts/bench_paged.py)")
    ap.add_argument("--node-calls", type=float, default=1000.0, help="our per-node management calls/s (default 1000)")
    ap.add_argument("--run-timeout", type=float, default=3600.0,
                    help="seconds a run may take before it is stopped and reported as at least that (default 3600)")
    ap.add_argument("--silent-limit", type=float, default=300.0,
                    help="seconds east-1's management may go unanswered during a run before the run is given up "
                         "(reported, not counted; default 300)")
    return ap.parse_args()


class Bench:
    def __init__(self, args):
        self.args = args
        self.env = bl.testbed_env()
        self.east, self.west = bl.node(self.env, "east-1"), bl.node(self.env, "west-1")
        self.classpath = bl.build_java(self.env, "BenchStream")
        self.database = f"artemis_transfer_bench_unstamped_{os.getpid()}"
        self.penv, self.run = bl.ours(self.env, self.east, self.west, args.binary, args.batch, args.node_calls,
                                      database=self.database)

    def java(self, *args):
        return subprocess.run(["java", "-Xmx256m", "-cp", self.classpath, *args], check=True, capture_output=True,
                              text=True)

    def credentials(self):
        return ["--url", self.east["core_url"], "--user", self.east["user"], "--password", self.east["password"]]

    def produce(self, queue, kind):
        t = time.time()
        self.java("BenchStream", "produce-many", *self.credentials(), "--queue", queue,
                  "--count", str(self.args.messages), "--body-size", str(self.args.size),
                  *(["--no-timestamp"] if kind == "unstamped" else []))
        return time.time() - t

    def first_timestamp(self, queue):
        """The first message's Core timestamp as the official client browses it; None when none was read."""
        out = self.java("Fidelity", "browse", *self.credentials(), "--queue", queue, "--max", "1").stdout
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return json.loads(lines[0]).get("timestamp") if lines else None

    def move(self, src, dst):
        """Our whole-queue move of `src`: (seconds or None, at_least, state, words)."""
        previewed = bl.preview(self.run, src, dst)
        run_id = previewed["run_id"]
        worker = bl.start_worker(self.args.binary, self.penv, os.path.join(bl.ROOT, "target",
                                                                           "bench-unstamped-worker.log"))
        try:
            time.sleep(1.0)  # the worker connected and polling before the clock starts, as in bench_move.py
            rss = bl.RssSampler(worker.pid, every=1.0).start()
            heap = bl.PeakSampler(lambda: bl.heap_used(self.east), every=1.0).start()
            started = time.time()
            bl.execute(self.run, previewed, src)
            state, gave_up = self.wait(run_id, started, heap)
            given_up_after = time.time() - started
            if state is None:
                self.run("stop", run_id, "--reason", f"benchmark: {gave_up}")
                state = bl.wait_run(self.penv, run_id, timeout=120)
            ended = bl.run_ended_at(self.penv, run_id)
            rss.stop()
            heap.stop()
            hwm = rss.hwm_kib()
        finally:
            bl.stop_worker(worker)
        timed_out = gave_up is not None
        counters = bl.run_counters(self.penv, run_id)
        secs = given_up_after if timed_out else (ended - started) if ended is not None else None
        on_target, left = bl.queue_count(self.west, "west-1", dst), bl.queue_count(self.east, "east-1", src)
        ok = not timed_out and state == "succeeded" and on_target == self.args.messages and left == 0
        words = (f"run {state or 'not ended'}{f' (stopped: {gave_up})' if timed_out else ''} in "
                 f"{'at least ' if timed_out else ''}{secs:.1f} s ({(on_target or 0) / secs:,.0f} msg/s); "
                 f"{on_target} on the target, {left} left{'' if ok else ' — census WRONG'}; batches "
                 f"{counters.get('batches')}; worker RSS peak {'unknown' if hwm is None else f'{hwm / 1024:.1f} MiB'}; "
                 f"east-1 heap peak {'unknown' if heap.peak is None else f'{heap.peak / 2**20:.0f} MiB'}, "
                 f"{heap.misses} of {heap.samples} heap reads unanswered")
        # Only a run stopped at --run-timeout gives a bound on its time; one whose broker went silent gives none.
        return {"ok": ok, "secs": secs, "at_least": gave_up == TIMEOUT, "words": words}

    def delete_queues(self, src, dst):
        """Both queues of one kind and the source address's paging setting."""
        for n, q in ((self.east, src), (self.west, dst)):
            try:
                bl.delete_queue(n, q)
            except Exception as e:  # never created; the next repetition uses new names
                print(f"  could not delete {q}: {e}", flush=True)
        try:
            bl.remove_address_settings(self.east, src)
        except Exception as e:
            print(f"  could not remove the address settings of {src}: {e}", flush=True)

    def wait(self, run_id, started, heap):
        """(end state, None), or (None, why it was given up): --run-timeout passed, or east-1's management stayed
        silent for --silent-limit seconds (a broker that does not answer may never let the run end)."""
        while True:
            state = bl.wait_run(self.penv, run_id, timeout=5)
            if state is not None:
                return state, None
            if time.time() - started > self.args.run_timeout:
                return None, TIMEOUT
            if heap.silent_secs() >= self.args.silent_limit:
                return None, f"east-1's management silent for {heap.silent_secs():.0f} s"

    def repetition(self, rep, stamp):
        a = self.args
        queues = {k: (f"bench.unst.{stamp}.r{rep}.{k}.src", f"bench.unst.{stamp}.r{rep}.{k}.dst") for k in KINDS}
        first = KINDS if a.first == KINDS[0] else tuple(reversed(KINDS))
        order = first if rep % 2 == 1 else tuple(reversed(first))
        results = {}
        try:
            for kind in order:
                src, dst = queues[kind]
                bl.add_paging_limit(self.east, src, a.max_size_bytes, a.page_size_bytes)
                bl.create_queue(self.east, src)
                bl.create_queue(self.west, dst)
                secs = self.produce(src, kind)
                address = f'{bl.broker_mbean(self.east)},component=addresses,address="{src}"'
                paging = bl.address_paging(self.east, src)
                pages = bl.jolokia_read(self.east, address, "NumberOfPages")
                print(f"  {kind}: {a.messages:,} produced in {secs:.1f} s; address paging {paging}, {pages} page "
                      f"files; first message's timestamp {self.first_timestamp(src)}", flush=True)
            load = bl.loadavg_words()
            for kind in order:
                results[kind] = self.move(*queues[kind])
                print(f"  {kind}: {results[kind]['words']}", flush=True)
                # Its census taken: its million goes, so the next run's target holds none of it (west-1's 512 MiB
                # heap, as in scripts/bench_concurrent.py).
                self.delete_queues(*queues.pop(kind))
        finally:
            for src, dst in queues.values():
                self.delete_queues(src, dst)
        u, s = results["unstamped"], results["stamped"]
        counted = s["ok"] and (u["ok"] or u["at_least"])
        ratio = u["secs"] / s["secs"] if counted else None
        bound = "at least " if u["at_least"] else ""
        print(f"rep {rep}/{a.reps} ({order[0]} first; load {load} -> {bl.loadavg_words()}): "
              + (f"unstamped/stamped time {bound}{ratio:.2f}" if counted else "NOT COUNTED"), flush=True)
        return {"ratio": ratio, "at_least": u["at_least"]}

    def close(self):
        bl.drop_database(self.env, self.database)


def main():
    args = parse_args()
    args.binary = bl.RELEASE_BINARY
    stamp = int(time.time())
    print(bl.header_words("unstamped"), flush=True)
    print(f"{args.messages:,} x {args.size} B per queue on east-1 (paging beyond {args.max_size_bytes:,} bytes, pages "
          f"of {args.page_size_bytes:,}) moved whole to west-1, B = {args.batch}; ours: {bl.binary_words(args.binary)}",
          flush=True)
    bench = Bench(args)
    try:
        reps = [bench.repetition(rep, stamp) for rep in range(1, args.reps + 1)]
    finally:
        bench.close()
    counted = [r for r in reps if r["ratio"] is not None]
    if not counted:
        print("unstamped_vs_stamped_time: unknown (no repetition counted)", flush=True)
        return 1
    bound = "at least " if any(r["at_least"] for r in counted) else ""
    print(f"unstamped_vs_stamped_time: {bound}{statistics.median(r['ratio'] for r in counted):.2f}", flush=True)
    return 0 if len(counted) == len(reps) and not bound else 1


if __name__ == "__main__":
    sys.exit(main())
